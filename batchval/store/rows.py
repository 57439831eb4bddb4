"""The checkpoint's copy of the input, as an ingest writes it: each row with its request's
key (or its problem), each distinct request with the rows asking for it (`row_count`),
and the rows' pass-through values (`store/records`). `Checkpoint` has these methods; they
live here because they change with the reading of the input, not with the sending.

An ingest is one transaction (`bulk_ingest`): its rows, requests and pass-through values
are committed together or not at all. The indexes on rows and requests are dropped at
its start and each built once at its end, by a sort: grown a row at a time, with a
transaction and an fsync a batch, their pages (random, the keys being hashes) were
written again at every commit, and a million rows took 25 s, five sixths of the ingest.
A kill rolls the ingest back whole, indexes included; the next run reads the input again
from its start, as it always did (`ingest_complete` is set only by `finish_ingest`).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from batchval.store import records
from batchval.store.schema import INGEST_INDEXES

# A row as stored: row number, the request's key, and the problem's field, rule, detail.
Row = tuple[int, str | None, str | None, str | None, str | None]

# SQLite's page cache while an ingest's transaction is open, in KiB (its default is 2 MiB):
# the index on the requests' keys takes a random page at every insert, and a page that is
# not held is read back from the write-ahead log. 64 MiB took the inserts of a million
# rows from 13 to 8 s of CPU (256 MiB: no better).
_BULK_CACHE_KIB = 64 * 1024


class InputRows:
    if TYPE_CHECKING:  # Checkpoint's own

        @property
        def sql(self) -> sqlite3.Connection: ...
        def get(self, name: str) -> str | None: ...
        def set(self, name: str, value: str) -> None: ...
        def unset(self, name: str) -> None: ...
        def transaction(self) -> contextlib.AbstractContextManager[None]: ...

    def restart_ingest(self) -> None:
        """Forget the rows and their pass-through values, never a request or an answer."""
        with self.transaction():
            self._forget_rows()

    def _forget_rows(self) -> None:
        self.sql.execute("DELETE FROM rows")
        self.sql.execute("UPDATE requests SET row_count = 0 WHERE row_count != 0")
        self.sql.execute("DELETE FROM passthrough")
        self.unset("passthrough_schema")
        self.unset("ingest_complete")

    def holds_requests(self) -> bool:
        """Whether any request is stored (one probe)."""
        return bool(self.sql.execute("SELECT EXISTS (SELECT 1 FROM requests)").fetchone()[0])

    @contextlib.contextmanager
    def bulk_ingest(self) -> Iterator[None]:
        """One transaction for the `add_rows` of a whole ingest, the indexes on rows and
        requests dropped and built again at its end (see the module's docstring)."""
        if self.sql.in_transaction:  # in a group: the indexes are in use
            yield
            return
        cache = int(self.sql.execute("PRAGMA cache_size").fetchone()[0])
        self.sql.execute(f"PRAGMA cache_size = {-_BULK_CACHE_KIB}")
        try:
            with self.transaction():
                for name in INGEST_INDEXES:
                    self.sql.execute(f"DROP INDEX IF EXISTS {name}")
                yield
                for index in INGEST_INDEXES.values():
                    self.sql.execute(index)
        finally:
            self.sql.execute(f"PRAGMA cache_size = {cache}")

    def add_rows(
        self,
        rows: Sequence[Row],
        requests: Sequence[tuple[str, str]],
        passthrough: pa.RecordBatch | None = None,
    ) -> None:
        """One batch of rows (row number, key, field, rule, detail), their requests and
        their pass-through values (one a row, rows consecutive), in one transaction (or
        the ingest's). Each request's `row_count` grows by the rows of the batch asking."""
        asked = Counter(row[1] for row in rows if row[1] is not None)
        with self.transaction():
            self.sql.executemany(
                "INSERT INTO rows (row_number, key, field, rule, detail) VALUES (?, ?, ?, ?, ?)",
                rows,
            )
            self.sql.executemany(
                "INSERT INTO requests (key, request, row_count) VALUES (?, ?, ?)"
                " ON CONFLICT (key) DO UPDATE SET row_count = row_count + excluded.row_count",
                [(key, request, asked.pop(key, 0)) for key, request in requests],
            )
            if asked:  # rows asking for a request an earlier batch (or run) stored
                self.sql.executemany(
                    "UPDATE requests SET row_count = row_count + ? WHERE key = ?",
                    [(n, key) for key, n in asked.items()],
                )
            if passthrough is not None:
                self._add_passthrough([row[0] for row in rows], passthrough)

    def _add_passthrough(self, numbers: Sequence[int], batch: pa.RecordBatch) -> None:
        schema, held = records.schema_text(batch.schema), self.get("passthrough_schema")
        if held not in (None, schema):
            raise ValueError(f"pass-through schema changed within an ingest: {batch.schema}")
        self.set("passthrough_schema", schema)
        if batch.num_columns and numbers:
            self.sql.execute(
                "INSERT INTO passthrough (first_row, rows, batch) VALUES (?, ?, ?)",
                (numbers[0], len(numbers), records.batch_bytes(numbers, batch)),
            )

    def finish_ingest(self) -> None:
        """Requests no row asks for any more (after an accepted input change) are dropped
        if they were never sent. One that was sent may have been charged: it is kept and
        sent again with its key (a free replay), so that its paid answer is recorded; an
        answer that was paid for is never thrown away."""
        with self.transaction():
            self.sql.execute(
                "DELETE FROM requests WHERE state = 'pending' AND attempts = 0 AND row_count = 0"
            )
            self.set("ingest_complete", "1")

    @property
    def ingest_complete(self) -> bool:
        return self.get("ingest_complete") == "1"
