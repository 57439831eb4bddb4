"""Files only batchval opens, readable only by whom the lender says (issue 54, part 2).

Under umask 000 (the loosest an account can have), a run's DIR is 0700 and every file in
it 0600, and so are an export's folder and files and report.html, unless `output.mode:
group` (or `BATCHVAL_OUTPUT_MODE=group`) asks for 0750 and 0640. Symlinks planted in a
run's DIR at every name batchval writes, each pointing at a file outside: no command
(`run` again, `--dry-run`, `status`, `report`, `export`) changes any of those files; a
command meets a link at a name it would append to or open in place (the log, the lock,
the checkpoint and its WAL) and stops 64 naming it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import Ran, portfolio
from support import invoke as invoked

from batchval._internal.place.invocation import RUN_MARKS
from batchval._internal.place.names import WRITTEN_NAMES
from batchval._internal.store.database import CHECKPOINT_NAME

CLEAN_ENV = {k: v for k, v in os.environ.items() if not k.startswith("BATCHVAL_")}


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """umask 000 for the test: every mode below is batchval's own doing."""
    before = os.umask(0)
    try:
        yield
    finally:
        os.umask(before)


class Done:
    """What a command in this process gave: its exit code, and all it printed."""

    def __init__(self, ran: Ran) -> None:
        self.exit_code, self.output = ran.returncode, ran.stdout + ran.stderr


def invoke(*args: str, **env: str) -> Done:
    return Done(invoked(*args, environ={**CLEAN_ENV, **env}))


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def modes_under(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): mode(p) for p in sorted(folder.rglob("*"))}


@pytest.mark.usefixtures("loose_umask")
@pytest.mark.parametrize(
    ("how", "file", "folder"),
    [("default", 0o600, 0o700), ("environment", 0o640, 0o750), ("config", 0o640, 0o750)],
)
def test_what_a_run_writes_is_readable_as_the_lender_says(
    tmp_path: Path, how: str, file: int, folder: int
) -> None:
    source = portfolio(tmp_path / "book.csv", 4)
    out, exported = tmp_path / "new" / "out", tmp_path / "exported"
    env = {"BATCHVAL_OUTPUT_MODE": "group"} if how == "environment" else {}
    config = []
    if how == "config":
        (tmp_path / "c.yaml").write_text("output:\n  mode: group\n", encoding="utf-8")
        config = ["--config", str(tmp_path / "c.yaml")]
    assert invoke("run", str(source), "--out", str(out), *config, **env).exit_code == 0
    # export and report read no config: the environment's variable is theirs
    reading = {"BATCHVAL_OUTPUT_MODE": "group"} if how != "default" else {}
    assert invoke("report", str(out), **reading).exit_code == 0
    assert (
        invoke("export", str(out), "--format", "csv", "--out", str(exported), **reading).exit_code
        == 0
    )
    assert mode(out) == mode(out.parent) == folder  # the folders it made, parents too
    assert mode(exported) == folder
    files = {**modes_under(out), **{f"exported/{k}": v for k, v in modes_under(exported).items()}}
    for name in (CHECKPOINT_NAME, "results.parquet", "summary.json", "report.html", "batchval.log"):
        assert name in files
    assert {name: m for name, m in files.items() if m != file} == {}


def test_a_folder_that_was_there_keeps_its_mode(tmp_path: Path) -> None:
    out = tmp_path / "shared"
    out.mkdir()
    out.chmod(0o775)
    assert invoke("run", str(portfolio(tmp_path / "book.csv", 2)), "--out", str(out)).exit_code == 0
    assert mode(out) == 0o775
    assert mode(out / "results.parquet") == 0o600


def test_an_output_mode_it_does_not_know_is_64(tmp_path: Path) -> None:
    done = invoke("run", str(portfolio(tmp_path / "book.csv", 2)), "--out", str(tmp_path / "o"),
                  BATCHVAL_OUTPUT_MODE="everyone")  # fmt: skip
    assert done.exit_code == 64
    assert "output.mode must be private or group, not 'everyone'" in done.output
    assert not (tmp_path / "o").exists()


# Every name batchval writes in DIR, and those SQLite adds beside its checkpoint.
PLANTED = sorted({*WRITTEN_NAMES, *RUN_MARKS, f"{CHECKPOINT_NAME}-wal", f"{CHECKPOINT_NAME}-shm"})


@pytest.mark.usefixtures("loose_umask")
@pytest.mark.parametrize("name", PLANTED)
def test_a_symlink_planted_at_a_name_batchval_writes_changes_nothing_outside(
    tmp_path: Path, name: str
) -> None:
    source = portfolio(tmp_path / "book.csv", 4)
    out = tmp_path / "out"
    assert invoke("run", str(source), "--out", str(out)).exit_code == 0
    victim = tmp_path / "outside" / "victim"
    victim.parent.mkdir()
    victim.write_bytes(b"the lender's own file\n")
    victim.chmod(0o644)
    (out / name).unlink(missing_ok=True)
    (out / name).symlink_to(victim)
    codes = [
        invoke("run", str(source), "--out", str(out)).exit_code,
        invoke("run", str(source), "--out", str(out), "--dry-run").exit_code,
        invoke("status", str(out)).exit_code,
        invoke("report", str(out)).exit_code,
        invoke("export", str(out), "--format", "csv").exit_code,
    ]
    # export reads what it finds: a link to a file that is not Parquet is unusable (65)
    assert set(codes[:4]) <= {0, 64}, codes
    assert codes[4] in (0, 64, 65), codes
    assert victim.read_bytes() == b"the lender's own file\n"
    assert mode(victim) == 0o644
    assert sorted(p.name for p in victim.parent.iterdir()) == ["victim"]
    if name in (CHECKPOINT_NAME, "batchval.log", ".batchval.lock"):
        assert codes[0] == 64, (name, codes)
    files = [p for p in out.rglob("*") if p.is_file() and not p.is_symlink()]
    assert files
    assert {p.name: mode(p) for p in files if mode(p) != 0o600} == {}
