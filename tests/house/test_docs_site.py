"""`make docs` fails on what would make the site wrong: the strict build is tried on a copy
of the site's sources that holds every deliberate fault at once, so that a loosened
mkdocs.yml (or hook) fails here.

One build serves every test of this file, once per pytest session (xdist's workers
share it through a file under the session's temporary root): each fault must be named by
a warning or an error of its own, and the build must name nothing else, which is what a
clean build of the copy proved when each fault had a build of its own."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MKDOCS = ROOT / ".venv" / "bin" / "mkdocs"


@dataclasses.dataclass(frozen=True, slots=True)
class Fault:
    """One thing that must fail the strict build, and what the build must say of it."""

    page: str  # under docs/
    old: str | None  # the text replaced; None: `new` is a page of its own
    new: str
    said: str  # in the build's warning or error about this fault, and in no other

    def apply(self, docs: Path) -> None:
        page = docs / self.page
        if self.old is None:
            assert not page.exists()
            page.write_text(self.new, "utf-8")
            return
        text = page.read_text("utf-8")
        assert self.old in text, (self.page, self.old)
        page.write_text(text.replace(self.old, self.new, 1), "utf-8")


FAULTS = {
    "missing page": Fault(
        "reference/exit-codes.md",
        "(../explanation/exit-codes.md)",
        "(../explanation/gone.md)",
        "'../explanation/gone.md'",
    ),
    "missing anchor": Fault(
        "reference/configuration.md",
        "(../outputs.md#lender-columns)",
        "(../outputs.md#no-such)",
        "'#no-such'",
    ),
    "unknown table": Fault(
        "reference/exit-codes.md",
        "<!-- generated: exit-codes -->",
        "<!-- generated: exit-code -->",
        "no generated table 'exit-code'",
    ),
    "a table not the code's": Fault(
        "reference/summary.md",
        "| `exit_code` |",
        "| `exit_status` |",
        "its tables are not the code's",
    ),
    "page left out of the nav": Fault("how-to/orphan.md", None, "# Orphan\n", "how-to/orphan.md"),
}


def _copy(into: Path) -> Path:
    site = into / "site-src"
    site.mkdir()
    shutil.copytree(ROOT / "docs", site / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("mkdocs.yml", "CHANGELOG.md"):
        shutil.copy(ROOT / name, site / name)
    (site / "batchval").symlink_to(ROOT / "batchval")  # watched by mkdocs serve
    (site / "examples").symlink_to(ROOT / "examples")  # pages include its scripts (snippets)
    return site


def _build(site: Path) -> dict[str, object]:
    built = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(site / "out")],
        cwd=site,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    return {"returncode": built.returncode, "stdout": built.stdout, "stderr": built.stderr}


@dataclasses.dataclass(frozen=True, slots=True)
class Build:
    returncode: int
    stdout: str  # mkdocs says there why it aborted
    stderr: str  # its log

    def complaints(self) -> list[str]:
        """The build's WARNING and ERROR records, each with its continuation lines (the
        nav's warning lists the pages left out below it)."""
        records = re.split(r"\n(?=[A-Z]+ +- )", self.stderr)
        return [r for r in records if r.startswith(("WARNING", "ERROR"))]


@pytest.fixture(scope="session")
def faulty_build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    """The strict build of a copy of the site with every fault of FAULTS, made once for
    the session: the first worker to ask builds it, the others read what it kept."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:  # no xdist: this process is the session
        shared = tmp_path_factory.mktemp("docs-site")
    else:  # the folder every worker's temporary folder is under, this session's own
        shared = tmp_path_factory.getbasetemp().parent
    kept = shared / "faulty-docs-build.json"
    with (shared / "faulty-docs-build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not kept.exists():
            work = shared / "faulty-docs-build"
            work.mkdir()
            site = _copy(work)
            for fault in FAULTS.values():
                fault.apply(site / "docs")
            kept.write_text(json.dumps(_build(site)), "utf-8")
    built = json.loads(kept.read_text("utf-8"))
    return Build(built["returncode"], built["stdout"], built["stderr"])


pytestmark = [
    pytest.mark.skipif(not MKDOCS.exists(), reason="the docs extra is not installed"),
    pytest.mark.slow,  # a build of the site: seconds, not for `make test-fast`
]


def test_the_copy_fails_on_its_faults_and_nothing_else(faulty_build: Build) -> None:
    """The copy builds as the site does but for its faults: strict mode turns it away with
    exactly one complaint for each, so each fault below is what the build names."""
    assert faulty_build.returncode != 0
    complaints = faulty_build.complaints()
    assert len(complaints) == len(FAULTS), "\n".join(complaints)
    # Turned away by strict mode at the end, not by a crash on the way.
    assert re.search(r"Aborted with .* in strict mode", faulty_build.stdout), faulty_build.stdout


@pytest.mark.parametrize("fault", FAULTS.values(), ids=FAULTS.keys())
def test_a_fault_fails_the_strict_build(faulty_build: Build, fault: Fault) -> None:
    """A link to a missing page or heading, a table the code does not make and a page left
    out of the nav each fail the strict build, named in a warning or error of their own
    (not an INFO line, which a loosened mkdocs.yml would demote them to)."""
    naming = [c for c in faulty_build.complaints() if fault.said in c]
    assert len(naming) == 1, faulty_build.stderr
