"""`run --dry-run` at the command line (in this process: the `batchval` fixture): its DIR
read by `status`, `export` and `report`, and the price of what a DIR's run still has to
send, read beside that run (a process) without its lock."""

from __future__ import annotations

import csv
import json
import sqlite3
import subprocess
import time
from pathlib import Path

import polars as pl
import pytest
from support import (
    BATCHVAL,
    LIVE,
    InProcess,
    assert_accounted,
    assert_paid_once,
    env_for,
    portfolio,
    wait_until,
)

from batchval._internal.sandbox.config import Faults
from batchval._internal.sandbox.server import RunningSandbox

pytestmark = pytest.mark.slow


def with_bad_rows(path: Path, rows: int, bad: int) -> Path:
    """`portfolio` with `bad` more rows whose postcode validation refuses."""
    portfolio(path, rows)
    with path.open("a", newline="", encoding="utf-8") as stream:
        for n in range(bad):
            csv.writer(stream).writerow([f"BAD-{n}", "NOT A POSTCODE", "terraced", 2, "x"])
    return path


def charged(served: RunningSandbox) -> int:
    return len(served.sandbox.ledger.valuations_created(LIVE.client_id))


def test_a_dry_runs_problems_open_with_export_csv(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A dry run's DIR: `export --format csv` writes its problems, `status` says it is a dry
    run with its price and exits as it did, `report` writes a page."""
    source = with_bad_rows(tmp_path / "book.csv", 8, 2)
    out = tmp_path / "dry"
    env = env_for(served)
    dry = batchval("run", str(source), "--out", str(out), "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert json.loads((out / "dry_run.json").read_text())["price"]["calls"] == 8

    exported = batchval("export", str(out), "--format", "csv", env=env)
    assert exported.returncode == 0, exported.stderr
    problems = pl.read_csv(out / "problems.csv", schema_overrides={"row_number": pl.Int64})
    assert problems["row_number"].to_list() == [9, 10]
    assert problems["loan_id"].to_list() == ["BAD-0", "BAD-1"]

    status = batchval("status", str(out), env=env)
    assert status.returncode == 0, status.stderr
    assert "dry run of" in status.stdout
    assert "nothing was sent" in status.stdout
    assert "would make 8 calls costing 80 credits" in status.stdout
    assert "2 with problems" in status.stdout
    as_json = json.loads(batchval("status", str(out), "--json", env=env).stdout)
    assert as_json["status"] == "dry_run"
    assert as_json["rows"] == {"total": 10, "problems": 2, "valid": 8}

    report = batchval("report", str(out), env=env)
    assert report.returncode == 0, report.stderr
    assert (out / "report.html").is_file()
    assert served.sandbox.ledger.requests == []


def test_status_exits_with_a_refused_dry_runs_code(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A dry run of a mostly refused input exits 65, and so does `status` of its DIR."""
    source = with_bad_rows(tmp_path / "book.csv", 1, 5)
    out = tmp_path / "dry"
    env = env_for(served)
    assert batchval("run", str(source), "--out", str(out), "--dry-run", env=env).returncode == 65
    status = batchval("status", str(out), env=env)
    assert status.returncode == 65
    assert "input_mostly_refused" in status.stdout
    exported = batchval("export", str(out), "--format", "xlsx", env=env)
    assert exported.returncode == 0, exported.stderr
    assert (out / "problems.xlsx").is_file()


def test_a_dry_run_prices_what_a_resume_still_sends(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A dry run on a DIR holding a stopped run prices only the requests without an
    answer, writes its problems beside the run's (never over them), and the resume then
    sends exactly that many."""
    source = with_bad_rows(tmp_path / "book.csv", 20, 1)
    out = tmp_path / "out"
    env = env_for(served)
    first = batchval("run", str(source), "--out", str(out), "--max-credits", "50", env=env)
    assert first.returncode == 75, first.stderr
    kept = {name: (out / name).read_bytes() for name in ("problems.parquet", "summary.json")}
    sent = len(served.sandbox.ledger.requests)

    dry = batchval("run", str(source), "--out", str(out), "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert "holds an answer for 5 of these requests" in dry.stdout
    assert "would make 15 calls costing 150 credits" in dry.stdout
    assert len(served.sandbox.ledger.requests) == sent
    assert {name: (out / name).read_bytes() for name in kept} == kept
    assert pl.read_parquet(out / "dry_run_problems.parquet")["row_number"].to_list() == [21]
    status = batchval("status", str(out), env=env)
    assert status.returncode == 75  # the run's own code, the dry run beside it
    assert "dry run (" in status.stdout
    assert "would make 15 calls" in status.stdout
    shown = json.loads(batchval("status", str(out), "--json", env=env).stdout)
    assert shown["status"] == "incomplete"
    assert shown["dry_run_summary"]["price"] == {
        "answered": 5,
        "calls": 15,
        "credits": 150,
        "cost_gbp": 1.5,
        "days_at_daily_limit": 1,
        "daily_limit": 5000,
    }
    exported = batchval("export", str(out), "--format", "csv", env=env)
    assert exported.returncode == 0, exported.stderr
    assert pl.read_csv(out / "dry_run_problems.csv")["loan_id"].to_list() == ["BAD-0"]

    resumed = batchval("run", str(source), "--out", str(out), env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert charged(served) == 20
    again = batchval("run", str(source), "--out", str(out), "--dry-run", env=env)
    assert again.returncode == 0, again.stderr
    assert "would make 0 calls" in again.stdout
    assert "nothing to send" in json.loads((out / "dry_run.json").read_text())["next_action"]


def test_a_dry_run_is_refused_as_the_run_would_be(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """Another input in a DIR that has sent: the dry run exits 64, as the run would, and
    prices the change with --accept-changes."""
    source = portfolio(tmp_path / "book.csv", 4)
    out = tmp_path / "out"
    env = env_for(served)
    assert batchval("run", str(source), "--out", str(out), env=env).returncode == 0
    portfolio(source, 6)
    refused = batchval("run", str(source), "--out", str(out), "--dry-run", env=env)
    assert refused.returncode == 64
    assert "different input file" in refused.stderr
    accepted = batchval(
        "run", str(source), "--out", str(out), "--dry-run", "--accept-changes", env=env
    )
    assert accepted.returncode == 0, accepted.stderr
    assert "would make 2 calls" in accepted.stdout


def test_a_dry_run_beside_a_run_in_progress(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A dry run on a DIR a run holds now is neither turned away nor blocking: it reads
    the checkpoint read-only, prices what is left, and the run finishes untouched, every
    row accounted for and nothing paid twice."""
    rows = 60
    source = portfolio(tmp_path / "book.csv", rows)
    out = tmp_path / "out"
    env = env_for(served)
    served.sandbox.set_faults(Faults(latency_ms=150))
    args = ["run", str(source), "--out", str(out), "--concurrency", "2"]
    with subprocess.Popen(
        [BATCHVAL, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    ) as live:
        wait_until(lambda: charged(served) >= 5, 60, "five charges of the run", process=live)
        started = time.monotonic()
        dry = batchval(*args, "--dry-run", env=env)
        took = time.monotonic() - started
        still_running = live.poll() is None
        _, stderr = live.communicate(timeout=120)
        assert live.returncode == 0, stderr
    served.sandbox.set_faults(Faults())
    assert dry.returncode == 0, dry.stderr
    assert still_running, "the run ended before the dry run did: nothing was shown"
    priced = json.loads((out / "dry_run.json").read_text())["price"]
    assert 0 < priced["calls"] < rows
    assert priced["answered"] + priced["calls"] == rows
    assert took < 20
    assert_accounted(out, rows)
    assert_paid_once(served, out)
    with sqlite3.connect(out / "checkpoint.sqlite") as db:  # the run's, not the dry run's
        assert db.execute("SELECT COUNT(*) FROM invocations").fetchone()[0] == 1
