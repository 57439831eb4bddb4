"""Records made into Arrow by a table of columns: the conversion of every Parquet file
built from records (results, problems, charges, verify, the street files).

A `Column` says what a column is called and holds (name, Arrow type, one-line
description, nullability) and where its value comes from (`get`, on the file's record).
Each product keeps its own table of them (`contract/schemas`, `money/charges_file`,
`streets/schema`, `verify/compare`); this module names none of their columns.
`column_table` takes a batch of records column by column, `column_values` one column.

A column's values are converted in one go. A value that strays from the column's type
never stops the write (a number too big for int64, a member that is not text, a
date-time that is not one): that column of that batch is converted again value by
value; text is kept as text (anything else as its JSON), and a value that cannot fit
is null. Integers are taken only when whole (pyarrow, told the type, turns 2.5 into 2),
and a JSON `250000.0` is the integer 250000. Timestamps are read from RFC 3339 text (`Z`
or an offset; none is UTC) as UTC instants, truncated to the column's unit. A struct of
JSON objects is converted under its `json_type`, the JSON's own member names, then
viewed as the column's type.

`PassthroughValues` hands out the input's pass-through values of the rows asked for, in
row order, from the stored Arrow batches (`PassthroughStore`: the checkpoint's rows, or
its streets'), one batch decoded at a time.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

import pyarrow as pa

_NANOSECONDS = pa.timestamp("ns", tz="UTC")
_CONVERSION_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError)

_R = TypeVar("_R")


@dataclasses.dataclass(frozen=True, slots=True)
class Column(Generic[_R]):
    """One fixed column: what it is called and holds, and where its value comes from."""

    name: str
    type: pa.DataType
    description: str
    get: Callable[[_R], Any] = dataclasses.field(repr=False, compare=False)
    nullable: bool = True
    # The column is there only when this is asked for (`contract/schemas.result_columns`:
    # an include item, or a lender column group).
    asked_by: str | None = None
    # For a column read from one part of the record alone (a result row's valuation): the
    # part (`part`, one function for every column of it) and the same `get` on it
    # (`of_part`). `column_table` reads each record's part once a batch, then calls
    # `of_part` once a value, not through the record; a record without the part is null.
    part: Callable[[_R], Any] | None = dataclasses.field(default=None, repr=False, compare=False)
    of_part: Callable[[Any], Any] | None = dataclasses.field(
        default=None, repr=False, compare=False
    )
    # For a struct column whose values are JSON objects: the same layout under the JSON's
    # own member names. The values are converted under it, then the array is viewed as
    # `type` (same buffers, no copy), so no member is renamed value by value.
    json_type: pa.DataType | None = None

    def field(self) -> pa.Field:
        return pa.field(
            self.name, self.type, self.nullable, metadata={"description": self.description}
        )


def column_values(records: Sequence[Any], column: Column[Any]) -> pa.Array:
    """One fixed column of these records, taken and converted exactly as the files' are:
    `verify` builds what results.parquet would hold from an answer read back with this."""
    return column_array(
        [column.get(record) for record in records], column.field(), column.json_type
    )


def column_table(
    records: Sequence[Any],
    passthrough: Sequence[pa.Array],
    columns: Sequence[Column[Any]],
    schema: pa.Schema,
) -> pa.Table:
    """One batch as a table: row_number, the pass-through values, then each fixed column
    taken from the records by its own getter."""
    numbers = pa.array([record.row_number for record in records], pa.int64())
    parts: dict[Callable[[Any], Any], list[Any]] = {}  # each read once for all its columns
    fixed = []
    for c in columns:
        if c.part is None or c.of_part is None:
            values = [c.get(record) for record in records]
        else:
            if c.part not in parts:
                parts[c.part] = [c.part(record) for record in records]
            get = c.of_part
            values = [None if part is None else get(part) for part in parts[c.part]]
        fixed.append(column_array(values, c.field(), c.json_type))
    return pa.Table.from_arrays([numbers, *passthrough, *fixed], schema=schema)


def column_array(
    values: Sequence[Any], field: pa.Field, json_type: pa.DataType | None = None
) -> pa.Array:
    """`values` as an array of `field`'s type; one that does not fit is coerced or null.
    `json_type`, for a struct field: the same layout under the values' own member names
    (`Column.json_type`), converted under, then viewed as the field's type."""
    if pa.types.is_timestamp(field.type):
        return _timestamps(values, field.type)
    if json_type is not None and pa.types.is_struct(field.type):
        return _array(values, json_type).view(field.type)
    return _array(values, field.type)


def _array(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    try:
        if not pa.types.is_integer(kind):
            return pa.array(values, type=kind)
        # Told the type, pyarrow turns 2.5 into 2 without a word: only whole ints go fast.
        found = pa.array(values)
        if pa.types.is_integer(found.type) or pa.types.is_null(found.type):
            return found.cast(kind)
    except _CONVERSION_ERRORS:
        pass
    return pa.array([_coerce(value, kind) for value in values], type=kind)


def _coerce(value: Any, kind: pa.DataType) -> Any:
    """`value` made to fit `kind`, or None: the slow path, for values off the spec."""
    if value is None:
        return None
    if pa.types.is_struct(kind):
        if not isinstance(value, Mapping):
            return None
        return {f.name: _coerce(value.get(f.name), f.type) for f in kind}
    if pa.types.is_string(kind):
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if pa.types.is_boolean(kind):
        return value if isinstance(value, bool) else None
    if isinstance(value, bool):  # a bool is an int to Python, never a number to JSON
        return None
    if pa.types.is_integer(kind):
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # 250000.0 is a whole number to JSON
        return value if isinstance(value, int) and -(2**63) <= value < 2**63 else None
    if pa.types.is_floating(kind):
        return float(value) if isinstance(value, int | float) else None
    return None


def _timestamps(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    """RFC 3339 date-times (`Z` or an offset) as UTC instants, truncated to the unit."""
    try:
        return _array(values, pa.string()).cast(_NANOSECONDS).cast(kind, safe=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.array([_instant(value) for value in values], type=kind)


def _instant(value: Any) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        when = dt.datetime.fromisoformat(value.strip().upper())
    except ValueError:
        return None
    # pyarrow truncates to the column's unit; a date-time without an offset is taken as UTC.
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


class PassthroughStore(Protocol):
    """Where typed pass-through values are kept: the checkpoint's rows, or its streets'."""

    def passthrough_schema(self) -> pa.Schema | None: ...

    def passthrough_batches(self) -> Generator[tuple[int, pa.RecordBatch], None, None]: ...


class PassthroughValues:
    """The pass-through values of rows asked for in row order, taken from the stored
    batches as they come: one batch decoded at a time, however long the input."""

    def __init__(self, checkpoint: PassthroughStore) -> None:
        self.schema: pa.Schema = checkpoint.passthrough_schema() or pa.schema([])
        self._stored = checkpoint.passthrough_batches()  # a cursor, until closed
        self._empty = pa.RecordBatch.from_pylist([], schema=self.schema)
        self._batch: pa.RecordBatch | None = None  # the stored batch at hand
        self._first = self._end = 0  # its rows: first <= n < end
        self._done = False  # every stored batch has been read

    def of(self, numbers: Sequence[int]) -> list[pa.Array]:
        """The columns' values of rows `numbers` (ascending); null where none is stored."""
        if not len(self.schema):
            return []
        pieces: list[pa.RecordBatch] = []
        at: list[int | None] = []  # positions in the batch at hand, None for no value
        for number in numbers:
            while not self._done and number >= self._end:
                self._take(at, pieces)
                self._next()
            held = self._batch is not None and self._first <= number < self._end
            at.append(number - self._first if held else None)
        self._take(at, pieces)
        if not pieces:
            return [pa.array([], field.type) for field in self.schema]
        return [pa.concat_arrays([p.column(i) for p in pieces]) for i in range(len(self.schema))]

    def close(self) -> None:
        """Let go of the stored batches (and their cursor) not read."""
        self._stored.close()

    def _take(self, at: list[int | None], pieces: list[pa.RecordBatch]) -> None:
        if at:
            batch = self._empty if self._batch is None else self._batch
            pieces.append(batch.take(pa.array(at, pa.int64())))
            at.clear()

    def _next(self) -> None:
        found = next(self._stored, None)
        if found is None:
            self._batch, self._done = None, True
            return
        self._first, self._batch = found
        self._end = self._first + self._batch.num_rows
