"""A run's memory that vanishes under it (issue 54, part 5): the checkpoint deleted, or
replaced by another file, while an invocation holds DIR. No further call leaves, the stop
is 64 saying what is gone, never "resumes once it is back"; a run begun again there the
same UTC day pays for nothing twice (the API replays its keys)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from support import LIVE, InProcess, env_for, portfolio, wait_until

from batchval.outcome import StopReason
from batchval.sandbox.config import Faults
from batchval.sandbox.server import RunningSandbox
from batchval.store.database import CHECKPOINT_NAME, Database


def test_a_checkpoint_deleted_or_replaced_is_the_runs_memory_gone(tmp_path: Path) -> None:
    database = Database.open(tmp_path)
    try:
        assert database.hold_lost() is None
        (tmp_path / CHECKPOINT_NAME).unlink()
        stop = database.hold_lost()
        assert stop is not None
        assert stop.reason is StopReason.REFUSED
        assert f"{tmp_path / CHECKPOINT_NAME}, was deleted while this invocation held" in (
            stop.detail
        )
        assert database.hold_lost() is stop  # decided once
    finally:
        database.close()
    other = tmp_path / "other"
    other.mkdir()
    database = Database.open(other)
    try:
        (other / "copy").write_bytes((other / CHECKPOINT_NAME).read_bytes())
        os.replace(other / "copy", other / CHECKPOINT_NAME)
        stop = database.hold_lost()
        assert stop is not None
        assert "was replaced by another file" in stop.detail
    finally:
        database.close()


@pytest.mark.slow  # a run of 120 valuations, its checkpoint deleted part way
def test_a_run_whose_checkpoint_is_deleted_stops_64_and_a_new_one_pays_nothing_twice(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """In this process: the run in this thread, the deletion from another once the API
    has charged ten valuations."""
    served.sandbox.set_faults(Faults(latency_ms=100))
    source = portfolio(tmp_path / "book.csv", 120)
    out = tmp_path / "out"
    ledger = served.sandbox.ledger

    def delete() -> None:
        wait_until(lambda: len(ledger.charges) >= 10, 60, "10 charges")
        (out / CHECKPOINT_NAME).unlink()

    deleting = threading.Thread(target=delete)
    deleting.start()
    args = ("run", str(source), "--out", str(out), "--concurrency", "2")
    ran = batchval(*args, env=env_for(served, LIVE))
    deleting.join(timeout=60)
    assert ran.returncode == 64, ran.stderr
    assert "was deleted while this invocation held it" in ran.stderr
    assert "once it is back" not in ran.stderr
    assert len(ledger.charges) < 120
    again = batchval(*args, env=env_for(served, LIVE))
    assert again.returncode == 0, again.stderr
    assert ledger.keys_charged_twice() == []
    assert len({c.idempotency_key for c in ledger.charges}) == 120
