"""The run's memory shipped to an object store as it commits (`store/replica`), held here
against an object store in memory that honours create-only and compare-and-swap writes:
a restore on an empty disk gives every commit shipped, generations move HEAD, a holder
that lost the run never overwrites the new holder's memory, a holder with little to add
writes no base and the old generations go, and every object read is checked before it is
trusted."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import BinaryIO

import pytest
from memory_objects import MemoryObjects
from support import wait_until

from batchval._internal import logs
from batchval._internal.outcome import StopReason
from batchval._internal.store import replica as replica_module
from batchval._internal.store.checkpoint import CHECKPOINT_NAME, Checkpoint
from batchval._internal.store.database import Database
from batchval._internal.store.lease import LeaseState
from batchval._internal.store.objects import ObjectStoreUnavailableError
from batchval._internal.store.replica import (
    HEAD,
    Head,
    Replica,
    ReplicaLostError,
    Restored,
    StateObjectError,
    restore,
)


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


def _blank(tmp_path: Path) -> Path:
    """Where a blank machine restores the run's checkpoint (its folder made)."""
    path = tmp_path / "blank" / "checkpoint.sqlite"
    path.parent.mkdir()
    return path


def _restored_values(tmp_path: Path, objects: MemoryObjects) -> list[int]:
    """What a blank machine restores from `objects`: the table's values."""
    path = _blank(tmp_path)
    restore(objects, path)
    return _values(path)


def _restored(objects: MemoryObjects, path: Path) -> Restored:
    found = restore(objects, path)
    assert found is not None
    return found


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
    restored = _blank(tmp_path)
    assert _restored(objects, restored).head == Head.of(objects.objects[HEAD])
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
    restored = _blank(tmp_path)
    assert _restored(objects, restored).head == Head.of(objects.objects[HEAD])
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
    restored = _blank(tmp_path)
    with pytest.raises(ObjectStoreUnavailableError):
        restore(objects, restored)
    assert list(restored.parent.iterdir()) == []
    kept.close()
    db.close()


def test_each_generation_says_its_base_size_and_time(tmp_path: Path) -> None:
    """A new generation is logged with its base's size and the seconds it took to write
    (the wait a resume of a big run has before its first call)."""
    objects = MemoryObjects()
    with logs.capture() as logged:
        db, kept = _holder(tmp_path, objects, "first", epoch=1)
    generation = Head.of(objects.objects[HEAD]).generation
    [event] = [e for e in logged if e["event"] == "store.replica.generation"]
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
    restored = _blank(tmp_path)
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
    assert _restored_values(tmp_path, objects) == list(range(2_000))
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
    assert _restored_values(tmp_path, objects) == list(range(2_000))
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
    restored = _blank(tmp_path)
    assert _restored(objects, restored).head == Head.of(objects.objects[HEAD])
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
    checkpoint = Checkpoint(Database.open(first))
    checkpoint.database.keep_at(Replica(objects, first / CHECKPOINT_NAME, epoch=1), None)
    checkpoint.set("run_id", "day-2026-11-25")
    with checkpoint.rows.bulk():
        checkpoint.rows.add(
            [(n, f"k{n % 50}", None, None, None) for n in range(1, 201)],
            [(f"k{n}", f'{{"n":{n}}}') for n in range(50)],
        )
    checkpoint.rows.finish()
    for start in range(0, 40, 10):  # the pool's groups: sent, answered, done
        checkpoint.database.begin_group()
        for n in range(start, start + 10):
            checkpoint.requests.mark_sent(f"k{n}", "2026-11-25T10:00:00+00:00")
            checkpoint.requests.record_answer(f"k{n}", b'{"valuationId":"v"}')
            checkpoint.requests.record_done(f"k{n}", 10)
        checkpoint.database.commit_group()
    counts = checkpoint.counts()
    checkpoint.database.close()  # ships what is left

    blank = tmp_path / "blank"
    blank.mkdir()
    head = restore(objects, blank / CHECKPOINT_NAME)
    again = Checkpoint(Database.open(blank))
    assert again.get("run_id") == "day-2026-11-25"
    assert again.counts() == counts
    assert counts.requests_done == 40
    assert [i.key for i in again.requests.pending()] == [f"k{n}" for n in range(40, 50)]
    # The blank machine takes the run on: a generation of its own, HEAD moved from `head`.
    again.database.keep_at(Replica(objects, blank / CHECKPOINT_NAME, epoch=2), head)
    assert Head.of(objects.objects[HEAD]).epoch == 2
    again.database.close()


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
    checkpoint = Checkpoint(Database.open(tmp_path))
    checkpoint.database.keep_at(Replica(objects, tmp_path / CHECKPOINT_NAME, epoch=1), None)
    assert checkpoint.database.hold_lost() is None
    objects.down = True
    checkpoint.database.begin_group()
    checkpoint.set("pause_until", "x")
    checkpoint.database.commit_group()  # shipped from the replica's thread, which meets the outage
    lost = wait_until(checkpoint.database.hold_lost, 5, "the replica's thread to meet the outage")
    assert lost.reason is StopReason.STORE_UNAVAILABLE
    assert "can no longer be kept at its URL" in lost.detail
    # The commits go on locally (what was answered is kept until the outputs are written),
    # never raising into the sending as a defect (70); no call leaves meanwhile.
    checkpoint.database.begin_group()
    checkpoint.set("pause_until", "y")
    checkpoint.database.commit_group()
    assert checkpoint.database.hold_lost() == lost


class _Counted(MemoryObjects):
    """Counts the bytes written from this process and the copies made on the server."""

    def __init__(self) -> None:
        super().__init__()
        self.created: list[str] = []
        self.copied: list[str] = []

    def create(self, key: str, data: bytes) -> bool:
        self.created.append(key)
        return super().create(key, data)

    def copy(self, source: str, target: str) -> None:
        self.copied.append(target)
        super().copy(source, target)


def _take(tmp_path: Path, objects: MemoryObjects, name: str, epoch: int, *values: int) -> None:
    """One invocation on a blank machine: restore, begin, commit `values`, close."""
    db, kept = _holder(tmp_path, objects, name, epoch)
    if values:
        _commit(db, kept, *values)
    kept.close()
    db.close()


def _generations(objects: MemoryObjects) -> set[str]:
    return {k.split("/")[1] for k in objects.objects if k.count("/") == 2}


def _padded_run(tmp_path: Path, objects: MemoryObjects, *values: int) -> None:
    """A first invocation whose base is about 256 KiB (a real run's is most of its
    memory), then `values` committed ten at a time, each shipped (its own object)."""
    path = tmp_path / "first" / "checkpoint.sqlite"
    path.parent.mkdir()
    db = _open(path)
    db.execute("CREATE TABLE t (v INTEGER)")
    db.execute("CREATE TABLE pad (b BLOB)")
    db.execute("INSERT INTO pad VALUES (zeroblob(1 << 18))")
    kept = Replica(objects, path, epoch=1)
    kept.begin(db, None)
    for start in range(0, len(values), 10):
        _commit(db, kept, *values[start : start + 10])
        kept.drain()
    kept.close()
    db.close()


def test_a_holder_with_little_to_add_copies_the_base_on_the_server(tmp_path: Path) -> None:
    """A resume whose restored log is small beside its base, but many objects (a sending
    run killed before it folded), writes no base: the base is copied on the server, the
    log written once as the new generation's one object, which its own commits rewrite,
    and a blank machine restores every commit of both holders."""
    objects = _Counted()
    _padded_run(tmp_path, objects, *range(30))  # three commits, three objects of log
    objects.created.clear()
    with logs.capture() as logged:
        _take(tmp_path, objects, "second", 2, 100)
    [event] = [e for e in logged if e["event"] == "store.replica.generation"]
    assert event["base_bytes"] == 0
    head = Head.of(objects.objects[HEAD])
    assert objects.copied == [f"state/{head.generation}/base.sqlite"]
    assert not [k for k in objects.created if k.endswith("base.sqlite")]
    assert sorted(k for k in objects.objects if f"/{head.generation}/" in k) == [
        f"state/{head.generation}/{0:016d}.wal",  # the log, one object
        f"state/{head.generation}/base.sqlite",
    ]
    assert _restored_values(tmp_path, objects) == [*range(30), 100]


def test_an_invocation_ends_by_folding_a_long_log_so_the_next_writes_no_base(
    tmp_path: Path,
) -> None:
    """A run whose log passed half its base folds it into a new base as its database
    closes (while it holds the run); the next holder then goes on in that generation,
    its epoch in HEAD, and writes no base and copies none."""
    objects = _Counted()
    first = tmp_path / "first"
    first.mkdir()
    checkpoint = Checkpoint(Database.open(first))
    checkpoint.database.keep_at(Replica(objects, first / CHECKPOINT_NAME, epoch=1), None)
    for n in range(50):
        with checkpoint.database.transaction():
            checkpoint.set(f"answer.{n}", "x" * 1_000)
    checkpoint.database.close()
    head = Head.of(objects.objects[HEAD])
    assert head.generation.startswith("00000001-000002-")  # the fold's generation
    assert not [k for k in objects.objects if f"/{head.generation}/" in k and ".wal" in k]
    objects.created.clear()
    blank = tmp_path / "blank"
    blank.mkdir()
    restored = restore(objects, blank / CHECKPOINT_NAME)
    again = Checkpoint(Database.open(blank))
    again.database.keep_at(Replica(objects, blank / CHECKPOINT_NAME, epoch=2), restored)
    assert again.get("answer.49") == "x" * 1_000
    again.database.close()
    assert Head.of(objects.objects[HEAD]) == Head(head.generation, 2)
    assert objects.copied == []
    assert not [k for k in objects.created if k.endswith("base.sqlite")]


def test_a_log_past_half_its_base_is_folded_into_a_new_base(tmp_path: Path) -> None:
    """A restored log larger than half the base (its holder was killed before folding
    it): the new holder writes a new base (the log emptied into it) rather than the log
    beside a copy, so a restore never reads more than one and a half bases."""
    objects = _Counted()
    _take(tmp_path, objects, "first", 1, *range(2_000))  # the log is most of the memory
    objects.created.clear()
    _take(tmp_path, objects, "second", 2)
    head = Head.of(objects.objects[HEAD])
    assert objects.copied == []
    assert objects.created[0] == f"state/{head.generation}/base.sqlite"
    assert _restored_values(tmp_path, objects) == list(range(2_000))


def test_rounds_with_nothing_to_do_add_no_object(tmp_path: Path) -> None:
    """Ten takes that add one small commit each, after a run killed with its log in many
    objects: the first copies the base into a generation whose log is one object; each
    take after it goes on in that generation and rewrites that object, so the objects
    under state/ do not grow with the rounds, the generation before HEAD's is kept, and
    the memory holds every commit."""
    objects = _Counted()
    _padded_run(tmp_path, objects, *range(100))
    run = Head.of(objects.objects[HEAD]).generation
    _take(tmp_path, objects, "resume-1", 2, 100)
    after_one = len(objects.objects)
    carried = Head.of(objects.objects[HEAD]).generation
    for epoch in range(3, 12):
        _take(tmp_path, objects, f"resume-{epoch - 1}", epoch, epoch * 1_000)
        assert Head.of(objects.objects[HEAD]) == Head(carried, epoch)
        assert _generations(objects) == {run, carried}  # HEAD's, and the one before it
        assert len(objects.objects) == after_one
    assert not [k for k in objects.created if k.endswith("base.sqlite")][1:]  # the run's own
    assert len(objects.copied) == 1
    assert _restored_values(tmp_path, objects) == [*range(101), *(e * 1_000 for e in range(3, 12))]


def test_two_holders_in_one_generation_meet_on_its_log_and_one_stops(tmp_path: Path) -> None:
    """A holder that stalled (epoch 2) and its successor (epoch 3) in one generation: the
    successor rewrites the log's object first, so the stalled holder's next rewrite fails
    (it was no longer the version it wrote) and it stops keeping; the memory holds the
    successor's commits, one history."""
    objects = MemoryObjects()
    _padded_run(tmp_path, objects, 1)
    stalled_db, stalled = _holder(tmp_path, objects, "stalled", 2)
    _commit(stalled_db, stalled, 2)
    stalled.drain()
    successor_db, successor = _holder(tmp_path, objects, "successor", 3)
    _commit(successor_db, successor, 3)
    successor.drain()
    _commit(stalled_db, stalled, 4)
    with pytest.raises(ReplicaLostError, match="rewritten by another holder"):
        stalled.drain()
    successor.close()
    stalled.close()
    assert _restored_values(tmp_path, objects) == [1, 2, 3]
    assert Head.of(objects.objects[HEAD]).epoch == 3


def test_a_log_rewritten_after_it_was_restored_is_not_taken_on(tmp_path: Path) -> None:
    """Another holder rewrote the log between this holder's restore and its taking the
    run: taking it on would drop that holder's commits, so it stops instead."""
    objects = MemoryObjects()
    _padded_run(tmp_path, objects, 1)
    _take(tmp_path, objects, "second", 2, 2)  # the log is one object, carried on
    path = tmp_path / "late" / "checkpoint.sqlite"
    path.parent.mkdir()
    head = restore(objects, path)
    _take(tmp_path, objects, "meanwhile", 3, 3)
    db = _open(path)
    with pytest.raises(ReplicaLostError, match="changed since it was restored"):
        Replica(objects, path, epoch=4).begin(db, head)
    db.close()


def test_a_holder_never_deletes_a_later_holders_generation(tmp_path: Path) -> None:
    """A stalled holder that moves HEAD of its own deletes only generations of its epoch
    or earlier: a later holder's (a higher epoch) are never its to delete."""
    objects = MemoryObjects()
    _take(tmp_path, objects, "first", 1, 1)
    later = "00000009-000001-0badc0de"
    objects.objects[f"state/{later}/base.sqlite"] = b"a later holder's"
    objects.objects["state/00000001-000007-0badf00d/base.sqlite"] = b"an orphan of epoch 1"
    _take(tmp_path, objects, "second", 2, 2)
    assert f"state/{later}/base.sqlite" in objects.objects
    assert "state/00000001-000007-0badf00d/base.sqlite" not in objects.objects


class _MovedWhileRead(MemoryObjects):
    """Another holder moves HEAD on twice while a reader lists its generation: the
    generation the reader began with is deleted, base first."""

    def __init__(self) -> None:
        super().__init__()
        self.then: tuple[bytes, str] | None = None  # HEAD's bytes, and the generation to delete

    def list(self, prefix: str) -> list[str]:
        found = super().list(prefix)
        if self.then is not None and prefix != "state/":
            head, gone = self.then
            self.then = None
            for key in sorted(k for k in self.objects if f"/{gone}/" in k):
                self.delete(key)
            self.objects[HEAD] = head
        return found


def test_a_reader_whose_generation_goes_meanwhile_reads_head_again(tmp_path: Path) -> None:
    """A restore whose generation is deleted under it (HEAD moved on twice meanwhile)
    never restores part of it: it reads the new HEAD and restores that generation."""
    objects = _MovedWhileRead()
    _take(tmp_path, objects, "first", 1, *range(50))
    first = Head.of(objects.objects[HEAD])
    _take(tmp_path, objects, "second", 2, 50)
    later = objects.objects[HEAD]
    objects.objects[HEAD] = first.to_bytes()  # the reader finds the older HEAD first
    objects.then = (later, first.generation)
    restored = _blank(tmp_path)
    found = restore(objects, restored)
    assert found is not None
    assert found.head == Head.of(later)
    assert _values(restored) == list(range(51))


_DAMAGED_HEADS = [
    b"\xff\xfe\x00garbage",
    b"not json at all",
    b"[1, 2]",
    b"{}",
    b'{"generation": "../../elsewhere", "epoch": 1}',
    b'{"generation": "00000001-000001-0badf00d", "epoch": "1"}',
]


@pytest.mark.parametrize("damaged", _DAMAGED_HEADS)
def test_a_head_that_does_not_parse_is_64_naming_the_repair(tmp_path: Path, damaged: bytes) -> None:
    """HEAD overwritten with something that is not a HEAD: `StateObjectError` (exit 64)
    naming HEAD, and the repair: HEAD naming the newest generation, whose restore holds
    every commit; no file is left."""
    objects = MemoryObjects()
    _take(tmp_path, objects, "first", 1, 1, 2)
    _take(tmp_path, objects, "second", 2, 3)
    newest = Head.of(objects.objects[HEAD])
    objects.objects[HEAD] = damaged
    restored = _blank(tmp_path)
    with pytest.raises(StateObjectError) as raised:
        restore(objects, restored, url="s3://b/run")
    assert raised.value.exit_code == 64
    message = str(raised.value)
    assert "s3://b/run/state/HEAD is not the run's HEAD" in message
    assert "Never name an older generation" in message
    assert list(restored.parent.iterdir()) == []
    objects.objects[HEAD] = _repair_in(message)
    assert Head.of(objects.objects[HEAD]).generation == newest.generation
    restore(objects, restored)
    assert _values(restored) == [1, 2, 3]


def _repair_in(message: str) -> bytes:
    """The HEAD a repair message says to write."""
    found = re.search(r"write (\{.*?\}) to ", message)
    assert found, message
    return json.dumps(json.loads(found.group(1))).encode()


def test_a_head_naming_a_missing_generation_is_64_and_says_what_is_forgotten(
    tmp_path: Path,
) -> None:
    """HEAD names a generation that is gone: 64 naming its base, never a silent fall back
    to the one before; the repair names that one and says what it may cost."""
    objects = MemoryObjects()
    _take(tmp_path, objects, "first", 1, *range(50))
    previous = Head.of(objects.objects[HEAD])
    _take(tmp_path, objects, "second", 2, 50)
    gone = Head.of(objects.objects[HEAD])
    for key in [k for k in objects.objects if f"/{gone.generation}/" in k]:
        del objects.objects[key]
    restored = _blank(tmp_path)
    with pytest.raises(StateObjectError) as raised:
        restore(objects, restored, url="s3://b/run")
    message = str(raised.value)
    assert f"names generation {gone.generation}" in message
    assert f"s3://b/run/state/{gone.generation}/base.sqlite is not there" in message
    assert f"is older than {gone.generation}" in message
    assert "paid again after it" in message
    assert Head.of(_repair_in(message)) == Head(previous.generation, 1)
    assert list(restored.parent.iterdir()) == []


def test_a_base_that_is_no_sqlite_file_is_64(tmp_path: Path) -> None:
    objects = MemoryObjects()
    _take(tmp_path, objects, "first", 1, 1)
    head = Head.of(objects.objects[HEAD])
    objects.objects[f"state/{head.generation}/base.sqlite"] = b"<html>an error page</html>"
    with pytest.raises(StateObjectError, match="is not an SQLite database"):
        restore(objects, tmp_path / "checkpoint.sqlite")


@pytest.mark.parametrize("damage", ["gap", "foreign", "torn"])
def test_a_log_that_is_not_one_whole_log_is_64(tmp_path: Path, damage: str) -> None:
    """A log with a gap, objects from another log (other salts), or a tail cut inside a
    frame: 64, never the silent loss of the commits SQLite's recovery would drop."""
    objects = MemoryObjects()
    db, kept = _holder(tmp_path, objects, "first", epoch=1)
    for start in range(0, 30, 3):
        _commit(db, kept, start, start + 1, start + 2)
        kept.drain()
    kept.close()
    db.close()
    head = Head.of(objects.objects[HEAD])
    segments = sorted(k for k in objects.objects if k.endswith(".wal"))
    assert len(segments) > 3
    if damage == "gap":
        del objects.objects[segments[2]]
    elif damage == "foreign":
        data = bytearray(objects.objects[segments[-1]])
        data[8:16] = b"\x01" * 8  # the first frame's salts, another log's
        objects.objects[segments[-1]] = bytes(data)
    else:
        objects.objects[segments[-1]] = objects.objects[segments[-1]][:-100]
    with pytest.raises(StateObjectError, match=f"state/{head.generation}/"):
        restore(objects, tmp_path / "checkpoint.sqlite")
    assert not (tmp_path / "checkpoint.sqlite").exists()


def test_a_missing_head_beside_a_kept_memory_is_64(tmp_path: Path) -> None:
    """HEAD deleted while the generations stay: a new run would start from nothing and pay
    again, so 64; but a first holder's base alone (killed before HEAD) is no run yet."""
    objects = MemoryObjects()
    objects.objects["state/00000001-000001-0badf00d/base.sqlite"] = b"SQLite format 3\x00"
    assert restore(objects, tmp_path / "checkpoint.sqlite") is None
    _take(tmp_path, objects, "first", 2, 1)
    del objects.objects[HEAD]
    with pytest.raises(StateObjectError, match="HEAD is missing"):
        restore(objects, tmp_path / "checkpoint.sqlite")


def test_a_head_damaged_under_a_running_holder_stops_it_with_the_repair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HEAD overwritten with garbage while a holder runs: at its next swap (a new
    generation) it stops sending with `refused` (64), its message naming HEAD and its own
    generation to write there; no UnicodeDecodeError reaches the run."""
    monkeypatch.setattr(replica_module, "GENERATION_BYTES", 16_384)
    objects = MemoryObjects()
    checkpoint = Checkpoint(Database.open(tmp_path))
    checkpoint.database.keep_at(
        Replica(objects, tmp_path / CHECKPOINT_NAME, epoch=1, url="s3://b/run"), None
    )
    mine = Head.of(objects.objects[HEAD])
    objects.objects[HEAD] = b"\xff\xfe garbage"
    for n in range(200):  # past the generation's size: a new one, and a swap
        with checkpoint.database.transaction():
            checkpoint.set(f"pad.{n}", "x" * 500)
    lost = checkpoint.database.hold_lost()
    assert lost is not None
    assert lost.reason is StopReason.REFUSED
    assert "s3://b/run/state/HEAD was overwritten while this run held it" in lost.detail
    assert Head.of(_repair_in(lost.detail)) == mine
    checkpoint.database.close()


@pytest.mark.parametrize("damaged", [b"\xff garbage", b"{}", b'{"holder": "h", "epoch": "x"}'])
def test_a_lease_that_does_not_parse_is_64_naming_the_repair(damaged: bytes) -> None:
    with pytest.raises(
        StateObjectError, match="state/LEASE at the run's URL is not the run's lease"
    ):
        LeaseState.of(damaged)
