"""`batchval status DIR`: where a run stands, read from its checkpoint and last summary.

It reads while a run may be writing (WAL lets a reader in) and never takes the lock, so
it works on a run in progress, a finished one and one that was killed. Its exit code is
the run's own: 0 complete, the last invocation's code when that invocation ended (75,
77, 65, 64, 70: a stop a person must act on is kept even when no row is pending), and 75
while a run holds DIR or after one was killed (run it again).

A DIR that holds only a dry run (`dry_run.json`, no checkpoint) is read by `read_dry_run`:
its price and its problems by type, exiting as the dry run did (0, or the run's stop).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from batchval._internal.outcome import ExitCode, StopInfo, StopReason
from batchval._internal.place import DRY_RUN_NAME
from batchval._internal.runs import SUMMARY_NAME, DryRunSummary, RunSummary, opened
from batchval._internal.store import (
    COMMAND,
    LOCK_NAME,
    Checkpoint,
    Database,
    StreetStore,
    live_holder,
)
from batchval._internal.valuations import complete_action, own_lines

if TYPE_CHECKING:
    from batchval._internal.store import Objects


def read_status(out_dir: Path, *, objects: Objects | None = None) -> RunSummary | None:
    """Where the run in `out_dir` stands. For a run kept at a URL (`out_dir` its copy),
    `objects` is its store, whose lease says whether a process is at work on it now
    (`store/lease.live_holder`: a few seconds' watch while a lease is not let go)."""
    database = opened(Database.open_existing, out_dir)
    if database is None:
        return None
    try:
        holder = None if objects is None else live_holder(objects)
        return _status(out_dir, Checkpoint(database), holder)
    finally:
        database.close()


def _status(out_dir: Path, checkpoint: Checkpoint, holder: str | None) -> RunSummary:
    counts = checkpoint.counts()
    run_id = checkpoint.get("run_id") or "?"
    mode = checkpoint.get("mode") or "unknown"
    problems = checkpoint.problem_types()
    complete = checkpoint.rows.complete and counts.complete
    if checkpoint.get("command") == COMMAND:  # a DIR of `batchval streets`
        streets = StreetStore(checkpoint.database)
        counts, run_id, problems = streets.counts(), COMMAND, streets.problem_types()
        mode = streets.get("mode") or "unknown"
        complete = streets.ingest_complete and counts.complete
    ended = checkpoint.database.invocations.last_ended()
    last = _last_summary(out_dir)
    action = ""
    stop: StopInfo | None = None
    if _is_running(out_dir):
        status, code = "running", ExitCode.RESUMABLE
        action = "wait: a batchval run holds this directory now"
    elif holder is not None:
        status, code = "running", ExitCode.RESUMABLE
        action = f"wait: a batchval run ({holder}) holds this run's lease and renews it now"
    elif complete and ended and (kept := _needs_a_person(last)) is not None:
        # Every row done, but the last invocation stopped on what a person must act on
        # (a defect, the account, the address): its code, as its summary said.
        status, code, stop = "incomplete", kept.reason.exit_code, kept
    elif complete:
        status, code = "complete", ExitCode.COMPLETE
    else:
        status = "incomplete"
        stop = _last_stop(last) if ended else None
        if stop is not None:
            code = stop.reason.exit_code
        else:  # killed before it could write a summary: run it again to finish
            stop = StopInfo(
                StopReason.SIGNAL, "the last run ended without a summary (killed); run it again"
            )
            code = ExitCode.RESUMABLE
    portfolio, book = _last_portfolio(last), _last_book(last)
    if not action and code is ExitCode.COMPLETE:
        action = complete_action(book)  # a book night that left rows for a later one
    return RunSummary.of_run(
        checkpoint.database,
        invocation=checkpoint.database.invocations.latest(),
        **_last_invocation(checkpoint, last),
        status=status,
        exit_code=code,
        run_id=run_id,
        mode=mode,
        counts=counts,
        problems_by_type=problems,
        stop=stop,
        input=last.get("input") if last else None,
        portfolio=portfolio,
        book=book,
        own_lines=own_lines(portfolio, book),
        next_action=action,
        files=_last_files(last),
    )


def status_text(
    found: RunSummary | DryRunSummary, dry: DryRunSummary | None, *, as_json: bool
) -> str:
    """What `batchval status` prints: the run's summary (or the dry run's, alone), and a
    dry run priced beside the run; or the status object as JSON."""
    if as_json:
        shown = found.to_json()
        if dry is not None and found is not dry:
            shown["dry_run_summary"] = dry.to_json()  # priced beside the run
        return json.dumps(shown, indent=2)
    if isinstance(found, DryRunSummary):
        return found.status_lines()
    text = found.render()
    if dry is not None:  # priced beside the run: what a resume would still cost
        text += (
            f"\ndry run ({dry.priced_at}): would make {dry.calls} calls costing "
            f"{dry.credits} credits; {dry.rows_with_problems} rows with problems"
            + (f" in {dry.problems_file}" if dry.problems_file else "")
        )
    return text


def read_dry_run(out_dir: Path) -> DryRunSummary | None:
    """The dry run DIR holds (`dry_run.json`): its price and problem counts, exit code as
    the dry run's; None when it holds none that can be read."""
    try:
        data = json.loads((out_dir / DRY_RUN_NAME).read_text(encoding="utf-8"))
        return DryRunSummary.from_json(data)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _is_running(out_dir: Path) -> bool:
    """Whether the process named in the lock file lives. Taking the lock to find out
    would, for an instant, turn a run starting at that moment away."""
    try:
        pid = int((out_dir / LOCK_NAME).read_text(encoding="utf-8").split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return False
    return True


def _last_invocation(checkpoint: Checkpoint, last: dict[str, Any] | None) -> dict[str, Any]:
    """The latest invocation's own figures, as its summary.json gave them: its calls and
    429s from the checkpoint's record of it, its times from that record (or, when the
    summary is that invocation's, the summary's own `finished_at` and `seconds`). A killed
    invocation recorded no calls (0) and no end (null)."""
    history = checkpoint.database.invocations.history()
    if not history:
        return {}
    latest = history[-1]
    figures: dict[str, Any] = {
        "calls": latest.calls or 0,
        "rate_limited": latest.rate_limited or 0,
        "started_at": latest.started_at,
        "finished_at": latest.ended_at,
        "seconds": None,
    }
    if last is not None and last.get("started_at") == latest.started_at:
        figures["finished_at"] = last.get("finished_at", latest.ended_at)
        figures["seconds"] = last.get("seconds")
    elif latest.ended_at is not None:
        took = dt.datetime.fromisoformat(latest.ended_at) - dt.datetime.fromisoformat(
            latest.started_at
        )
        figures["seconds"] = round(took.total_seconds(), 3)
    return figures


def _last_stop(last: dict[str, Any] | None) -> StopInfo | None:
    stop = last.get("stop") if last else None
    try:
        return StopInfo.from_json(stop) if isinstance(stop, dict) else None
    except (KeyError, ValueError):  # a reason word of another version
        return None


def _needs_a_person(last: dict[str, Any] | None) -> StopInfo | None:
    stop = _last_stop(last)
    return stop if stop is not None and stop.needs_a_person else None


def _last_portfolio(last: dict[str, Any] | None) -> dict[str, Any] | None:
    """The portfolio totals the last run wrote (they are made only while writing)."""
    portfolio = last.get("portfolio") if last else None
    return portfolio if isinstance(portfolio, dict) else None


def _last_book(last: dict[str, Any] | None) -> dict[str, Any] | None:
    """The book section (rows, age profile, forecast) the last `run --book` wrote."""
    book = last.get("book") if last else None
    return book if isinstance(book, dict) else None


def _last_files(last: dict[str, Any] | None) -> tuple[dict[str, Any], ...] | None:
    """The Parquet files the last invocation wrote, as its summary described them."""
    files = last.get("files") if last else None
    if not isinstance(files, list):
        return None
    return tuple(file for file in files if isinstance(file, dict))


def _last_summary(out_dir: Path) -> dict[str, Any] | None:
    """The last invocation's summary.json, if it wrote one that can be read."""
    try:
        summary = json.loads((out_dir / SUMMARY_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return summary if isinstance(summary, dict) else None
