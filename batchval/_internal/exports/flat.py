"""DIR's Parquet files as flat tables: the reading and flattening every export format
shares (`exports/export` writes CSV and JSON Lines from them, `exports/workbook` XLSX).

No column is known by name, so the columns that later versions add come out too.
Nested columns are flattened (a struct's members become columns named
`<column>_<member>`, depth after depth: `commentary_summary`,
`commentary_area_insights_growth`, `rebuild_cost_low`) or dropped (every struct, list or
map column left out). Lists and maps have no fixed set of columns: they become their
JSON text (`["a", "b"]`), or stay as they are for JSON Lines. Names are unique ignoring
case: a name already taken gets `_2`, `_3`, ...

Every text is scrubbed as the log is (`batchval._internal.redaction`): a column is looked at in
Arrow's own code for anything that may hold a secret, and only such values are scrubbed.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from batchval._internal import redaction

# Rows read at a time, so memory stays flat however long the file.
BATCH_ROWS = 65_536


class Nested(enum.Enum):
    FLATTEN = "flatten"  # a struct's members become columns; lists become JSON text
    DROP = "drop"  # struct, list and map columns are left out


@dataclasses.dataclass(frozen=True, slots=True)
class ExportedFile:
    """One Parquet file's rows, written to `path` (in a workbook: its sheet `source`)."""

    source: str  # the Parquet file's stem: results, problems, ...
    path: Path
    rows: int
    columns: int
    cut: int = 0  # cells whose text was cut to a spreadsheet cell's limit


def parquet_tables(parquet: Path, batch_rows: int = BATCH_ROWS) -> Iterator[pa.Table]:
    """The file's rows in tables of up to `batch_rows`; an empty file gives one empty
    table (so that a CSV of no rows still has its header)."""
    reader = pq.ParquetFile(parquet)
    schema = reader.schema_arrow
    empty = True
    for batch in reader.iter_batches(batch_size=batch_rows):
        empty = False
        yield pa.Table.from_batches([batch], schema=schema)
    if empty:
        yield schema.empty_table()


def flat_table(table: pa.Table, nested: Nested, *, lists_as_text: bool) -> pa.Table:
    """`table` with its struct columns flattened (or dropped) and its list and map
    columns as JSON text (or dropped, or kept for JSON): the columns a flat file holds.

    Names are unique ignoring case (an Excel table refuses `Loan` beside `loan`): a name
    already taken gets `_2`, `_3`, ... appended. The file's own columns come first, in
    order, then the flattened members, so that no member takes a column's name."""
    taken: set[str] = set()
    names = [_unique(name, taken) for name in table.column_names]
    fields: list[pa.Field] = []
    columns: list[pa.ChunkedArray] = []
    for field, name, column in zip(table.schema, names, table.columns, strict=True):
        top = field.with_name(name)
        for flat, values in _flat(top, column, nested, lists_as_text, taken, top=True):
            fields.append(flat)
            columns.append(values)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def decimals_as_doubles(table: pa.Table) -> pa.Table:
    """For JSON and Excel, whose numbers are doubles: a decimal of up to 15 digits as the
    double nearest its text (exact to 15 digits; Arrow's own cast multiplies by the scale
    and is off in the last bit: 50.05 became 50.050000000000004), a wider one as its text,
    so that no digit is lost."""
    for i, field in enumerate(table.schema):
        if pa.types.is_decimal(field.type):
            text = table[i].cast(pa.string())
            if field.type.precision <= 15:
                table = table.set_column(i, field.with_type(pa.float64()), text.cast(pa.float64()))
            else:
                table = table.set_column(i, field.with_type(pa.string()), text)
    return table


def _flat(
    field: pa.Field,
    column: pa.ChunkedArray,
    nested: Nested,
    lists_as_text: bool,
    taken: set[str],
    *,
    top: bool,
) -> Iterator[tuple[pa.Field, pa.ChunkedArray]]:
    kind = field.type
    if not top:
        field = field.with_name(_unique(field.name, taken))
    if pa.types.is_struct(kind):
        if nested is Nested.DROP:
            return
        # flatten() takes the struct's own nulls into its members: a row without
        # commentary has every commentary_* column null.
        for child, values in zip(kind, column.flatten(), strict=True):
            named = child.with_name(f"{field.name}_{child.name}")
            yield from _flat(named, values, nested, lists_as_text, taken, top=False)
    elif _is_nested(kind):
        if nested is Nested.DROP:
            return
        if lists_as_text:
            yield field.with_type(pa.string()), _scrubbed(_json_text(column))
        else:
            yield field, column
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        yield field, _scrubbed(column)
    else:
        yield field, column


# What a text holding a secret in a form `redaction.canonical` decodes, a `Bearer` token
# or a URL's password shows, whatever its secret.
_ESCAPED = r"[%&\\@]|bearer"
# What the canonical form leaves out between two characters, and `/` as it reads `_`.
_CANONICAL_GAP = r"[\s+\-\x1f]*"


def _scrubbed(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A text column with every secret the process knows masked, in every form: the
    values that may hold one (an escape, `Bearer`, a URL's password, or a secret's
    canonical form, `redaction.needles`) found by one expression in Arrow's own code
    (0.1 s a million rows), then each of those scrubbed; a column none of whose values
    may hold one is returned as it is."""
    if column.null_count == len(column):
        return column
    needles = [
        _CANONICAL_GAP.join("[/_]" if c == "/" else re.escape(c) for c in needle)
        for needle in redaction.active().needles
    ]
    suspect = pc.match_substring_regex(column, "|".join([_ESCAPED, *needles]), ignore_case=True)
    if not pc.any(suspect).as_py():
        return column
    values = column.to_pylist()
    for i in pc.indices_nonzero(pc.fill_null(suspect, False)).to_pylist():
        values[i] = redaction.scrub(values[i])
    return pa.chunked_array([pa.array(values, column.type)], column.type)


def _unique(name: str, taken: set[str]) -> str:
    found, n = name, 1
    while found.casefold() in taken:
        n += 1
        found = f"{name}_{n}"
    taken.add(found.casefold())
    return found


def _is_nested(kind: pa.DataType) -> bool:
    return bool(
        pa.types.is_list(kind)
        or pa.types.is_large_list(kind)
        or pa.types.is_fixed_size_list(kind)
        or pa.types.is_map(kind)
        or getattr(pa.types, "is_list_view", lambda _: False)(kind)
        or getattr(pa.types, "is_large_list_view", lambda _: False)(kind)
    )


def _json_text(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Each value as its JSON text (a map as a list of [key, value] pairs); null stays null."""
    texts = [
        None if value is None else json.dumps(value, ensure_ascii=False, default=_plain)
        for value in column.to_pylist()
    ]
    return pa.chunked_array([pa.array(texts, pa.string())], pa.string())


def _plain(value: Any) -> Any:
    """What json.dumps cannot write by itself, as JSON would say it."""
    if isinstance(value, dt.date | dt.time | dt.datetime):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    return str(value)
