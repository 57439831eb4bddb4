"""Writing the outputs of `batchval streets` from the checkpoint's street tables:
street_analysis.parquet (one row a distinct postcode read), problems.parquet (the run's
own columns: one row an input row whose postcode got no street analysis) and
homes_with_street.parquet (`--join`: every input row with its street's figures).

Each file is written atomically, streamed in batches, with the helpers the results
use: `batchval._internal.place.files` (the same temporary-fsync-replace, the same row groups) and
`place/arrow` (the same conversion of values that stray from the spec: a null, never
a stopped write).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from batchval._internal import logs
from batchval._internal.contract import (
    ROW_NUMBER,
    given_fields,
)
from batchval._internal.place import PassthroughValues, column_table, column_values, write_parquet
from batchval._internal.store import StreetStore
from batchval._internal.streets.schema import (
    HOME_TAIL,
    STREET_SCHEMA_VERSION,
    STREET_TAIL,
    StreetRecord,
    street_schema,
)

log = logs.get_logger()

STREETS_NAME = "street_analysis.parquet"
HOMES_NAME = "homes_with_street.parquet"
_BATCH = 2_000


def _data(text: str | None) -> Mapping[str, Any] | None:
    """A stored answer's JSON object (the job read it before it was stored as done)."""
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, Mapping) else None


def write_streets(store: StreetStore, path: Path) -> int:
    """Every postcode read that a row asks for, one row each, atomically; rows written."""
    schema = street_schema()

    def tables() -> Iterator[pa.Table]:
        batch: list[StreetRecord] = []
        for read in store.reads():
            batch.append(
                StreetRecord(
                    0, read.postcode, _data(read.answer), read.rows, read.credits, read.read_at
                )
            )
            if len(batch) >= _BATCH:
                yield _street_table(batch, schema)
                batch = []
        if batch:
            yield _street_table(batch, schema)

    return write_parquet(path, schema, tables())


def _street_table(records: list[StreetRecord], schema: pa.Schema) -> pa.Table:
    columns = [column_values(records, c) for c in STREET_TAIL]
    return pa.Table.from_arrays(columns, schema=schema)


def homes_schema(passthrough: pa.Schema) -> pa.Schema:
    """row_number, the pass-through columns (renamed `_input` on a clash), the street's."""
    given = given_fields(passthrough, [ROW_NUMBER.name, *(c.name for c in HOME_TAIL)])
    return pa.schema(
        [ROW_NUMBER.field(), *given, *(c.field() for c in HOME_TAIL)],
        metadata={
            "batchval.file": "homes_with_street",
            "batchval.schema_version": STREET_SCHEMA_VERSION,
        },
    )


def write_homes(store: StreetStore, path: Path) -> int:
    """Every input row with its postcode's street analysis (null where none), atomically."""
    given = PassthroughValues(store)
    schema = homes_schema(given.schema)

    def tables() -> Iterator[pa.Table]:
        parsed: dict[str, Mapping[str, Any] | None] = {}  # a postcode's answer, read once
        for batch in store.row_streets(_BATCH):
            rows = []
            for row in batch:
                data = None
                if row.postcode is not None and row.answer is not None:
                    if row.postcode not in parsed:
                        parsed[row.postcode] = _data(row.answer)
                    data = parsed[row.postcode]
                rows.append(StreetRecord(row.row_number, row.postcode, data))
            yield column_table(rows, given.of([r.row_number for r in rows]), HOME_TAIL, schema)
            if len(parsed) > 10 * _BATCH:
                parsed.clear()  # memory stays flat however many postcodes

    with contextlib.closing(given):
        return write_parquet(path, schema, tables())
