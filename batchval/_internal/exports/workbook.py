"""`batchval export --format xlsx`: one workbook, a sheet per Parquet file.

Each sheet has a bold header row with an autofilter, the header and the first column
(`row_number`) frozen, column widths fitted to the header and the first rows, and a
number format on every number and date column (`number_format`): money in pounds and
pence (`£181,636.39`), dates day first (`31/01/2026`), an instant to the minute
(`25/11/2026 14:07`) under a header that says it is UTC (`valued_at (UTC)`), each still a
number or a date Excel sorts and sums, not text. Text is written as
text, never as a formula, a number or a link.

Written with xlsxwriter in its `constant_memory` mode, row by row from Arrow batches:
memory stays flat up to Excel's 1,048,575 rows. Not through polars' `write_excel`,
which turns the whole frame into Python rows and has xlsxwriter keep every cell: on
100,000 result rows with commentary it took 2 GB and 84 s, so a full sheet would not
fit in memory; this writer took 330 MB and 51 s on the same file.

What Excel cannot hold is said, not hidden: it has no time zones (a UTC instant is
written as its UTC wall time), its numbers are doubles shown to 15 digits (a decimal of
up to 15 digits is a number, a wider one its text; an integer column with a value of
more than 15 digits is text), a cell holds 32,767 characters (longer text is cut, and
the cells cut are counted in `ExportedFile.cut`, which the command prints) and a sheet
1,048,575 rows (a longer file is refused, 64).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from batchval._internal.exports.flat import (
    ExportedFile,
    Nested,
    decimals_as_doubles,
    flat_table,
    parquet_tables,
)
from batchval._internal.outcome import RunRefusedError, StopReason
from batchval._internal.place import atomic_file

# Excel's 1,048,576 rows a sheet, less the header.
XLSX_MAX_ROWS = 1_048_575
# The largest whole number Excel shows exactly (15 digits).
EXCEL_DIGITS = 999_999_999_999_999
# Rows turned into Python values at a time (a row of commentary is about 10 kB).
SHEET_BATCH_ROWS = 4_096
# What xlsxwriter's write() returns for a string it cut to Excel's 32,767 characters.
_CUT = -2
# Column widths are fitted to the header and this many first rows, up to MAX_WIDTH.
WIDTH_ROWS, MAX_WIDTH = 1_000, 60

# The number formats (Excel's codes), chosen for each column by its type, then by the
# words of its name (split on `_`) and of its description (the field's metadata).
# Money in pounds and pence (the `£` quoted, as Excel itself writes a literal in a code).
MONEY = '"£"#,##0.00'
SHARE = "0.0%"  # a fraction from 0 to 1, such as coverage or a loan-to-value
WHOLE = "0"  # other integers: counts, years, ids (no separators: 1930, not 1,930)
FRACTION = "0.00"  # other numbers
# UK dates, day first; an instant to the minute (its value keeps the seconds). Excel has
# no zones: an instant is its UTC wall time, and its column's header says so (`UTC`).
DATE, DATE_TIME, TIME = "dd/mm/yyyy", "dd/mm/yyyy hh:mm", "hh:mm:ss"
UTC_HEADER = "{name} (UTC)"
SHARE_WORDS = frozenset({"coverage", "share", "ltv", "change", "fall"})
MONEY_WORDS = frozenset(
    {
        "estimate",
        "low",
        "high",
        "typical",
        "balance",
        "value",
        "valuation",
        "amount",
        "price",
        "cost",
        "rent",
    }
)
# Words that make a number a count or a length of time, or API credits (a charge's
# `balance_after` is credits, not pounds), whatever money word is beside them.
NOT_MONEY_WORDS = frozenset(
    {"credits", "credit", "charge", "charged", "months", "days", "years", "age", "count"}
)


def number_format(field: pa.Field, money: frozenset[str] = frozenset()) -> str | None:
    """The Excel number format of a column, or None for text and booleans: dates as UK
    dates, shares as percentages, money in pounds and pence (the columns named in
    `money`, a lender's balance or valuation whatever it is called, and those whose name
    or description says money, unless they say credits or time), other numbers plainly."""
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
    if field.name in money:
        return MONEY
    # Words split on anything not a letter: `Current Balance`, `current-balance` too.
    words = set(re.findall(r"[a-z]+", field.name.casefold()))
    description = (field.metadata or {}).get(b"description", b"").decode().casefold()
    said = set(re.findall(r"[a-z]+", description))
    if not whole and (words & SHARE_WORDS or "share" in said):
        return SHARE
    if (words & MONEY_WORDS or "pounds" in said) and not (words | said) & NOT_MONEY_WORDS:
        return MONEY
    return WHOLE if whole else FRACTION


def header(field: pa.Field) -> str:
    """A column's header in the sheet: its name, and `(UTC)` after an instant's."""
    kind = field.type
    if pa.types.is_timestamp(kind) and kind.tz is not None:
        return UTC_HEADER.format(name=field.name)
    return str(field.name)


def write_workbook(
    path: Path,
    sources: Sequence[tuple[str, Path]],
    nested: Nested,
    money: frozenset[str] = frozenset(),
) -> list[ExportedFile]:
    """Every (sheet name, Parquet file) as a sheet of one workbook at `path`, atomically;
    the columns named in `money` formatted as money in every sheet."""
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
                "constant_memory": True,  # each row leaves memory once written
                # Text is written as text: a borrower called "=HYPERLINK(...)" is not a
                # formula, "007" not a number, and no text becomes a link.
                "strings_to_formulas": False,
                "strings_to_numbers": False,
                "strings_to_urls": False,
                # Excel has no time zones: instants are written as their UTC wall time.
                "remove_timezone": True,
                # A NaN or an infinity is Excel's #NUM! or #DIV/0!, not a refusal.
                "nan_inf_to_errors": True,
            },
        )
        try:
            files = [
                _write_sheet(workbook, path, name, parquet, nested, money)
                for name, parquet in sources
            ]
        finally:
            workbook.close()
    return files


def _write_sheet(
    workbook: Any, path: Path, name: str, parquet: Path, nested: Nested, money: frozenset[str]
) -> ExportedFile:
    sheet = workbook.add_worksheet(name)
    as_text = _long_integers(parquet, nested)
    row, cut, columns, formats, widths = 0, 0, [], [], []
    for table in parquet_tables(parquet, SHEET_BATCH_ROWS):
        flat = _for_excel(flat_table(table, nested, lists_as_text=True), as_text)
        if row == 0:
            columns = [header(f) for f in flat.schema]
            formats = [_format(workbook, number_format(f, money)) for f in flat.schema]
            sheet.write_row(0, 0, columns, workbook.add_format({"bold": True, "bottom": 1}))
            widths = [len(name) + 2 for name in columns]  # room for the filter's button
            row = 1
        for values in zip(*(column.to_pylist() for column in flat.columns), strict=True):
            for at, value in enumerate(values):
                if value is None:
                    continue
                if sheet.write(row, at, _cell(value), formats[at]) == _CUT:
                    cut += 1
                if row <= WIDTH_ROWS:
                    widths[at] = max(widths[at], _width(value))
            row += 1
    for at, (width, cell_format) in enumerate(zip(widths, formats, strict=True)):
        sheet.set_column(at, at, min(width, MAX_WIDTH), cell_format)
    sheet.freeze_panes(1, 1)  # the header row and the first column (row_number)
    if columns:
        sheet.autofilter(0, 0, row - 1, len(columns) - 1)
    return ExportedFile(name, path, row - 1, len(columns), cut)


def _format(workbook: Any, code: str | None) -> Any:
    return None if code is None else workbook.add_format({"num_format": code})


def _long_integers(parquet: Path, nested: Nested) -> set[str]:
    """The flat names of the integer columns with a value Excel cannot show exactly."""
    found: set[str] = set()
    for table in parquet_tables(parquet):
        flat = flat_table(table, nested, lists_as_text=False)
        for field, column in zip(flat.schema, flat.columns, strict=True):
            if pa.types.is_integer(field.type) and field.name not in found:
                low, high = (v.as_py() for v in pc.min_max(column).values())
                if max(abs(low or 0), abs(high or 0)) > EXCEL_DIGITS:
                    found.add(field.name)
    return found


def _for_excel(table: pa.Table, as_text: set[str]) -> pa.Table:
    """Decimals as doubles (or their text), and the integer columns too long for Excel's
    15 digits as text, every digit kept (1234567890123456789 would show 1234567890123450000)."""
    table = decimals_as_doubles(table)
    for i, field in enumerate(table.schema):
        if field.name in as_text:
            text = table[i].cast(pa.string())
            table = table.set_column(i, field.with_type(pa.string()), text)
    return table


def _cell(value: Any) -> Any:
    """A value as xlsxwriter writes it: what it has no cell type for, as text."""
    if isinstance(value, bool | int | float | str | dt.date | dt.time):
        return value  # dt.datetime is a dt.date
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)  # a duration, or a type a later version adds


def _width(value: Any) -> int:
    if isinstance(value, dt.datetime):
        return len(DATE_TIME)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return len(f"{value:,.2f}")
    return len(str(value)) + 1
