"""`batchval status DIR`: where a run stands, read from its checkpoint and last summary.

It reads while a run may be writing (WAL lets a reader in) and never takes the lock, so
it works on a run in progress, a finished one and one that was killed. Its exit code is
the run's own: 0 complete, the last invocation's code when that invocation ended (75,
77, 64, 70), and 75 while a run holds DIR or after one was killed (run it again).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

from batchval.outcome import ExitCode, StopReason
from batchval.run.checkpoint import LOCK_NAME, Checkpoint


def read_status(out_dir: Path) -> dict[str, Any] | None:
    checkpoint = Checkpoint.open_existing(out_dir)
    if checkpoint is None:
        return None
    try:
        counts = checkpoint.counts()
        totals = checkpoint.totals()
        not_before = checkpoint.get("not_before")
        run_id = checkpoint.get("run_id") or "?"
        mode = checkpoint.get("mode") or "unknown"
        problems = checkpoint.problem_types()
        ingested = checkpoint.ingest_complete
        ended = checkpoint.last_invocation_ended()
    finally:
        checkpoint.close()
    running = _is_running(out_dir)
    complete = ingested and counts.complete
    last = _last_summary(out_dir)
    stop = last.get("stop") if last else None
    if running:
        status, code = "running", ExitCode.RESUMABLE
        action = "wait: a batchval run holds this directory now"
        stop = None
    elif complete:
        status, code, stop = "complete", ExitCode.COMPLETE, None
        action = "nothing: every row has a result or a problem"
    else:
        status = "incomplete"
        code = ExitCode(last["exit_code"]) if last else ExitCode.RESUMABLE
        if code is ExitCode.COMPLETE or stop is None or not ended:
            # Killed before it could write a summary: run it again to finish.
            code = ExitCode.RESUMABLE
            stop = {
                "reason": StopReason.SIGNAL.value,
                "detail": "the last run ended without a summary (killed); run it again",
                "not_before": None,
                "status": None,
            }
        action = str(last.get("next_action")) if last else "run the same command again"
        if not_before and dt.datetime.fromisoformat(not_before) > dt.datetime.now(dt.UTC):
            action = f"run the same command again after {not_before} (daily limit)"
    return {
        "run_id": run_id,
        "mode": mode,
        "status": status,
        "exit_code": int(code),
        "next_action": action,
        **counts.as_json(),
        "problems_by_type": problems,
        "credits_charged": {"this_invocation": 0, "total": counts.credits},
        "last_known_balance": totals["last_balance"],
        "stop": stop,
    }


def _is_running(out_dir: Path) -> bool:
    """Whether the process named in the lock file lives. Taking the lock to find out
    would, for an instant, turn a run starting at that moment away."""
    try:
        pid = int((out_dir / LOCK_NAME).read_text(encoding="utf-8").split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return False
    return True


def _last_summary(out_dir: Path) -> dict[str, Any] | None:
    """The last invocation's summary.json, if it wrote one that can be read."""
    try:
        summary = json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(summary, dict) or not isinstance(summary.get("exit_code"), int):
        return None
    return summary
