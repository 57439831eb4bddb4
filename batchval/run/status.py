"""`batchval status DIR`: where a run stands, read from its checkpoint.

It reads while a run may be writing (WAL lets a reader in) and never takes the lock, so
it works on a run in progress, a finished one and one that was killed.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

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
        mode = checkpoint.get("mode") or "not started"
        problems = checkpoint.problem_types()
        ingested = checkpoint.ingest_complete
    finally:
        checkpoint.close()
    running = _is_running(out_dir)
    complete = ingested and counts.complete
    if running:
        action = "wait: a batchval run holds this directory now"
    elif complete:
        action = "nothing: every row has a result or a problem"
    elif not_before and dt.datetime.fromisoformat(not_before) > dt.datetime.now(dt.UTC):
        action = f"run the same command again after {not_before} (daily limit)"
    else:
        action = "run the same command again to finish"
    last_exit = _last_exit_code(out_dir)
    return {
        "run_id": run_id,
        "mode": mode,
        "status": "running" if running else ("complete" if complete else "incomplete"),
        "exit_code": last_exit,
        "next_action": action,
        **counts.as_json(),
        "problems_by_type": problems,
        "credits_charged": {"this_invocation": 0, "total": counts.credits},
        "last_known_balance": totals["last_balance"],
        "stop": None,
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


def _last_exit_code(out_dir: Path) -> int | None:
    try:
        summary = json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    code = summary.get("exit_code")
    return code if isinstance(code, int) else None
