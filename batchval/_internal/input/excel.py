"""Excel workbooks in: `.xlsx` and `.xlsm`, and `.xls` (also `.xlsb` and `.ods`), which
the same reader opens: fastexcel, over calamine (Rust).

A sheet cannot be streamed as a CSV file is: calamine parses the whole sheet before its
first row can be had, and parses it again on every call. So the sheet is read once, when
the input is opened, turned into Arrow, typed, and written to a temporary Parquet file
that the reader then streams as it streams any Parquet input (`input/reader`): disk, not
memory, pays for the rest of the run, as for a transcoded CSV, and requests, problems
and pass-through types follow Parquet's rules from there.

Its memory grows with the sheet's cells, about 95 MiB of peak RSS a million (a full
sheet, 1,048,575 rows: 770 MiB for 7 columns, 1.4 GiB for 14; make bench). So a sheet of
more than `CELL_LIMIT` cells (8 million, by the sheet's own dimension bounded by its
XML's size, `_cells`: 7 columns at full length) is streamed instead, by openpyxl's
read-only reader, twice (once for its header and types, once to write it), in memory
that does not grow with the sheet but far more slowly: 200,000 rows of 14 columns took
52 s at a 222 MiB peak streamed, 1.8 s at 351 MiB whole (2 loaded cores). It gives the
same table (tested: every behaviour below, both ways).
Only `.xlsx` and `.xlsm` are streamed (openpyxl's formats).

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
- **Bounds** (`_Bounds`): before calamine opens an .xlsx or .xlsm workbook (it reads
  every shared string then), its shared strings and the sheet's XML are checked from the
  archive's directory and streamed, never inflated whole: over `SHARED_STRINGS_LIMIT` or
  `SHEET_LIMIT` unpacked, or a text over `TEXT_LIMIT` characters, is refused (65).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import html
import itertools
import logging
import re
import zipfile
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import fastexcel
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from batchval._internal.input.layout import (
    HEADER_SEARCH_LINES,
    LINE,
    Header,
    find_header,
    reporting_date,
)
from batchval._internal.input.options import InputError
from batchval._internal.input.sniff import first_line

# The temporary file's row groups: what the Parquet reader holds at once is one of them.
ROW_GROUP_ROWS = 65_536
_UNNAMED = re.compile(r"__UNNAMED__(\d+)")
_WHOLE_LIMIT = 2.0**53  # beyond, a double no longer holds every integer
# fastexcel warns through the standard logging (unconfigured here, so on stderr) of every
# column with no value at all, whose type it cannot guess: such a column is text here
# anyway (`_kept`), and a person has nothing to do about it.
_QUIET = logging.getLogger("fastexcel.types.dtype")


def sheet_to_parquet(
    path: Path,
    sheet: str | None,
    target: Path,
    *,
    header_row: int | None = None,
    configured: Mapping[str, str] | None = None,
) -> tuple[str, str, Header]:
    """Write the sheet (the first when `sheet` is None) of the workbook at `path` to a
    Parquet file at `target`, typed and without blank rows, each row with its sheet line
    (`layout.LINE`); returns the sheet's name, when the first was read by
    default the workbook's other sheets as a hint to add to a fault in it (else ""), and
    where its header is: the line `header_row` states, else the line found
    (`layout.find_header`, knowing the columns the config maps, `configured`), else the
    first line that holds a value. Raises InputError when the workbook or the sheet cannot
    be used, and NoTableError when the first sheet, read by default, holds no table and
    others do (a cover sheet)."""
    configured = configured or {}
    bounds = _Bounds(path)
    bounds.check_strings()  # calamine reads every shared string when it opens the book
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
    bounds.check_sheet(name)
    cells = _cells(path, name)
    if cells is not None and cells > CELL_LIMIT:  # streamed: see CELL_LIMIT
        values = _values(path, name)  # read on for the types, past the header's search
        header, cells_of, table, head = _streamed_header(
            values, path, name, hint, header_row, configured
        )
        if not table and sheet is None and len(names) > 1:
            values.close()
            _refuse_cover(path, workbook, name, names, configured)
        del workbook
        rows = itertools.chain(head, values)  # streamed on, never held
        _stream_to_parquet(path, name, target, hint, header, cells_of, rows)
        return name, hint, header
    _QUIET.setLevel(logging.ERROR)
    first_line = _first_line(path, name)
    try:
        if header_row is not None:
            if header_row < first_line:
                raise InputError(
                    path,
                    f"sheet {name!r}: header row {header_row} is above the sheet's first "
                    f"line that holds a value (line {first_line})",
                )
            above = header_row - first_line
            banner: list[list[str | None]] = []
            if above:
                head = workbook.load_sheet(name, header_row=0, n_rows=above - 1, **_LOAD)
                banner = _head_rows(head)[:above]
            reporting = reporting_date(list(enumerate(banner, start=first_line)))
            header = Header(header_row, stated=True, first_line=first_line, reporting=reporting)
            loaded = workbook.load_sheet(name, header_row=header_row - first_line, **_LOAD)
        else:
            loaded = workbook.load_sheet(name, header_row=0, **_LOAD)
            found = _found_header(loaded, configured)
            if found is None and sheet is None and len(names) > 1:
                _refuse_cover(path, workbook, name, names, configured)
            reporting = None
            if found:
                banner = _head_rows(loaded)[:found]
                reporting = reporting_date(list(enumerate(banner, start=first_line)))
            header = Header(
                first_line + (found or 0),
                found=bool(found),
                first_line=first_line,
                reporting=reporting,
            )
            if found:  # below the first line: read again, typed from the rows below it
                loaded = workbook.load_sheet(name, header_row=found, **_LOAD)
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
    table = _without_blank_rows(table, header.line + 1)
    if table.num_rows == 0:
        raise InputError(path, f"sheet {name!r}{hint} has a header but no data rows")
    pq.write_table(table, target, row_group_size=ROW_GROUP_ROWS)
    return name, hint, header


# How every sheet is loaded: each column's type guessed over all its rows, a mix is text.
_LOAD: dict[str, Any] = {"schema_sample_rows": None, "dtype_coercion": "coerce"}


class NoTableError(InputError):
    """The workbook's first sheet holds no table, and `sheets` do (a cover sheet first)."""

    def __init__(self, path: Path, first: str, sheets: list[str]) -> None:
        listed = ", ".join(repr(n) for n in sheets)
        super().__init__(
            path,
            f"its first sheet {first!r} holds no table (a cover sheet?); the sheets that "
            f"do: {listed}; name one with --sheet NAME (input.sheet in the config)",
        )
        self.first, self.sheets = first, sheets


def _head_rows(loaded: Any) -> list[list[str | None]]:
    """A loaded sheet's header line and the lines below it, as text, for `find_header`."""
    named = [column.name for column in loaded.available_columns()]
    head: list[str | None] = [None if _UNNAMED.fullmatch(n) else n for n in named]
    frame = pl.from_arrow(loaded.to_arrow().slice(0, HEADER_SEARCH_LINES))
    assert isinstance(frame, pl.DataFrame)
    rows = frame.select(pl.all().cast(pl.String)).rows()
    return [head, *[list(row) for row in rows]]


def _found_header(loaded: Any, configured: Mapping[str, str]) -> int | None:
    """The header's place among a sheet's lines (0: the first that holds a value, as
    loaded), or None when no line looks like one."""
    if not loaded.available_columns():
        return None
    return find_header(_head_rows(loaded), configured)


def _refuse_cover(
    path: Path, workbook: Any, first: str, names: list[str], configured: Mapping[str, str]
) -> None:
    """NoTableError when another sheet of the workbook holds a table; else nothing (the
    first sheet is read as it is, and a missing column is said of it)."""
    tables = []
    for other in names[1:]:
        _Bounds(path).check_sheet(other)
        try:
            loaded = workbook.load_sheet(other, header_row=0, **_LOAD)
        except fastexcel.FastExcelError:
            continue
        if _found_header(loaded, configured) is not None:
            tables.append(other)
    if tables:
        raise NoTableError(path, first, tables)


def _first_line(path: Path, name: str) -> int:
    """The sheet line of the first cell that holds a value, where calamine's rows begin:
    read from the sheet's XML (an .xlsx or .xlsm); 1 for the other formats, whose lines
    are then counted from the first that holds a value."""
    if path.suffix.lower() not in _STREAMED:
        return 1
    try:
        with zipfile.ZipFile(path) as archive:
            part = _sheet_part(archive, name)
            if part is None:
                return 1
            with archive.open(part) as xml:
                for _, element in ElementTree.iterparse(xml):
                    if element.tag == f"{{{_MAIN}}}c" and _holds_value(element):
                        found = re.match(r"[A-Z]+(\d+)", element.get("r") or "")
                        return int(found.group(1)) if found else 1
                    if element.tag == f"{{{_MAIN}}}row":
                        element.clear()
    except (OSError, KeyError, zipfile.BadZipFile, ElementTree.ParseError):
        return 1
    return 1


def _holds_value(cell: ElementTree.Element) -> bool:
    value = cell.find(f"{{{_MAIN}}}v")
    inline = cell.find(f"{{{_MAIN}}}is")
    return (value is not None and bool(value.text)) or (
        inline is not None and bool("".join(inline.itertext()).strip())
    )


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


def _without_blank_rows(table: pa.Table, first: int) -> pa.Table:
    """The rows that hold a value, each with its sheet line (`layout.LINE`; the first
    row's is `first`): a row whose every cell is empty or spaces goes."""
    table = _with_line(table, pa.array(range(first, first + table.num_rows), pa.int64()))
    frame = pl.from_arrow(table.drop_columns([LINE]))
    assert isinstance(frame, pl.DataFrame)
    held = frame.select(
        pl.any_horizontal(
            pl.col(name).cast(pl.String).str.strip_chars().fill_null("") != ""
            for name in frame.columns
        )
    ).to_series()
    return table if held.all() else table.filter(held.to_arrow())


def _with_line(table: pa.Table, lines: Sequence[int] | pa.Array) -> pa.Table:
    """The table with each row's sheet line (`layout.LINE`)."""
    return table.append_column(LINE, pa.array(lines, pa.int64()))


# --- bounds: what a small file may not make batchval read ------------------------------------

TEXT_LIMIT = 32_767  # Excel's own limit on a cell's characters
SHARED_STRINGS_LIMIT = 256 * 1024 * 1024  # unpacked: the most a workbook's strings may take
SHEET_LIMIT = 2 * 1024 * 1024 * 1024  # unpacked: a sheet's XML (a full Excel sheet is less)
_SCAN_CHUNK = 1 << 20
_MOST_BYTES = 10 * (TEXT_LIMIT + 1)  # a character takes at most 10 bytes (`&#x10FFFF;`)
_ROW_AT = re.compile(rb'<(?:\w+:)?row\b[^>]*?\br="(\d+)"')


class _Bounds:
    """A workbook (`.xlsx`, `.xlsm`: a zip holding `xl/workbook.xml`) checked before
    calamine reads it, from the archive's directory and its parts streamed a MiB at a
    time, never inflated whole: its shared strings and a sheet's XML no larger unpacked
    than `SHARED_STRINGS_LIMIT` and `SHEET_LIMIT`, and no text in them over `TEXT_LIMIT`
    characters (a 1 MB file can hold a string of a GiB). Each refusal is an InputError
    (65) naming what is too large and, for a text, its line. Other formats pass."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _archive(self) -> zipfile.ZipFile | None:
        try:
            archive = zipfile.ZipFile(self.path)
        except (OSError, zipfile.BadZipFile):
            return None  # an .xls, or no zip: fastexcel says what it is
        if "xl/workbook.xml" not in archive.namelist():
            archive.close()
            return None
        return archive

    def check_strings(self) -> None:
        archive = self._archive()
        if archive is None:
            return
        with archive:
            part = "xl/sharedStrings.xml"
            if part not in archive.namelist():
                return
            self._size(archive, part, SHARED_STRINGS_LIMIT, "its shared strings take")
            found = self._long_text(archive, part)
            if found is None:
                return
            where = self._used_at(archive, _sheet_parts(archive), found.items - 1)
        raise InputError(
            self.path,
            f"holds a text of {found.length:,} characters or more{where}, more than "
            f"Excel's {TEXT_LIMIT:,} a cell: not a workbook Excel wrote",
        )

    def check_sheet(self, name: str) -> None:
        archive = self._archive()
        if archive is None:
            return
        with archive:
            try:
                part = _sheet_part(archive, name)
            except (KeyError, ElementTree.ParseError):
                return
            if part is None or part not in archive.namelist():
                return
            self._size(archive, part, SHEET_LIMIT, f"sheet {name!r} takes")
            found = self._long_text(archive, part)
        if found is not None:
            line = f" on line {found.row}" if found.row else ""
            raise InputError(
                self.path,
                f"sheet {name!r} holds a text of {found.length:,} characters or more{line}, "
                f"more than Excel's {TEXT_LIMIT:,} a cell: not a workbook Excel wrote",
            )

    def _size(self, archive: zipfile.ZipFile, part: str, most: int, what: str) -> None:
        size = archive.getinfo(part).file_size
        if size > most:
            raise InputError(
                self.path,
                f"{what} {size / 2**20:,.0f} MiB unpacked, more than the "
                f"{most / 2**20:,.0f} MiB batchval reads of a workbook; save the sheet as CSV",
            )

    def _long_text(self, archive: zipfile.ZipFile, part: str) -> _Long | None:
        """The first text of `part` over TEXT_LIMIT characters, or None."""
        long = _Long()
        tail = b""  # an unfinished run: from the last `<` read
        try:
            with archive.open(part) as stream:
                while chunk := stream.read(_SCAN_CHUNK):
                    data = tail + chunk
                    for start, end in _long_runs(data):  # each after a `<`
                        length = _characters(data[start : min(end, start + _MOST_BYTES)])
                        if length > TEXT_LIMIT or end - start > _MOST_BYTES:
                            return long.after(data[:start], max(length, TEXT_LIMIT + 1))
                    cut = data.rfind(b"<")
                    tail = data[cut:] if cut >= 0 else data
                    done = data[: len(data) - len(tail)]
                    if len(tail) > _MOST_BYTES:  # a run with no tag in it: too long
                        return long.after(done, TEXT_LIMIT + 1)
                    long = long.after(done, 0)
        except (OSError, zipfile.BadZipFile, EOFError) as exc:
            raise InputError(self.path, f"is a damaged workbook ({part}): {exc}") from exc
        return None

    def _used_at(self, archive: zipfile.ZipFile, sheets: Mapping[str, str], index: int) -> str:
        """` (on line L of sheet 'S')`: where a shared string is first used (`sheets`: each
        sheet's part -> its name), or ` (shared string N)`."""
        cell = re.compile(
            rb'<(?:\w+:)?c\b[^>]*?\br="[A-Z]+(\d+)"[^>]*?\bt="s"[^>]*>\s*<(?:\w+:)?v>%d<' % index
        )
        for part, name in sheets.items():
            tail = b""
            with archive.open(part) as stream:
                while chunk := stream.read(_SCAN_CHUNK):
                    data = tail + chunk
                    found = cell.search(data)
                    if found:
                        return f" (on line {int(found.group(1))} of sheet {name!r})"
                    tail = data[-4096:]
        return f" (shared string {index + 1})"


@dataclasses.dataclass(frozen=True, slots=True)
class _Long:
    """Where a part's scan is: the shared-string items and the last row begun so far, and
    (once found) the length of the text over the limit."""

    items: int = 0
    row: int | None = None
    length: int = 0

    def after(self, read: bytes, length: int) -> _Long:
        """Past `read` (whole tags), and `length` once found."""
        row = self.row
        begun = max(read.rfind(b"<row "), read.rfind(b":row "))
        if begun >= 0:
            found = _ROW_AT.match(read, read.rfind(b"<", 0, begun + 1))
            row = int(found.group(1)) if found else row
        items = read.count(b"<si>") + read.count(b"<si ")
        return _Long(self.items + items, row, length)


def _long_runs(data: bytes) -> Iterator[tuple[int, int]]:
    """Where `data` holds more than TEXT_LIMIT bytes between a `<` and the next (or its
    end): each run's start (after the `<`) and end, found by numpy over the bytes."""
    tags = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("<"))
    if len(tags) == 0:
        return
    ends = np.append(tags[1:], len(data))
    for at in np.flatnonzero(ends - tags - 1 > TEXT_LIMIT):
        yield int(tags[at]) + 1, int(ends[at])


def _characters(run: bytes) -> int:
    """The characters of an XML text run (its tag's end cut off, entities read)."""
    text = run.split(b">", 1)[1] if b">" in run[:64] else run
    return len(html.unescape(text.decode("utf-8", "replace")))


# --- a wide sheet: streamed -----------------------------------------------------------------

# Cells (rows x columns, as the sheet's own dimension says) that fastexcel reads at once:
# beyond, an .xlsx or .xlsm sheet is streamed with openpyxl instead, in memory that does
# not grow with the sheet (about 95 MiB a million cells would pass the reader's 1 GB).
CELL_LIMIT = 8_000_000
_HEAD_BYTES = 64 * 1024  # a sheet's <dimension> comes before its rows
_CELL_BYTES = 12  # the least XML a cell that holds a value takes: `<c r="A1"><v>1</v></c>`
_DIMENSION = re.compile(r'<(?:\w+:)?dimension ref="([A-Z]+)(\d+)(?::([A-Z]+)(\d+))?"')
_MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_RELATIONSHIPS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_ERRORS = frozenset({"#N/A", "#DIV/0!", "#VALUE!", "#REF!", "#NAME?", "#NUM!", "#NULL!"})
_STREAMED = (".xlsx", ".xlsm")


def _cells(path: Path, name: str) -> int | None:
    """The sheet's cells: by its own dimension (rows x columns, the `<dimension ref>` that
    openpyxl's read-only `max_row` and `max_column` read too), but never more than its
    XML's size can hold (`_CELL_BYTES` a cell: a dimension may claim A1:XFD1048576 over
    three rows); by that size alone when it has no dimension; None when the workbook is
    not one openpyxl streams. Read from the sheet's XML head and the archive's directory
    alone: opening the workbook with openpyxl first loads every shared string (5 s for
    300,000 rows), at every invocation."""
    if path.suffix.lower() not in _STREAMED:
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            part = _sheet_part(archive, name)
            if part is None:
                return None
            held = archive.getinfo(part).file_size // _CELL_BYTES
            with archive.open(part) as xml:
                head = xml.read(_HEAD_BYTES).decode("utf-8", "replace")
    except (OSError, KeyError, zipfile.BadZipFile, ElementTree.ParseError):
        return None  # fastexcel has read it: a refusal here would be the wrong one
    found = _DIMENSION.search(head)
    if found is None:
        return held
    first_column, first_row, last_column, last_row = found.groups()
    rows = int(last_row or first_row) - int(first_row) + 1
    columns = _column_number(last_column or first_column) - _column_number(first_column) + 1
    return min(rows * columns, held)


def _sheet_part(archive: zipfile.ZipFile, name: str) -> str | None:
    """The archive's path of the sheet named `name` (by the workbook and its rels)."""
    book = ElementTree.fromstring(archive.read("xl/workbook.xml"))
    rel = next(
        (
            sheet.get(f"{{{_RELATIONSHIPS}}}id")
            for sheet in book.iter(f"{{{_MAIN}}}sheet")
            if sheet.get("name") == name
        ),
        None,
    )
    links = ElementTree.fromstring(archive.read("xl/_rels/workbook.xml.rels"))
    target = next((link.get("Target") for link in links if link.get("Id") == rel), None)
    if rel is None or target is None:
        return None
    return target.lstrip("/") if target.startswith("/") else f"xl/{target}"


@dataclasses.dataclass(frozen=True, slots=True)
class Hidden:
    """What a sheet hides: its rows' lines (hidden, or filtered out: Excel writes both as
    hidden), and its columns' positions (1 for column A)."""

    lines: tuple[int, ...] = ()
    columns: tuple[int, ...] = ()
    first_column: int = 1  # the sheet's used range begins there (its `<dimension>`)


_TAG = re.compile(rb"<(?:\w+:)?(row|col|dimension)\b([^>]*)>")
_ATTRIBUTE = re.compile(rb'\b(r|min|max|hidden|ref)="([^"]*)"')
_SCAN_BYTES = 1 << 20


def hidden_parts(path: Path, name: str) -> Hidden:
    """The rows and columns an .xlsx or .xlsm sheet hides, read from its XML as a stream
    of bytes (a tag at a time, never the sheet whole); none for the other formats, whose
    files do not say."""
    if path.suffix.lower() not in _STREAMED:
        return Hidden()
    lines: list[int] = []
    columns: list[int] = []
    first_column = 1
    try:
        with zipfile.ZipFile(path) as archive:
            part = _sheet_part(archive, name)
            if part is None:
                return Hidden()
            with archive.open(part) as xml:
                tail = b""
                while chunk := xml.read(_SCAN_BYTES):
                    text = tail + chunk
                    cut = text.rfind(b"<")
                    text, tail = text[:cut], text[cut:]
                    for tag, attributes in _TAG.findall(text):
                        said = dict(_ATTRIBUTE.findall(attributes))
                        if tag == b"dimension":
                            found = re.match(rb"([A-Z]+)", said.get(b"ref", b""))
                            if found:
                                first_column = _column_number(found.group(1).decode())
                        elif said.get(b"hidden") in (b"1", b"true"):
                            if tag == b"row" and said.get(b"r", b"").isdigit():
                                lines.append(int(said[b"r"]))
                            elif tag == b"col":
                                low, high = int(said.get(b"min", 0)), int(said.get(b"max", 0))
                                columns.extend(range(low, min(high, low + 16_384) + 1))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, ElementTree.ParseError):
        return Hidden()  # fastexcel has read it: what it hides is not known
    return Hidden(tuple(lines), tuple(sorted(set(columns))), first_column)


def _sheet_parts(archive: zipfile.ZipFile) -> dict[str, str]:
    """Each sheet's part in the archive -> the sheet's name, in the workbook's order."""
    try:
        book = ElementTree.fromstring(archive.read("xl/workbook.xml"))
        names = [s.get("name") or "" for s in book.iter(f"{{{_MAIN}}}sheet")]
        parts = {_sheet_part(archive, name): name for name in names}
    except (KeyError, ElementTree.ParseError):
        return {}  # calamine will say what is wrong with the workbook
    return {part: name for part, name in parts.items() if part in archive.namelist()}


def _column_number(letters: str) -> int:
    """`A` is 1, `Z` 26, `AA` 27."""
    number = 0
    for letter in letters:
        number = number * 26 + ord(letter) - ord("A") + 1
    return number


def _values(path: Path, name: str) -> Generator[tuple[int, list[Any]], None, None]:
    """The sheet's rows that hold a value, each with its line and its cells (an error cell
    empty). openpyxl's read-only rows begin at line 1, a row for every line."""
    import openpyxl  # only for a sheet too large to read whole: not on every start-up

    book = openpyxl.load_workbook(path, read_only=True, data_only=True)
    try:
        sheet = book[name]
        # Its rows as they are, not padded to the dimension it declares (see `_cells`).
        sheet.reset_dimensions()
        for line, row in enumerate(sheet.iter_rows(values_only=True), start=1):
            cells = [None if isinstance(c, str) and c in _ERRORS else c for c in row]
            if any(c is not None and not (isinstance(c, str) and not c.strip()) for c in cells):
                yield line, cells
    finally:
        book.close()


def _streamed_header(
    values: Iterator[tuple[int, list[Any]]],
    path: Path,
    name: str,
    hint: str,
    header_row: int | None,
    configured: Mapping[str, str],
) -> tuple[Header, list[Any], bool, list[tuple[int, list[Any]]]]:
    """Where a streamed sheet's header is (as `sheet_to_parquet` says), its cells, whether
    a line looks like a header (the sheet holds a table), and the lines taken from
    `values` (the sheet's, `_values`) to find it."""
    head = list(itertools.islice(values, HEADER_SEARCH_LINES + _BELOW_READ))
    if not head:
        raise InputError(path, f"sheet {name!r}{hint} is empty")
    first = head[0][0]
    texts = [[_text(c) for c in cells] for _, cells in head]
    if header_row is not None:
        for at, (line, cells) in enumerate(head):
            if line == header_row:
                banner = [(n, t) for (n, _), t in zip(head[:at], texts, strict=False)]
                header = Header(
                    line, stated=True, first_line=first, reporting=reporting_date(banner)
                )
                return header, cells, True, head
        raise InputError(path, f"sheet {name!r}: line {header_row} holds no header")
    found = find_header(texts, configured)
    line, cells = head[found or 0]
    banner = [(n, t) for (n, _), t in zip(head[: found or 0], texts, strict=False)]
    header = Header(line, found=bool(found), first_line=first, reporting=reporting_date(banner))
    return header, cells, found is not None, head


_BELOW_READ = 20  # the lines read below the last a header is looked for on


def _kind(values: set[type]) -> str:
    """A column's type from the Python types of its values, as fastexcel guesses it."""
    if not values:
        return "text"
    if values <= {int, float}:
        return "number"
    if values <= {dt.datetime}:
        return "datetime"
    if values <= {bool}:
        return "bool"
    return "text"


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _stream_to_parquet(
    path: Path,
    name: str,
    target: Path,
    hint: str,
    found: Header,
    header: list[Any],
    values: Iterable[tuple[int, list[Any]]],
) -> None:
    """The sheet read twice by openpyxl's streaming reader: once for its header (found in
    the first lines of `values`) and each column's type (over every row of `values`, as
    fastexcel guesses them), once to write it in row groups. Slower (about 7 times), in
    memory that does not grow with the sheet."""
    rows = (cells for line, cells in values if line > found.line)
    width = len(header)
    seen: list[set[type]] = [set() for _ in range(width)]
    whole = [True] * width
    midnight = [True] * width
    count = 0
    for row in rows:
        count += 1
        for i, cell in enumerate(row[:width]):
            if cell is None:
                continue
            if isinstance(cell, str) and not cell.strip():
                continue
            seen[i].add(dt.datetime if isinstance(cell, dt.date) else type(cell))
            if isinstance(cell, float) and not (cell.is_integer() and abs(cell) < _WHOLE_LIMIT):
                whole[i] = False
            if isinstance(cell, dt.datetime) and cell.time() != dt.time(0):
                midnight[i] = False
    if count == 0:
        raise InputError(path, f"sheet {name!r}{hint} has a header but no data rows")
    names = _header_names(header)
    kinds = [_kind(s) for s in seen]
    types: list[pa.DataType] = []
    for kind, is_whole, at_midnight in zip(kinds, whole, midnight, strict=True):
        if kind == "number":
            types.append(pa.int64() if is_whole else pa.float64())
        elif kind == "datetime":
            types.append(pa.date32() if at_midnight else pa.timestamp("ms"))
        elif kind == "bool":
            types.append(pa.bool_())
        else:
            types.append(pa.string())
    schema = pa.schema(list(zip(names, types, strict=True)))
    hidden = pa.schema([*schema, (LINE, pa.int64())])
    with pq.ParquetWriter(target, hidden) as writer:
        chunk: list[list[Any]] = []
        lines: list[int] = []
        for line, row in _values(path, name):
            if line <= found.line:
                continue
            chunk.append([*row[:width], *([None] * (width - len(row)))])
            lines.append(line)
            if len(chunk) == ROW_GROUP_ROWS:
                writer.write_table(_with_line(_chunk_table(chunk, schema, kinds), lines))
                chunk, lines = [], []
        if chunk:
            writer.write_table(_with_line(_chunk_table(chunk, schema, kinds), lines))


def _chunk_table(rows: list[list[Any]], schema: pa.Schema, kinds: list[str]) -> pa.Table:
    columns = []
    for i, (field, kind) in enumerate(zip(schema, kinds, strict=True)):
        values = [row[i] for row in rows]
        if kind == "text":
            values = [_text(v) for v in values]
        elif field.type == pa.date32():
            values = [v.date() if isinstance(v, dt.datetime) else v for v in values]
        elif field.type == pa.int64():
            values = [None if v is None else int(v) for v in values]
        columns.append(pa.array(values, field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _header_names(header: list[Any]) -> list[str]:
    """The header's names as fastexcel gives them: a blank cell `column_N` (N its 1-based
    position), a repeated name with a suffix (`Balance`, `Balance_1`)."""
    names: list[str] = []
    for position, cell in enumerate(header, start=1):
        text = _text(cell)
        name = f"column_{position}" if text is None or not text.strip() else text
        if name in names:
            n = 1
            while f"{name}_{n}" in names:
                n += 1
            name = f"{name}_{n}"
        names.append(name)
    return names
