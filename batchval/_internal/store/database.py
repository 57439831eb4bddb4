"""The DIR's database: an SQLite file beside the outputs (`DIR/checkpoint.sqlite`), the
run's memory. `Database` is what every command shares, whatever its product: the one
connection, the `meta` table, transactions and group commits, and the tables made of it:
the invocations (`invocations`, `store/invocations`), the charges ledger (`charges`,
`store/charges`) and the files `export` and `report` wrote (`derived`, `store/derived`).
Each product wraps it in its own tables and work queue (`store/queue`): valuations
(`store/checkpoint`), street reads (`store/streets`), the book's plan (`store/book`).
Nothing outside `store/` holds the connection or writes SQL.

Outside the sending phase writes are committed one by one in WAL mode with
synchronous=FULL, so that the run id is on disk before the run acts on it; while
sending, in groups (`begin_group`), each item's writes applied as one statement
(`store/held`) and an answer always committed with its reading. Neither a killed
process (`kill -9`) nor a power cut loses a committed answer. `RunLock` (`store/lock`)
keeps two processes out of one DIR.

A second backend (the run's memory on object storage) is this class's seam: every write
goes through `sql` inside a transaction or a group, and a group's commit is the moment
the writes are durable.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Self

from batchval._internal.outcome import BatchvalError, StopInfo, StopReason
from batchval._internal.store.charges import ChargeLedger
from batchval._internal.store.derived import DerivedFiles
from batchval._internal.store.held import HeldWrites
from batchval._internal.store.invocations import InvocationLog
from batchval._internal.store.lease import LeaseKeeper, LeaseLostError
from batchval._internal.store.lock import refuse_link
from batchval._internal.store.records import RowProblem
from batchval._internal.store.replica import (
    MemoryGoneError,
    Replica,
    ReplicaLostError,
    Restored,
    StateObjectError,
)
from batchval._internal.store.schema import INDEXES, MIGRATIONS, SCHEMA_VERSION, TABLES

CHECKPOINT_NAME = "checkpoint.sqlite"

# Meta values read on every answer and written only through this connection while the
# DIR's lock is held, so kept in memory as well.
_CACHED_META = frozenset({"mode", "streets.mode"})


def _identity(path: Path) -> tuple[int, int] | None:
    """The file at `path` (device, inode), or None when there is none."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino


class CheckpointVersionError(BatchvalError):
    """The checkpoint was written by a batchval this one cannot read."""


class Database:
    def __init__(self, connection: sqlite3.Connection, path: Path) -> None:
        self._connection = connection
        self.path = path
        self.held = HeldWrites()
        self._meta: dict[str, str | None] = {}
        self.invocations = InvocationLog(self)
        self.charges = ChargeLedger(self)
        self.derived = DerivedFiles(self)
        # The run's memory kept at a URL as it commits (`store/replica`), when it is there.
        self._replica: Replica | None = None
        self._lease: LeaseKeeper | None = None  # this process's hold on that URL's run
        # Why the replica stopped keeping the commits, when it failed in this thread (a new
        # generation's base, HEAD): commits go on locally, `hold_lost` stops the sending.
        self._unkept: BaseException | None = None
        self._lease_lost: StopInfo | None = None  # why the lease no longer holds, once known
        self._grouped = False  # a group began in this process (see `begin_group`)
        # The file this connection opened (device, inode), and why it is gone once known:
        # a checkpoint deleted or replaced under the run is the run's memory lost.
        self._identity = _identity(path)
        self._gone: StopInfo | None = None

    @property
    def sql(self) -> sqlite3.Connection:
        """The connection, once the writes held in the group are applied: every read and
        every other write sees them, in the order they were made. For `store/` only."""
        if self.held:
            self.held.apply(self._connection)
        return self._connection

    @property
    def settled(self) -> bool:
        """Whether another connection sees all this one has written: no write held and
        no transaction open."""
        return not self.held and not self._connection.in_transaction

    @classmethod
    def open(cls, directory: Path, *, mode: int = 0o600) -> Self:
        """DIR's database, made with `mode` when it is new (exactly, whatever the umask;
        SQLite gives its WAL and shared-memory files the same). Never through a symlink
        planted at its name or its WAL's (LockFileError, 64)."""
        path = directory / CHECKPOINT_NAME
        for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            refuse_link(name)
        with contextlib.suppress(FileExistsError):
            made = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
            os.fchmod(made, mode)
            os.close(made)
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("PRAGMA busy_timeout=5000")
        db.executescript(TABLES)
        database = cls(db, path)
        version = database.get("schema_version")
        if version is None:
            database.set("schema_version", SCHEMA_VERSION)
        elif version in MIGRATIONS:
            with database.transaction():
                while version in MIGRATIONS:
                    version, step = MIGRATIONS[version]
                    step(db)
                database.set("schema_version", version)
        if version not in (None, SCHEMA_VERSION):
            db.close()
            raise _newer(path, version)
        for index in INDEXES:
            db.execute(index)
        return database

    @classmethod
    def open_existing(cls, directory: Path) -> Self | None:
        """The database of DIR if there is one (for `status`), never creating it."""
        if not (directory / CHECKPOINT_NAME).is_file():
            return None
        return cls.open(directory)

    @classmethod
    def open_read_only(cls, directory: Path) -> Self | None:
        """DIR's database for reading alone (None when DIR has none), as a dry run prices
        what a run still has to do: SQLite's read-only mode, which never writes, migrates
        or waits for a run in progress (WAL lets a reader in beside its writer). Raises
        `CheckpointVersionError` for a schema newer than this batchval reads."""
        path = directory / CHECKPOINT_NAME
        for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            refuse_link(name)
        if not path.is_file():
            return None
        db = sqlite3.connect(
            f"{path.resolve().as_uri()}?mode=ro",
            uri=True,
            isolation_level=None,
            check_same_thread=False,
        )
        db.execute("PRAGMA query_only=1")
        db.execute("PRAGMA busy_timeout=5000")
        database = cls(db, path)
        version = database.get("schema_version")
        if version not in (SCHEMA_VERSION, *MIGRATIONS):
            db.close()
            raise _newer(path, version)
        return database

    @classmethod
    @contextlib.contextmanager
    def scratch(cls) -> Iterator[Self]:
        """A throwaway database, gone at the block's end: what a dry run prices in, or
        what a DIR that has none uses for one invocation."""
        with tempfile.TemporaryDirectory(prefix="batchval-scratch-") as place:
            database = cls.open(Path(place))
            try:
                yield database
            finally:
                database.close()

    def keep_at(
        self, replica: Replica, restored: Restored | None, lease: LeaseKeeper | None = None
    ) -> None:
        """Ship every commit from now on (`store/replica`): the run's memory at a URL,
        taken from what the URL held when `restored` (None: nothing), while `lease`
        holds the run (`store/lease`; its holder lets it go, after the outputs)."""
        replica.begin(self._connection, restored)
        self._replica, self._lease = replica, lease

    def hold_lost(self) -> StopInfo | None:
        """Why this process may not send a call now (None: it may). A local DIR is held
        until the process ends (its `RunLock`); a run at a URL only while its lease surely
        holds and its commits are being kept there."""
        gone = self._memory_gone()
        if gone is not None:
            return gone
        if (
            self._replica is not None
            and self._unkept is None
            and self._lease is not None
            and self._lease.lease.found_missing
        ):
            # The lease was found missing (and written again): asked once whether the
            # run's memory beside it went too, a prefix emptied under the run.
            self._lease.lease.found_missing = False
            self._unkept = self._replica.memory_gone()
        if self._replica is not None and (self._replica.failure or self._unkept) is not None:
            why = self._replica.failure or self._unkept
            return _lost(why, "its commits can no longer be kept at its URL")
        if self._lease is not None and not self._lease.holds():
            if self._lease_lost is None:  # decided once: the stop says the first reason
                why = self._lease.lost or self._lease.trouble
                if why is None and self._lease.stalled():
                    why = _UnansweredError(
                        f"{self._lease.store}: the lease's renewal is not answered"
                    )
                # A renewal not answered in time may be this process's own pause (a
                # stopped process, a host that slept): another holder named by the lease
                # is what happened, and the stop says so.
                if not isinstance(why, LeaseLostError) and self._lease.lease.taken():
                    why = LeaseLostError("another process has taken this run's lease")
                self._lease_lost = _lost(why, "its lease at the run's URL lapsed or was taken")
            return self._lease_lost
        return None

    def _memory_gone(self) -> StopInfo | None:
        """A stop (64) when the checkpoint this connection opened is no longer at its
        path: deleted, or replaced by another file, while the run held it. What the run
        knew of its calls is gone, so no further call may leave; a stat a call."""
        if self._gone is None and self._identity is not None:
            now = _identity(self.path)
            if now != self._identity:
                what = "deleted" if now is None else "replaced by another file"
                self._gone = StopInfo(
                    StopReason.REFUSED,
                    f"the run's memory, {self.path}, was {what} while this invocation held "
                    "it: what the run knew of its calls is gone, so nothing more is sent. A "
                    "run begun again there starts from nothing (the same UTC day, the API "
                    "replays the keys it has answered: nothing is charged twice)",
                )
        return self._gone

    def _committed(self) -> None:
        """A commit, kept at the URL (when the run is there) while the replica can: once it
        cannot, the commits stay local, and `hold_lost` says why no call may leave (the
        run's stop, never a defect: the store's fault, or another holder's)."""
        if self._replica is None or self._unkept is not None:
            return
        if self._replica.failure is not None:
            return  # the shipping thread's: `hold_lost` reads it there
        try:
            self._replica.committed(self._connection)
        except BatchvalError as exc:  # ReplicaLostError, or the store's error on a new base
            self._unkept = exc

    def close(self) -> None:
        # Writes held in an uncommitted group are dropped, as the open transaction is.
        self.held.drop()
        try:
            if self._replica is not None and not self._connection.in_transaction:
                with contextlib.suppress(ReplicaLostError):  # the run's stop says it
                    self._replica.committed(self._connection)  # the autocommitted writes too
                if self.hold_lost() is None:  # a long log made a base while surely held
                    self._replica.fold(self._connection)
                self._replica.close()
        finally:
            self._connection.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction for the block (inside a group, the group's)."""
        if self.sql.in_transaction:
            yield
            return
        self.sql.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.held.drop()
            self._meta.clear()
            self.sql.execute("ROLLBACK")
            raise
        self.sql.execute("COMMIT")
        self._committed()

    # --- group commits: one fsync for many writes, while sending ------------------------

    def begin_group(self) -> None:
        """Hold the writes that follow in one transaction until `commit_group`. While
        items are sent, a commit (an fsync, with synchronous=FULL) per answer would cap
        the call rate; the pool commits a group every fraction of a second instead. A kill
        loses at most the last group: those items are sent again with their keys, and
        the API answers them from its idempotency store, free."""
        if not self.sql.in_transaction:
            if self._replica is not None:
                # The writes committed one by one before (the run id among them) are kept
                # at the URL before the first group's calls: shipped and waited for, once.
                # A replica that stopped shipping stops the calls (`hold_lost`).
                self._committed()
                if not self._grouped and self._unkept is None:
                    try:
                        self._replica.drain()
                    except BatchvalError as exc:
                        self._unkept = exc
            self.sql.execute("BEGIN IMMEDIATE")
        self._grouped = True
        self.held.grouping = True

    def commit_group(self) -> None:
        """Make the group's writes durable, those held (`store/held`) applied first."""
        self.held.grouping = False
        if self.sql.in_transaction:
            self.sql.execute("COMMIT")
            self._committed()

    def set_now(self, name: str, value: str) -> None:
        """`set`, committed at once: with the group under way, if one is (which goes on).
        For what a kill must not lose even for a group's fraction of a second."""
        if self.sql.in_transaction and self.held.grouping:
            self.set(name, value)
            self.commit_group()
            self.begin_group()
            return
        with self.transaction():
            self.set(name, value)

    # --- meta ----------------------------------------------------------------------------

    def get(self, name: str) -> str | None:
        if name in self._meta:
            return self._meta[name]
        row = self.sql.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        value = None if row is None else str(row[0])
        if name in _CACHED_META:
            self._meta[name] = value
        return value

    def set(self, name: str, value: str) -> None:
        self.sql.execute(
            "INSERT INTO meta (name, value) VALUES (?, ?)"
            " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            (name, value),
        )
        if name in _CACHED_META:
            self._meta[name] = value

    def unset(self, name: str) -> None:
        self.sql.execute("DELETE FROM meta WHERE name = ?", (name,))
        self._meta.pop(name, None)


# What a run whose memory at its URL is gone says after what is gone.
_ANEW = (
    ": what the run knew of its calls is gone, so nothing more is sent. The same command "
    "would start a new run there, from nothing (the same UTC day, the API replays the keys "
    "it has answered: nothing is charged twice)"
)


class _UnansweredError(BatchvalError):
    """The store has not answered the lease's renewal within the lease's margin."""


def _lost(why: BaseException | None, what: str) -> StopInfo:
    """The stop of a process that may no longer send (docs/how-to/object-storage.md, "One
    verdict for each fault"): the store refuses its writes (64), its bucket or the run's
    memory under its prefix was deleted (64: a new run would begin), it stopped answering
    (75, `store_unavailable`), or another holder has the run (75, `dir_locked`)."""
    # Only a run at a URL gets here, where the store's module is loaded already.
    from batchval._internal.store.objects import (
        BucketMissingError,
        CredentialsRefusedError,
        ObjectStoreRefusedError,
        ObjectStoreUnavailableError,
    )

    if isinstance(why, StateObjectError):  # a person repairs it, as its message says
        return StopInfo(StopReason.REFUSED, f"{why}; nothing more is sent")
    # The run's memory gone (64, as a local DIR's checkpoint deleted: `_memory_gone`):
    # what is gone is said, and that the same command would begin the run anew.
    if isinstance(why, BucketMissingError):
        return StopInfo(
            StopReason.STORE_MISSING,
            f"the run's memory is gone: the {why.word} {why.bucket!r} was deleted while this "
            f"invocation held the run, and the run's memory with it ({why}){_ANEW}",
        )
    if isinstance(why, MemoryGoneError):
        return StopInfo(StopReason.REFUSED, f"{why}{_ANEW}")
    resumes = "; nothing more is sent, and the same command resumes it"
    if isinstance(why, ObjectStoreRefusedError):
        return StopInfo(
            StopReason.STORE_CREDENTIALS
            if isinstance(why, CredentialsRefusedError)
            else StopReason.REFUSED,
            f"the store refuses what the run must write ({why}); nothing more is sent: "
            "once it takes the run's writes again, the same command resumes",
        )
    if isinstance(why, ObjectStoreUnavailableError | _UnansweredError):
        detail = f"the store does not answer: {what} ({why})"
        return StopInfo(StopReason.STORE_UNAVAILABLE, detail + resumes)
    detail = f"this process no longer surely holds the run: {what}" + (f" ({why})" if why else "")
    return StopInfo(StopReason.DIR_LOCKED, detail + resumes)


def row_counts(database: Database, table: str, key: str) -> tuple[int, int]:
    """`table`'s rows, and those validation refused (`key` NULL): read from indexes only,
    never a join of rows and requests (which took seconds a million rows)."""
    sql = database.sql
    rows = int(sql.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    refused = int(sql.execute(f"SELECT COUNT(*) FROM {table} WHERE {key} IS NULL").fetchone()[0])
    return rows, refused


def problem_types(
    database: Database, table: str, key: str, queue: str, named: str
) -> dict[str, int]:
    """Problem rows by type: each row of `table` that validation refused (`key` NULL) by
    its rule, and each whose request in `queue` is a problem by `named` (an SQL expression
    of the request `q` and the row `r`: the API's type name)."""
    found = database.sql.execute(
        "SELECT name, COUNT(*) FROM ("
        f" SELECT rule AS name FROM {table} WHERE {key} IS NULL"
        f" UNION ALL SELECT {named} FROM {queue} q"
        f" JOIN {table} r ON r.{key} = q.{key} WHERE q.state = 'problem'"
        ") GROUP BY 1 ORDER BY 1"
    ).fetchall()
    return {str(name): int(n) for name, n in found}


def problem_rows(
    database: Database, table: str, key: str, queue: str, answer: str, batch: int
) -> Iterator[list[RowProblem]]:
    """The rows of `table` that validation refused (`key` NULL) or whose request in
    `queue` is a problem, in row order, `batch` at a time, each found by index; `answer`
    is the SQL of the raw answer kept beside a problem (of the request `q`)."""
    cursor = database.sql.execute(
        f"SELECT row_number, field, rule, detail, NULL, 0, NULL FROM {table} WHERE {key} IS NULL"
        f" UNION ALL SELECT r.row_number, r.field, r.rule, r.detail, q.problem, q.attempts,"
        f" {answer} FROM {queue} q JOIN {table} r ON r.{key} = q.{key}"
        " WHERE q.state = 'problem' ORDER BY 1"
    )
    while chunk := cursor.fetchmany(batch):
        yield [RowProblem.of(row) for row in chunk]


def refused_kinds(
    database: Database, table: str, key: str, limit: int
) -> list[tuple[str | None, str, int, str | None]]:
    """`table`'s rows that validation refused (`key` NULL) by field and rule, most rows
    first, each with its first row's detail (SQLite takes a bare column from the MIN row)."""
    found = database.sql.execute(
        f"SELECT field, rule, COUNT(*), detail, MIN(row_number) FROM {table}"
        f" WHERE {key} IS NULL GROUP BY field, rule ORDER BY 3 DESC, 5 LIMIT ?",
        (limit,),
    ).fetchall()
    return [(field, str(rule), int(n), detail) for field, rule, n, detail, _ in found]


def _newer(path: Path, version: str | None) -> CheckpointVersionError:
    """A checkpoint of a schema this batchval does not read (a newer batchval's)."""
    return CheckpointVersionError(
        f"{path} was written by another batchval (checkpoint schema {version}; this "
        f"one reads {SCHEMA_VERSION} and older): run that version, or use a new --out DIR"
    )
