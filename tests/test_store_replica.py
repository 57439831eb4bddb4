"""The run's memory shipped to an object store as it commits (`store/replica`), held here
against an object store in memory that honours create-only and compare-and-swap writes:
a restore on an empty disk gives every commit shipped, generations move HEAD, and a
holder that lost the run never overwrites the new holder's memory."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import BinaryIO

import pytest
import structlog
from memory_objects import MemoryObjects

from batchval.outcome import StopReason
from batchval.store import replica as replica_module
from batchval.store.checkpoint import CHECKPOINT_NAME, Checkpoint
from batchval.store.objects import ObjectStoreUnavailableError
from batchval.store.replica import HEAD, Head, Replica, ReplicaLostError, restore


def _open(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    return db


def _commit(db: sqlite3.Connection, kept: Replica, *values: int) -> None:
    db.execute("BEGIN IMMEDIATE")
    db.executemany("INSERT INTO t (v) VALUES (?)", [(v,) for v in values])
    db.execute("COMMIT")
    kept.committed(db)


def _values(path: Path) -> list[int]:
    db = sqlite3.connect(path)
    try:
        return [int(v) for (v,) in db.execute("SELECT v FROM t ORDER BY v")]
    finally:
        db.close()


def _holder(
    tmp_path: Path, objects: MemoryObjects, name: str, epoch: int
) -> tuple[sqlite3.Connection, Replica]:
    """A machine with an empty disk taking the run: restore, open, begin."""
    path = tmp_path / name / "checkpoint.sqlite"
    path.parent.mkdir()
    head = restore(objects, path)
    db = _open(path)
    db.execute("CREATE TABLE IF NOT EXISTS t (v INTEGER)")
    kept = Replica(objects, path, epoch=epoch)
    kept.begin(db, head)
    return db, kept


def test_an_empty_url_holds_no_run(tmp_path: Path) -> None:
    assert restore(MemoryObjects(), tmp_path / "checkpoint.sqlite") is None


def test_a_blank_machine_gets_every_commit_shipped(tmp_path: Path) -> None:
    objects = MemoryObjects()
    db, kept = _holder(tmp_path, objects, "first", epoch=1)
    for start in range(0, 300, 3):
        _commit(db, kept, start, start + 1, start + 2)
    kept.drain()
    shipped = [k for k in objects.list("state/") if k.endswith(".wal")]
    assert len(shipped) > 1  # commit by commit, not one copy at the end
    restored = tmp_path / "blank" / "checkpoint.sqlite"
    restored.parent.mkdir()
    assert restore(objects, restored) == Head.of(objects.objects[HEAD])
    assert _values(restored) == list(range(300))
    kept.close()
    db.close()


class _StreamedOnly(MemoryObjects):
    """A store that answers `get` for HEAD alone: the base and the log must be streamed."""

    def get(self, key: str) -> tuple[bytes, str] | None:
        assert key == HEAD, f"{key} was read whole"
        return super().get(key)


class _CutAfterBase(_StreamedOnly):
    """The log's objects cannot be read: the store stopped answering after the base."""

    def read_into(self, key: str, out: BinaryIO) -> int | None:
        if key.endswith(".wal"):
            raise ObjectStoreUnavailableError("s3://b/run", "no answer")
        return super().read_into(key, out)


def test_a_restore_streams_the_base_and_the_log_to_disk(tmp_path: Path) -> None:
    """The base and the log's objects are written to their files as they arrive, never
    read whole into memory (a million-row run's base is hundreds of MiB)."""
    objects = _StreamedOnly()
    db, kept = _holder(tmp_path, objects, "first", epoch=1)
    for start in range(0, 30, 3):
        _commit(db, kept, start, start + 1, start + 2)
    kept.drain()
    restored = tmp_path / "blank" / "checkpoint.sqlite"
    restored.parent.mkdir()
    assert restore(objects, restored) == Head.of(objects.objects[HEAD])
    assert _values(restored) == list(range(30))
    kept.close()
    db.close()


def test_a_restore_that_fails_leaves_no_file(tmp_path: Path) -> None:
    """A store that stops answering midway: its error is raised, and neither the base nor
    half a log is left for a later open to take as the run's memory."""
    objects = _CutAfterBase()
    db, kept = _holder(tmp_path, objects, "first", epoch=1)
    _commit(db, kept, 1, 2)
    kept.drain()
    restored = tmp_path / "blank" / "checkpoint.sqlite"
    restored.parent.mkdir()
    with pytest.raises(ObjectStoreUnavailableError):
        restore(objects, restored)
    assert list(restored.parent.iterdir()) == []
    kept.close()
    db.close()


def test_each_generation_says_its_base_size_and_time(tmp_path: Path) -> None:
    """A new generation is logged with its base's size and the seconds it took to write
    (the wait a resume of a big run has before its first call)."""
    objects = MemoryObjects()
    with structlog.testing.capture_logs() as logged:
        db, kept = _holder(tmp_path, objects, "first", epoch=1)
    generation = Head.of(objects.objects[HEAD]).generation
    [event] = [e for e in logged if e["event"] == "replica.generation"]
    assert event["generation"] == generation
    assert event["base_bytes"] == len(objects.objects[f"state/{generation}/base.sqlite"])
    assert event["seconds"] >= 0
    kept.close()
    db.close()


def test_a_kill_loses_at_most_the_commits_not_yet_shipped(tmp_path: Path) -> None:
    """Whatever was shipped when the holder died restores as a whole number of commits:
    never half of one."""
    objects = MemoryObjects()
    db, kept = _holder(tmp_path, objects, "first", epoch=1)
    _commit(db, kept, 0, 1)
    kept.drain()
    for start in range(2, 200, 2):
        _commit(db, kept, start, start + 1)  # no drain: the shipping thread is behind
    restored = tmp_path / "blank" / "checkpoint.sqlite"
    restored.parent.mkdir()
    restore(objects, restored)  # taken while the holder still ships
    values = _values(restored)
    assert values[:2] == [0, 1]
    assert values == list(range(len(values)))
    assert len(values) % 2 == 0
    kept.close()
    db.close()


def test_a_grown_log_begins_a_new_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replica_module, "GENERATION_BYTES", 16_384)
    objects = MemoryObjects()
    db, kept = _holder(tmp_path, objects, "first", epoch=1)
    first = Head.of(objects.objects[HEAD]).generation
    for start in range(0, 2_000, 100):
        _commit(db, kept, *range(start, start + 100))
    kept.drain()
    assert Head.of(objects.objects[HEAD]).generation != first
    restored = tmp_path / "blank" / "checkpoint.sqlite"
    restored.parent.mkdir()
    restore(objects, restored)
    assert _values(restored) == list(range(2_000))
    kept.close()
    db.close()


def test_a_log_smaller_than_its_base_begins_no_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past `GENERATION_BYTES` but not half its base's size the log goes on; past both, a
    new generation begins: a big run's base is not written again every few minutes."""
    monkeypatch.setattr(replica_module, "GENERATION_BYTES", 16_384)
    objects = MemoryObjects()
    path = tmp_path / "first" / "checkpoint.sqlite"
    path.parent.mkdir()
    db = _open(path)
    db.execute("CREATE TABLE t (v INTEGER)")
    db.execute("CREATE TABLE pad (b BLOB)")
    db.execute("INSERT INTO pad VALUES (zeroblob(1 << 20))")  # a base of about 1 MiB
    kept = Replica(objects, path, epoch=1)
    kept.begin(db, None)
    first = Head.of(objects.objects[HEAD]).generation
    for start in range(0, 2_000, 100):
        _commit(db, kept, *range(start, start + 100))
    kept.drain()
    assert 16_384 < Path(f"{path}-wal").stat().st_size < (1 << 20) // 2
    assert Head.of(objects.objects[HEAD]).generation == first
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT INTO pad VALUES (zeroblob(1 << 20))")  # the log past half the base
    db.execute("COMMIT")
    kept.committed(db)
    kept.drain()
    assert Head.of(objects.objects[HEAD]).generation != first
    restored = tmp_path / "blank" / "checkpoint.sqlite"
    restored.parent.mkdir()
    restore(objects, restored)
    assert _values(restored) == list(range(2_000))
    kept.close()
    db.close()


def test_a_holder_that_lost_the_run_never_overwrites_the_new_one(tmp_path: Path) -> None:
    objects = MemoryObjects()
    old_db, old = _holder(tmp_path, objects, "old", epoch=1)
    _commit(old_db, old, 1, 2)
    old.drain()
    new_db, new = _holder(tmp_path, objects, "new", epoch=2)  # the old one stalled
    _commit(new_db, new, 3)
    new.drain()
    _commit(old_db, old, 99)  # it wakes and writes on: into its own generation
    old.drain()
    restored = tmp_path / "blank" / "checkpoint.sqlite"
    restored.parent.mkdir()
    assert restore(objects, restored) == Head.of(objects.objects[HEAD])
    assert _values(restored) == [1, 2, 3]
    with pytest.raises(ReplicaLostError):  # nor can it make its generation HEAD again
        old._new_generation(old_db, Head(old._generation, 1))
    for db, kept in ((old_db, old), (new_db, new)):
        kept.close()
        db.close()


def test_a_checkpoint_kept_at_a_url_resumes_on_a_blank_machine(tmp_path: Path) -> None:
    """The run's own database, its ingest and its group commits, shipped as it works: a
    blank machine restores the same rows, requests, states and answers."""
    objects = MemoryObjects()
    first = tmp_path / "first"
    first.mkdir()
    checkpoint = Checkpoint.open(first)
    checkpoint.keep_at(Replica(objects, first / CHECKPOINT_NAME, epoch=1), None)
    checkpoint.set("run_id", "day-2026-11-25")
    with checkpoint.bulk_ingest():
        checkpoint.add_rows(
            [(n, f"k{n % 50}", None, None, None) for n in range(1, 201)],
            [(f"k{n}", f'{{"n":{n}}}') for n in range(50)],
        )
    checkpoint.finish_ingest()
    for start in range(0, 40, 10):  # the pool's groups: sent, answered, done
        checkpoint.begin_group()
        for n in range(start, start + 10):
            checkpoint.requests.mark_sent(f"k{n}", "2026-11-25T10:00:00+00:00")
            checkpoint.requests.record_answer(f"k{n}", b'{"valuationId":"v"}')
            checkpoint.requests.record_done(f"k{n}", 10)
        checkpoint.commit_group()
    counts = checkpoint.counts()
    checkpoint.close()  # ships what is left

    blank = tmp_path / "blank"
    blank.mkdir()
    head = restore(objects, blank / CHECKPOINT_NAME)
    again = Checkpoint.open(blank)
    assert again.get("run_id") == "day-2026-11-25"
    assert again.counts() == counts
    assert counts.requests_done == 40
    assert [i.key for i in again.requests.pending()] == [f"k{n}" for n in range(40, 50)]
    # The blank machine takes the run on: a generation of its own, HEAD moved from `head`.
    again.keep_at(Replica(objects, blank / CHECKPOINT_NAME, epoch=2), head)
    assert Head.of(objects.objects[HEAD]).epoch == 2
    again.close()


class _Outage(MemoryObjects):
    """A store that stops answering once `down` is set."""

    down = False

    def create(self, key: str, data: bytes) -> bool:
        if self.down:
            raise ObjectStoreUnavailableError("s3://b/run", "no answer")
        return super().create(key, data)


def test_a_store_that_stops_answering_stops_the_sending_as_an_outage(tmp_path: Path) -> None:
    """Commits that can no longer be kept at the URL: the next call is not sent, and the
    stop is the store's outage (75), not another holder."""
    objects = _Outage()
    checkpoint = Checkpoint.open(tmp_path)
    checkpoint.keep_at(Replica(objects, tmp_path / CHECKPOINT_NAME, epoch=1), None)
    assert checkpoint.hold_lost() is None
    objects.down = True
    checkpoint.begin_group()
    checkpoint.set("pause_until", "x")
    checkpoint.commit_group()  # shipped from the replica's thread, which meets the outage
    deadline = time.monotonic() + 5
    while checkpoint.hold_lost() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    lost = checkpoint.hold_lost()
    assert lost is not None
    assert lost.reason is StopReason.STORE_UNAVAILABLE
    assert "can no longer be kept at its URL" in lost.detail
    # The commits go on locally (what was answered is kept until the outputs are written),
    # never raising into the sending as a defect (70); no call leaves meanwhile.
    checkpoint.begin_group()
    checkpoint.set("pause_until", "y")
    checkpoint.commit_group()
    assert checkpoint.hold_lost() == lost
