"""The docs stay true to the code: the reference pages draw their tables from it
(batchval/_internal/admin/reference.py), every option a page names is the command's, every
variable the code reads is in the reference, and the README's commands run."""

from __future__ import annotations

import ast
import importlib.metadata
import re
from collections.abc import Mapping
from pathlib import Path

import click
import pytest
import yaml
from docs_examples import commands, fenced

from batchval._internal.admin.reference import OTHER_VARIABLES, TABLES, written
from batchval._internal.cli import cli
from batchval._internal.contract.schemas import PROBLEM_COLUMNS, RESULT_COLUMNS, SCHEMA_VERSION
from batchval._internal.input import PROBLEM_RULES
from batchval._internal.input.lender import LenderOptions
from batchval._internal.input.options import InputOptions
from batchval._internal.outcome import ExitCode, SettingsError, StopReason
from batchval._internal.settings import (
    INPUT_KEYS,
    LENDER_KEYS,
    RUN_KEYS,
    SECTIONS,
    RunOptions,
    load_settings,
)

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = ROOT / "docs"
PAGES = {p.relative_to(DOCS).as_posix(): p.read_text("utf-8") for p in DOCS.rglob("*.md")}
# The output schemas' contract, as the site shows it.
OUTPUTS = PAGES["outputs.md"]


def _page(name: str) -> str:
    return PAGES[name]


@pytest.mark.parametrize("column", [*RESULT_COLUMNS, *PROBLEM_COLUMNS])
def test_every_output_column_is_documented(column: str) -> None:
    """Each column of results.parquet and problems.parquet has a row in docs/outputs.md."""
    assert f"| `{column}` |" in OUTPUTS


@pytest.mark.parametrize(
    ("page", "tables"),
    [
        ("outputs.md", ["results", "problems", "book", "charges", "verify", "metrics", "streets"]),
        ("reference/exit-codes.md", ["exit-codes", "stop-reasons"]),
        ("reference/input.md", ["problem-rules"]),
        ("reference/summary.md", ["summary", "summary-charges"]),
        (
            "reference/configuration.md",
            [*(f"config-{s}" for s in SECTIONS if SECTIONS[s]), "environment"],
        ),
    ],
)
def test_the_reference_pages_hold_their_tables_as_the_code_draws_them(
    page: str, tables: list[str]
) -> None:
    """Each reference page holds its tables in its own Markdown (what the repository shows
    is what the site shows), each as the code makes it now."""
    for name in tables:
        assert f"<!-- generated: {name} -->" in PAGES[page], name
        assert TABLES[name]() in PAGES[page], name


@pytest.mark.parametrize("page", sorted(name for name, text in PAGES.items() if "<!-- gen" in text))
def test_no_page_s_tables_drift_from_the_code(page: str) -> None:
    """A table written into a page is the code's table today: a setting, a column or an
    exit code changed in the code and not in the page fails here."""
    assert written(PAGES[page]) == PAGES[page], f"docs/{page}: run `make docs-tables`"


def test_a_table_changed_by_hand_or_unknown_is_caught() -> None:
    page = PAGES["reference/exit-codes.md"]
    assert written(page.replace("| `77` |", "| `78` |")) == page  # rewritten as the code's
    with pytest.raises(ValueError, match="no generated table 'exit-code'"):
        written("# x\n\n<!-- generated: exit-code -->\n<!-- end generated: exit-code -->\n")
    with pytest.raises(ValueError, match="has no <!-- end generated: exit-codes -->"):
        written("# x\n\n<!-- generated: exit-codes -->\n| a |\n")


def _rows(table: str) -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {}
    for line in table.splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        rows[cells[0].strip("`")] = cells[1:]
    return rows


def test_the_exit_code_table_is_the_codes() -> None:
    """A row for every exit code and no other, each with a meaning and what follows."""
    table = _rows(TABLES["exit-codes"]())
    assert sorted(table, key=int) == sorted(str(int(code)) for code in ExitCode)
    assert all(meaning and then for meaning, then in table.values())


def test_the_stop_reason_table_is_the_reasons() -> None:
    """A row for every reason and no other, each with the exit code the reason gives."""
    table = _rows(TABLES["stop-reasons"]())
    assert {reason: cells[0] for reason, cells in table.items()} == {
        reason.value: str(int(reason.exit_code)) for reason in StopReason
    }


@pytest.mark.parametrize("rule", list(PROBLEM_RULES))
def test_every_input_rule_is_documented(rule: str) -> None:
    assert f"| `{rule}` |" in _page("reference/input.md")


def test_the_output_schema_version_is_documented() -> None:
    """docs/outputs.md names the current schema version and says what changed in it."""
    assert f"## Schema version {SCHEMA_VERSION}, and what changed" in PAGES["outputs.md"]
    assert f"\n| {SCHEMA_VERSION} | " in PAGES["outputs.md"]


def test_every_schema_version_the_docs_name_is_the_code_s() -> None:
    """Wherever the README or a page names the output schema version (prose, a manifest
    example), it is the one the code writes (outputs.md's table of earlier versions has
    them as bare numbers)."""
    pattern = r"schema version (\d+)|\"schema_version\": \"(\d+)\""
    named = [
        a or b
        for text in [README, *PAGES.values()]
        for a, b in re.findall(pattern, text, re.IGNORECASE)
    ]
    assert named  # the check can see
    assert set(named) == {SCHEMA_VERSION}


def test_the_config_tables_are_the_loader_s_keys() -> None:
    """The run, input and lender tables hold every key the loader takes and no other:
    the run's are RunOptions' fields (its test seam and --live's verdict aside) and the
    include; the input's InputOptions' (the include aside, which lives in the run
    section); the lender's LenderOptions'."""
    # Not settings: a test seam, and what --live learns of the API (money/live).
    run = {f for f in RunOptions.__dataclass_fields__} - {"clock_offset_seconds", "rehearsal"}
    assert {k.name for k in RUN_KEYS} == run | {"include"}
    assert {k.name for k in INPUT_KEYS} == set(InputOptions.__dataclass_fields__) - {"include"}
    assert {k.name for k in LENDER_KEYS} == set(LenderOptions().to_json())


@pytest.mark.parametrize("section", [s for s in SECTIONS if SECTIONS[s]])
def test_a_key_not_in_the_tables_is_refused(tmp_path: Path, section: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"{section}:\n  not_a_key: 1\n")
    with pytest.raises(SettingsError, match="not_a_key"):
        load_settings(config, {})


def test_every_variable_the_code_reads_is_in_the_reference() -> None:
    """Each BATCHVAL_* and AWS_* name in the package is in the environment table."""
    table = _rows(TABLES["environment"]())
    named = {
        name
        for path in (ROOT / "batchval").rglob("*.py")
        for name in re.findall(r"\b(?:BATCHVAL|AWS)_[A-Z0-9_]*[A-Z0-9]\b", path.read_text("utf-8"))
    }
    assert named
    assert named <= set(table), sorted(named - set(table))
    assert set(OTHER_VARIABLES) <= set(table)


def _options(command: click.Command) -> set[str]:
    return {
        name
        for param in command.params
        for name in [*param.opts, *param.secondary_opts]
        if name.startswith("-")
    }


def _commands_named(text: str) -> list[tuple[str, str]]:
    """Every `batchval COMMAND ...` the text shows (in code blocks and inline code), with
    what follows it on its line (and on the lines a backslash carries it to)."""
    text = text.replace("\\\n", " ")
    return re.findall(
        r"batchval (check|export|init|report|run|sandbox|split|status|streets|verify)\b([^\n`]*)",
        text,
    )


def _options_named(texts: Mapping[str, str]) -> tuple[int, list[str]]:
    """How many `--option`s the texts name after `batchval COMMAND`, and those that are
    not the command's own."""
    assert isinstance(cli, click.Group)
    wrong: list[str] = []
    seen = 0
    for name, text in texts.items():
        for command, rest in _commands_named(text):
            own = _options(cli.commands[command]) | {"--help", "-h"}
            for option in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", rest.split(" #")[0]):
                seen += 1
                if option not in own:
                    wrong.append(f"{name}: batchval {command} {option}")
    return seen, wrong


def test_every_option_the_docs_name_is_the_command_s() -> None:
    """A renamed or removed option fails here for every page that shows it, run or not
    (a crontab, an Airflow recipe): each `--option` after `batchval COMMAND` is one of the
    command's own."""
    seen, wrong = _options_named({"README.md": README, **PAGES})
    assert seen > 20  # the check can see
    assert not wrong, wrong


def test_a_renamed_option_is_found() -> None:
    """The check above sees an option a page names that the command no longer has, on a
    line a backslash carries on too."""
    page = "```sh\nbatchval run in.csv --out d \\\n  --max-call 3 --book b.parquet\n```\n"
    assert _options_named({"page.md": page}) == (3, ["page.md: batchval run --max-call"])


def test_set_up_commands_are_documented() -> None:
    """The two set-up commands are in the quick start."""
    assert "make run" in README
    assert "make test" in README


def test_the_first_run_tutorial_runs_what_make_run_runs() -> None:
    """`make run` values the sample as the first-run tutorial does, command for command
    (the tutorial's commands run in tests/house/test_docs_examples.py), and the README says what
    it values where."""
    recipe = re.search(r"^run: .*\n\t(.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert recipe is not None
    command = recipe.group(1).replace("$(BIN)/", "")
    tutorial = [c.text for c in commands(PAGES["tutorials/first-run.md"])]
    assert command in tutorial
    made = README.split("make run", 1)[1].split("\n", 1)[0]
    assert all(part in made for part in command.split() if "/" in part), made


def test_the_summary_table_is_the_summary_s_keys() -> None:
    """reference/summary.md's key table (drawn from runs/summary's SUMMARY_KEYS) names
    each key of the summary.json its example prints (tests/house/test_docs_examples.py holds
    that example to a real run), and `book`, which only a --book run writes."""
    page = _page("reference/summary.md")
    printed = page.split("$ cat runs/small/summary.json\n", 1)[1].split("\n```", 1)[0]
    keys = set(re.findall(r'^  "(\w+)":', printed, re.MULTILINE))  # its `...` hides `files`'s
    assert set(_rows(TABLES["summary"]())) == keys | {"book"}
    assert TABLES["summary"]() in page + "\n"
    assert TABLES["summary-charges"]() in page + "\n"


def test_the_changelog_s_latest_version_is_the_package_s() -> None:
    """CHANGELOG.md keeps Keep a Changelog's form (an Unreleased section, then versions,
    newest first, each a semantic version with a date) and its latest version is the one
    batchval says it is; the site includes the file whole."""
    text = (ROOT / "CHANGELOG.md").read_text("utf-8")
    headings = re.findall(r"^## \[([^\]]+)\](.*)$", text, re.MULTILINE)
    assert headings[0] == ("Unreleased", "")
    versions = [(v, rest) for v, rest in headings[1:]]
    assert versions, "no version yet"
    for version, rest in versions:
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), version
        assert re.fullmatch(r" - \d{4}-\d\d-\d\d", rest), rest
    numbers = [tuple(int(n) for n in v.split(".")) for v, _ in versions]
    assert numbers == sorted(numbers, reverse=True)
    assert versions[0][0] == importlib.metadata.version("batchval")
    for section in re.findall(r"^### (.+)$", text, re.MULTILINE):
        assert section in ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")
    assert PAGES["changelog.md"].strip() == '--8<-- "CHANGELOG.md"'


def _blocks(language: str) -> list[tuple[str, str]]:
    """Every fenced block of `language` in the README and the pages, with where it is."""
    return [
        (name, body)
        for name, text in [("README.md", README), *PAGES.items()]
        for _, body in fenced(text, language)
    ]


def test_every_config_the_docs_show_uses_the_loader_s_keys() -> None:
    """A YAML block shaped as a config (its top-level keys are config sections) names only
    keys the settings' tables hold: a renamed key fails here, shown or run."""
    wrong: list[str] = []
    shown = 0
    for name, block in _blocks("yaml"):
        data = yaml.safe_load(block)
        if not isinstance(data, dict) or not set(data) <= set(SECTIONS):
            continue
        shown += 1
        for section, part in data.items():
            known = {key.name for key in SECTIONS[section]}
            if section != "sandbox" and isinstance(part, dict):
                wrong += [f"{name}: {section}.{key}" for key in part if key not in known]
    assert shown >= 2  # the check can see
    assert not wrong, wrong


def test_every_python_block_of_the_docs_is_python() -> None:
    """The Python the pages show (Airflow DAGs, a pytest fixture) parses."""
    blocks = _blocks("python")
    assert blocks
    for name, block in blocks:
        try:
            ast.parse(block)
        except SyntaxError as exc:
            pytest.fail(f"{name}: {exc}")


def test_every_link_of_the_readme_reaches_a_file() -> None:
    """The README is not a page of the site, so the strict build does not see its links:
    each relative one names a file of the checkout."""
    links = re.findall(r"\]\(([^)\s]+)\)", README)
    relative = [link.split("#", 1)[0] for link in links if "://" not in link]
    assert len(relative) > 5  # the check can see
    missing = [link for link in relative if not (ROOT / link).is_file()]
    assert not missing, missing
