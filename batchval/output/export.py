"""`batchval export DIR`: DIR's Parquet files as flat files for people.

The Parquet files are the contract (docs/outputs.md); this is their copy for a person
with a spreadsheet, or a tool that reads CSV or JSON. It reads whichever of `SOURCES`
DIR holds, whatever their columns (it knows no column by name, so columns that later
versions add come out too), and writes:

- `csv`: one file per Parquet file, `results.csv`, `problems.csv`, ... (UTF-8, a header
  row, `,` between cells, an empty cell for null; polars' own writer);
- `xlsx`: one workbook named after its first sheet (`results.xlsx`), a sheet per file,
  written by xlsxwriter through polars;
- `json`: JSON Lines, one file per Parquet file (`results.jsonl`): one object a row,
  with every column as a member (null included), so that it streams.

Nested columns are `flatten`ed (a struct's members become columns named
`<column>_<member>`, depth after depth: `commentary_summary`,
`commentary_area_insights_growth`, `rebuild_cost_low`), or `drop`ped (every struct, list
or map column left out). Lists and maps cannot be flattened into a fixed set of columns:
CSV and XLSX hold each as its JSON text (`["a", "b"]`), JSON as itself.

Types are kept: integers stay integers, decimals and floats numbers, dates dates,
booleans booleans, in every format the format allows. The exceptions, each forced by
the format: CSV is text, so a date is its ISO text (`2000-01-31`, read back as a date by
`polars.read_csv(..., try_parse_dates=True)`); Excel has no time zones, so a UTC instant
is written as its UTC wall time; JSON and Excel have no decimals, so a decimal of 15
digits or fewer is written as a number (exactly: a double holds 15 digits) and a wider
one as its text; Excel shows 15 digits, so an integer column with a longer value is
text there; JSON has no dates, so they are ISO text. A name already taken, ignoring
case, gets `_2` (`flat_table`).

Every file is written atomically (`output.writer.atomic_file`), so a reader sees the old
file or the new one. Nothing in DIR is locked: each Parquet file is itself replaced
atomically by a run, so export reads a whole file even while a run writes a new one.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import json
import re
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from batchval.outcome import RunRefusedError, StopReason
from batchval.output.writer import atomic_file

# The Parquet files export reads, in this order (also the workbook's sheets): the run's
# two, then those of the later commands when DIR holds them.
SOURCES = ("results", "problems", "street_analysis", "homes_with_street", "verify")
# A DIR holds something to export when it has one of these (a `streets` DIR has no results).
MAIN_SOURCES = ("results", "street_analysis")
# Excel's 1,048,576 rows a sheet, less the header.
XLSX_MAX_ROWS = 1_048_575
# Rows read and written at a time for CSV and JSON, so memory stays flat.
BATCH_ROWS = 65_536
# Fitting column widths measures every cell: skipped on bigger sheets.
AUTOFIT_ROWS = 20_000
# The largest whole number Excel shows exactly (15 digits).
EXCEL_DIGITS = 999_999_999_999_999

# The number formats of the workbook (Excel's codes), chosen for each column by its type,
# then by the words of its name (split on `_`) and of its description (field metadata).
MONEY = "#,##0"  # whole pounds with thousands separators: the value itself stays exact
SHARE = "0.0%"  # a fraction from 0 to 1, such as coverage or a loan-to-value
WHOLE = "0"  # other integers: counts, years, ids (no separators: 1930, not 1,930)
FRACTION = "0.00"  # other numbers
DATE, DATE_TIME, TIME = "yyyy-mm-dd", "yyyy-mm-dd hh:mm:ss", "hh:mm:ss"
SHARE_WORDS = frozenset({"coverage", "share", "ltv", "change"})
MONEY_WORDS = frozenset(
    {"estimate", "low", "high", "typical", "balance", "value", "price", "cost", "rent"}
)


class Format(enum.Enum):
    CSV = "csv"  # one CSV file per Parquet file
    XLSX = "xlsx"  # one workbook, a sheet per Parquet file
    JSON = "json"  # JSON Lines, one file per Parquet file


class Nested(enum.Enum):
    FLATTEN = "flatten"  # a struct's members become columns; lists become JSON text
    DROP = "drop"  # struct, list and map columns are left out


_SUFFIX = {Format.CSV: ".csv", Format.XLSX: ".xlsx", Format.JSON: ".jsonl"}


@dataclasses.dataclass(frozen=True, slots=True)
class ExportedFile:
    """One Parquet file's rows, written to `path` (in the workbook: its sheet `source`)."""

    source: str  # the Parquet file's stem: results, problems, ...
    path: Path
    rows: int
    columns: int


@dataclasses.dataclass(frozen=True, slots=True)
class Export:
    """What one `batchval export` wrote."""

    format: Format
    files: tuple[ExportedFile, ...]

    def render(self) -> str:
        """One line a file (a sheet, for a workbook)."""
        lines = []
        for f in self.files:
            where = f"{f.path} (sheet {f.source})" if self.format is Format.XLSX else f.path
            lines.append(f"{where}: {f.rows} rows, {f.columns} columns from {f.source}.parquet")
        return "\n".join(lines)


def export_dir(
    directory: Path,
    fmt: Format,
    *,
    nested: Nested = Nested.FLATTEN,
    out_dir: Path | None = None,
) -> Export:
    """Write DIR's Parquet files in `fmt` to `out_dir` (DIR itself by default).

    Raises `RunRefusedError`: `refused` (64) when DIR holds nothing to export or a sheet
    would pass Excel's row limit, `input_unusable` (65) when a Parquet file cannot be read.
    """
    found = [(name, directory / f"{name}.parquet") for name in SOURCES]
    found = [(name, path) for name, path in found if path.is_file()]
    if not any(name in MAIN_SOURCES for name, _ in found):
        raise RunRefusedError(
            StopReason.REFUSED,
            f"{directory} holds no results.parquet: nothing to export "
            "(run `batchval run INPUT --out DIR` first)",
        )
    target = directory if out_dir is None else out_dir
    if target.exists() and not target.is_dir():
        raise RunRefusedError(StopReason.REFUSED, f"--out {target} is a file, not a directory")
    target.mkdir(parents=True, exist_ok=True)
    try:
        if fmt is Format.XLSX:
            files = _write_workbook(target / f"{found[0][0]}.xlsx", found, nested)
        else:
            files = [
                _write_lines(target / f"{name}{_SUFFIX[fmt]}", name, path, fmt, nested)
                for name, path in found
            ]
    except pa.ArrowInvalid as exc:  # not Parquet, or a damaged one
        raise RunRefusedError(
            StopReason.INPUT_UNUSABLE, f"a Parquet file in {directory} cannot be read: {exc}"
        ) from exc
    return Export(fmt, tuple(files))


# --- flattening ------------------------------------------------------------------------------


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
            yield field.with_type(pa.string()), _json_text(column)
        else:
            yield field, column
    else:
        yield field, column


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


def _decimals_as_doubles(table: pa.Table) -> pa.Table:
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


def _for_excel(table: pa.Table) -> pa.Table:
    """Excel's numbers are doubles shown to 15 digits: decimals as for JSON, and an
    integer column with a value of more than 15 digits (a long account number) as text,
    since Excel would show 1234567890123456789 as 1234567890123450000."""
    table = _decimals_as_doubles(table)
    for i, field in enumerate(table.schema):
        if pa.types.is_integer(field.type) and table.num_rows:
            low, high = pc.min_max(table[i]).values()
            if max(abs(low.as_py() or 0), abs(high.as_py() or 0)) > EXCEL_DIGITS:
                table = table.set_column(
                    i, field.with_type(pa.string()), table[i].cast(pa.string())
                )
    return table


def _frame(table: pa.Table) -> pl.DataFrame:
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)  # a Table always gives a DataFrame
    return frame


# --- CSV and JSON Lines -------------------------------------------------------------------


def _write_lines(
    path: Path, source: str, parquet: Path, fmt: Format, nested: Nested
) -> ExportedFile:
    """One Parquet file to CSV or JSON Lines, a batch at a time (one header, for CSV)."""
    rows = columns = 0
    with atomic_file(path) as file:
        for n, table in enumerate(_tables(parquet)):
            flat = flat_table(table, nested, lists_as_text=fmt is Format.CSV)
            columns = flat.num_columns
            if fmt is Format.CSV:
                _frame(flat).write_csv(file, include_header=n == 0)
            else:
                _frame(_decimals_as_doubles(flat)).write_ndjson(file)
            rows += flat.num_rows
    return ExportedFile(source, path, rows, columns)


def _tables(parquet: Path) -> Iterator[pa.Table]:
    """The file's rows in tables of up to BATCH_ROWS; an empty file gives one empty table
    (so that a CSV of no rows still has its header)."""
    reader = pq.ParquetFile(parquet)
    schema = reader.schema_arrow
    empty = True
    for batch in reader.iter_batches(batch_size=BATCH_ROWS):
        empty = False
        yield pa.Table.from_batches([batch], schema=schema)
    if empty:
        yield schema.empty_table()


# --- XLSX --------------------------------------------------------------------------------


def _write_workbook(
    path: Path, sources: Sequence[tuple[str, Path]], nested: Nested
) -> list[ExportedFile]:
    """Every file as a sheet of one workbook: a header row, the header and first column
    (row_number) frozen, a number format on every number and date column."""
    # Imported here: only this format needs it.
    import xlsxwriter

    for name, parquet in sources:
        rows = pq.ParquetFile(parquet).metadata.num_rows
        if rows > XLSX_MAX_ROWS:
            raise RunRefusedError(
                StopReason.REFUSED,
                f"{name}.parquet has {rows:,} rows, more than an Excel sheet holds "
                f"({XLSX_MAX_ROWS:,}): export it with --format csv",
            )
    with atomic_file(path) as file:
        workbook = xlsxwriter.Workbook(
            file,
            {
                # Text is written as text: a borrower called "=HYPERLINK(...)" is not a
                # formula, "007" not a number, and no text becomes a link.
                "strings_to_formulas": False,
                "strings_to_numbers": False,
                "strings_to_urls": False,
                # Excel has no time zones: instants are written as their UTC wall time.
                "remove_timezone": True,
            },
        )
        try:
            with warnings.catch_warnings():
                # xlsxwriter only warns where it leaves a table or cell out (a duplicate
                # header left a sheet empty): an export that would lose data fails instead.
                warnings.filterwarnings("error", module=r"xlsxwriter\.")
                files = [
                    _write_sheet(workbook, path, name, parquet, nested) for name, parquet in sources
                ]
        finally:
            workbook.close()
    return files


def _write_sheet(
    workbook: Any, path: Path, name: str, parquet: Path, nested: Nested
) -> ExportedFile:
    flat = _for_excel(flat_table(pq.read_table(parquet), nested, lists_as_text=True))
    formats = {f.name: code for f in flat.schema if (code := number_format(f))}
    frame = _frame(flat)
    frame.write_excel(
        workbook,
        name,
        column_formats=formats,
        freeze_panes=(1, 1),  # the header row and the first column (row_number)
        autofit=frame.height <= AUTOFIT_ROWS,
    )
    return ExportedFile(name, path, frame.height, frame.width)


def number_format(field: pa.Field) -> str | None:
    """The Excel number format of a column, or None for text and booleans: dates as dates,
    shares as percentages, money as whole pounds with separators, other numbers plainly."""
    kind = field.type
    if pa.types.is_date(kind):
        return DATE
    if pa.types.is_timestamp(kind):
        return DATE_TIME
    if pa.types.is_time(kind):
        return TIME
    whole = pa.types.is_integer(kind)
    if not (whole or pa.types.is_floating(kind) or pa.types.is_decimal(kind)):
        return None
    words = set(field.name.casefold().split("_"))
    description = (field.metadata or {}).get(b"description", b"").decode().casefold()
    said = set(re.findall(r"[a-z]+", description))
    if not whole and (words & SHARE_WORDS or "share" in said):
        return SHARE
    if words & MONEY_WORDS or "pounds" in said:
        return MONEY
    return WHOLE if whole else FRACTION
