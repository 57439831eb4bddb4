"""The street analyses of `batchval streets`, in the DIR's database (`store/database`).

Three tables of `store/schema` (version 5), beside the valuations' and on the same
connection, so that one lock, one WAL and the same group commits serve both:

- `street_rows`: one per input row: its row number and its postcode in normal form
  (NULL when the input stage refused the postcode, with the problem in
  `field`/`rule`/`detail`).
- `street_passthrough`: the rows' pass-through values, typed, as `passthrough` holds
  them for a run (`store/records`); their schema in `meta` (`streets.passthrough_schema`).
- `streets`: the work queue (`store/queue`), one item per distinct postcode: its state,
  attempts, last error, the API's raw answer (kept before it is read: a first read is
  charged), its problem, the credits it was charged, whether the answer carried a
  `charge`, when it was read (`read_at`, the run's clock), from when its free 30-day
  repeat window runs (`fresh_from`), and how many rows ask for it (`row_count`).

A postcode's state moves pending -> sent -> answered -> done | problem, as every queue's
item does, and back to pending when its window has passed (`expire`) or
when `--refresh` asks again (`refresh`). A postcode no row asks for any more (the input
changed) is kept, with its read, but neither sent nor written: a later input that names
it again pays nothing within its window.

The credits charged are a running total in `meta` (`streets.credits_total`), added to
with each recorded charge: a postcode read again overwrites its own `credits`, and an
invocation that is killed never records its own, yet both were paid.

A DIR holds one command's outputs (problems.parquet and summary.json are both
commands' names): `meta.command` says `streets` once this store has rows, and `run`
refuses such a DIR, as `streets` refuses a DIR that holds a run's rows.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import sqlite3
from collections import Counter
from collections.abc import Generator, Iterator, Sequence
from typing import Any

import pyarrow as pa

from batchval._internal.store import records
from batchval._internal.store.counts import Counts
from batchval._internal.store.database import (
    Database,
    problem_rows,
    problem_types,
    refused_kinds,
    row_counts,
)
from batchval._internal.store.queue import WorkQueue
from batchval._internal.store.schema import STREETS

COMMAND = "streets"
# The API's free repeat window (docs/api.md, sections 4.3 and 8).
REPEAT_WINDOW = dt.timedelta(days=30)
# A postcode's stored read, written out whatever its state (an expired or retried read
# is pending again, its answer kept) until a new read replaces it: a read records
# `charged`, a problem (a 404, an unreadable answer) clears it, and an `answered`
# postcode holds new bytes not read yet.
_HAS_READ = (
    "s.charged IS NOT NULL AND s.read_at IS NOT NULL AND s.answer IS NOT NULL"
    " AND s.state IN ('done', 'pending', 'sent')"
)

PostcodeRow = tuple[int, str | None, str | None, str | None, str | None]


@dataclasses.dataclass(frozen=True, slots=True)
class StreetRead:
    """A postcode read, as the writer reads it back."""

    postcode: str
    answer: str  # exactly as received
    credits: int
    read_at: str | None
    rows: int  # input rows that asked for it


@dataclasses.dataclass(frozen=True, slots=True)
class RowStreet:
    """An input row and where its postcode stands, for homes_with_street.parquet."""

    row_number: int
    postcode: str | None
    answer: str | None  # the postcode's stored read, else None


class StreetStore:
    """The DIR's database as `streets` uses it: its rows, and `queue`, its postcodes."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.queue = WorkQueue(database, STREETS)

    @property
    def _db(self) -> sqlite3.Connection:
        return self.database.sql

    # --- meta, under this store's names ------------------------------------------------

    def get(self, name: str) -> str | None:
        return self.database.get(f"streets.{name}")

    def set(self, name: str, value: str) -> None:
        self.database.set(f"streets.{name}", value)

    @property
    def largest_charge(self) -> int:
        """The most credits one read has been charged in this DIR (0: none seen)."""
        return int(self.get("largest_charge") or 0)

    @property
    def credits_total(self) -> int:
        """Every credit this DIR's reads were charged, in all invocations: a running total
        (a re-read overwrites a postcode's `credits`, a killed invocation never records
        its own). A DIR from before it was kept starts from the stored reads' credits."""
        held = self.get("credits_total")
        if held is not None:
            return int(held)
        found = self._db.execute("SELECT COALESCE(SUM(credits), 0) FROM streets").fetchone()
        return int(found[0])

    def add_charge(self, credits: int) -> None:
        """Credits an answer was charged, recorded with it (a read, a problem, a stray)."""
        if credits:
            self.set("credits_total", str(self.credits_total + credits))

    # --- ingest ------------------------------------------------------------------------

    def restart_ingest(self) -> None:
        """Forget the rows and their pass-through values, never a postcode's read."""
        with self.database.transaction():
            self._db.execute("DELETE FROM street_rows")
            self._db.execute("UPDATE streets SET row_count = 0 WHERE row_count != 0")
            self._db.execute("DELETE FROM street_passthrough")
            self.database.unset("streets.passthrough_schema")
            self.database.unset("streets.ingest_complete")
            self.database.set("command", COMMAND)

    def add_rows(self, rows: Sequence[PostcodeRow], passthrough: pa.RecordBatch | None) -> None:
        """One batch of rows (row number, postcode, field, rule, detail) and their
        pass-through values, in one transaction; each postcode's `row_count` grows."""
        asked = Counter(row[1] for row in rows if row[1] is not None)
        with self.database.transaction():
            self._db.executemany(
                "INSERT INTO street_rows (row_number, postcode, field, rule, detail)"
                " VALUES (?, ?, ?, ?, ?)",
                rows,
            )
            self._db.executemany(
                "INSERT INTO streets (postcode, row_count) VALUES (?, ?)"
                " ON CONFLICT (postcode) DO UPDATE SET row_count = row_count + excluded.row_count",
                list(asked.items()),
            )
            if passthrough is not None and passthrough.num_columns and rows:
                schema = records.schema_text(passthrough.schema)
                held = self.get("passthrough_schema")
                if held not in (None, schema):
                    raise ValueError(f"pass-through schema changed within an ingest: {schema}")
                self.set("passthrough_schema", schema)
                numbers = [row[0] for row in rows]
                self._db.execute(
                    "INSERT INTO street_passthrough (first_row, rows, batch) VALUES (?, ?, ?)",
                    (numbers[0], len(numbers), records.batch_bytes(numbers, passthrough)),
                )

    def finish_ingest(self) -> None:
        self.set("ingest_complete", "1")

    @property
    def ingest_complete(self) -> bool:
        return self.get("ingest_complete") == "1"

    # --- the 30-day window -------------------------------------------------------------

    def expire(self, now: dt.datetime) -> int:
        """Postcodes whose free window has passed are read afresh: pending again (the
        old answer stays until the new one replaces it). Returns how many."""
        cursor = self._db.execute(
            "UPDATE streets SET state = 'pending', attempts = 0"
            " WHERE state IN ('done', 'problem') AND (fresh_from IS NULL OR fresh_from <= ?)",
            ((now - REPEAT_WINDOW).isoformat(),),
        )
        return cursor.rowcount

    def refresh(self, started: dt.datetime) -> int:
        """--refresh: every postcode read before this invocation is read again (free
        within its window, docs/api.md 4.3). Returns how many."""
        cursor = self._db.execute(
            "UPDATE streets SET state = 'pending', attempts = 0"
            " WHERE state IN ('done', 'problem') AND (read_at IS NULL OR read_at < ?)",
            (started.isoformat(),),
        )
        return cursor.rowcount

    def forget_reads(self) -> int:
        """Every read made pending and forgotten: the DIR held test answers (fake, free)
        and other credentials now read it; one DIR never mixes test and live figures."""
        with self.database.transaction():
            cursor = self._db.execute(
                "UPDATE streets SET state = 'pending', attempts = 0, answer = NULL,"
                " problem = NULL, credits = NULL, charged = NULL, read_at = NULL,"
                " fresh_from = NULL"
            )
            self.database.unset("streets.mode")
        return cursor.rowcount

    def unread_postcodes(self, now: dt.datetime, postcodes: Sequence[str]) -> int:
        """How many of `postcodes` have no read whose free window still runs at `now`
        (what a dry run prices)."""
        fresh = 0
        since = (now - REPEAT_WINDOW).isoformat()
        for start in range(0, len(postcodes), 500):
            chunk = list(postcodes[start : start + 500])
            marks = ",".join("?" * len(chunk))
            found = self._db.execute(
                f"SELECT COUNT(*) FROM streets WHERE postcode IN ({marks})"
                " AND state IN ('done', 'problem') AND fresh_from > ?",
                (*chunk, since),
            ).fetchone()
            fresh += int(found[0])
        return len(postcodes) - fresh

    def ask_for_index(self, postcodes: Sequence[str], now: dt.datetime) -> None:
        """A `--book` night's reads of the API's index (`valuations/index_reads`): each
        postcode a queue item some row asks for (`row_count` at least 1: the book's index
        asks), pending unless it holds a read whose free window still runs at `now`."""
        since = (now - REPEAT_WINDOW).isoformat()
        with self.database.transaction():
            self._db.executemany(
                "INSERT INTO streets (postcode, row_count) VALUES (?, 1)"
                " ON CONFLICT (postcode) DO UPDATE SET row_count = MAX(row_count, 1),"
                " attempts = CASE WHEN state IN ('done', 'problem') AND (fresh_from IS NULL"
                " OR fresh_from <= ?) THEN 0 ELSE attempts END,"
                " state = CASE WHEN state IN ('done', 'problem') AND (fresh_from IS NULL"
                " OR fresh_from <= ?) THEN 'pending' ELSE state END",
                [(p, since, since) for p in postcodes],
            )

    def outcome(self, postcode: str) -> tuple[str, str | None, bool | None, str | None] | None:
        """(state, answer, charged, problem) of `postcode`'s item, or None without one."""
        found = self._db.execute(
            "SELECT state, answer, charged, problem FROM streets WHERE postcode = ?", (postcode,)
        ).fetchone()
        if found is None:
            return None
        state, answer, charged, problem = found
        return str(state), answer, None if charged is None else bool(charged), problem

    def asked_postcodes(self) -> list[str]:
        """Every postcode some input row asks for."""
        found = self._db.execute("SELECT postcode FROM streets WHERE row_count > 0 ORDER BY rowid")
        return [str(p) for (p,) in found]

    # --- dispatch ----------------------------------------------------------------------

    def keep_stray(self, asked: str, body: bytes, credits: int) -> None:
        """An answer for another postcode than `asked`, which may have been charged: its
        exact bytes kept (`streets.stray.<postcode>`, the last one) and its charge
        counted, never recorded as `asked`'s read."""
        self.set(f"stray.{asked}", body.decode("utf-8", "replace"))
        self.add_charge(credits)

    def stray(self, asked: str) -> str | None:
        return self.get(f"stray.{asked}")

    def record_read(
        self,
        postcode: str,
        *,
        credits: int,
        charged: bool,
        read_at: dt.datetime,
        fresh_from: dt.datetime,
    ) -> None:
        """The stored answer is the postcode's street analysis."""
        before = self.credits_total  # before this read's credits are in the table
        self.queue.record_done(postcode, credits)
        self._db.execute(
            "UPDATE streets SET charged = ?, read_at = ?, fresh_from = ?, problem = NULL"
            " WHERE postcode = ?",
            (int(charged), read_at.isoformat(), fresh_from.isoformat(), postcode),
        )
        if credits:
            self.set("credits_total", str(before + credits))
        if credits > self.largest_charge:
            self.set("largest_charge", str(credits))

    def record_problem(self, postcode: str, problem: dict[str, Any], read_at: dt.datetime) -> None:
        """Final until the window passes (or --refresh): a 404, or an unreadable answer."""
        self.queue.record_problem(postcode, problem)
        self._db.execute(
            "UPDATE streets SET read_at = ?, fresh_from = ?, charged = NULL WHERE postcode = ?",
            (read_at.isoformat(), read_at.isoformat(), postcode),
        )

    def asking(self, postcode: str) -> tuple[int, int]:
        """The first input row that asks for `postcode` and how many do: one row of
        SQLite, however many rows share the postcode (each log line asks)."""
        found = self._db.execute(
            "SELECT (SELECT MIN(row_number) FROM street_rows WHERE postcode = ?), row_count"
            " FROM streets WHERE postcode = ?",
            (postcode, postcode),
        ).fetchone()
        return (0, 0) if found is None else (int(found[0] or 0), int(found[1]))

    def read_since(self, started: dt.datetime) -> int:
        """Postcodes some row asks for read (an analysis or a problem) from `started` on."""
        found = self._db.execute(
            "SELECT COUNT(*) FROM streets WHERE row_count > 0"
            " AND state IN ('done', 'problem') AND read_at >= ?",
            (started.isoformat(),),
        ).fetchone()
        return int(found[0])

    # --- reading back ------------------------------------------------------------------

    def counts(self) -> Counts:
        """Rows and postcodes as `Counts` (a postcode is a run's distinct request), so
        that the summary, its rendering and `status` are the run's own."""
        rows, refused = row_counts(self.database, "street_rows", "postcode")
        return Counts.of_tally(rows, refused, self.queue.tally(), self.credits_total)

    def problem_types(self) -> dict[str, int]:
        """Problem rows by type (the API's type name, or the input rule)."""
        named = "json_extract(q.problem, '$.type')"
        return problem_types(self.database, "street_rows", "postcode", "streets", named)

    def refused_kinds(self, limit: int = 3) -> list[tuple[str | None, str, int, str | None]]:
        """The rows whose postcode validation refused, by field and rule, most first."""
        return refused_kinds(self.database, "street_rows", "postcode", limit)

    def reads(self) -> Iterator[StreetRead]:
        """Every postcode with a stored read that some row asks for, in postcode order."""
        cursor = self._db.execute(
            "SELECT postcode, answer, COALESCE(credits, 0), read_at, row_count FROM streets s"
            f" WHERE {_HAS_READ} AND row_count > 0 ORDER BY postcode"
        )
        for postcode, answer, credits, read_at, rows in cursor:
            yield StreetRead(str(postcode), str(answer), int(credits), read_at, int(rows))

    def problem_rows(self, batch: int = 20_000) -> Iterator[list[records.RowProblem]]:
        """Rows whose postcode was refused by validation or by the API, in row order."""
        unreadable = "CASE WHEN json_extract(q.problem, '$.type') = 'unreadable-answer'"
        answer = f"{unreadable} THEN q.answer END"
        return problem_rows(self.database, "street_rows", "postcode", "streets", answer, batch)

    def row_streets(self, batch: int = 5_000) -> Iterator[list[RowStreet]]:
        """Every input row, in order, with its postcode's answer where it was read."""
        cursor = self._db.execute(
            f"SELECT r.row_number, r.postcode, CASE WHEN {_HAS_READ} THEN s.answer END"
            " FROM street_rows r LEFT JOIN streets s ON s.postcode = r.postcode"
            " ORDER BY r.row_number"
        )
        while chunk := cursor.fetchmany(batch):
            yield [RowStreet(int(n), p, a) for n, p, a in chunk]

    def passthrough_schema(self) -> pa.Schema | None:
        stored = self.get("passthrough_schema")
        return None if stored is None else records.schema_of(stored)

    def passthrough_batches(self) -> Generator[tuple[int, pa.RecordBatch], None, None]:
        query = "SELECT first_row, batch FROM street_passthrough ORDER BY first_row"
        for first, blob in self._db.execute(query):
            yield int(first), records.batch_of(blob)
