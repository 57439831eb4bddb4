"""The run's memory: an SQLite file beside the outputs (`DIR/checkpoint.sqlite`).

Three tables carry the work:

- `rows`: one per input row: its row number, and its request's key (NULL when the
  input stage refused the row, with the problem in `field`/`rule`/`detail`).
- `passthrough`: the rows' pass-through values, typed: an Arrow IPC stream per ingest
  batch, committed with its rows (a killed ingest never parts them), streamed back a
  batch at a time; their schema is in `meta` (`passthrough_schema`).
- `requests`: one per distinct request (rows with identical requests share a key, and
  so one call and one charge): its canonical JSON, state, attempts, last error, the
  API's answer or problem, and how many rows ask for it (`row_count`, kept with the
  rows), so that `counts()` reads indexes and never joins a million rows to their
  requests. The tables, indexes and migrations are in `store/schema`; an ingest writes
  rows, requests and pass-through values through `store/rows`.

A request's state moves pending -> sent -> answered -> done | problem, and back to
pending after a transient failure. `sent` means "may have reached the API": a resumed
run sends it again with the same key, which the API answers from its idempotency store
without a second charge. `answered` means the answer's exact bytes are stored but not
yet read (`batchval.run.answers`): a run that starts after a crash reads them, it never
asks again. Outside the sending phase writes are committed one by one in WAL mode with
synchronous=FULL, so that the run id is on disk before the run acts on it (an ingest's
rows all in one transaction, `store/rows`); while sending,
in groups (`begin_group`), each request's writes applied as one statement (`store/held`)
and an answer always committed with its reading. Neither a killed process (`kill -9`)
nor a power cut loses a committed answer.

`RunLock` (`store/lock`) keeps two processes out of one DIR.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sqlite3
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from batchval.outcome import BatchvalError
from batchval.store import records
from batchval.store.charges import ChargeLedger
from batchval.store.counts import Counts
from batchval.store.held import HeldWrites
from batchval.store.invocations import InvocationLog
from batchval.store.rows import InputRows
from batchval.store.schema import INDEXES, MIGRATIONS, SCHEMA_VERSION, TABLES

__all__ = [
    "CHECKPOINT_NAME",
    "SCHEMA_VERSION",
    "Checkpoint",
    "CheckpointVersionError",
    "Counts",
    "PendingRequest",
]

CHECKPOINT_NAME = "checkpoint.sqlite"


class CheckpointVersionError(BatchvalError):
    """The checkpoint was written by a batchval this one cannot read."""


@dataclasses.dataclass(frozen=True, slots=True)
class PendingRequest:
    rowid: int
    key: str
    request_json: str
    attempts: int
    first_sent: str | None = None  # when this DIR first sent it (batchval's clock)


# Meta values read on every answer and written only through this connection while the
# DIR's lock is held, so kept in memory as well.
_CACHED_META = frozenset({"mode"})


class Checkpoint(InputRows, InvocationLog, ChargeLedger):
    def __init__(self, connection: sqlite3.Connection, path: Path) -> None:
        self._connection = connection
        self.path = path
        self._held = HeldWrites()
        self._meta: dict[str, str | None] = {}
        self.invocation: int | None = None  # this process's, once `start_invocation`
        self.sent_floor: str | None = None  # see `InvocationLog.start_invocation`

    @property
    def _db(self) -> sqlite3.Connection:  # type: ignore[override]  # read, never assigned
        """The connection, once the writes held in the group are applied: every read and
        every other write sees them, in the order they were made."""
        if self._held:
            self._held.apply(self._connection)
        return self._connection

    @classmethod
    def open(cls, directory: Path) -> Checkpoint:
        path = directory / CHECKPOINT_NAME
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("PRAGMA busy_timeout=5000")
        db.executescript(TABLES)
        checkpoint = cls(db, path)
        version = checkpoint.get("schema_version")
        if version is None:
            checkpoint.set("schema_version", SCHEMA_VERSION)
        elif version in MIGRATIONS:
            with checkpoint.transaction():
                while version in MIGRATIONS:
                    version, step = MIGRATIONS[version]
                    step(db)
                checkpoint.set("schema_version", version)
        if version not in (None, SCHEMA_VERSION):
            db.close()
            raise CheckpointVersionError(
                f"{path} was written by another batchval (checkpoint schema {version}; this "
                f"one reads {SCHEMA_VERSION} and older): run that version, or use a new --out DIR"
            )
        for index in INDEXES:
            db.execute(index)
        return checkpoint

    @classmethod
    def open_existing(cls, directory: Path) -> Checkpoint | None:
        """The checkpoint of DIR if there is one (for `status`), never creating it."""
        if not (directory / CHECKPOINT_NAME).is_file():
            return None
        return cls.open(directory)

    def close(self) -> None:
        # Writes held in an uncommitted group are dropped, as the open transaction is.
        self._held.drop()
        self._connection.close()

    @property
    def connection(self) -> sqlite3.Connection:
        """The one connection, shared by `store/streets` (its tables, the same groups)."""
        return self._db

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction for the block (inside a group, the group's)."""
        if self._db.in_transaction:
            yield
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._held.drop()
            self._meta.clear()
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # --- group commits: one fsync for many writes, while sending ------------------------

    def begin_group(self) -> None:
        """Hold the writes that follow in one transaction until `commit_group`. While
        requests are sent, a commit (an fsync, with synchronous=FULL) per answer would cap
        the call rate; the pool commits a group every fraction of a second instead. A kill
        loses at most the last group: those requests are sent again with their keys, and
        the API answers them from its idempotency store, free."""
        if not self._db.in_transaction:
            self._db.execute("BEGIN IMMEDIATE")
        self._held.grouping = True

    def commit_group(self) -> None:
        """Make the group's writes durable, those held (`store/held`) applied first."""
        self._held.grouping = False
        if self._db.in_transaction:
            self._db.execute("COMMIT")

    # --- meta ----------------------------------------------------------------------------

    def get(self, name: str) -> str | None:
        if name in self._meta:
            return self._meta[name]
        row = self._db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        value = None if row is None else str(row[0])
        if name in _CACHED_META:
            self._meta[name] = value
        return value

    def set(self, name: str, value: str) -> None:
        self._db.execute(
            "INSERT INTO meta (name, value) VALUES (?, ?)"
            " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            (name, value),
        )
        if name in _CACHED_META:
            self._meta[name] = value

    def unset(self, name: str) -> None:
        self._db.execute("DELETE FROM meta WHERE name = ?", (name,))
        self._meta.pop(name, None)

    # --- dispatch ------------------------------------------------------------------------

    def pending(self, after_rowid: int = 0, limit: int = 1000) -> list[PendingRequest]:
        """Requests without an answer, in order, a page at a time. Each state is read in
        rowid order from `requests_by_state` and the two merged, so that a page costs its
        own size (`state IN (...)` sorted every pending request for each page)."""
        found = self._db.execute(
            "SELECT rowid, key, request, attempts, first_sent FROM requests"
            " WHERE state = 'pending' AND rowid > ?1"
            " UNION ALL SELECT rowid, key, request, attempts, first_sent FROM requests"
            " WHERE state = 'sent' AND rowid > ?1"
            " ORDER BY 1 LIMIT ?2",
            (after_rowid, limit),
        ).fetchall()
        return [PendingRequest(int(r[0]), str(r[1]), str(r[2]), int(r[3]), r[4]) for r in found]

    def any_pending(self) -> bool:
        """Whether some request is still without its answer (one probe of an index)."""
        found = self._db.execute(
            "SELECT EXISTS (SELECT 1 FROM requests WHERE state IN ('pending', 'sent', 'answered'))"
        ).fetchone()
        return bool(found[0])

    def mark_sent(self, key: str, first_sent: str | None = None) -> None:
        """About to be sent; `first_sent` is kept unless the DIR sent it before."""
        held = self._held.hold(key, "sent")
        if held is not None:
            held.sends += 1
            held.first_sent = held.first_sent or first_sent
            return
        self._db.execute(
            "UPDATE requests SET state = 'sent', attempts = attempts + 1,"
            " first_sent = COALESCE(first_sent, ?) WHERE key = ?",
            (first_sent, key),
        )

    def row_numbers(self, key: str, limit: int = 5) -> list[int]:
        """The first row numbers that ask for a request (for log lines)."""
        found = self._db.execute(
            "SELECT row_number FROM rows WHERE key = ? ORDER BY row_number LIMIT ?", (key, limit)
        ).fetchall()
        return [int(r[0]) for r in found]

    def record_answer(self, key: str, body: bytes) -> None:
        """A success's exact bytes, kept before anything reads them: at once outside a
        group; in a group, applied with the reading that follows and always committed
        with it, or before it is ever read from the checkpoint."""
        answer = body.decode("utf-8", "replace")
        held = self._held.hold(key, "answered")
        if held is not None:
            held.answer = answer
            return
        self._db.execute(
            "UPDATE requests SET state = 'answered', answer = ? WHERE key = ?", (answer, key)
        )

    def answered(self) -> list[tuple[str, str, str | None]]:
        """(key, raw answer, first sent) of answers stored and never read (a crash came
        between)."""
        found = self._db.execute(
            "SELECT key, answer, first_sent FROM requests WHERE state = 'answered' ORDER BY rowid"
        ).fetchall()
        return [(str(k), str(a), f) for k, a, f in found]

    def record_valuation(self, key: str, credits: int) -> None:
        """The stored answer is a valuation."""
        held = self._held.hold(key, "done")
        if held is not None:
            held.credits, held.valued = credits, True
            return
        self._db.execute(
            "UPDATE requests SET state = 'done', credits = ?, last_error = NULL WHERE key = ?",
            (credits, key),
        )

    def record_problem(self, key: str, problem: dict[str, Any]) -> None:
        self._db.execute(
            "UPDATE requests SET state = 'problem', problem = ? WHERE key = ?",
            (json.dumps(problem, sort_keys=True), key),
        )

    def record_retry(self, key: str, error: str) -> None:
        """The request stays to be sent again with the same key."""
        self._db.execute(
            "UPDATE requests SET state = 'pending', answer = NULL, last_error = ? WHERE key = ?",
            (error, key),
        )

    def forget_requests(self) -> int:
        """Forget every request and answer, to read the input again under new keys: the
        DIR held test-mode answers (fake, free) and the credentials changed, and a DIR
        never mixes test and live answers. Returns how many requests were forgotten."""
        with self.transaction():
            cursor = self._db.execute("DELETE FROM requests")
            self._forget_rows()
            self.unset("mode")
        return cursor.rowcount

    # --- reading back --------------------------------------------------------------------

    def counts(self) -> Counts:
        """Read from indexes only: the rows' count, those refused, and each state's
        requests with the rows asking for them (`requests_tally`), never a join of rows
        and requests, which took seconds a million rows."""
        rows = int(self._db.execute("SELECT COUNT(*) FROM rows").fetchone()[0])
        refused = self._db.execute("SELECT COUNT(*) FROM rows WHERE key IS NULL").fetchone()[0]
        by_state: dict[str, tuple[int, int, int]] = {}
        credits = duplicates = 0
        for state, n, asking, distinct, paid in self._db.execute(
            "SELECT state, COUNT(*), SUM(row_count), SUM(row_count > 0), COALESCE(SUM(credits), 0)"
            " FROM requests GROUP BY state"
        ):
            by_state[str(state)] = (int(n), int(asking), int(distinct))
            credits += int(paid)
            duplicates += int(asking) - int(distinct)  # rows after the first asking

        def tally(*states: str) -> tuple[int, int]:
            """(requests, rows asking for them) in `states`."""
            found = [by_state.get(state, (0, 0, 0)) for state in states]
            return sum(f[0] for f in found), sum(f[1] for f in found)

        requests_done, valued_rows = tally("done")
        requests_problem, problem_rows = tally("problem")
        requests_pending, pending_rows = tally("pending", "sent", "answered")
        return Counts(
            rows=rows,
            input_problems=int(refused),
            valued_rows=valued_rows,
            api_problem_rows=problem_rows,
            pending_rows=pending_rows,
            duplicate_rows=duplicates,
            requests=sum(n for n, _, _ in by_state.values()),
            requests_done=requests_done,
            requests_problem=requests_problem,
            requests_pending=requests_pending,
            credits=credits,
        )

    def problem_types(self) -> dict[str, int]:
        """Problem rows by type (the API's type name, or the input rule)."""
        found = self._db.execute(
            "SELECT name, COUNT(*) FROM ("
            " SELECT rule AS name FROM rows WHERE key IS NULL"
            " UNION ALL SELECT COALESCE(r.rule, json_extract(q.problem, '$.type'))"
            " FROM requests q JOIN rows r ON r.key = q.key WHERE q.state = 'problem'"
            ") GROUP BY 1 ORDER BY 1"
        ).fetchall()
        return {str(name): int(n) for name, n in found}

    def refused_kinds(self, limit: int = 3) -> list[tuple[str | None, str, int, str | None]]:
        """The rows validation refused by field and rule, most rows first: (field, rule,
        rows, the first such row's detail)."""
        return refused_kinds(self._db, "rows", "key", limit)

    def problems_of_type(self, name: str) -> list[tuple[int, str, str, str | None]]:
        """(rowid, key, problem JSON, raw answer) of the problem requests of type `name`."""
        return self._db.execute(
            "SELECT rowid, key, problem, answer FROM requests WHERE state = 'problem' AND"
            " CASE WHEN json_valid(problem) THEN json_extract(problem, '$.type') END = ?"
            " ORDER BY rowid",
            (name,),
        ).fetchall()

    def request_of(self, key: str) -> str | None:
        """The canonical request JSON sent with `key` (None for a key it does not hold)."""
        found = self._db.execute("SELECT request FROM requests WHERE key = ?", (key,)).fetchone()
        return None if found is None else str(found[0])

    def passthrough_schema(self) -> pa.Schema | None:
        """The pass-through columns' schema; None before an ingest, or if begun by 1 or 2."""
        stored = self.get("passthrough_schema")
        return None if stored is None else records.schema_of(stored)

    def passthrough_batches(self) -> Generator[tuple[int, pa.RecordBatch], None, None]:
        """(first row number, values) of each pass-through batch, in row order, lazily."""
        query = "SELECT first_row, batch FROM passthrough ORDER BY first_row"
        for first, blob in self._db.execute(query):
            yield int(first), records.batch_of(blob)

    def asked_extras(self) -> frozenset[str]:
        """The include items any row's request asks for (the run's, or the row's own)."""
        found = self._db.execute(
            "SELECT DISTINCT j.value FROM requests q, json_each(q.request, '$.include') j"
            # A cheap test first: most runs ask for no extras, and then no JSON is parsed.
            " WHERE q.request LIKE '%\"include\"%' AND q.key IN (SELECT key FROM rows)"
        ).fetchall()
        return frozenset(str(item) for (item,) in found)

    def answer_values(self, *paths: str) -> list[tuple[Any, ...]]:
        """The distinct values at these JSON paths of the valued answers (not JSON: left
        out), each with the rows asking; read by SQLite, a sixth of Python's cost."""
        picks = ", ".join("?" for _ in paths)  # several: json_extract gives a JSON array
        query = f"SELECT json_extract(answer, {picks}), SUM(row_count) FROM requests WHERE"
        query += " state = 'done' AND row_count > 0 AND json_valid(answer) GROUP BY 1"
        return [
            (*(json.loads(values) if len(paths) > 1 else [values]), int(rows))
            for values, rows in self._db.execute(query, paths)
        ]

    def valued_rows(self, batch: int = 20_000) -> Iterator[list[records.RowAnswer]]:
        """Valued rows with their request's answer, in row order, in batches."""
        cursor = self._db.execute(
            "SELECT r.row_number, r.key, q.answer, COALESCE(q.credits, 0)"
            " FROM rows r JOIN requests q ON q.key = r.key"
            " WHERE q.state = 'done' ORDER BY r.row_number"
        )
        while chunk := cursor.fetchmany(batch):
            yield [records.RowAnswer.of(row) for row in chunk]

    def problem_rows(self, batch: int = 20_000) -> Iterator[list[records.RowProblem]]:
        """Rows refused by validation or with a request's problem, in row order, in batches."""
        cursor = self._db.execute(
            # The refused rows and the problem requests' rows, each found by index.
            "SELECT row_number, field, rule, detail, NULL, 0, NULL FROM rows WHERE key IS NULL"
            " UNION ALL SELECT r.row_number, r.field, r.rule, r.detail, q.problem, q.attempts,"
            " q.answer FROM requests q JOIN rows r ON r.key = q.key WHERE q.state = 'problem'"
            " ORDER BY 1"
        )
        while chunk := cursor.fetchmany(batch):
            yield [records.RowProblem.of(row) for row in chunk]


def refused_kinds(
    db: sqlite3.Connection, table: str, key: str, limit: int
) -> list[tuple[str | None, str, int, str | None]]:
    """`table`'s rows that validation refused (`key` NULL) by field and rule, most rows
    first, each with its first row's detail (SQLite takes a bare column from the MIN row)."""
    found = db.execute(
        f"SELECT field, rule, COUNT(*), detail, MIN(row_number) FROM {table}"
        f" WHERE {key} IS NULL GROUP BY field, rule ORDER BY 3 DESC, 5 LIMIT ?",
        (limit,),
    ).fetchall()
    return [(field, str(rule), int(n), detail) for field, rule, n, detail, _ in found]
