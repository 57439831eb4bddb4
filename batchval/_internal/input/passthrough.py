"""Pass-through columns, typed: the input's own columns as the outputs carry them.

A pass-through column keeps the type it has in the input, in results.parquet and
problems.parquet alike (docs/outputs.md):

- **Parquet**: the file's own Arrow type (integers, decimals, floats, dates, times,
  timestamps with their zone, booleans, text), with four exceptions, each a type the
  readers of the outputs could not use as it is:
  - a dictionary column is written as its values (dictionary encoding is Parquet's own
    business, and it applies it anyway);
  - binary is read as UTF-8 text: writers such as Hive and older Spark store text as
    plain binary. Binary that is not UTF-8 makes the file unusable (exit 65);
  - a decimal of more than 38 digits (`decimal256`) is written as its text: polars,
    DuckDB and Spark hold no wider decimal, and would not read the file at all;
  - the include column, when it is passed through and is a list, is its items joined
    by `;`, as a CSV cell has them.
- **CSV**: the type that polars' schema inference gives the column, read over the whole
  file (`infer_schema_length=None`; polars' defaults otherwise, so dates stay text; run
  block by block and merged as polars merges, so memory does not grow with the file,
  `input/stream`):
  Int64, Float64, Boolean or String. Two kinds of integer columns stay text, because
  a number would lose what the text says: one with a value beyond Int64 (polars reads
  it as Int128, which Arrow does not have; such numbers are identifiers), and one with a
  value written with a leading zero (`007`, an account number). If polars cannot infer
  the types (a malformed file), every column stays text, and reading the file reports
  the fault as it always did.

Validation never sees these types: it reads every field as text (`input/reader`).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from batchval._internal.input.options import InputError

_WIDEST_DECIMAL = 38  # digits: what polars, DuckDB and Spark read
LEADING_ZERO = r"^-?0\d"  # an integer written with a leading zero: 007, -01
# The CSV types polars infers that are kept; any other (Int128, or a type a later polars
# may infer) is written as the text it was read from.
_KEPT: tuple[pl.DataType, ...] = (pl.Int64(), pl.Float64(), pl.Boolean(), pl.String())


def empty() -> pa.RecordBatch:
    """The pass-through of an input that has none."""
    return pa.record_batch([], schema=pa.schema([]))


# --- CSV ------------------------------------------------------------------------------------


def csv_types(
    inferred: Mapping[str, pl.DataType], leading_zero: Sequence[str]
) -> dict[str, pl.DataType]:
    """The type each pass-through column is written as, from polars' inference over the
    file and the integer columns found holding a value with a leading zero."""
    types: dict[str, pl.DataType] = {}
    for name, kind in inferred.items():
        kept = kind in _KEPT and not (kind == pl.Int64 and name in leading_zero)
        types[name] = kind if kept else pl.String()
    return types


def integer_columns(inferred: Mapping[str, pl.DataType]) -> list[str]:
    """The columns to look at for leading zeros: those polars reads as integers."""
    return [name for name, kind in inferred.items() if kind == pl.Int64]


def has_leading_zero(text: pl.Expr) -> pl.Expr:
    """Whether any value of the text column is an integer written with a leading zero."""
    return text.str.contains(LEADING_ZERO).any()


def from_text(path: Path, frame: pl.DataFrame, types: Mapping[str, pl.DataType]) -> pa.RecordBatch:
    """The pass-through columns of a CSV batch (all text) in their inferred types."""
    if not types:
        return empty()
    columns: list[pa.Array] = []
    for name, kind in types.items():
        text = frame.get_column(name)
        try:
            typed = _cast(text, kind)
        except pl.exceptions.PolarsError as exc:
            raise _disagrees(path, name, kind) from exc
        if typed.null_count() != text.null_count():
            raise _disagrees(path, name, kind)
        array = typed.to_arrow()
        # polars hands text out as large_string or string_view; Arrow's plain string is
        # what every other text column of the outputs is.
        columns.append(array.cast(pa.string()) if kind == pl.String else array)
    return pa.RecordBatch.from_arrays(columns, names=list(types))


def _disagrees(path: Path, name: str, kind: pl.DataType) -> InputError:
    """Polars' inference read the whole file, and its own parser disagrees: never seen,
    but a value is not to be lost quietly."""
    return InputError(path, f"column {name!r} was read as {kind} but holds a value that is not")


def _cast(text: pl.Series, kind: pl.DataType) -> pl.Series:
    if kind == pl.Boolean:
        # Polars infers booleans from true/false in a few cases (True, FALSE, ...).
        lowered = text.str.to_lowercase()
        return lowered.replace_strict(["true", "false"], [True, False], default=None)
    if kind == pl.String:
        return text
    return text.cast(kind, strict=True)


# --- Parquet --------------------------------------------------------------------------------


def parquet_type(kind: pa.DataType, *, include: bool = False) -> pa.DataType:
    """The type a Parquet column of type `kind` is written as."""
    if pa.types.is_dictionary(kind):
        return parquet_type(kind.value_type, include=include)
    if include and pa.types.is_nested(kind):
        return pa.string()  # the items joined by ;
    if _is_binary(kind):
        return pa.string()
    if pa.types.is_decimal256(kind):
        if kind.precision > _WIDEST_DECIMAL:
            return pa.string()
        return pa.decimal128(kind.precision, kind.scale)
    return kind


def check_writable(path: Path, schema: pa.Schema) -> None:
    """Refuse, before anything is sent, a pass-through type Parquet cannot hold, rather
    than fail every write of the outputs after the answers were paid for."""
    for field in schema:
        try:
            pq.ParquetWriter(io.BytesIO(), pa.schema([field])).close()
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise InputError(
                path, f"column {field.name!r} ({field.type}) cannot be written to Parquet: {exc}"
            ) from exc


def from_arrow(
    path: Path, batch: pa.RecordBatch, names: Sequence[str], include: str | None
) -> pa.RecordBatch:
    """The pass-through columns of a Parquet batch, in the types of `parquet_type`."""
    if not names:
        return empty()
    columns = [_written(path, name, batch.column(name), name == include) for name in names]
    return pa.RecordBatch.from_arrays(columns, names=list(names))


def _written(path: Path, name: str, array: pa.Array, include: bool) -> pa.Array:
    kind = array.type
    if pa.types.is_dictionary(kind):
        array = array.dictionary_decode()
    target = parquet_type(kind, include=include)
    if include and pa.types.is_nested(array.type):
        series = pl.Series(values=array)
        return series.list.join(";").to_arrow().cast(pa.string())
    if target == array.type:
        return array
    try:
        return array.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        said = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        raise InputError(path, f"column {name!r} ({kind}) has no text form: {said}") from exc


def _is_binary(kind: pa.DataType) -> bool:
    return bool(
        pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_fixed_size_binary(kind)
        or pa.types.is_binary_view(kind)
    )
