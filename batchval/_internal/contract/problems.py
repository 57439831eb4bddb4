"""problems.parquet, as every product writes it: each row that got no answer of its own
(refused by validation, or its request's problem), in row order, with the input's
pass-through values and the contract's columns (`schemas.PROBLEM_TAIL`), replaced whole."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Protocol

import pyarrow as pa

from batchval._internal.contract.records import ProblemRow
from batchval._internal.contract.schemas import PROBLEM_TAIL, problems_schema
from batchval._internal.place import (
    PassthroughStore,
    PassthroughValues,
    column_table,
    write_parquet,
)
from batchval._internal.store import RowProblem

BATCH_ROWS = 5_000  # the rows a table of the file is made of, read from the store at once


class ProblemSource(PassthroughStore, Protocol):
    """A product's rows in the run's memory: the run's checkpoint, or the streets' store."""

    def problem_rows(self, batch: int = ...) -> Iterator[list[RowProblem]]: ...


def write_problems(
    source: ProblemSource, path: Path, *, metadata: Mapping[str, str] | None = None
) -> int:
    """Write every row of `source` that got no answer to `path`, atomically; the rows
    written. `metadata` joins the file's key-value metadata (the run's manifest)."""
    given = PassthroughValues(source)
    schema = problems_schema(given.schema, metadata)

    def tables() -> Iterator[pa.Table]:
        for batch in source.problem_rows(BATCH_ROWS):
            rows = [ProblemRow.of(stored) for stored in batch]
            yield column_table(rows, given.of([r.row_number for r in rows]), PROBLEM_TAIL, schema)

    with contextlib.closing(given):
        return write_parquet(path, schema, tables())
