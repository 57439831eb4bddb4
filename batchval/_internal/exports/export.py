"""`batchval export DIR`: DIR's Parquet files as flat files for people.

The Parquet files are the contract (docs/outputs.md); these are their copies for a
person with a spreadsheet, or a tool that reads CSV or JSON. It reads whichever of
`SOURCES` DIR holds, whatever their columns (`exports/flat`: structs flattened to
`<column>_<member>` columns or dropped), and writes:

- `csv`: one file per Parquet file, `results.csv`, `problems.csv`, ... (UTF-8, a header
  row, `,` between cells, every field quoted, an empty cell for null; polars' own
  writer; lists and maps as their JSON text), that a spreadsheet cannot run
  (`inert_text`);
- `xlsx`: one workbook named after its first sheet (`results.xlsx`), a sheet per file
  (`exports/workbook`);
- `json`: JSON Lines, one file per Parquet file (`results.jsonl`): one object a row,
  with every column as a member (null included), so that it streams; lists stay arrays;
  text as it is (JSON is data for programs, not a spreadsheet).

Types are kept: integers stay integers, decimals and floats numbers, dates dates,
booleans booleans, as far as each format goes. CSV is text, so a date is its ISO text
(`2000-01-31`, read back as a date by `polars.read_csv(..., try_parse_dates=True)`) and
an instant its UTC wall time to the second (`2026-11-25 14:07:21`: `CSV_DATETIME`), which
Excel reads as a date and time (the CSV keeps ISO dates and plain numbers: only the
workbook shows pounds and UK dates);
JSON has no decimals, so a decimal of 15 digits or fewer is written as a number
(exactly: a double holds 15 digits) and a wider one as its text; JSON has no dates, so
they are ISO text. Excel's own limits are in `exports/workbook`.

Every file is written atomically (`place.files.atomic_file`), so a reader sees the old
file or the new one. Nothing in DIR is locked: each Parquet file is itself replaced
atomically by a run, so export reads a whole file even while a run writes a new one.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import enum
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from batchval._internal.exports.flat import (
    ExportedFile,
    Nested,
    decimals_as_doubles,
    flat_table,
    parquet_tables,
)
from batchval._internal.exports.workbook import write_workbook
from batchval._internal.input import MONEY_FIELDS, LenderColumnError, find_lender_columns
from batchval._internal.outcome import RunRefusedError, StopReason
from batchval._internal.place import DRY_RUN_NAME, atomic_file, make_folder
from batchval._internal.valuations import MANIFEST_NAME, input_columns, read_metadata

__all__ = ["Export", "ExportedFile", "Format", "Nested", "export_dir"]

# The Parquet files export reads, in this order (also the workbook's sheets): the run's
# two, then those of the later commands when DIR holds them.
SOURCES = (
    "results",
    "problems",
    "dry_run_problems",  # a dry run's, beside a run's (place/names.DRY_RUN_PROBLEMS_NAME)
    "street_analysis",
    "homes_with_street",
    "verify",
    "charges",
)
# A DIR holds something to export when it has one of these (a `streets` DIR has no
# results), or when it holds a dry run (`dry_run.json`): its problems are the export.
MAIN_SOURCES = ("results", "street_analysis")


class Format(enum.Enum):
    CSV = "csv"  # one CSV file per Parquet file
    XLSX = "xlsx"  # one workbook, a sheet per Parquet file
    JSON = "json"  # JSON Lines, one file per Parquet file


# Times in CSV as Excel reads them, as a date and time (a number it can sort, filter and
# format), when it opens the file: `2026-11-25 14:07:21`, an instant's UTC wall time
# (Excel has no zones) to the second. ISO 8601's `T` and offset (`+0000`) make Excel keep
# the cell as text, and fractions of a second make it show only `07:21.8`. The Parquet
# files keep the milliseconds and the zone.
CSV_DATETIME, CSV_TIME = "%Y-%m-%d %H:%M:%S", "%H:%M:%S"

# What starts a formula in Excel, LibreOffice or Google Sheets when it opens a CSV file:
# `=`, `+`, `-` and `@`, and tab and carriage return, which they skip before one (OWASP's
# "CSV Injection"). A text cell or header beginning with one is written after a `'`,
# which the spreadsheet shows as text; numbers are numbers and never start a formula.
FORMULA_START = "=+-@\t\r"
_FORMULA_START = "^([" + "".join(f"\\x{ord(c):02x}" for c in FORMULA_START) + "])"

_SUFFIX = {Format.CSV: ".csv", Format.XLSX: ".xlsx", Format.JSON: ".jsonl"}


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
            line = f"{where}: {f.rows} rows, {f.columns} columns from {f.source}.parquet"
            if f.cut:
                line += f"; {f.cut} cells cut to Excel's 32,767 characters"
            lines.append(line)
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
    dry_run = (directory / DRY_RUN_NAME).is_file()
    if not found or not (dry_run or any(name in MAIN_SOURCES for name, _ in found)):
        raise RunRefusedError(
            StopReason.REFUSED,
            f"{directory} holds no results.parquet and no dry run: nothing to export "
            "(run `batchval run INPUT --out DIR`, or with --dry-run, first)",
        )
    target = directory if out_dir is None else out_dir
    if target.exists() and not target.is_dir():
        raise RunRefusedError(StopReason.REFUSED, f"--out {target} is a file, not a directory")
    make_folder(target)
    try:
        if fmt is Format.XLSX:
            # Named after the DIR's main file (results, or street_analysis for a streets
            # DIR), whichever sheet comes first.
            # A dry run's DIR: after its problems.
            main = next((name for name, _ in found if name in MAIN_SOURCES), found[0][0])
            files = write_workbook(
                target / f"{main}.xlsx", found, nested, lender_money(directory, found)
            )
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


def lender_money(directory: Path, found: Sequence[tuple[str, Path]]) -> frozenset[str]:
    """The pass-through columns that hold a lender's money (`input.lender.MONEY_FIELDS`:
    the loan balance, the valuation at origination, ...), whatever their names: found as
    the run found them (`input.lender.find_lender_columns`), with the columns the run's
    config maps (`settings.input.columns` of manifest.json, or of a Parquet file's own
    manifest), else by their own or their usual names (`Current Balance`)."""
    configured = _configured_columns(directory, found)
    money: set[str] = set()
    for _, path in found:
        names = pq.read_schema(path).names
        lender: dict[str, str] = {}
        for columns in (configured, {}):  # a mapped column this file has not: usual names
            with contextlib.suppress(LenderColumnError):
                lender = find_lender_columns(names, columns)
                break
        money.update(lender[f] for f in MONEY_FIELDS if f in lender)
    return frozenset(money)


def _configured_columns(directory: Path, found: Sequence[tuple[str, Path]]) -> dict[str, str]:
    """The run's `input.columns` (field -> the input's column), from its manifest."""
    manifest: Any = None
    with contextlib.suppress(OSError, ValueError):
        manifest = json.loads((directory / MANIFEST_NAME).read_text(encoding="utf-8"))
    for _, path in found if not isinstance(manifest, dict) else ():
        with contextlib.suppress(OSError, ValueError, pa.ArrowException):
            manifest = read_metadata(pq.read_schema(path).metadata)
        if isinstance(manifest, dict):
            break
    return input_columns(manifest)


def _write_lines(
    path: Path, source: str, parquet: Path, fmt: Format, nested: Nested
) -> ExportedFile:
    """One Parquet file to CSV or JSON Lines, a batch at a time (one header, for CSV)."""
    rows = columns = 0
    with atomic_file(path) as file:
        for n, table in enumerate(parquet_tables(parquet)):
            flat = flat_table(table, nested, lists_as_text=fmt is Format.CSV)
            columns = flat.num_columns
            if fmt is Format.CSV:
                if n == 0:
                    _write_header(file, flat.column_names)
                frame = _frame(flat).with_columns(_utc_wall_times(flat))
                frame.with_columns(inert_text(_text_columns())).write_csv(
                    file,
                    include_header=False,
                    quote_style="always",
                    datetime_format=CSV_DATETIME,
                    time_format=CSV_TIME,
                )
            else:
                _frame(decimals_as_doubles(flat)).write_ndjson(file)
            rows += flat.num_rows
    return ExportedFile(source, path, rows, columns)


def inert_text(text: pl.Expr) -> pl.Expr:
    """Text that a spreadsheet opening a CSV file shows, never runs: `'` before a value
    that begins with a `FORMULA_START` character (`=1+1` becomes `'=1+1`, a text `-12`
    `'-12`); any other value, and null, as it is. One expression, for every text column
    of every batch and for the header's names alike.

    A column none of whose values needs it is left as it is: nearly every column of a
    run's file, and rebuilding each string costs more than writing it (a million rows
    of results: 0.3 s to look, 2 s to rebuild)."""
    needs = text.str.contains(_FORMULA_START)
    return pl.when(needs.any()).then(text.str.replace(_FORMULA_START, "'$1")).otherwise(text)


def _text_columns() -> pl.Expr:
    """Every text column, a categorical one (Arrow's dictionary of strings) as its text."""
    return pl.col(pl.String, pl.Categorical, pl.Enum).cast(pl.String)


def _write_header(file: IO[bytes], names: Sequence[str]) -> None:
    """The header row, quoted and made inert as the cells are (`inert_text`), written
    here rather than by polars so that two names made alike (`=a` beside `'=a`) do not
    collide as a frame's columns."""
    inert = pl.select(inert_text(pl.lit(pl.Series(names, dtype=pl.String))))
    text = io.StringIO()
    csv.writer(text, quoting=csv.QUOTE_ALL, lineterminator="\n").writerow(inert.to_series())
    file.write(text.getvalue().encode("utf-8"))


def _utc_wall_times(table: pa.Table) -> list[pl.Expr]:
    """Instants as their UTC wall time (`CSV_DATETIME` then writes no zone)."""
    return [
        pl.col(field.name).dt.convert_time_zone("UTC").dt.replace_time_zone(None)
        for field in table.schema
        if pa.types.is_timestamp(field.type) and field.type.tz is not None
    ]


def _frame(table: pa.Table) -> pl.DataFrame:
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)  # a Table always gives a DataFrame
    return frame
