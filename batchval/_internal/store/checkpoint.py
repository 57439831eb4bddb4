"""The valuations of `batchval run` in the DIR's database (`store/database`).

Three tables carry the work:

- `rows`: one per input row: its row number, and its request's key (NULL when the
  input stage refused the row, with the problem in `field`/`rule`/`detail`).
- `passthrough`: the rows' pass-through values, typed: an Arrow IPC stream per ingest
  batch, committed with its rows (a killed ingest never parts them), streamed back a
  batch at a time; their schema is in `meta` (`passthrough_schema`).
- `requests`: the work queue (`store/queue`), one item per distinct request (rows with
  identical requests share a key, and so one call and one charge): its canonical JSON,
  state, attempts, last error, the API's answer or problem, and how many rows ask for
  it (`row_count`, kept with the rows), so that `counts()` reads indexes and never joins
  a million rows to their requests. The tables, indexes and migrations are in
  `store/schema`; an ingest writes rows, requests and pass-through values through
  `store/rows`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Generator, Iterator
from typing import Any

import pyarrow as pa

from batchval._internal.store import records
from batchval._internal.store.counts import Counts
from batchval._internal.store.database import (
    CHECKPOINT_NAME,
    CheckpointVersionError,
    Database,
    problem_rows,
    problem_types,
    refused_kinds,
    row_counts,
)
from batchval._internal.store.queue import WorkQueue
from batchval._internal.store.rows import InputRows
from batchval._internal.store.schema import REQUESTS, SCHEMA_VERSION

__all__ = [
    "CHECKPOINT_NAME",
    "SCHEMA_VERSION",
    "Checkpoint",
    "CheckpointVersionError",
    "Counts",
]


class Checkpoint:
    """The DIR's database as `run` uses it: `rows`, its input, and `requests`, its work
    queue (as `StreetStore` is streets' view of the same database)."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.rows = InputRows(database)
        self.requests = WorkQueue(database, REQUESTS)

    @property
    def _sql(self) -> sqlite3.Connection:
        return self.database.sql

    # --- meta, under run's names (the first product's: no prefix) -----------------------

    def get(self, name: str) -> str | None:
        return self.database.get(name)

    def set(self, name: str, value: str) -> None:
        self.database.set(name, value)

    def forget_requests(self) -> int:
        """Forget every request and answer, to read the input again under new keys: the
        DIR held test-mode answers (fake, free) and the credentials changed, and a DIR
        never mixes test and live answers. Returns how many requests were forgotten."""
        with self.database.transaction():
            cursor = self._sql.execute("DELETE FROM requests")
            self.rows.forget()
            self.database.unset("mode")
        return cursor.rowcount

    # --- reading back --------------------------------------------------------------------

    def counts(self) -> Counts:
        """Read from indexes only: the rows' count, those refused, and each state's
        requests with the rows asking for them (`requests_tally`), never a join of rows
        and requests, which took seconds a million rows."""
        rows, refused = row_counts(self.database, "rows", "key")
        tally = self.requests.tally()
        return Counts.of_tally(rows, refused, tally, sum(t.credits for t in tally.values()))

    def problem_types(self) -> dict[str, int]:
        """Problem rows by type (the API's type name, or the input rule)."""
        named = "COALESCE(r.rule, json_extract(q.problem, '$.type'))"
        return problem_types(self.database, "rows", "key", "requests", named)

    def refused_kinds(self, limit: int = 3) -> list[tuple[str | None, str, int, str | None]]:
        """The rows validation refused by field and rule, most rows first: (field, rule,
        rows, the first such row's detail)."""
        return refused_kinds(self.database, "rows", "key", limit)

    def problems_of_type(self, name: str) -> list[tuple[int, str, str, str | None]]:
        """(rowid, key, problem JSON, raw answer) of the problem requests of type `name`."""
        return self._sql.execute(
            "SELECT rowid, key, problem, answer FROM requests WHERE state = 'problem' AND"
            " CASE WHEN json_valid(problem) THEN json_extract(problem, '$.type') END = ?"
            " ORDER BY rowid",
            (name,),
        ).fetchall()

    def request_of(self, key: str) -> str | None:
        """The canonical request JSON sent with `key` (None for a key it does not hold)."""
        found = self._sql.execute("SELECT request FROM requests WHERE key = ?", (key,)).fetchone()
        return None if found is None else str(found[0])

    def passthrough_schema(self) -> pa.Schema | None:
        """The pass-through columns' schema; None before an ingest, or if begun by 1 or 2."""
        stored = self.get("passthrough_schema")
        return None if stored is None else records.schema_of(stored)

    def passthrough_batches(self) -> Generator[tuple[int, pa.RecordBatch], None, None]:
        """(first row number, values) of each pass-through batch, in row order, lazily."""
        query = "SELECT first_row, batch FROM passthrough ORDER BY first_row"
        for first, blob in self._sql.execute(query):
            yield int(first), records.batch_of(blob)

    def asked_extras(self) -> frozenset[str]:
        """The include items any row's request asks for (the run's, or the row's own)."""
        found = self._sql.execute(
            "SELECT DISTINCT j.value FROM requests q, json_each(q.request, '$.include') j"
            # Cheap tests first: most runs ask for no extras, and then no JSON is parsed;
            # a row asks for the request (`row_count`), never a join with a million rows'
            # keys (2.7 s of a million-row night's write, whatever the requests held).
            " WHERE q.row_count > 0 AND q.request LIKE '%\"include\"%'"
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
            for values, rows in self._sql.execute(query, paths)
        ]

    def valued_rows(self, batch: int = 20_000) -> Iterator[list[records.RowAnswer]]:
        """Valued rows with their request's answer and its record, in row order, in batches."""
        cursor = self._sql.execute(
            "SELECT r.row_number, r.key, q.answer, COALESCE(q.credits, 0), q.record"
            " FROM rows r JOIN requests q ON q.key = r.key"
            " WHERE q.state = 'done' ORDER BY r.row_number"
        )
        while chunk := cursor.fetchmany(batch):
            yield [records.RowAnswer.of(row) for row in chunk]

    def problem_rows(self, batch: int = 20_000) -> Iterator[list[records.RowProblem]]:
        """Rows refused by validation or with a request's problem, in row order, in batches."""
        return problem_rows(self.database, "rows", "key", "requests", "q.answer", batch)
