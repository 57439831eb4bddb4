"""The run's memory kept at a URL as it commits, so that a machine with an empty disk picks
the run up: the second backend of `store/database` (issue 23's).

The database stays an SQLite file on the local disk, where the run works; what makes it
durable elsewhere is its write-ahead log. With SQLite's own checkpoints turned off
(`wal_autocheckpoint=0`), the log only grows between the checkpoints this module makes,
and a byte of it, once a transaction that wrote it has committed, never changes. So each
commit's new bytes are shipped as they are, in order, to immutable objects; a restore
concatenates them after the base they follow and lets SQLite recover the log on open,
which keeps every committed transaction and drops a torn tail.

At the URL's prefix (`state/`):

- `HEAD`: `{"generation": ..., "epoch": ...}`, replaced only by compare-and-swap: which
  generation is the run's memory now.
- `<generation>/base.sqlite`: the database file as the generation began (after a
  checkpoint that emptied the log), written create-only.
- `<generation>/<offset>.wal`: the log's bytes from `offset` on, up to the next object's
  offset, each written create-only once its transactions committed.

A generation is one holder's: it begins when a holder takes the run (its base is the
database it restored, checkpointed), and again when the log has grown past both
`GENERATION_BYTES` and half its base's size (a checkpoint, a new base). A holder that lost the
run writes on in its own generation, which HEAD no longer names: it can never overwrite
the new holder's.

What a kill can lose is the commits not shipped yet: the writer ships every group commit
(a fifth of a second while sending) from a thread of its own, within a second or two of
the commit. A request whose `sent` was lost is sent again with its key, the same UTC day,
and the API answers it from its idempotency store, free; an answer is recorded in the
same group as its reading, so it is shipped with it or not at all.
"""

from __future__ import annotations

import dataclasses
import json
import queue
import secrets
import sqlite3
import threading
import time
from pathlib import Path
from typing import BinaryIO, Protocol

import structlog

from batchval.outcome import BatchvalError

log = structlog.get_logger()

# A new generation (a checkpoint and a new base) once the log passes this size and half
# its base's: a restore reads the base and the log, and a log of hundreds of MiB (a
# million-row ingest) makes it slow to restore and slow to recover. Past this size alone,
# a million-row run (a 410 MiB base) sending at 20/s wrote its whole base again every
# 3 minutes (its log grows 16 KiB a call), 5 s each with the sending held, and kept every
# one. Half the base writes one a third as often, and a restore reads at most 1.5 times
# the base: that run with 217 MiB of log made its first call 21 s after a blank machine
# started it (at a load of 4 on 2 cores), 12 s of them its own new base.
GENERATION_BYTES = 64 << 20
HEAD = "state/HEAD"


class Objects(Protocol):
    """The object store as the replica needs it (`store/objects.ObjectStore`)."""

    def get(self, key: str) -> tuple[bytes, str] | None: ...
    def read_into(self, key: str, out: BinaryIO) -> int | None: ...
    def create(self, key: str, data: bytes) -> bool: ...
    def replace(self, key: str, data: bytes, etag: str) -> bool: ...
    def list(self, prefix: str) -> list[str]: ...


class ReplicaLostError(BatchvalError):
    """Another holder's generation is HEAD now: this one must stop writing."""


@dataclasses.dataclass(frozen=True, slots=True)
class Head:
    generation: str
    epoch: int

    def to_bytes(self) -> bytes:
        return json.dumps({"generation": self.generation, "epoch": self.epoch}).encode()

    @classmethod
    def of(cls, data: bytes) -> Head:
        found = json.loads(data)
        return cls(str(found["generation"]), int(found["epoch"]))


def _segment(generation: str, offset: int) -> str:
    return f"state/{generation}/{offset:016d}.wal"


def _base(generation: str) -> str:
    return f"state/{generation}/base.sqlite"


def restore(objects: Objects, database: Path) -> Head | None:
    """Write the run's memory at the URL into `database` (and its log beside it); None when
    the URL holds no run yet. The log's objects must follow each other without a gap.

    Each object is streamed to its file (`read_into`), never held whole: a million-row
    run's base is hundreds of MiB, and held as bytes it once doubled the peak memory of a
    resume (1 GiB for a 410 MiB base). A restore that fails leaves no file behind."""
    found = objects.get(HEAD)
    if found is None:
        return None
    head = Head.of(found[0])
    files = (database, _wal(database), Path(f"{database}-shm"))
    for leftover in files:
        leftover.unlink(missing_ok=True)
    try:
        with database.open("wb") as base:
            if objects.read_into(_base(head.generation), base) is None:
                raise BatchvalError(
                    f"the run's memory names generation {head.generation} without its base"
                )
        prefix = f"state/{head.generation}/"
        segments = sorted(k for k in objects.list(prefix) if k.endswith(".wal"))
        if segments:
            with _wal(database).open("wb") as log:
                size = 0
                for key in segments:
                    if int(key.removeprefix(prefix).removesuffix(".wal")) != size:
                        raise BatchvalError(f"the run's memory has a gap in its log before {key}")
                    part = objects.read_into(key, log)
                    if part is None:
                        raise BatchvalError(f"{key} was listed but cannot be read")
                    size += part
    except BaseException:
        for partial in files:
            partial.unlink(missing_ok=True)
        raise
    return head


def _wal(database: Path) -> Path:
    return Path(f"{database}-wal")


class Replica:
    """Ships one database's commits to the object store, a generation at a time. `begin`
    after the database is open (and restored); `committed` after every commit; `close`
    ships what is left."""

    def __init__(self, objects: Objects, database: Path, *, epoch: int) -> None:
        self._objects = objects
        self._database = database
        self._epoch = epoch
        self._generation = ""
        self._shipped = 0  # bytes of this generation's log at the URL
        self._base_bytes = 0  # this generation's base
        self._pending: queue.Queue[tuple[str, int] | None] = queue.Queue()
        self._failure: BaseException | None = None
        self._thread: threading.Thread | None = None

    @property
    def failure(self) -> BaseException | None:
        """Why shipping stopped (the run must stop: its commits are not kept), if it did."""
        return self._failure

    def begin(self, connection: sqlite3.Connection, head: Head | None) -> None:
        """Take the run: a new generation from the database as it is (the log emptied into
        it), HEAD moved to it from `head` (None: the URL held no run)."""
        connection.execute("PRAGMA wal_autocheckpoint=0")
        self._new_generation(connection, head)
        self._thread = threading.Thread(target=self._ship, name="replica", daemon=True)
        self._thread.start()

    def committed(self, connection: sqlite3.Connection) -> None:
        """A transaction committed: its bytes of the log are shipped (in the background).
        Past `GENERATION_BYTES` and half the base's size the log is emptied into the
        database and a new generation begins, once what was committed before is shipped."""
        if self._failure is not None:
            raise ReplicaLostError(f"the run's memory is no longer kept: {self._failure}")
        size = _wal(self._database).stat().st_size if _wal(self._database).exists() else 0
        self._pending.put((self._generation, size))
        if size > max(GENERATION_BYTES, self._base_bytes // 2):
            self.drain()
            self._new_generation(connection, self._head())

    def drain(self) -> None:
        """Wait until every commit so far is shipped."""
        self._pending.join()
        if self._failure is not None:
            raise ReplicaLostError(f"the run's memory is no longer kept: {self._failure}")

    def close(self) -> None:
        """Ship what is left and stop; a failure stays in `failure` (the run's stop says it)."""
        self._pending.join()
        self._pending.put(None)
        if self._thread is not None:
            self._thread.join()

    def _head(self) -> Head:
        return Head(self._generation, self._epoch)

    def _new_generation(self, connection: sqlite3.Connection, before: Head | None) -> None:
        started = time.monotonic()
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        generation = f"{self._epoch:08d}-{secrets.token_hex(4)}"
        # Read whole: a create-only write is one PUT (obstore's multipart upload takes no
        # condition), so the base is in memory once while it is written.
        base = self._database.read_bytes()
        if not self._objects.create(_base(generation), base):
            raise ReplicaLostError(f"generation {generation} was begun by another holder")
        head = Head(generation, self._epoch)
        _swap_head(self._objects, before, head)
        self._generation, self._shipped, self._base_bytes = generation, 0, len(base)
        # The base of a big run is hundreds of MiB: what a resume waits for, said.
        log.info(
            "replica.generation",
            generation=generation,
            base_bytes=len(base),
            seconds=round(time.monotonic() - started, 3),
        )

    def _ship(self) -> None:
        while (job := self._pending.get()) is not None:
            try:
                if self._failure is None:
                    self._ship_to(*job)
            except BaseException as exc:  # kept for the writer, which stops the run
                self._failure = exc
            finally:
                self._pending.task_done()
        self._pending.task_done()

    def _ship_to(self, generation: str, size: int) -> None:
        if generation != self._generation or size <= self._shipped:
            return  # a generation since begun holds these bytes in its base
        with _wal(self._database).open("rb") as log:
            log.seek(self._shipped)
            data = log.read(size - self._shipped)
        if not self._objects.create(_segment(generation, self._shipped), data):
            raise ReplicaLostError(
                f"{_segment(generation, self._shipped)} was written by another holder"
            )
        self._shipped = size


def _swap_head(objects: Objects, before: Head | None, after: Head) -> None:
    """HEAD from `before` to `after`, only if it still says `before` (compare-and-swap)."""
    found = objects.get(HEAD)
    if before is None:
        swapped = found is None and objects.create(HEAD, after.to_bytes())
    else:
        same = found is not None and Head.of(found[0]) == before
        swapped = same and found is not None and objects.replace(HEAD, after.to_bytes(), found[1])
    if swapped:
        return
    raise ReplicaLostError("another holder has taken the run's memory")
