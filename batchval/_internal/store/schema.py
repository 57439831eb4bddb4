"""The checkpoint's tables and indexes, its schema version, and the migrations that
bring an older DIR's checkpoint up to date when it is opened; and `QueueTable`, a work
queue's table by name and columns, which `store/queue` runs and `store/held` writes
(here, below both, so that neither needs the other's module for it).

The indexes are created after the migrations, since an index may name a column a
migration adds.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable

from batchval._internal.api import record_of_text

SCHEMA_VERSION = "9"


@dataclasses.dataclass(frozen=True, slots=True)
class QueueTable:
    """Where a queue's items live: its table and the columns that differ by product."""

    name: str  # the table
    key: str  # the item's key column
    rows: str  # the table of input rows asking for an item, by the same key column
    payload: str | None = None  # the column of what is sent, if it is not the key
    first_sent: bool = False  # the table keeps when this DIR first sent an item
    # The table keeps each result's record, read once (`record`): the file is written from it.
    record: bool = False
    # An item no row asks for (`row_count = 0`) is neither sent nor counted.
    asked_only: bool = False

    def where(self, *conditions: str) -> str:
        """`WHERE` with this table's own condition (`asked_only`) added."""
        found = [*conditions, *(["row_count > 0"] if self.asked_only else [])]
        return " WHERE " + " AND ".join(found) if found else ""


# The work queues (`store/queue`): valuations keyed by Idempotency-Key, street reads by
# postcode (an item some row no longer asks for is kept, with its read, but not sent).
REQUESTS = QueueTable("requests", "key", "rows", payload="request", first_sent=True, record=True)
STREETS = QueueTable("streets", "postcode", "street_rows", asked_only=True)
QUEUES = (REQUESTS, STREETS)

# A work queue's item as `store/queue` runs it, the same columns in each queue's table
# (after its key and before what only that product keeps).
_QUEUE_ITEM = """\
    state TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    answer TEXT,
    problem TEXT,
    credits INTEGER,"""

TABLES = f"""
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rows (
    row_number INTEGER PRIMARY KEY,
    key TEXT,
    field TEXT,
    rule TEXT,
    detail TEXT
);
CREATE TABLE IF NOT EXISTS passthrough (
    first_row INTEGER PRIMARY KEY,
    rows INTEGER NOT NULL,
    batch BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS requests (
    key TEXT PRIMARY KEY,
    request TEXT NOT NULL,
{_QUEUE_ITEM}
    row_count INTEGER NOT NULL DEFAULT 0,
    first_sent TEXT,
    record TEXT
);
CREATE TABLE IF NOT EXISTS invocations (
    id INTEGER PRIMARY KEY,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    exit_code INTEGER,
    calls INTEGER,
    rate_limited INTEGER,
    credits INTEGER,
    balance INTEGER,
    api_started TEXT
);
CREATE TABLE IF NOT EXISTS streets (
    postcode TEXT PRIMARY KEY,
{_QUEUE_ITEM}
    charged INTEGER,
    read_at TEXT,
    fresh_from TEXT,
    row_count INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS street_rows (
    row_number INTEGER PRIMARY KEY,
    postcode TEXT,
    field TEXT,
    rule TEXT,
    detail TEXT
);
CREATE TABLE IF NOT EXISTS book_rows (
    row_number INTEGER PRIMARY KEY,
    identity TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    plan TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS charges (
    id INTEGER PRIMARY KEY,
    product TEXT NOT NULL,
    item TEXT NOT NULL,
    ref TEXT,
    at TEXT,
    credits INTEGER NOT NULL,
    balance_after INTEGER,
    kind TEXT NOT NULL,
    why TEXT NOT NULL,
    invocation INTEGER,
    received_at TEXT
);
CREATE TABLE IF NOT EXISTS street_passthrough (
    first_row INTEGER PRIMARY KEY,
    rows INTEGER NOT NULL,
    batch BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS derived_files (
    name TEXT PRIMARY KEY,
    command TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    made_from TEXT NOT NULL
);
"""
# `derived_files` (`store/derived`) came in version 7 without a new version: an older
# batchval ignores it and merely leaves an export in place, as it did before.

# The indexes an ingest grows row by row (`Checkpoint.add_rows`); a bulk ingest drops them
# and builds each once at its end (`Checkpoint.bulk_ingest`). `requests_tally` covers what
# `counts()` reads (state, rows asking, credits): where a run stands is read from it
# without touching the rows or the stored answers.
INGEST_INDEXES = {
    "rows_by_key": "CREATE INDEX IF NOT EXISTS rows_by_key ON rows (key)",
    "requests_by_state": "CREATE INDEX IF NOT EXISTS requests_by_state ON requests (state)",
    "requests_tally": "CREATE INDEX IF NOT EXISTS requests_tally"
    " ON requests (state, row_count, credits)",
}
INDEXES = (
    *INGEST_INDEXES.values(),
    "CREATE INDEX IF NOT EXISTS street_rows_by_postcode ON street_rows (postcode)",
    "CREATE INDEX IF NOT EXISTS streets_by_state ON streets (state)",
    "CREATE UNIQUE INDEX IF NOT EXISTS charges_once ON charges (product, item, ref, at)",
)


def _to_3(db: sqlite3.Connection) -> None:
    """2 added the `answered` state; 3 types pass-through values (`passthrough`, not JSON
    in `rows`): having no `passthrough_schema`, an older DIR's input is read again."""
    if any(column[1] == "passthrough" for column in db.execute("PRAGMA table_info(rows)")):
        db.execute("ALTER TABLE rows DROP COLUMN passthrough")


def _to_4(db: sqlite3.Connection) -> None:
    """4 keeps, on each request, how many rows ask for it (`row_count`), so that the
    counts of a large run are read from an index rather than a join over every row."""
    if not any(column[1] == "row_count" for column in db.execute("PRAGMA table_info(requests)")):
        db.execute("ALTER TABLE requests ADD COLUMN row_count INTEGER NOT NULL DEFAULT 0")
    db.execute(
        "UPDATE requests SET row_count = asked.n"
        " FROM (SELECT key, COUNT(*) AS n FROM rows WHERE key IS NOT NULL GROUP BY key) AS asked"
        " WHERE requests.key = asked.key"
    )


def _to_5(db: sqlite3.Connection) -> None:
    """5 adds the street analyses of `batchval streets` (`streets`, one a postcode;
    `street_rows`, one an input row; `street_passthrough`), which `TABLES` creates before
    the migrations run: nothing in a version-4 DIR changes, and a batchval that reads 4
    refuses a DIR that may hold street analyses it would not know of."""
    del db  # the tables exist already (CREATE TABLE IF NOT EXISTS)


def _to_6(db: sqlite3.Connection) -> None:
    """6 adds the `--book` plan: `book_rows` (one an input row: its identity, request
    fingerprint and plan), which `TABLES` creates, and two request states, `carried` and
    `deferred` (`store/book`). Nothing in a version-5 DIR changes; a batchval that reads
    5 refuses a DIR whose deferred requests it would take for answered ones."""
    del db  # the table exists already (CREATE TABLE IF NOT EXISTS)


def _to_7(db: sqlite3.Connection) -> None:
    """7 tells a fresh charge from a replay (`store/charges`): each request keeps when this
    DIR first sent it (`first_sent`), and every answer that carried a `charge` is a line
    of `charges`, which `TABLES` creates. The charges a version-6 DIR recorded are copied
    in as `uncertain`: it kept no evidence to tell them apart."""
    if not any(column[1] == "first_sent" for column in db.execute("PRAGMA table_info(requests)")):
        db.execute("ALTER TABLE requests ADD COLUMN first_sent TEXT")
    why = "recorded by a batchval that did not yet tell fresh charges from replays"

    def read(path: str) -> str:
        return f"CASE WHEN json_valid(answer) THEN json_extract(answer, '{path}') END"

    db.execute(
        "INSERT INTO charges (product, item, ref, at, credits, balance_after, kind, why)"
        f" SELECT 'valuation', key, {read('$.id')}, {read('$.valuedAt')}, credits,"
        f" {read('$.charge.balanceAfter')}, 'uncertain', ? FROM requests WHERE credits > 0",
        (why,),
    )
    db.execute(
        "INSERT INTO charges (product, item, ref, at, credits, kind, why)"
        " SELECT 'street', postcode, postcode, read_at, credits, 'fresh', ?"
        " FROM streets WHERE credits > 0",
        ("a street analysis carries a charge only when it is charged (docs/api.md)",),
    )
    db.execute("UPDATE requests SET credits = 0 WHERE credits > 0")


def _to_8(db: sqlite3.Connection) -> None:
    """8 reads a charge against this DIR's first send of its key on the API's own clock
    (`money/charges`), and each invocation's start on it (`invocations.api_started`). A
    version-7 DIR kept its first sends on this machine's clock, which may be off the API's:
    they become unknown, so no replay is proven against them (a charge then counts as
    spent, never as free)."""
    if not any(c[1] == "api_started" for c in db.execute("PRAGMA table_info(invocations)")):
        db.execute("ALTER TABLE invocations ADD COLUMN api_started TEXT")
    db.execute("UPDATE requests SET first_sent = 'unknown' WHERE first_sent IS NOT NULL")


_RECORDS_AT_ONCE = 10_000  # answers read a statement by `_to_9`


def _to_9(db: sqlite3.Connection) -> None:
    """9 keeps, beside each valued request's raw answer, the answer as read once when it
    was settled (`record`: `api.Valuation.to_record`, or why it cannot be read), which
    results.parquet is written from. A version-8 DIR's answers are read here, once."""
    if not any(column[1] == "record" for column in db.execute("PRAGMA table_info(requests)")):
        db.execute("ALTER TABLE requests ADD COLUMN record TEXT")
    after = 0
    while found := db.execute(
        "SELECT rowid, answer FROM requests WHERE state = 'done' AND record IS NULL"
        " AND answer IS NOT NULL AND rowid > ? ORDER BY rowid LIMIT ?",
        (after, _RECORDS_AT_ONCE),
    ).fetchall():
        db.executemany(
            "UPDATE requests SET record = ? WHERE rowid = ?",
            [(record_of_text(str(answer)), rowid) for rowid, answer in found],
        )
        after = found[-1][0]


# Each version this one reads, with the step that brings it to a later one.
MIGRATIONS: dict[str, tuple[str, Callable[[sqlite3.Connection], None]]] = {
    "1": ("3", _to_3),
    "2": ("3", _to_3),
    "3": ("4", _to_4),
    "4": ("5", _to_5),
    "5": ("6", _to_6),
    "6": ("7", _to_7),
    "7": ("8", _to_8),
    "8": ("9", _to_9),
}
