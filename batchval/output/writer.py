"""Writing results.parquet and problems.parquet from the checkpoint.

Atomic: each file replaces the old one whole (`batchval.files`): a reader sees the old
file or the new one, never half of one.

Streamed: the checkpoint hands out rows in batches; each stored answer is read once per
batch into a `Valuation` (`output/records`), each row becomes a frozen record, and each
column is taken from the records by the schema's own table (`output/schemas`), then
converted to Arrow in one go; batches are gathered into Parquet row groups: memory stays
flat however long the input. A value that strays from the spec never stops the write
(a number too big for int64, a commentary member that is not text, a date-time that is
not one): that column of that batch is converted again value by value; text is kept as
text, and a value that cannot fit is null.

Credits: rows with identical requests share one call and one charge. Every such row gets
the valuation, but only the first of them (in row order) carries `credits_charged`, the
others 0, so that the column sums to what was charged. That takes a set of the charged
keys seen so far: about 100 bytes per distinct charged request.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Collection, Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import structlog

from batchval.files import write_parquet
from batchval.output.lender import LenderFigures, Lending
from batchval.output.records import Answer, ProblemRow, ValuedRow
from batchval.output.schemas import (
    PROBLEM_TAIL,
    Column,
    problems_schema,
    result_columns,
    results_schema,
)
from batchval.store.checkpoint import Checkpoint

log = structlog.get_logger()

# Memory, not speed, sets this: rows are turned from JSON into Arrow a batch at a time
# (parsed JSON takes about 10 kB a row with commentary); `write_parquet` gathers the
# batches into row groups.
BATCH_ROWS = 5_000

_NANOSECONDS = pa.timestamp("ns", tz="UTC")
_CONVERSION_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError)


def write_results(
    checkpoint: Checkpoint,
    path: Path,
    *,
    include: Collection[str] = (),
    lending: Lending | None = None,
    metadata: Mapping[str, str] | None = None,
) -> int:
    """Write every valued row to `path` (results.parquet), atomically; the rows written.

    `include` is the run's include: with the items any row's request asked for, it
    decides whether `commentary` and `rebuild_cost` are columns at all. `lending`, when
    the input has lender columns, adds their figures to each row and the rows to its
    portfolio. `metadata` joins the file's key-value metadata.
    """
    extras = {*include, *checkpoint.asked_extras(), *(lending.asks if lending else ())}
    columns = result_columns(extras)
    given = PassthroughValues(checkpoint)
    schema = results_schema(given.schema, extras, metadata)
    charged: set[str] = set()  # keys whose charge a row already carries
    unread: set[str] = set()  # keys whose answer was found unreadable (logged once)

    def tables() -> Iterator[pa.Table]:
        for batch in checkpoint.valued_rows(BATCH_ROWS):
            answers: dict[str, Answer] = {}
            read: list[tuple[int, str, int, Answer]] = []
            for stored in batch:
                answer = answers.get(stored.key)
                if answer is None:
                    answer = answers[stored.key] = Answer.read(stored.answer)
                    if answer.error is not None and stored.key not in unread:
                        unread.add(stored.key)
                        log.warning(
                            "output.answer.unreadable",
                            key=stored.key,
                            row_number=stored.row_number,
                            detail=answer.error,
                        )
                credits = 0
                if stored.credits and stored.key not in charged:
                    credits = stored.credits
                    charged.add(stored.key)
                read.append((stored.row_number, stored.key, credits, answer))
            values = given.of([number for number, *_ in read])
            lender: Sequence[LenderFigures | None] = (
                [None] * len(read)
                if lending is None
                else lending.batch([answer.valuation for *_, answer in read], values)
            )
            rows = [
                ValuedRow(number, key, credits, answer.valuation, answer.valuation_id, figures)
                for (number, key, credits, answer), figures in zip(read, lender, strict=True)
            ]
            yield column_table(rows, values, columns, schema)

    with contextlib.closing(given):
        return write_parquet(path, schema, tables())


def write_problems(
    checkpoint: Checkpoint, path: Path, *, metadata: Mapping[str, str] | None = None
) -> int:
    """Write every row that got no valuation to `path` (problems.parquet), atomically;
    the rows written. `metadata` joins the file's key-value metadata."""
    given = PassthroughValues(checkpoint)
    schema = problems_schema(given.schema, metadata)

    def tables() -> Iterator[pa.Table]:
        for batch in checkpoint.problem_rows(BATCH_ROWS):
            rows = [ProblemRow.of(stored) for stored in batch]
            yield column_table(rows, given.of([r.row_number for r in rows]), PROBLEM_TAIL, schema)

    with contextlib.closing(given):
        return write_parquet(path, schema, tables())


def column_values(records: Sequence[Any], column: Column[Any]) -> pa.Array:
    """One fixed column of these records, taken and converted exactly as the files' are:
    `verify` builds what results.parquet would hold from an answer read back with this."""
    return column_array(
        [column.get(record) for record in records], column.field(), column.json_type
    )


# --- records to columns -------------------------------------------------------------------


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


def column_table(
    records: Sequence[Any],
    passthrough: Sequence[pa.Array],
    columns: Sequence[Column[Any]],
    schema: pa.Schema,
) -> pa.Table:
    """One batch as a table: row_number, the pass-through values, then each fixed column
    taken from the records by its own getter."""
    numbers = pa.array([record.row_number for record in records], pa.int64())
    valuations: list[Any] = []  # of a result batch, read once for every answer column
    fixed = []
    for c in columns:
        if c.of_valuation is None:
            values = [c.get(record) for record in records]
        else:
            valuations = valuations or [record.valuation for record in records]
            get = c.of_valuation
            values = [None if v is None else get(v) for v in valuations]
        fixed.append(column_array(values, c.field(), c.json_type))
    return pa.Table.from_arrays([numbers, *passthrough, *fixed], schema=schema)


# --- columns to Arrow ----------------------------------------------------------------------


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
