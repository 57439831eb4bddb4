"""Excel workbooks in: `.xlsx` and `.xlsm`, and `.xls` (also `.xlsb` and `.ods`), which
the same reader opens: fastexcel, over calamine (Rust).

A sheet cannot be streamed as a CSV file is: calamine parses the whole sheet before its
first row can be had, and parses it again on every call. So the sheet is read once, when
the input is opened, turned into Arrow, typed, and written to a temporary Parquet file
that the reader then streams as it streams any Parquet input (`input/reader`): disk, not
memory, pays for the rest of the run, as for a transcoded CSV, and requests, problems
and pass-through types follow Parquet's rules from there.

Its memory grows with the sheet's cells, about 95 MiB of peak RSS a million (a full
sheet, 1,048,575 rows: 770 MiB for 7 columns, 1.4 GiB for 14; make bench). openpyxl's
streaming read-only mode would hold 133 MiB for the 7 columns but takes about 7 times
as long (95 s beside 14 s on the same loaded machine): the fast reader was chosen.

- **Cell types**: fastexcel's, guessed over every row of the column; a column that mixes
  numbers and text is text, each number written as it reads (3.0 as "3"). Then, as a
  CSV's inference would read the same column: a number column whose every value is whole
  (Excel keeps every number as a double) is Int64, and a date-time column whose every
  value is at midnight is a date. Request fields are cast to text from these types, as a
  Parquet file's are (a bedrooms cell 3.0 is `3`, validated as 3).
- **Formulas** are read as the values Excel last saved for them, never computed here; a
  cell holding an error (`#N/A`, `#DIV/0!`) reads as empty.
- **Rows**: a row with no value at all (every cell empty or spaces: formatting that
  Excel keeps below the data, say) is skipped and not counted, as a CSV's blank line is;
  so data row N is the sheet's row N + 1 when no blank row comes before it.
- **Header**: the sheet's first row that holds a value. A blank header cell names its
  column `column_N` (N its 1-based position), as in a CSV; a repeated header is given a
  suffix by the reader (`Balance`, `Balance_1`), where a CSV is refused.
- An empty sheet, or a sheet with a header but no data row, is refused (exit 65), and so
  is a sheet the workbook does not have, naming the sheets it has.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import fastexcel
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from batchval.input.options import InputError
from batchval.input.sniff import first_line

# The temporary file's row groups: what the Parquet reader holds at once is one of them.
ROW_GROUP_ROWS = 65_536
_UNNAMED = re.compile(r"__UNNAMED__(\d+)")
_WHOLE_LIMIT = 2.0**53  # beyond, a double no longer holds every integer
# fastexcel warns through the standard logging (unconfigured here, so on stderr) of every
# column with no value at all, whose type it cannot guess: such a column is text here
# anyway (`_kept`), and a person has nothing to do about it.
_QUIET = logging.getLogger("fastexcel.types.dtype")


def sheet_to_parquet(path: Path, sheet: str | None, target: Path) -> tuple[str, str]:
    """Write the sheet (the first when `sheet` is None) of the workbook at `path` to a
    Parquet file at `target`, typed and without blank rows; returns the sheet's name and,
    when the first was read by default, the workbook's other sheets as a hint to add to a
    fault in it (else ""). Raises InputError when the workbook or the sheet cannot be used."""
    try:
        workbook = fastexcel.read_excel(path)
    except fastexcel.FastExcelError as exc:
        raise InputError(
            path,
            "is a zip archive or an OLE file but not a workbook that can be read "
            f"(xlsx, xlsm, xls, xlsb, ods): {_said(exc)}",
        ) from exc
    names = list(workbook.sheet_names)
    if not names:
        raise InputError(path, "is a workbook with no sheet")
    name = names[0] if sheet is None else sheet
    if name not in names:
        listed = ", ".join(repr(n) for n in names)
        raise InputError(path, f"has no sheet {name!r}; its sheets: {listed} (--sheet NAME)")
    hint = ""
    if sheet is None and len(names) > 1:
        others = ", ".join(repr(n) for n in names[1:])
        hint = f" (the first sheet; the others: {others}; --sheet NAME reads another)"
    _QUIET.setLevel(logging.ERROR)
    try:
        loaded = workbook.load_sheet(name, schema_sample_rows=None, dtype_coercion="coerce")
        if not loaded.available_columns():
            raise InputError(path, f"sheet {name!r}{hint} is empty")
        if loaded.height == 0:
            raise InputError(path, f"sheet {name!r}{hint} has a header but no data rows")
        batch = loaded.to_arrow()
    except fastexcel.FastExcelError as exc:
        raise InputError(path, f"sheet {name!r}{hint} cannot be read: {_said(exc)}") from exc
    # The sheet as calamine parsed it is the largest thing held: let it go first.
    del loaded, workbook
    table = _typed(pa.Table.from_batches([batch]))
    del batch
    table = _without_blank_rows(table)
    if table.num_rows == 0:
        raise InputError(path, f"sheet {name!r}{hint} has a header but no data rows")
    pq.write_table(table, target, row_group_size=ROW_GROUP_ROWS)
    return name, hint


def _said(exc: BaseException) -> str:
    return first_line(exc).removeprefix("calamine error: ")


def _typed(table: pa.Table) -> pa.Table:
    """Column names as a CSV's header gives them, and the types a CSV's inference would
    give the same values: whole numbers as integers, midnights as dates; a column with no
    value at all is text."""
    names: list[str] = []
    columns: list[pa.ChunkedArray] = []
    for name, column in zip(table.column_names, table.columns, strict=True):
        unnamed = _UNNAMED.fullmatch(name)
        names.append(f"column_{int(unnamed.group(1)) + 1}" if unnamed else name)
        columns.append(_kept(column))
    return pa.table(columns, names=names)


def _kept(column: pa.ChunkedArray) -> pa.ChunkedArray:
    kind = column.type
    if pa.types.is_null(kind):
        return column.cast(pa.string())
    if pa.types.is_floating(kind) and column.null_count < len(column):
        whole = pc.all(pc.equal(column, pc.floor(column))).as_py()
        small = pc.max(pc.abs(column)).as_py() < _WHOLE_LIMIT
        return column.cast(pa.int64()) if whole and small else column
    if pa.types.is_timestamp(kind) and column.null_count < len(column):
        midnight = pc.all(pc.equal(column, pc.floor_temporal(column, unit="day"))).as_py()
        return column.cast(pa.date32()) if midnight else column
    return column


def _without_blank_rows(table: pa.Table) -> pa.Table:
    """The rows that hold a value: a row whose every cell is empty or spaces goes."""
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    blank = pl.all_horizontal(
        pl.col(name).is_null() | pl.col(name).str.contains(r"^\s*$")
        if frame.schema[name] == pl.String
        else pl.col(name).is_null()
        for name in frame.columns
    )
    flags = frame.select(blank.alias("blank")).get_column("blank")
    if not flags.any():
        return table
    return table.filter(pa.array((~flags).to_arrow()))
