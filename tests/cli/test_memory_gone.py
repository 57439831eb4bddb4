"""A run's memory that vanishes under it (issue 54, part 5): the checkpoint deleted, or
replaced by another file, while an invocation holds DIR; at a URL, its HEAD or the log
object it rewrites deleted, or its whole prefix emptied (the bucket deleted is in
tests/cli/test_run_url_verdicts.py). No further call leaves, the stop is 64 saying what is
gone and that the same command would start a new run, never "resumes once it is back";
a run begun again there the same UTC day pays for nothing twice (the API replays its
keys)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from memory_objects import MemoryObjects
from support import LIVE, InProcess, env_for, portfolio, wait_until

from batchval._internal.outcome import StopReason
from batchval._internal.sandbox.config import Faults
from batchval._internal.sandbox.server import RunningSandbox
from batchval._internal.store import replica as replica_module
from batchval._internal.store.database import CHECKPOINT_NAME, Database
from batchval._internal.store.lease import LEASE, Lease, LeaseKeeper
from batchval._internal.store.replica import HEAD, Head, Replica, restore

URL = "s3://b/run"


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
    assert ran.stdout.splitlines()[0].endswith("(live mode, new run): incomplete")
    again = batchval(*args, env=env_for(served, LIVE))
    assert again.returncode == 0, again.stderr
    # Its memory gone, the run begun again there says so: a new run, not a resume.
    assert again.stdout.splitlines()[0].endswith("(live mode, new run): complete")
    once_more = batchval(*args, env=env_for(served, LIVE))
    assert once_more.stdout.splitlines()[0].endswith("(live mode, resumed): complete")
    assert ledger.keys_charged_twice() == []
    assert len({c.idempotency_key for c in ledger.charges}) == 120


def _kept(
    place: Path, objects: MemoryObjects, epoch: int, lease: LeaseKeeper | None = None
) -> Database:
    """A holder of the run at URL on a blank machine: restored into `place`, opened, kept."""
    place.mkdir()
    restored = restore(objects, place / CHECKPOINT_NAME, url=URL)
    database = Database.open(place)
    database.keep_at(Replica(objects, database.path, epoch=epoch, url=URL), restored, lease)
    return database


def _gone(database: Database, key: str) -> None:
    lost = wait_until(database.hold_lost, 5, "the run's memory found gone")
    assert lost.reason is StopReason.REFUSED
    assert lost.reason.exit_code == 64
    assert f"the run's memory at {URL} is gone: {URL}/{key} was deleted while this" in (lost.detail)
    assert "The same command would start a new run there, from nothing" in lost.detail
    assert "resumes" not in lost.detail


def test_a_head_deleted_under_a_holder_is_the_runs_memory_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HEAD deleted while a holder runs: at its next swap (a new generation) it stops 64
    saying HEAD is gone, not that another holder took the run."""
    monkeypatch.setattr(replica_module, "GENERATION_BYTES", 16_384)
    objects = MemoryObjects()
    database = _kept(tmp_path / "one", objects, 1)
    del objects.objects[HEAD]
    for n in range(200):  # past the generation's size: a new one, and a swap
        with database.transaction():
            database.set(f"pad.{n}", "x" * 500)
    _gone(database, HEAD)
    database.close()


def test_the_log_a_resuming_holder_rewrites_deleted_is_the_runs_memory_gone(
    tmp_path: Path,
) -> None:
    """A resume goes on in the restored generation, rewriting its log's one object: that
    object deleted under it (HEAD still naming the generation) stops it 64 naming it."""
    objects = MemoryObjects()
    first = _kept(tmp_path / "first", objects, 1)
    first.set("a", "1")
    first.close()
    second = _kept(tmp_path / "second", objects, 2)
    generation = Head.of(objects.objects[HEAD]).generation
    log_object = f"state/{generation}/{0:016d}.wal"
    with second.transaction():
        second.set("b", "2")
    wait_until(lambda: log_object in objects.objects, 5, "the log's one object")
    assert second.hold_lost() is None
    del objects.objects[log_object]
    with second.transaction():
        second.set("c", "3")
    _gone(second, log_object)
    second.close()


def test_a_prefix_emptied_under_a_holder_is_found_by_its_lease(tmp_path: Path) -> None:
    """Every object under the run's prefix deleted (its lease too): the keeper writes the
    lease again, and the database, told so, asks the URL once and finds HEAD gone (64).
    Only the lease deleted (HEAD there): the run goes on."""
    objects = MemoryObjects()
    lease = Lease(objects, duration=3.0, margin=1.0)
    lease.take()
    keeper = LeaseKeeper(lease, every=0.05)
    database = _kept(tmp_path / "one", objects, lease.epoch, keeper)
    try:
        del objects.objects[LEASE]
        wait_until(lambda: LEASE in objects.objects, 5, "the lease written again")
        assert database.hold_lost() is None  # HEAD is there: the run's memory is not gone
        objects.objects.clear()
        wait_until(lambda: LEASE in objects.objects, 5, "the lease written again")
        _gone(database, HEAD)
    finally:
        keeper.close()
        database.close()
