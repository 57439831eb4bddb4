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
- `<generation>/base.sqlite`: the database file as the generation began, written
  create-only, or copied on the server from the generation before (below).
- `<generation>/<offset>.wal`: the log's bytes from `offset` on, up to the next object's
  offset, each written create-only once its transactions committed.

A generation is named `<epoch>-<sequence>-<random>`: the lease's epoch of the holder that
began it (`store/lease`), and its count of generations, so that the newest is known by
its name alone (what the repair of a damaged HEAD names). A holder begins one when it
takes the run with a log too long to carry on, and again when the log has grown past
both `GENERATION_BYTES` and half its base's size (a checkpoint, a new base).

**Fencing.** Every write a holder makes is conditional on what it read: HEAD by
compare-and-swap (and a holder that takes the run writes its epoch into HEAD, even when
it goes on in the same generation, so that a holder before it can move HEAD no more); a
log object create-only at the offset where the log it restored ends, or, for a log that
is one object, rewritten only if it is still the version last read or written. Two
writers of one generation's log therefore meet on the same object and one of them fails
(`ReplicaLostError`): the log stays one history. A holder that lost the run and begins a
generation of its own cannot make it HEAD.

**A bucket that holds what a run needs** (issue 36). A holder that takes the run does not
write the database again when little has changed since its base (`_carries_on`: the
restored log is at most half the base). When that log is one object, or none, and small
(`GROWING_BYTES`), it goes on in the same generation (`_carry_in_place`) and rewrites
that object as it commits: a resume that sends nothing adds no object and no base (the
first adds the log's one object to a generation that had none).
When the log is many objects (a sending run was killed before it folded), its
generation's base is copied on the server (S3's CopyObject: no byte of it passes through
this process) into a new generation, and the log written once as that generation's
first object, which then grows in the same way. An invocation ends by folding a log past
half its base into a new base (`fold`: the run that sent writes it, while nothing
waits), and a holder that finds such a log (its predecessor was killed) folds it on
taking the run instead; so a restore never reads more than one and a half bases. Once
HEAD is moved, every generation but the one it names and the one before it is deleted,
by the holder that moved it, from a thread of its own: the one before stays so that a
reader that read the old HEAD finishes its restore, and so that a HEAD naming a
generation since lost can be repaired to it; a reader whose generation goes meanwhile
reads HEAD again, finds it moved, and restores the new (`restore`). Only
generations of this holder's epoch or an earlier one are deleted: a holder that stalled
and lost the run can never delete its successor's.

**A pointer that cannot strand a run.** Every object read is checked before it is
trusted: HEAD parses as a HEAD and names a generation; the base is there and is an
SQLite file; the log's objects follow each other from offset 0 without a gap and make
one write-ahead log (its header, whole frames of one log, ending on a commit). What fails
a check raises `StateObjectError` (exit 64), naming the object and the repair
(docs/how-to/object-storage.md, "Repair a run's memory"): never a silent fall back to an
older generation, which could forget answers already paid for and pay them again on a
later day.

What a kill can lose is the commits not shipped yet: the writer ships every group commit
(a fifth of a second while sending) from a thread of its own, within a second or two of
the commit. A request whose `sent` was lost is sent again with its key, the same UTC day,
and the API answers it from its idempotency store, free; an answer is recorded in the
same group as its reading, so it is shipped with it or not at all.
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import re
import secrets
import sqlite3
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from batchval._internal import logs
from batchval._internal.outcome import BatchvalError, ExitCode

if TYPE_CHECKING:
    from batchval._internal.store.objects import Objects

log = logs.get_logger()

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
STATE = "state/"
REPAIR = 'docs/how-to/object-storage.md, "Repair a run\'s memory"'
# A restore whose generation is deleted meanwhile (HEAD moved on twice) reads HEAD again,
# this many times in all.
RESTORE_ATTEMPTS = 3
# A holder that takes on a generation whose log is one object this small at most rewrites
# that object as it commits (compare-and-swap) instead of adding one per commit, until it
# passes this size: a resume that sends nothing adds no object. Past it, each rewrite
# would upload the whole log again (a sending run commits five times a second).
GROWING_BYTES = 1 << 20

_GENERATION = re.compile(r"(?P<epoch>\d{8})-(?:(?P<sequence>\d{6})-)?[0-9a-f]{8}")
_SQLITE = b"SQLite format 3\x00"
_WAL_MAGIC = (0x377F0682, 0x377F0683)
_WAL_HEADER = 32
_FRAME_HEADER = 24


class ReplicaLostError(BatchvalError):
    """Another holder's generation is HEAD now: this one must stop writing."""


class MemoryGoneError(ReplicaLostError):
    """The run's memory at its URL vanished under the holder: HEAD, or the log object it
    rewrites, is missing where it must be (deleted by hand, a lifecycle rule, a prefix
    emptied). What the run knew of its calls is gone there: a run begun again at the URL
    starts from nothing, so this is no outage to wait out but a stop (64) that says so."""

    def __init__(self, key: str, url: str) -> None:
        super().__init__(
            f"the run's memory at {url} is gone: {url}/{key} was deleted while this "
            "invocation held the run"
        )
        self.key = key


class StateObjectError(BatchvalError):
    """An object of the run's memory at its URL (`state/...`) cannot be trusted: HEAD does
    not parse or names a generation that is not there, a base is no SQLite file, the log
    has a gap, the lease does not parse. A person repairs it (the message says how): 64."""

    exit_code = ExitCode.USAGE

    def __init__(self, key: str, detail: str) -> None:
        super().__init__(detail)
        self.key = key


@dataclasses.dataclass(frozen=True, slots=True)
class Head:
    generation: str
    epoch: int

    def to_bytes(self) -> bytes:
        return json.dumps({"generation": self.generation, "epoch": self.epoch}).encode()

    @classmethod
    def of(cls, data: bytes) -> Head:
        """HEAD's bytes as a HEAD; `ValueError` when they are not one (not UTF-8 JSON, not
        an object of a generation name and an integer epoch)."""
        try:
            found = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise ValueError("it is not JSON") from None
        if not isinstance(found, dict):
            raise ValueError("it is not a JSON object")
        generation, epoch = found.get("generation"), found.get("epoch")
        if not isinstance(generation, str) or not _GENERATION.fullmatch(generation):
            raise ValueError(f"its generation is not a generation's name: {generation!r}")
        if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
            raise ValueError(f"its epoch is not a whole number: {epoch!r}")
        return cls(generation, epoch)


@dataclasses.dataclass(frozen=True, slots=True)
class Restored:
    """What `restore` wrote: the HEAD it followed, and the sizes and stamp of the files,
    so that a new holder can tell that its database is still the base it restored."""

    head: Head
    base_bytes: int
    log_bytes: int
    stamp: tuple[int, int, int]  # the database file's (inode, size, mtime_ns)
    log_objects: int = 0  # the objects the log was read from


def _segment(generation: str, offset: int) -> str:
    return f"state/{generation}/{offset:016d}.wal"


def _base(generation: str) -> str:
    return f"state/{generation}/base.sqlite"


def _order(generation: str) -> tuple[int, int]:
    """A generation's place in the run's history: (epoch, sequence); -1 for a name of
    before sequences (each holder's first generation then)."""
    found = _GENERATION.fullmatch(generation)
    if found is None:
        return (-1, -1)
    return int(found["epoch"]), int(found["sequence"] or -1)


def _stamp(path: Path) -> tuple[int, int, int]:
    found = os.stat(path)
    return found.st_ino, found.st_size, found.st_mtime_ns


class _VanishedError(Exception):
    """An object of the generation being restored is gone: deleted meanwhile, or lost."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def restore(objects: Objects, database: Path, *, url: str = "the run's URL") -> Restored | None:
    """Write the run's memory at the URL into `database` (and its log beside it); None when
    the URL holds no run yet. Every object is checked before it is trusted (the module's
    doc); what fails raises `StateObjectError`, naming the object under `url` and the
    repair. A generation deleted while it was read (HEAD moved on twice meanwhile) is
    read again from the new HEAD.

    Each object is streamed to its file (`read_into`), never held whole: a million-row
    run's base is hundreds of MiB, and held as bytes it once doubled the peak memory of a
    resume (1 GiB for a 410 MiB base). A restore that fails leaves no file behind."""
    for _ in range(RESTORE_ATTEMPTS):
        found = objects.get(HEAD)
        if found is None:
            _check_headless(objects, url)
            return None
        head = _parse_head(objects, found[0], url)
        try:
            return _restore_generation(objects, head, database, url)
        except _VanishedError as exc:
            now = objects.get(HEAD)
            if now is not None and now[0] != found[0]:
                continue  # HEAD moved on while the old generation was read: read the new
            raise StateObjectError(HEAD, _missing(objects, head, exc.key, url)) from None
    raise StateObjectError(
        HEAD, f"{url}/{HEAD} moved on {RESTORE_ATTEMPTS} times while it was read: try again"
    )


def _restore_generation(objects: Objects, head: Head, database: Path, url: str) -> Restored:
    files = (database, _wal(database), Path(f"{database}-shm"))
    for leftover in files:
        leftover.unlink(missing_ok=True)
    prefix = f"state/{head.generation}/"
    try:
        with database.open("wb") as base:
            base_bytes = objects.read_into(_base(head.generation), base)
        if base_bytes is None:
            raise _VanishedError(_base(head.generation))
        with database.open("rb") as written:
            if written.read(len(_SQLITE)) != _SQLITE:
                raise StateObjectError(
                    _base(head.generation),
                    f"{url}/{_base(head.generation)} is not an SQLite database: "
                    + _repair(objects, url, head),
                )
        listed = objects.list(prefix)
        segments = sorted(k for k in listed if k.endswith(".wal"))
        size = 0
        if segments:
            with _wal(database).open("wb") as out:
                for key in segments:
                    offset = key.removeprefix(prefix).removesuffix(".wal")
                    if not offset.isdigit() or int(offset) != size:
                        raise StateObjectError(
                            key,
                            f"the log of {url}/{prefix} has a gap before {key} (at byte "
                            f"{size}): " + _repair(objects, url, head),
                        )
                    part = objects.read_into(key, out)
                    if part is None:
                        raise _VanishedError(key)
                    size += part
            _check_log(_wal(database), f"{url}/{prefix}", lambda: _repair(objects, url, head))
        # Deleted meanwhile (its base goes first)? Then what was listed may be short of it.
        if _base(head.generation) not in objects.list(prefix):
            raise _VanishedError(_base(head.generation))
    except BaseException:
        for partial in files:
            partial.unlink(missing_ok=True)
        raise
    return Restored(head, base_bytes, size, _stamp(database), len(segments))


def _check_log(path: Path, where: str, repair: Callable[[], str]) -> None:
    """The restored log is one SQLite write-ahead log: its header, then whole frames that
    carry its salts, the last of them a commit. SQLite itself would drop, without a word,
    frames from another log or cut short: commits the run made would be forgotten."""
    size = path.stat().st_size
    with path.open("rb") as wal:
        header = wal.read(_WAL_HEADER)
        bad = len(header) < _WAL_HEADER
        if not bad:
            magic, _, page_size, _, salt1, salt2 = struct.unpack(">6I", header[:24])
            frame = _FRAME_HEADER + page_size
            bad = magic not in _WAL_MAGIC or page_size < 512 or (size - _WAL_HEADER) % frame
        last_commit = 0
        if not bad:
            for at in range(_WAL_HEADER, size, frame):
                wal.seek(at)
                _, committed, s1, s2 = struct.unpack(">4I", wal.read(16))
                if (s1, s2) != (salt1, salt2):
                    bad = True
                    break
                last_commit = committed
        if not bad and size > _WAL_HEADER and last_commit == 0:
            bad = True  # frames of a transaction that never committed: never shipped
    if bad:
        raise StateObjectError(where, f"the log of {where} is not one whole SQLite log: {repair()}")


def _parse_head(objects: Objects, data: bytes, url: str) -> Head:
    try:
        return Head.of(data)
    except ValueError as exc:
        raise StateObjectError(
            HEAD,
            f"{url}/{HEAD} is not the run's HEAD ({exc}): " + _repair(objects, url, None),
        ) from None


def _check_headless(objects: Objects, url: str) -> None:
    """No HEAD: a run that never began, or one whose HEAD was deleted. The first holder
    writes its base before it creates HEAD, so a base alone is a first holder killed in
    between (nothing was committed at the URL yet); a log, or more than one generation,
    is a run whose HEAD is gone, which a new run would start again from nothing."""
    keys = objects.list(STATE)
    generations = {k.split("/")[1] for k in keys if k.count("/") == 2}
    if any(k.endswith(".wal") for k in keys) or len(generations) > 1:
        raise StateObjectError(
            HEAD,
            f"{url}/{HEAD} is missing, but {url}/{STATE} holds the run's memory: "
            + _repair(objects, url, None),
        )


def _missing(objects: Objects, head: Head, key: str, url: str) -> str:
    return f"{url}/{HEAD} names generation {head.generation}, but {url}/{key} is not there: " + (
        _repair(objects, url, head)
    )


def _generations(objects: Objects) -> list[str]:
    """The generations under `state/` whose base is there, oldest first."""
    found = [
        k.split("/")[1]
        for k in objects.list(STATE)
        if k.endswith("/base.sqlite") and k.count("/") == 2
    ]
    return sorted((g for g in found if _GENERATION.fullmatch(g)), key=_order)


def _repair(objects: Objects, url: str, broken: Head | None) -> str:
    """What a person does about a damaged HEAD or generation (docs/how-to/object-storage.md):
    name in HEAD the newest generation whose base is there (but `broken`, the generation
    HEAD names that is damaged or gone), and what that costs when it is older than that."""
    try:
        generations = [g for g in _generations(objects) if broken is None or g != broken.generation]
    except BatchvalError:
        generations = []
    where = f"{url}/{HEAD}"
    if not generations:
        return (
            f"no other generation with a base is under {url}/{STATE}: the run's memory is "
            f"lost. Move {url}/{STATE} aside and run the same command again: it starts the "
            "run anew, and a request already answered within the API's idempotency window "
            "(24 hours) is answered free, but one answered before that is paid again; "
            f"see {REPAIR}"
        )
    newest = generations[-1]
    fix = Head(newest, _order(newest)[0]).to_bytes().decode()
    said = (
        f"write {fix} to {where} (the newest generation left under {url}/{STATE}), then run "
        f"the same command again; see {REPAIR}."
    )
    if broken is not None and _order(newest) < _order(broken.generation):
        return (
            f"{said} Generation {newest} is older than {broken.generation}: what only "
            f"{broken.generation} kept is forgotten, and requests answered since are sent "
            "again with their keys: free within the API's idempotency window (24 hours "
            "from their first call), paid again after it, so repair and run it the same day"
        )
    return (
        f"{said} Never name an older generation: it forgets answers already paid for, "
        "which a later day would pay for again"
    )


def _wal(database: Path) -> Path:
    return Path(f"{database}-wal")


class Replica:
    """Ships one database's commits to the object store, a generation at a time. `begin`
    after the database is open (and restored); `committed` after every commit; `close`
    ships what is left."""

    def __init__(
        self, objects: Objects, database: Path, *, epoch: int, url: str = "the run's URL"
    ) -> None:
        self._objects = objects
        self._database = database
        self._epoch = epoch
        self._url = url
        self._generation = ""
        self._sequence = 0  # generations this holder began
        self._shipped = 0  # bytes of this generation's log at the URL
        self._base_bytes = 0  # this generation's base
        # While the log is one object that grows (`_carry_in_place`): True, and the ETag
        # of its last version (None: not written yet).
        self._growing = False
        self._grown: str | None = None
        self._pending: queue.Queue[tuple[str, int] | None] = queue.Queue()
        self._failure: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._sweeps: list[threading.Thread] = []

    @property
    def failure(self) -> BaseException | None:
        """Why shipping stopped (the run must stop: its commits are not kept), if it did."""
        return self._failure

    @property
    def generation(self) -> str:
        """The generation this holder writes now."""
        return self._generation

    def begin(self, connection: sqlite3.Connection, restored: Restored | None) -> None:
        """Take the run: a new generation from the database as it is, HEAD moved to it
        from what was `restored` (None: the URL held no run). Its base is copied on the
        server when the database is still the base restored and its log at most half of
        it (`_carries_on`); else the log is emptied into the database, written whole."""
        connection.execute("PRAGMA wal_autocheckpoint=0")
        if restored is not None and self._carries_on(restored):
            if restored.log_objects <= 1 and self._log_bytes() <= GROWING_BYTES:
                self._carry_in_place(restored)
            else:
                self._carried_generation(restored)
        else:
            self._new_generation(connection, None if restored is None else restored.head)
        self._thread = threading.Thread(target=self._ship, name="replica", daemon=True)
        self._thread.start()

    def committed(self, connection: sqlite3.Connection) -> None:
        """A transaction committed: its bytes of the log are shipped (in the background).
        Past `GENERATION_BYTES` and half the base's size the log is emptied into the
        database and a new generation begins, once what was committed before is shipped.
        A new generation that cannot be made HEAD stops the keeping (`failure`): the run
        stops sending, and says why."""
        if self._failure is not None:
            raise ReplicaLostError(f"the run's memory is no longer kept: {self._failure}")
        size = _wal(self._database).stat().st_size if _wal(self._database).exists() else 0
        self._pending.put((self._generation, size))
        if size > max(GENERATION_BYTES, self._base_bytes // 2):
            self.drain()
            try:
                self._new_generation(connection, self._head())
            except (ReplicaLostError, StateObjectError) as exc:
                self._failure = exc
                raise

    def fold(self, connection: sqlite3.Connection) -> None:
        """At the end of an invocation that holds the run: a log past half the base is
        emptied into a new generation's base now, while nothing waits on it, so that the
        next holder copies the base on the server and writes no base of its own (a run
        ends with its log folded; a resume that sends nothing adds little to it). A fold
        that fails is left for the next holder, which folds on taking the run."""
        if self._failure is not None or not self._generation:
            return
        try:
            self.drain()
            size = _wal(self._database).stat().st_size if _wal(self._database).exists() else 0
            if size > self._base_bytes // 2:
                self._new_generation(connection, self._head())
        except BatchvalError as exc:
            log.warning("store.replica.fold_failed", error=f"{type(exc).__name__}: {exc}")

    def drain(self) -> None:
        """Wait until every commit so far is shipped."""
        self._pending.join()
        if self._failure is not None:
            raise ReplicaLostError(f"the run's memory is no longer kept: {self._failure}")

    def close(self) -> None:
        """Ship what is left and stop; a failure stays in `failure` (the run's stop says it).
        Waits for the deletion of old generations, which a later holder would do anyway."""
        self._pending.join()
        self._pending.put(None)
        if self._thread is not None:
            self._thread.join()
        for sweep in self._sweeps:
            sweep.join()

    def _head(self) -> Head:
        return Head(self._generation, self._epoch)

    def _name(self) -> str:
        self._sequence += 1
        return f"{self._epoch:08d}-{self._sequence:06d}-{secrets.token_hex(4)}"

    def _carries_on(self, restored: Restored) -> bool:
        """Whether the new generation can copy the restored base on the server: the
        database file is the one restored (no checkpoint has touched it), and the log to
        write beside it is at most half the base (past that, a new base is smaller to
        write and quicker to restore)."""
        log_bytes = _wal(self._database).stat().st_size if _wal(self._database).exists() else 0
        return _stamp(self._database) == restored.stamp and log_bytes <= restored.base_bytes // 2

    def _log_bytes(self) -> int:
        return _wal(self._database).stat().st_size if _wal(self._database).exists() else 0

    def _carry_in_place(self, restored: Restored) -> None:
        """Go on in the restored generation: HEAD names it with this holder's epoch (so a
        holder before, should it wake, can move HEAD no more), and its log, one object at
        most, grows by being rewritten (compare-and-swap on its ETag: a second writer's
        rewrite fails). A resume with nothing to do adds no object and no base."""
        generation = restored.head.generation
        etag: str | None = None
        if restored.log_objects:
            found = self._objects.get(_segment(generation, 0))
            with _wal(self._database).open("rb") as local:
                restored_log = local.read(restored.log_bytes)
            if found is None or found[0] != restored_log:
                raise ReplicaLostError(
                    f"the log of generation {generation} changed since it was restored: "
                    "another holder writes it"
                )
            etag = found[1]
        # The generation before this one is kept, as a new HEAD keeps the one it replaced:
        # a reader that began there finishes, and a repair has it to name.
        earlier = [g for g in _generations(self._objects) if _order(g) < _order(generation)]
        self._publish(
            restored.head,
            generation,
            restored.base_bytes,
            restored.log_bytes,
            previous=earlier[-1] if earlier else None,
        )
        self._growing, self._grown = True, etag
        log.info(
            "store.replica.generation",
            generation=generation,
            base_bytes=0,
            carried_on=True,
            log_bytes=restored.log_bytes,
        )

    def _carried_generation(self, restored: Restored) -> None:
        """A new generation whose base is the restored one's, copied on the server, and
        whose first object is the log as restored (and as committed since), read from
        many objects and written as one, which grows as `_carry_in_place`'s does: the
        database is never written again for a holder that has little to add, and the
        holder after it goes on in place."""
        started = time.monotonic()
        generation = self._name()
        self._objects.copy(_base(restored.head.generation), _base(generation))
        log_bytes = _wal(self._database).read_bytes() if _wal(self._database).exists() else b""
        etag: str | None = None
        if log_bytes:
            etag = self._objects.write_if(_segment(generation, 0), log_bytes, None)
            if etag is None:
                raise ReplicaLostError(f"generation {generation} was begun by another holder")
        self._publish(restored.head, generation, restored.base_bytes, len(log_bytes))
        self._growing, self._grown = True, etag
        log.info(
            "store.replica.generation",
            generation=generation,
            base_bytes=0,
            copied_base_bytes=restored.base_bytes,
            log_bytes=len(log_bytes),
            seconds=round(time.monotonic() - started, 3),
        )

    def _new_generation(self, connection: sqlite3.Connection, before: Head | None) -> None:
        started = time.monotonic()
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        generation = self._name()
        # Read whole: a create-only write is one PUT (obstore's multipart upload takes no
        # condition), so the base is in memory once while it is written.
        base = self._database.read_bytes()
        if not self._objects.create(_base(generation), base):
            raise ReplicaLostError(f"generation {generation} was begun by another holder")
        self._publish(before, generation, len(base), 0)
        # The base of a big run is hundreds of MiB: what a resume waits for, said.
        log.info(
            "store.replica.generation",
            generation=generation,
            base_bytes=len(base),
            seconds=round(time.monotonic() - started, 3),
        )

    def _publish(
        self,
        before: Head | None,
        generation: str,
        base: int,
        shipped: int,
        *,
        previous: str | None = None,
    ) -> None:
        """HEAD moved from `before` to `generation`, now this holder's; then the
        generations older than the one before deleted, in the background: `before`'s,
        or `previous` when HEAD stays in its generation (the one before that)."""
        head = Head(generation, self._epoch)
        _swap_head(self._objects, before, head, self._url)
        self._generation, self._shipped, self._base_bytes = generation, shipped, base
        self._growing, self._grown = False, None
        if previous is None and before is not None:
            previous = before.generation
        keep = {generation} | ({previous} if previous is not None else set())
        sweep = threading.Thread(target=self._sweep, args=(keep,), name="sweep", daemon=True)
        self._sweeps = [s for s in self._sweeps if s.is_alive()] + [sweep]
        sweep.start()

    def _sweep(self, keep: set[str]) -> None:
        """Delete every generation but `keep` of this holder's epoch or an earlier one
        (never a later holder's), each base first: a reader that then finds the base gone
        knows its generation was deleted under it, and reads HEAD again."""
        try:
            keys = self._objects.list(STATE)
            doomed: dict[str, list[str]] = {}
            for key in keys:
                parts = key.split("/")
                if len(parts) != 3 or parts[1] in keep or not _GENERATION.fullmatch(parts[1]):
                    continue
                if _order(parts[1])[0] <= self._epoch:
                    doomed.setdefault(parts[1], []).append(key)
            for objects in doomed.values():
                first = sorted(objects, key=lambda k: not k.endswith("/base.sqlite"))
                for key in first:
                    self._objects.delete(key)
            if doomed:
                log.info("store.replica.swept", generations=sorted(doomed))
        except Exception as exc:  # left for the next holder's sweep; the run goes on
            log.warning("store.replica.sweep_failed", error=f"{type(exc).__name__}: {exc}")

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
        if self._growing and size <= GROWING_BYTES:
            self._grow(generation, size)
            return
        self._growing = False  # the log's first object stays as it is; segments follow
        with _wal(self._database).open("rb") as log:
            log.seek(self._shipped)
            data = log.read(size - self._shipped)
        if not self._objects.create(_segment(generation, self._shipped), data):
            raise ReplicaLostError(
                f"{_segment(generation, self._shipped)} was written by another holder"
            )
        self._shipped = size

    def _grow(self, generation: str, size: int) -> None:
        """The log's one object rewritten with the log up to `size`, only if it is still
        the version this holder wrote last (or, at first, the one it restored)."""
        with _wal(self._database).open("rb") as log:
            data = log.read(size)
        key = _segment(generation, 0)
        etag = self._objects.write_if(key, data, self._grown)
        if etag is None:
            if self._grown is not None and self._vanished(key):
                raise MemoryGoneError(key, self._url)
            raise ReplicaLostError(f"{key} was rewritten by another holder")
        self._grown, self._shipped = etag, size

    def _vanished(self, key: str) -> bool:
        """After a rewrite of `key` failed (two reads, never on a call's path): whether the
        run's memory is gone rather than taken, `key` missing while HEAD is missing too or
        still names this holder's generation (a later holder may sweep this generation,
        and then HEAD names its own)."""
        if self._objects.get(key) is not None:
            return False
        found = self._objects.get(HEAD)
        if found is None:
            return True
        try:
            return Head.of(found[0]).generation == self._generation
        except ValueError:
            return False

    def memory_gone(self) -> MemoryGoneError | None:
        """Whether the run's memory at the URL is gone (HEAD missing after this holder
        wrote it): one read, asked when there is cause (the lease found missing), never
        on every call. A store that does not answer says nothing here."""
        if not self._generation:
            return None
        try:
            found = self._objects.get(HEAD)
        except BatchvalError:
            return None
        return MemoryGoneError(HEAD, self._url) if found is None else None


def _swap_head(objects: Objects, before: Head | None, after: Head, url: str) -> None:
    """HEAD from `before` to `after`, only if it still says `before` (compare-and-swap).
    A HEAD that no longer parses (overwritten while this holder had the run) is no other
    holder's: `StateObjectError`, with the repair that names this holder's generation."""
    found = objects.get(HEAD)
    if before is None:
        swapped = found is None and objects.create(HEAD, after.to_bytes())
    elif found is None:  # no holder deletes HEAD: the run's memory was deleted under this one
        raise MemoryGoneError(HEAD, url)
    else:
        current: Head | None = None
        if found is not None:
            try:
                current = Head.of(found[0])
            except ValueError:
                fix = before.to_bytes().decode()
                raise StateObjectError(
                    HEAD,
                    f"{url}/{HEAD} was overwritten while this run held it and is not a HEAD "
                    f"any more: this run's memory is generation {before.generation}; write "
                    f"{fix} to {url}/{HEAD}, then run the same command again (see {REPAIR})",
                ) from None
        swapped = (
            found is not None
            and current == before
            and objects.replace(HEAD, after.to_bytes(), found[1])
        )
    if swapped:
        return
    raise ReplicaLostError("another holder has taken the run's memory")
