"""Nothing stale beside newer results (batchval/_internal/place/derived.py, issue 33): what `export`
and `report` wrote in a run's place is listed in the run's memory, and the run that
changes the outputs removes exactly that, says so in one line and in its log; a run that
changes nothing keeps it. In-process against the served sandbox, and at an S3 URL
(SeaweedFS)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from objects_server import S3Server
from support import LIVE, env_for, portfolio, run_in_process

from batchval._internal.place.derived import data_digest, removed_line
from batchval._internal.sandbox.server import RunningSandbox
from batchval._internal.store.database import Database
from batchval._internal.store.objects import ObjectStore

DAY = 86_400


class Cli:
    """The command line in this process, against the served sandbox, on the run's clock."""

    def __init__(
        self, served: RunningSandbox, monkeypatch: pytest.MonkeyPatch, capsys: Any
    ) -> None:
        self.served, self.monkeypatch, self.capsys = served, monkeypatch, capsys
        self.offset = 0

    def __call__(self, *args: str, code: int = 0) -> str:
        env = env_for(self.served, BATCHVAL_CLOCK_OFFSET_SECONDS=str(self.offset))
        ended, out, err = run_in_process(
            *args, env=env, monkeypatch=self.monkeypatch, capsys=self.capsys
        )
        assert ended == code, out + err
        return out

    def next_day(self) -> None:
        self.served.sandbox.clock.advance(DAY)
        self.offset += DAY


@pytest.fixture
def cli(served: RunningSandbox, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> Cli:
    served.sandbox.account(LIVE.client_id).daily_limit = 6
    return Cli(served, monkeypatch, capsys)


def test_a_run_that_adds_results_removes_the_exports_and_report_made_before(
    cli: Cli, tmp_path: Path
) -> None:
    """A run stopped at the daily limit is exported and reported; the next day's run adds
    results: the old copies and report.html are gone, and the run said which in one line
    (and in its log); a person's own file, and one they saved over an export, are kept."""
    book, out = portfolio(tmp_path / "book.csv", 10), tmp_path / "out"
    cli("run", str(book), "--out", str(out), code=75)
    cli("export", str(out), "--format", "csv")
    cli("export", str(out), "--format", "xlsx")
    cli("report", str(out))
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    (out / "charges.csv").write_text("my own charges sheet", encoding="utf-8")
    cli.next_day()
    said = cli("run", str(book), "--out", str(out))
    gone = ["problems.csv", "report.html", "results.csv", "results.xlsx"]
    assert removed_line(gone) in said.splitlines()
    assert not [name for name in gone if (out / name).exists()]
    assert (out / "notes.txt").read_text(encoding="utf-8") == "mine"
    assert (out / "charges.csv").read_text(encoding="utf-8") == "my own charges sheet"
    events = [json.loads(line) for line in (out / "batchval.log").read_text().splitlines()]
    removed = [e for e in events if e["event"] == "engine.derived.removed"]
    assert [(e["files"], e["changed_by_hand"]) for e in removed] == [
        (", ".join(gone), "charges.csv")
    ]
    database = Database.open(out)
    try:
        assert database.derived.listed() == []  # forgotten, the kept one too: it is the person's
    finally:
        database.close()


def test_a_run_that_changes_nothing_keeps_them(cli: Cli, tmp_path: Path) -> None:
    """A resume with nothing to do rewrites the outputs with the same data: the export
    and the report stay, and nothing is said."""
    book, out = portfolio(tmp_path / "book.csv", 4), tmp_path / "out"
    cli("run", str(book), "--out", str(out))
    before = data_digest(out / "results.parquet")
    cli("export", str(out), "--format", "csv")
    cli("report", str(out))
    said = cli("run", str(book), "--out", str(out))
    assert "removed" not in said
    assert data_digest(out / "results.parquet") == before
    assert (out / "results.csv").is_file()
    assert (out / "report.html").is_file()


def test_a_dry_runs_export_goes_when_the_run_comes(cli: Cli, tmp_path: Path) -> None:
    """problems.csv exported from a dry run (listed in its dry_run.json: no memory yet) is
    removed by the real run, which takes the list over; a file exported elsewhere (--out)
    is not listed and not touched."""
    book, out = tmp_path / "book.csv", tmp_path / "out"
    portfolio(book, 3)
    with book.open("a", encoding="utf-8") as rows:
        rows.write("LN-BAD,not a postcode,terraced,2,CASE-BAD\n")
    cli("run", str(book), "--out", str(out), "--dry-run")
    cli("export", str(out), "--format", "csv")
    cli("export", str(out), "--format", "json", "--out", str(tmp_path / "elsewhere"))
    priced = json.loads((out / "dry_run.json").read_text())
    assert [f["name"] for f in priced["derived_files"]] == ["problems.csv"]
    said = cli("run", str(book), "--out", str(out))
    assert removed_line(["problems.csv"]) in said.splitlines()
    assert not (out / "problems.csv").exists()
    assert (tmp_path / "elsewhere" / "problems.jsonl").is_file()
    assert "derived_files" not in json.loads((out / "dry_run.json").read_text())


def test_at_a_url_the_published_copies_are_removed(
    cli: Cli, s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At an s3:// place, export and report publish their files and list them in the
    run's memory there; the run that adds results deletes those objects, and says so."""
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    url = s3_server.url(f"stale-{hashlib.sha256(str(tmp_path).encode()).hexdigest()[:8]}")
    store = ObjectStore.from_url(url, s3_server.env())
    book = portfolio(tmp_path / "book.csv", 10)
    cli("run", str(book), "--out", url, code=75)
    cli("export", url, "--format", "csv")
    cli("report", url)
    store.put("notes.txt", b"mine")
    assert store.get("results.csv") is not None
    assert store.get("report.html") is not None
    cli.next_day()
    said = cli("run", str(book), "--out", url)
    gone = ["charges.csv", "problems.csv", "report.html", "results.csv"]
    assert removed_line(gone) in said.splitlines()
    assert [name for name in gone if store.get(name) is not None] == []
    assert store.get("notes.txt") is not None
