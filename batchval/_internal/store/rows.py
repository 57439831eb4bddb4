"""The checkpoint's copy of the input, as an ingest writes it: each row with its request's
key (or its problem), each distinct request with the rows asking for it (`row_count`),
and the rows' pass-through values (`store/records`). `Checkpoint` holds one (`rows`); it
lives here because it changes with the reading of the input, not with the sending.

An ingest is one transaction (`bulk`): its rows, requests and pass-through values
are committed together or not at all. The indexes on rows and requests are dropped at
its start and each built once at its end, by a sort: grown a row at a time, with a
transaction and an fsync a batch, their pages (random, the keys being hashes) were
written again at every commit, and a million rows took 25 s, five sixths of the ingest.
A kill rolls the ingest back whole, indexes included; the next run reads the input again
from its start, as it always did (`complete` is set only by `finish`).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections import Counter
from collections.abc import Iterator, Sequence

import pyarrow as pa

from batchval._internal.store import records
from batchval._internal.store.connected import Connected
from batchval._internal.store.schema import INGEST_INDEXES

# A row as stored: row number, the request's key, and the problem's field, rule, detail.
Row = tuple[int, str | None, str | None, str | None, str | None]

# SQLite's page cache while an ingest's transaction is open, in KiB (its default is 2 MiB):
# the index on the requests' keys takes a random page at every insert, and a page that is
# not held is read back from the write-ahead log. 64 MiB took the inserts of a million
# rows from 13 to 8 s of CPU (256 MiB: no better).
_BULK_CACHE_KIB = 64 * 1024


class InputRows:
    """The `rows` and `passthrough` tables, and what an ingest writes to `requests`."""

    def __init__(self, database: Connected) -> None:
        self._database = database

    @property
    def _sql(self) -> sqlite3.Connection:
        return self._database.sql

    def restart(self) -> None:
        """Forget the rows and their pass-through values, never a request or an answer."""
        with self._database.transaction():
            self.forget()

    def forget(self) -> None:
        """`restart`, inside the caller's transaction."""
        self._sql.execute("DELETE FROM rows")
        self._sql.execute("UPDATE requests SET row_count = 0 WHERE row_count != 0")
        self._sql.execute("DELETE FROM passthrough")
        self._database.unset("passthrough_schema")
        self._database.unset("ingest_complete")

    def holds_requests(self) -> bool:
        """Whether any request is stored (one probe)."""
        return bool(self._sql.execute("SELECT EXISTS (SELECT 1 FROM requests)").fetchone()[0])

    @contextlib.contextmanager
    def bulk(self) -> Iterator[None]:
        """One transaction for the `add` of a whole ingest, the indexes on rows and
        requests dropped and built again at its end (see the module's docstring)."""
        if self._sql.in_transaction:  # in a group: the indexes are in use
            yield
            return
        cache = int(self._sql.execute("PRAGMA cache_size").fetchone()[0])
        self._sql.execute(f"PRAGMA cache_size = {-_BULK_CACHE_KIB}")
        try:
            with self._database.transaction():
                for name in INGEST_INDEXES:
                    self._sql.execute(f"DROP INDEX IF EXISTS {name}")
                yield
                for index in INGEST_INDEXES.values():
                    self._sql.execute(index)
        finally:
            self._sql.execute(f"PRAGMA cache_size = {cache}")

    def add(
        self,
        rows: Sequence[Row],
        requests: Sequence[tuple[str, str]],
        passthrough: pa.RecordBatch | None = None,
    ) -> None:
        """One batch of rows (row number, key, field, rule, detail), their requests and
        their pass-through values (one a row, rows consecutive), in one transaction (or
        the ingest's). Each request's `row_count` grows by the rows of the batch asking."""
        asked = Counter(row[1] for row in rows if row[1] is not None)
        with self._database.transaction():
            self._sql.executemany(
                "INSERT INTO rows (row_number, key, field, rule, detail) VALUES (?, ?, ?, ?, ?)",
                rows,
            )
            self._sql.executemany(
                "INSERT INTO requests (key, request, row_count) VALUES (?, ?, ?)"
                " ON CONFLICT (key) DO UPDATE SET row_count = row_count + excluded.row_count",
                [(key, request, asked.pop(key, 0)) for key, request in requests],
            )
            if asked:  # rows asking for a request an earlier batch (or run) stored
                self._sql.executemany(
                    "UPDATE requests SET row_count = row_count + ? WHERE key = ?",
                    [(n, key) for key, n in asked.items()],
                )
            if passthrough is not None:
                self._add_passthrough([row[0] for row in rows], passthrough)

    def _add_passthrough(self, numbers: Sequence[int], batch: pa.RecordBatch) -> None:
        schema, held = records.schema_text(batch.schema), self._database.get("passthrough_schema")
        if held not in (None, schema):
            raise ValueError(f"pass-through schema changed within an ingest: {batch.schema}")
        self._database.set("passthrough_schema", schema)
        if batch.num_columns and numbers:
            self._sql.execute(
                "INSERT INTO passthrough (first_row, rows, batch) VALUES (?, ?, ?)",
                (numbers[0], len(numbers), records.batch_bytes(numbers, batch)),
            )

    def finish(self) -> None:
        """Requests no row asks for any more (after an accepted input change) are dropped
        if they were never sent. One that was sent may have been charged: it is kept and
        sent again with its key (a free replay), so that its paid answer is recorded; an
        answer that was paid for is never thrown away."""
        with self._database.transaction():
            self._sql.execute(
                "DELETE FROM requests WHERE state = 'pending' AND attempts = 0 AND row_count = 0"
            )
            self._database.set("ingest_complete", "1")

    @property
    def complete(self) -> bool:
        return self._database.get("ingest_complete") == "1"
