"""A DIR that is someone else's (issue 54, part 2): `--out` naming a folder that holds no
batchval run but a file at a name batchval writes is refused (64) naming the files, which
are left as they were; a folder with other files, a dry run's, or one a run was killed in
before its checkpoint existed is the run's to use."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from objects_server import S3Server
from support import portfolio

from batchval._internal.cli import cli
from batchval._internal.outcome import ExitCode
from batchval._internal.place.invocation import RUN_MARKS
from batchval._internal.place.names import WRITTEN_NAMES
from batchval._internal.reports.report import REPORT_NAME
from batchval._internal.runs.summary import SUMMARY_NAME
from batchval._internal.store.objects import ObjectStore
from batchval._internal.streets.files import HOMES_NAME, STREETS_NAME
from batchval._internal.valuations.manifest import MANIFEST_NAME

CLEAN_ENV: dict[str, str | None] = {k: None for k in os.environ if k.startswith("BATCHVAL_")}


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=CLEAN_ENV, catch_exceptions=False)


def test_the_names_listed_are_every_writers_own() -> None:
    for name in (SUMMARY_NAME, MANIFEST_NAME, STREETS_NAME, HOMES_NAME, REPORT_NAME):
        assert name in WRITTEN_NAMES


@pytest.mark.parametrize(
    "name", ["summary.json", "manifest.json", "results.parquet", "report.html"]
)
@pytest.mark.parametrize("command", ["run", "streets"])
def test_a_folder_of_someone_elses_files_is_refused_untouched(
    tmp_path: Path, name: str, command: str
) -> None:
    out = tmp_path / "theirs"
    out.mkdir()
    (out / name).write_text("their own file", encoding="utf-8")
    (out / "notes.txt").write_text("theirs too", encoding="utf-8")
    done = invoke(command, str(portfolio(tmp_path / "book.csv", 3)), "--out", str(out))
    assert done.exit_code == ExitCode.USAGE, done.output
    assert f"holds no batchval run but holds {name}" in done.output
    assert (out / name).read_text(encoding="utf-8") == "their own file"
    assert sorted(p.name for p in out.iterdir()) == sorted([name, "notes.txt"])


@pytest.mark.parametrize("mark", [None, *RUN_MARKS])
def test_a_folder_of_other_files_or_a_runs_own_is_used(tmp_path: Path, mark: str | None) -> None:
    """A `.gitkeep` and a README are no matter; a checkpoint, a lock file (a run killed
    before its checkpoint existed) or a dry run's price makes the folder a run's."""
    out = tmp_path / "out"
    out.mkdir()
    (out / ".gitkeep").touch()
    (out / "README.md").write_text("valuations go here\n", encoding="utf-8")
    if mark is not None:
        (out / "summary.json").write_text("{}", encoding="utf-8")  # a killed run's, say
        if mark != "checkpoint.sqlite":  # an empty file is no database: left to the run
            (out / mark).write_text("{}" if mark.endswith(".json") else "", encoding="utf-8")
    if mark == "checkpoint.sqlite":
        (out / "summary.json").unlink()
        first = invoke("run", str(portfolio(tmp_path / "first.csv", 3)), "--out", str(out))
        assert first.exit_code == 0, first.output
    done = invoke("run", str(portfolio(tmp_path / "book.csv", 3)), "--out", str(out))
    assert done.exit_code in (ExitCode.COMPLETE, ExitCode.USAGE), done.output
    assert "holds no batchval run" not in done.output
    if mark != "checkpoint.sqlite":
        assert done.exit_code == ExitCode.COMPLETE, done.output


def test_symlinks_planted_at_batchvals_names_catch_no_write(tmp_path: Path) -> None:
    """In a DIR others can write: a symlink at the lock file's name is refused (64) and
    its target left whole; symlinks at the temporaries' old predictable names
    (`.NAME.tmp-PID`) are never written through, as the temporaries' names now carry a
    random part and are made with O_EXCL and O_NOFOLLOW."""
    victim = tmp_path / "victim.txt"
    victim.write_text("not batchval's\n", encoding="utf-8")
    out = tmp_path / "shared"
    out.mkdir()
    (out / ".batchval.lock").symlink_to(victim)
    book = portfolio(tmp_path / "book.csv", 3)
    done = invoke("run", str(book), "--out", str(out))
    assert done.exit_code == ExitCode.USAGE, done.output
    assert ".batchval.lock is a symlink, not batchval's file" in done.output
    assert victim.read_text(encoding="utf-8") == "not batchval's\n"
    (out / ".batchval.lock").unlink()
    done = invoke("run", str(book), "--out", str(out))
    assert done.exit_code == ExitCode.COMPLETE, done.output
    written = ("report.html", "results.csv", "problems.csv", "dry_run.json", "summary.json")
    for name in written:
        (out / f".{name}.tmp-{os.getpid()}").symlink_to(victim)
    for command in (
        ["export", str(out), "--format", "csv"],
        ["report", str(out)],
        ["run", str(book), "--out", str(out), "--dry-run"],
    ):
        done = invoke(*command)
        assert done.exit_code == 0, done.output
    assert victim.read_text(encoding="utf-8") == "not batchval's\n"
    assert all((out / name).is_file() and not (out / name).is_symlink() for name in written)


def test_a_prefix_of_someone_elses_objects_is_refused_untouched(
    s3_server: S3Server, tmp_path: Path
) -> None:
    """The same rule at a URL: a prefix holding another program's `summary.json` and no
    run of batchval's is refused (64) naming it, its objects as they were and no lease
    taken; once a run is there (its `state/`), the prefix is the run's."""
    url = s3_server.url(f"theirs-{tmp_path.name}")
    store = ObjectStore.from_url(url, s3_server.env())
    store.put("summary.json", b"their own file")
    store.put("notes.txt", b"theirs too")
    env = {**{k: v for k, v in CLEAN_ENV.items() if v is not None}, **s3_server.env()}
    book = str(portfolio(tmp_path / "book.csv", 3))
    done = CliRunner().invoke(cli, ["run", book, "--out", url], env=env, catch_exceptions=False)
    assert done.exit_code == ExitCode.USAGE, done.output
    assert f"{url} holds no batchval run but holds summary.json" in done.output
    assert "give --out a prefix of its own" in done.output
    assert sorted(store.list("")) == ["notes.txt", "summary.json"]
    kept = store.get("summary.json")
    assert kept is not None
    assert kept[0] == b"their own file"
    ours = s3_server.url(f"ours-{tmp_path.name}")
    first = CliRunner().invoke(cli, ["run", book, "--out", ours], env=env, catch_exceptions=False)
    assert first.exit_code == 0, first.output
    again = CliRunner().invoke(cli, ["run", book, "--out", ours], env=env, catch_exceptions=False)
    assert again.exit_code == 0, again.output
