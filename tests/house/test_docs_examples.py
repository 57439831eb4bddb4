"""The docs' shell examples run as written (tests/docs_examples.py says how): the README's
and every page's console blocks, and every command of the tutorials.

The examples themselves (minutes of processes) are marked `docs_examples`: `make docs-check`
and CI run them, `make test` does not; the checks of how they are read run everywhere."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from docs_examples import ROOT, commands, failures, mask, matches

PAGES = sorted(ROOT.glob("docs/**/*.md"))
RUN = [ROOT / "README.md", *(page for page in PAGES if commands(page.read_text("utf-8")))]


@pytest.mark.slow
@pytest.mark.docs_examples
@pytest.mark.parametrize("page", RUN, ids=[str(p.relative_to(ROOT)) for p in RUN])
def test_the_page_s_examples_print_what_it_shows(page: Path) -> None:
    wrong = failures(page)
    assert not wrong, "\n\n".join(wrong)


@pytest.mark.parametrize("page", sorted(ROOT.glob("docs/tutorials/*.md")), ids=lambda p: p.name)
def test_a_tutorial_runs_every_command_it_shows(page: Path) -> None:
    """A tutorial's shell blocks are all console blocks, so every command in it runs."""
    text = page.read_text("utf-8")
    assert commands(text), f"{page.name} has no console block"
    for fence in ("```sh", "```bash", "```shell"):
        assert fence not in text, f"{page.name}: a {fence} block is not run; make it console"


def test_the_readme_s_five_steps_end_in_a_priced_dry_run_and_a_run() -> None:
    """ "Value your own file": five numbered steps whose commands (run as written by the
    test above) propose a config for a sample lender extract, price a dry run of it and
    then run it, the same command without --dry-run."""
    readme = (ROOT / "README.md").read_text("utf-8")
    section = readme.split("## Value your own file\n", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^\*\*(\d)\. ", section, re.MULTILINE) == ["1", "2", "3", "4", "5"]
    steps = commands(section)
    first, *_, dry, run = [c for c in steps if c.text.startswith("batchval ")]
    assert re.fullmatch(r"batchval init sample_inputs/\S+ --out \S+", first.text)
    assert dry.text.endswith(" --dry-run")
    assert any(re.match(r"would make \d+ calls costing \d+ credits", line) for line in dry.expected)
    assert run.text == dry.text.removesuffix(" --dry-run")
    assert run.expected[-1].startswith("exit 0;")


@pytest.mark.parametrize(
    ("expected", "printed", "same"),
    [
        (
            ("run day-2026-11-25 (test mode): complete",),
            ["run day-2027-01-02 (test mode): complete"],
            True,
        ),
        (("credits: 3 this time",), ["credits: 4 this time"], False),
        (("a", "...", "z"), ["a", "b", "c", "z"], True),
        (("a", "...", "z"), ["a", "z"], True),
        (("a", "...", "z"), ["a", "b"], False),
        (("took 1.5 s",), ["took 22 s"], True),
        (("key bv1-0123456789abcdef",), ["key bv1-fedcba9876543210"], True),
        (("a",), ["a", "b"], False),
        (("balance: 4,990",), ["balance: 5,000"], True),
        (("estimates 100; weighted LTV 41.1%",), ["estimates 90; weighted LTV 45%"], True),
        (("29 loans",), ["28 loans"], False),
        (("estimates £73,531,000; LTV 4%",), ["estimates £70,000; LTV 5%"], True),
        (("loan balance £1,108,699.18",), ["loan balance £1,108,699.19"], False),
        (("fall 47 (£1.00), age 4 (£2.00)",), ["fall 3 (£7.00), age 5 (£9.00)"], True),
    ],
)
def test_masks_hide_what_changes_and_only_that(
    expected: tuple[str, ...], printed: list[str], same: bool
) -> None:
    assert matches(expected, printed) is same, [mask(line) for line in printed]


def test_a_console_block_must_start_with_a_command() -> None:
    with pytest.raises(ValueError, match="line 2"):
        commands("```console\nhello\n```\n")


def test_a_command_carried_on_by_a_backslash_is_one_command() -> None:
    page = "```console\n$ batchval run a \\\n    --out b\nprinted\n$ ls\n```\n"
    found = commands(page)
    assert [c.text for c in found] == ["batchval run a \\\n    --out b", "ls"]
    assert found[0].expected == ("printed",)
    assert found[0].line == 2


@pytest.mark.slow
@pytest.mark.docs_examples
def test_the_readme_s_make_run_runs_as_written(tmp_path: Path) -> None:
    """The quick start's `make run`, as the README writes it, in a copy of the checkout's
    layout whose virtual environment is set up (the project's own, linked: make finds its
    stamp newer than pyproject.toml and uv.lock and installs nothing), ends with the sample
    valued."""
    readme = (ROOT / "README.md").read_text("utf-8")
    block = readme.split("## Install\n", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    command = block.splitlines()[0].split("#")[0].strip()
    assert command == "make run"
    for name in (
        ".venv",
        "sample_inputs",
        "Makefile",
        "pyproject.toml",
        "uv.lock",
        "requirements-uv.txt",
    ):
        (tmp_path / name).symlink_to(ROOT / name)
    done = subprocess.run(
        command.split(), cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    # The linked environment was used as it is.
    assert "pip install" not in done.stdout
    assert "uv sync" not in done.stdout
    assert "exit 0; next: nothing" in done.stdout
    assert (tmp_path / "runs" / "sample" / "results.parquet").exists()


def test_ci_runs_the_examples_make_test_leaves_out() -> None:
    """`make test` deselects the `docs_examples` marker, `make docs-check` selects it and
    CI's .ci/run runs both, so the examples are left out of the one and never of CI."""
    makefile = (ROOT / "Makefile").read_text("utf-8")

    def recipe(target: str) -> str:
        found = re.search(rf"^{target}:.*\n\t(.+)$", makefile, re.MULTILINE)
        assert found is not None, target
        return found.group(1)

    assert '-m "not docs_examples"' in recipe("test")
    assert "not docs_examples" in recipe("test-fast")
    assert recipe("docs-check").endswith("-m docs_examples")
    ci = (ROOT / ".ci" / "run").read_text("utf-8").splitlines()
    assert {"make test", "make docs-check"} <= set(ci)
