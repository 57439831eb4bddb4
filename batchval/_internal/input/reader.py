"""Opening an input file and streaming it, validated, in batches.

`open_input` reads only the head of the file (and a Parquet footer; a CSV whose
encoding is not given is also scanned once, a second a GiB, and a workbook's sheet read
whole): enough to know that the file can be used, so that a bad file fails in seconds,
not after a day of valuations. `InputSource.batches` then streams the rows with memory
that does not grow with the file:

- CSV, plain or gzip (found by its magic bytes, not its name): pyarrow's streaming CSV
  reader, a block at a time, every column read as text as polars reads it
  (`input/stream`: polars' own scan holds the whole file in memory). Where pyarrow and
  polars may part ways (a row with fewer fields than the header, which polars pads with
  nulls; a quote mark inside a value; any other fault), polars' scan
  (`scan_csv(...).collect_batches`) reads on from the row pyarrow stopped at, so such a
  file reads, or fails, as it always did; a file whose head ends a line with a bare
  carriage return is read by polars throughout. The
  file is transcoded first when it is not UTF-8, as a stream, to a temporary UTF-8 file
  (disk, not memory, pays for it). Its encoding is the one given (`--encoding`,
  `input.encoding`), or else found from all its bytes when it is opened
  (`sniff.detect_encoding`): UTF-8 when every byte is, else cp1252 (what Excel on Windows
  writes), else the file is refused naming `--encoding`.
- Excel (`.xlsx`, `.xlsm`, `.xls`; `input/excel`): the sheet (`--sheet`, else the first)
  is read whole when the file is opened, typed, and written to a temporary Parquet file
  that is then read as any Parquet input is, below.
- Parquet: `pyarrow.parquet.ParquetFile.iter_batches` (not pre-buffered: memory flat as
  the file grows), every request field cast to text
  (a float 3.0 becomes "3.0", which is the integer 3 to validation), but for an
  include column that is a list of text (`list<string>`), read as a list of items.
  Any other nested column is refused: nothing else in a request is nested.

Validation reads the fields as text; the pass-through columns ride along beside them,
row for row, in their own types (`input/passthrough`: the Parquet file's types, or
polars' inference over the whole CSV file, block by block, which costs one more read of
it, cut short once every pass-through column is text).

Where the table is (`input/layout`): a CSV's or a sheet's header may stand below banner
lines (found, or `header_row`), and the rows of the table that are not loans (subtotals,
headings, totals, notes) are found when the file is opened (`_not_loans`) and left out
of the batches.
Each row keeps its line (`InputBatch.lines`: what a run stores and writes as
`source_row`).

Row numbers are 1-based positions of data rows, the header not counted. In a CSV, a
row with no value at all (a blank line, or only delimiters and spaces, as spreadsheets
leave after the data) is skipped and not counted: it asks for nothing, and counting it
would only add a problem per empty line; a sheet's blank row is skipped the same way
(`input/excel`). A Parquet row always counts. A blank header
cell (a trailing delimiter) names its column `column_N`, N its 1-based position.
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import gzip
import io
import shutil
import tempfile
import weakref
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from batchval._internal.input import layout, stream
from batchval._internal.input import passthrough as given
from batchval._internal.input.excel import hidden_parts, sheet_to_parquet
from batchval._internal.input.layout import SOURCE_ROW, Header, NotLoan, locate_csv_header
from batchval._internal.input.lender import LenderColumnError, find_lender_columns
from batchval._internal.input.lender_values import lender_kinds, read_lender_values
from batchval._internal.input.mapping import ColumnMap, resolve_columns
from batchval._internal.input.options import InputError, InputOptions
from batchval._internal.input.personal import SAMPLE_ROWS
from batchval._internal.input.sniff import (
    GZIP_MAGIC,
    READ_ERRORS,
    detect_delimiter,
    first_line,
    has_data,
    head_text,
    read_head,
)
from batchval._internal.input.validate import Checker, check_batch
from batchval._internal.outcome import SettingsError

_PARQUET_MAGIC = b"PAR1"
_ZIP_MAGIC = b"PK\x03\x04"  # every .xlsx, .xlsm, .xlsb and .ods workbook
_OLE2_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # an .xls workbook
_TRANSCODE_CHARS = 1 << 20
_PARQUET_BUFFER_BYTES = 1 << 20

_DELIMITER_NAMES = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}


# A batch as read: the request fields as text (CSV: the pass-through columns' text too),
# and the same rows' pass-through columns in their own types.
_Raw = tuple[pl.DataFrame, pa.RecordBatch]


@dataclasses.dataclass(frozen=True, slots=True)
class InputBatch:
    """One batch of input rows: checked, and their pass-through columns, row for row."""

    checked: pl.DataFrame  # validate.OUTPUT_SCHEMA: a request, or a problem, per row
    passthrough: pa.RecordBatch  # the pass-through columns, typed (input/passthrough)
    lines: pa.Array | None = None  # each row's line (a sheet's or a CSV file's; int64)

    def stored(self) -> pa.RecordBatch:
        """The pass-through columns as a run keeps them: each row's line first
        (`layout.SOURCE_ROW`, written as `source_row`), then the input's columns."""
        if self.lines is None:
            return self.passthrough
        return pa.RecordBatch.from_arrays(
            [self.lines, *self.passthrough.columns],
            names=[SOURCE_ROW, *self.passthrough.schema.names],
        )


@dataclasses.dataclass(frozen=True, slots=True)
class ReadAs:
    """What the input file is and how it was read, as summary.json and the manifest say."""

    format: str  # csv, parquet or excel
    encoding: str | None = None  # a CSV's: the Python codec its bytes were decoded with
    encoding_detected: bool = False  # found from the file's bytes, not given
    sheet: str | None = None  # a workbook's: the sheet read
    header: Header | None = None  # a CSV's or a sheet's: where its header is
    not_loans: tuple[NotLoan, ...] = ()  # the table's rows that are not loans
    # Columns the default pass-through left out as a person's data or the lender's
    # internal data -> why (input/personal).
    personal_left_out: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # A workbook's: the data rows' lines it hides (or filters out), and its hidden columns.
    hidden_rows: tuple[int, ...] = ()
    hidden_columns: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        reporting = None if self.header is None else self.header.reporting
        return {
            "format": self.format,
            "encoding": self.encoding,
            "encoding_detected": self.encoding_detected,
            "sheet": self.sheet,
            "header_line": None if self.header is None else self.header.line,
            "lines_above_header": 0
            if self.header is None
            else self.header.line - self.header.first_line,
            "not_loans": [line.to_json() for line in self.not_loans],
            "personal_left_out": dict(self.personal_left_out),
            "hidden_rows": len(self.hidden_rows),
            "hidden_columns": list(self.hidden_columns),
            "reporting_date": None if reporting is None else reporting.date.isoformat(),
            "reporting_date_line": None if reporting is None else reporting.line,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class _Asked:
    """What a reading asks of a table: every data row, in order, about `rows` at a time,
    the `fields` columns as text (the include column, when it is a list of text, as it
    is) and the `passthrough` columns typed; a CSV's or a sheet's rows with their lines
    (`layout.LINE`)."""

    fields: Sequence[str]
    rows: int
    passthrough: Sequence[str] = ()
    include: str | None = None


class _Table(Protocol):
    """A file format's reader: its header, and its rows in batches."""

    @property
    def columns(self) -> list[str]: ...

    @property
    def read_as(self) -> ReadAs: ...

    def raw_batches(self, asked: _Asked) -> Iterator[_Raw]: ...


def _delimiter_name(delimiter: str) -> str:
    return _DELIMITER_NAMES.get(delimiter, repr(delimiter))


@dataclasses.dataclass(frozen=True, slots=True)
class _CsvTable:
    path: Path
    columns: list[str]
    delimiter: str
    codec: str
    compressed: bool
    bare_cr: bool  # a carriage return ends a line in the head: polars reads (input/stream)
    detected: bool = False  # the codec was found from the bytes (sniff.detect_encoding)
    skip_lines: int = 0  # the lines above the header (a banner), as the file's lines
    header: Header = dataclasses.field(default_factory=lambda: Header(1))

    @property
    def read_as(self) -> ReadAs:
        return ReadAs("csv", self.codec, self.detected, header=self.header)

    def raw_batches(self, asked: _Asked) -> Iterator[_Raw]:
        if self.codec == "utf-8":
            yield from self._read(self.path, asked)
            return
        with tempfile.TemporaryDirectory(prefix="batchval-input-") as tmp:
            utf8 = Path(tmp) / "input.csv"
            self._transcode(utf8)
            yield from self._read(utf8, asked)

    def _read(self, source: Path, asked: _Asked) -> Iterator[_Raw]:
        types = self._types(source, asked.passthrough)
        wanted = list(dict.fromkeys([*asked.fields, *asked.passthrough]))
        frames = self._scan(source, wanted, asked.rows)
        pairs = ((frame, given.from_text(self.path, frame, types)) for frame in frames)
        return _guarded(self.path, pairs)

    def _blocks(self, source: Path, only: Sequence[int] | None = None) -> Iterator[pl.DataFrame]:
        """The records as text, streamed by pyarrow (input/stream); `source` is UTF-8,
        compressed only when it is the file itself."""
        compressed = self.compressed and source == self.path
        return stream.text_blocks(
            source,
            compressed=compressed,
            delimiter=self.delimiter,
            width=len(self.columns),
            only=only,
            skip_lines=self.skip_lines,
        )

    def _types(self, source: Path, passthrough: Sequence[str]) -> dict[str, pl.DataType]:
        """The pass-through columns' types: polars' inference over the whole file, less
        the integer columns with a leading zero (input/passthrough)."""
        if not passthrough:
            return {}
        if not self.bare_cr:
            try:
                positions = [self.columns.index(name) for name in passthrough]
                blocks = self._blocks(source, positions)
                kinds, leading = stream.passthrough_types(blocks, len(positions))
                typed = dict(zip(passthrough, kinds, strict=True))
                return given.csv_types(typed, [passthrough[i] for i in leading])
            except (*READ_ERRORS, stream.QuoteMarkError):
                pass  # a file pyarrow does not read through: polars infers, as below
        try:
            inferred = self._lazy(source, infer=True).collect_schema()
            found = {name: inferred[name] for name in passthrough}
            integers = given.integer_columns(found)
            zeros: list[str] = []
            if integers:
                flags = (
                    self._lazy(source, infer=False)
                    .select(
                        given.has_leading_zero(pl.nth(self.columns.index(name))).alias(f"z{i}")
                        for i, name in enumerate(integers)
                    )
                    .collect(engine="streaming")
                )
                zeros = [name for name, zero in zip(integers, flags.row(0), strict=True) if zero]
        except READ_ERRORS:
            # A file polars cannot read through: its columns stay text, and the scan
            # below reports the fault where it is, as it would have without types.
            return {name: pl.String() for name in passthrough}
        return given.csv_types(found, zeros)

    def _lazy(self, source: Path, *, infer: bool) -> pl.LazyFrame:
        """The file as polars reads it: every column text, or typed by inference over
        the whole file."""
        return pl.scan_csv(
            source,
            separator=self.delimiter,
            has_header=True,
            new_columns=self.columns,
            quote_char='"',
            raise_if_empty=False,
            skip_lines=self.skip_lines,
            **({"infer_schema_length": None} if infer else {"infer_schema": False}),
        )

    def _transcode(self, target: Path) -> None:
        try:
            with (
                gzip.open(self.path, "rb") if self.compressed else open(self.path, "rb") as raw,
                io.TextIOWrapper(raw, encoding=self.codec, newline="") as text,
                open(target, "w", encoding="utf-8", newline="") as out,
            ):
                while chunk := text.read(_TRANSCODE_CHARS):
                    out.write(chunk)
        except (*READ_ERRORS, UnicodeDecodeError) as exc:
            raise InputError(
                self.path, f"cannot be read as {self.codec}: {first_line(exc)}"
            ) from exc

    def _scan(self, source: Path, wanted: Sequence[str], batch_rows: int) -> Iterator[pl.DataFrame]:
        # Every column is text: validation decides what a field is. By position, not
        # name: a column may be called "*" or "^a$" (polars patterns). Each record also
        # gets its line (`layout.LINE`: the header's, plus its place among the records
        # after it).
        each = [pl.nth(i) for i in range(len(self.columns))]
        blank = pl.all_horizontal([c.is_null() | c.str.contains(r"^\s*$") for c in each])
        keep = [
            *(pl.nth(self.columns.index(name)).alias(name) for name in wanted),
            (pl.col(layout.LINE) + self.header.line + 1).alias(layout.LINE),
        ]
        done = 0
        if not self.bare_cr:
            try:
                blocks = (
                    block.filter(~blank).select(keep) for block in _numbered(self._blocks(source))
                )
                for frame in stream.rebatched(blocks, batch_rows):
                    yield frame
                    done += frame.height
                return
            except (*READ_ERRORS, stream.QuoteMarkError):
                pass  # polars reads on from the row pyarrow stopped at (input/stream)
        numbered = self._lazy(source, infer=False).with_columns(
            pl.int_range(pl.len(), dtype=pl.Int64).alias(layout.LINE)
        )
        scan = numbered.filter(~blank).slice(done).select(keep)
        yield from scan.collect_batches(chunk_size=batch_rows, lazy=True)


def _numbered(blocks: Iterator[pl.DataFrame]) -> Iterator[pl.DataFrame]:
    """The blocks, each record with its place among them (0 for the first) as `LINE`."""
    start = 0
    for block in blocks:
        place = pl.int_range(start, start + block.height, dtype=pl.Int64)
        yield block.with_columns(place.alias(layout.LINE))
        start += block.height


def _guarded(path: Path, batches: Iterator[_Raw]) -> Iterator[_Raw]:
    """The batches, with a reading failure turned into an InputError saying where."""
    rows = 0
    while True:
        try:
            frame, typed = next(batches)
        except StopIteration:
            return
        except READ_ERRORS as exc:
            said = first_line(exc)
            if isinstance(exc, pl.exceptions.ComputeError) and (
                "parse" in said or "malformed" in said
            ):
                said += " (a stray or unclosed quote mark?)"
            raise InputError(path, f"cannot be read after data row {rows}: {said}") from exc
        rows += frame.height
        yield frame, typed


class _Scratch:
    """A temporary directory, removed with the last reference to it (or at exit)."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="batchval-input-"))
        weakref.finalize(self, shutil.rmtree, self.path, ignore_errors=True)


@dataclasses.dataclass(frozen=True, slots=True)
class _ParquetTable:
    path: Path  # the input, as faults name it
    columns: list[str]
    schema: pa.Schema
    read_as: ReadAs = ReadAs("parquet")
    # A workbook's sheet is read from a Parquet file of its own (input/excel), in a
    # scratch directory that lives as long as this table.
    file: Path | None = None
    scratch: _Scratch | None = None

    def raw_batches(self, asked: _Asked) -> Iterator[_Raw]:
        # A sheet's hidden columns, as input/excel wrote them.
        hidden = [] if self.file is None else list(layout.HIDDEN)
        try:
            # No pre-buffering: with it (pyarrow's default) the column chunks read stay
            # cached until the reader closes, so the Arrow memory held grew with the
            # file (measured on the bench's books: 34 MiB at 1 M rows, 116 MiB at 5 M;
            # 16 MiB at both without it, reading through a 1 MiB buffer).
            parquet = pq.ParquetFile(
                self.file or self.path, pre_buffer=False, buffer_size=_PARQUET_BUFFER_BYTES
            )
        except READ_ERRORS as exc:
            raise InputError(self.path, f"cannot be read: {first_line(exc)}") from exc
        wanted = list(dict.fromkeys([*asked.fields, *asked.passthrough, *hidden]))
        with parquet:
            batches = parquet.iter_batches(batch_size=asked.rows, columns=wanted)
            pairs = (
                (
                    _as_text(self.path, batch, asked.fields, hidden),
                    given.from_arrow(self.path, batch, asked.passthrough, asked.include),
                )
                for batch in batches
            )
            yield from _guarded(self.path, pairs)

    def passthrough_schema(self, passthrough: Sequence[str], include: str | None) -> pa.Schema:
        """The pass-through columns as they are written (input/passthrough)."""
        return pa.schema(
            (name, given.parquet_type(self.schema.field(name).type, include=name == include))
            for name in passthrough
        )


def _as_text(
    path: Path, batch: pa.RecordBatch, fields: Sequence[str], hidden: Sequence[str] = ()
) -> pl.DataFrame:
    """The request fields as text, cast by Arrow (which knows every Parquet type; polars
    panics on some, such as decimals wider than 38 digits); a list of text as a list of
    text (`_refuse_nested` has let only the include column through as a list)."""
    columns: dict[str, pa.Array] = {}
    for name in fields:
        column = batch.column(name)
        text = pa.list_(pa.string()) if _is_text_list(column.type) else pa.string()
        try:
            columns[name] = pc.cast(column, text)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise InputError(
                path, f"column {name!r} ({column.type}) has no text form: {first_line(exc)}"
            ) from exc
    for name in hidden:  # as the sheet's reading wrote them
        columns[name] = batch.column(name)
    frame = pl.from_arrow(pa.table(columns))
    assert isinstance(frame, pl.DataFrame)
    return frame


def _duplicates(path: Path, columns: Sequence[str]) -> None:
    repeated = [name for name, n in collections.Counter(columns).items() if n > 1]
    if repeated:
        names = ", ".join(repr(c) for c in repeated)
        raise InputError(path, f"has duplicate column names: {names}")


def _open_parquet(path: Path, file: Path | None = None) -> _ParquetTable:
    """The Parquet input at `path`, or (`file`) a workbook's sheet written to Parquet, whose
    hidden columns (`layout.HIDDEN`) are no column of the input's."""
    try:
        with pq.ParquetFile(file or path) as parquet:
            schema = parquet.schema_arrow
            rows = parquet.metadata.num_rows
    except READ_ERRORS as exc:
        raise InputError(
            path, f"is not a readable Parquet file (truncated or corrupt?): {first_line(exc)}"
        ) from exc
    if file is not None:
        schema = pa.schema([f for f in schema if f.name not in layout.HIDDEN])
    columns = [str(name) for name in schema.names]
    unnamed = [str(i + 1) for i, name in enumerate(columns) if not name.strip()]
    if unnamed:
        raise InputError(path, f"has columns with no name (column {', '.join(unnamed)})")
    _duplicates(path, columns)
    if rows == 0:
        raise InputError(path, "has no data rows")
    return _ParquetTable(path, columns, schema, file=file)


def _open_workbook(path: Path, options: InputOptions) -> tuple[_ParquetTable, str]:
    """A workbook's sheet, read once into a Parquet file of the table's own (input/excel),
    and a hint for a missing-column fault (the other sheets, when the first was read)."""
    scratch = _Scratch()
    file = scratch.path / "sheet.parquet"
    name, hint, header = sheet_to_parquet(
        path, options.sheet, file, header_row=options.header_row, configured=options.columns
    )
    table = _open_parquet(path, file)
    hidden = hidden_parts(path, name)
    # The table's columns begin at the sheet's used range (calamine's), as hidden_parts says.
    at = [p - hidden.first_column for p in hidden.columns]
    read_as = ReadAs(
        "excel",
        sheet=name,
        header=header,
        hidden_rows=tuple(line for line in hidden.lines if line > header.line),
        hidden_columns=tuple(table.columns[i] for i in at if 0 <= i < len(table.columns)),
    )
    if hint:
        hint = f"; sheet {name!r} was read{hint}"
    return dataclasses.replace(table, read_as=read_as, scratch=scratch), hint


def _is_text(kind: pa.DataType) -> bool:
    if pa.types.is_dictionary(kind):
        return _is_text(kind.value_type)
    return bool(
        pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)
    )


def _is_text_list(kind: pa.DataType) -> bool:
    """A list (or large list) of strings: the Parquet form of an include column."""
    listed = pa.types.is_list(kind) or pa.types.is_large_list(kind)
    return listed and _is_text(kind.value_type)


def _refuse_nested(path: Path, schema: pa.Schema, include: str | None) -> None:
    """Lists and structs cannot be used, but for an include column that is a list of text.

    Nothing else in a request is nested, and a list or struct has no plain-text form to
    ride along as.
    """
    nested = [f for f in schema if pa.types.is_nested(f.type)]
    if include is not None:
        kind = schema.field(include).type
        if pa.types.is_nested(kind) and not _is_text_list(kind):
            raise InputError(
                path,
                f"the include column {include!r} is {kind}; it must be text "
                "(commentary;rebuildCost) or a list of text",
            )
        nested = [f for f in nested if f.name != include]
    if nested:
        named = ", ".join(f"{f.name!r} ({f.type})" for f in nested)
        raise InputError(path, f"has nested columns {named}; convert or drop them first")


def _open_csv(path: Path, head: bytes, options: InputOptions) -> tuple[_CsvTable, str]:
    """The CSV table and a hint for a missing-column fault (a likely wrong delimiter)."""
    if options.sheet is not None:
        raise InputError(
            path, f"is CSV text, not an Excel workbook: it has no sheet {options.sheet!r}"
        )
    decoded = head_text(path, head, options.codec)
    text, complete = decoded.text, decoded.complete
    first, newline, _ = text.partition("\n")
    if not newline and not complete:
        raise InputError(path, "has no line break in its first 64 KiB: not a CSV file?")
    whole = text if complete else text[: text.rfind("\n") + 1]  # the head's whole lines
    located = locate_csv_header(path, whole, options)
    if located is None:  # no line looks like a header: the first is, as it always was
        if not first.strip():
            raise InputError(
                path,
                "starts with a blank line and no line below looks like a header; "
                "name the header's line with --header-row N",
            )
        located = (options.delimiter or detect_delimiter(first), 0, 0, Header(1))
    delimiter, skip_lines, skip_chars, header_at = located
    detected = detect_delimiter(whole[skip_chars:].partition("\n")[0])
    rows = csv.reader(
        io.StringIO(text[skip_chars:], newline=""), delimiter=delimiter, quotechar='"'
    )
    try:
        header = next(rows)
    except csv.Error as exc:
        raise InputError(path, f"has an unreadable header: {exc}") from exc
    except StopIteration:
        raise InputError(path, f"has no line {header_at.line}") from None
    columns = [name if name.strip() else f"column_{i}" for i, name in enumerate(header, 1)]
    _duplicates(path, columns)
    if complete and not has_data(rows):
        raise InputError(path, "has a header but no data rows")
    hint = ""
    if options.delimiter is not None and len(columns) == 1 and detected != options.delimiter:
        hint = (
            f"; the header has no {_delimiter_name(options.delimiter)} but has "
            f"{_delimiter_name(detected)}s: set that delimiter, or none to detect it"
        )
    table = _CsvTable(
        path,
        columns,
        delimiter,
        decoded.codec,
        head.startswith(GZIP_MAGIC),
        stream.bare_carriage_return(text),
        decoded.detected,
        skip_lines=skip_lines,
        header=header_at,
    )
    return table, hint


class InputSource:
    """An input file that can be used, and how its columns feed requests.

    `batches()` may be called again (a resumed run reads the file afresh); each call
    streams the file from the start.
    """

    def __init__(
        self,
        path: Path,
        table: _Table,
        mapped: ColumnMap,
        options: InputOptions,
        not_loans: Sequence[NotLoan] = (),
    ):
        self.path = path
        self.columns: list[str] = list(table.columns)
        self.field_columns: dict[str, str] = dict(mapped.fields)
        self.passthrough: list[str] = list(mapped.passthrough)
        self.read_as: ReadAs = dataclasses.replace(
            table.read_as, not_loans=tuple(not_loans), personal_left_out=mapped.personal
        )
        self._table = table
        self._mapped = mapped
        self._options = options
        self._not_loans = pa.array([line.line for line in not_loans], pa.int64())

    def __repr__(self) -> str:
        return f"InputSource({str(self.path)!r}, field_columns={self.field_columns!r})"

    @property
    def header(self) -> Header | None:
        """Where the header of a CSV file or a sheet is (None for Parquet)."""
        return self.read_as.header

    def batches(
        self,
        check: Checker = check_batch,
        *,
        lender: bool = True,
        every_column: bool = False,
        riding: bool = True,
    ) -> Iterator[InputBatch]:
        """Validated rows, about `batch_rows` at a time: the checked rows (the columns of
        validate.OUTPUT_SCHEMA), their pass-through columns, typed, and their lines; with
        `lender`, a lender's money and dates among them read (what LTVs need: its caller
        says); with `every_column` (`split`), every column in order, a CSV's request fields
        as the text read; without `riding`, no pass-through column but a lender's (what
        validation makes of the rows, and no more). The rows of the table that are not loans
        (`read_as.not_loans`) are left out.

        Raises InputError when the file turns out unreadable part way (truncated,
        corrupt, not the encoding it claimed): rows already yielded stay valid.
        """
        fields = list(dict.fromkeys(self.field_columns.values()))
        include = self.field_columns.get("include")
        typed_names = self.passthrough if riding else []
        if every_column:  # a shard read again must make the same requests
            as_text = fields if isinstance(self._table, _CsvTable) else []
            typed_names = [c for c in self.columns if c not in as_text]
        # A lender's money and dates, read when asked (a shard keeps its values as read);
        # without `riding` (a pass that counts refusals), those columns alone: a value
        # that cannot be read is a refusal there as it is when the rows are stored.
        kinds = {}
        if lender and not every_column:
            kinds = lender_kinds(self.passthrough, self._options.columns)
            if not riding:
                typed_names = [name for name in self.passthrough if name in kinds]
        done = 0
        asked = _Asked(fields, self._options.batch_rows, typed_names, include)
        for raw, typed in self._table.raw_batches(asked):
            raw, typed, lines = self._loans(raw, typed, done)
            if raw.height == 0:
                continue
            checked = check(raw, first_row=done, columns=self._mapped, options=self._options)
            checked, typed = read_lender_values(checked, typed, kinds)
            if every_column:
                typed = pa.RecordBatch.from_arrays(
                    [
                        typed.column(c) if c in typed_names else raw[c].to_arrow().cast(pa.string())
                        for c in self.columns
                    ],
                    names=self.columns,
                )
            yield InputBatch(checked, typed, lines)
            done += raw.height
        if done == 0:
            raise InputError(self.path, "has no data rows")

    def _loans(
        self, raw: pl.DataFrame, typed: pa.RecordBatch, done: int
    ) -> tuple[pl.DataFrame, pa.RecordBatch, pa.Array]:
        """A batch without its lines that are not loans, and without the reader's hidden
        columns; and its rows' lines (a Parquet file's: their positions)."""
        if layout.LINE not in raw.columns:
            return raw, typed, pa.array(range(done + 1, done + raw.height + 1), pa.int64())
        lines = raw.get_column(layout.LINE).to_arrow().cast(pa.int64())
        raw = raw.drop(layout.HIDDEN, strict=False)
        if len(self._not_loans):
            kept = pc.invert(pc.is_in(lines, self._not_loans))
            if not pc.all(kept).as_py():
                raw, lines = raw.filter(pl.Series(kept)), lines.filter(kept)
                typed = typed.filter(kept) if typed.num_columns else typed
        return raw, typed, lines


def _not_loans(table: _Table, mapped: ColumnMap, options: InputOptions) -> list[NotLoan]:
    """The rows of a CSV's or a sheet's table that are not loans (`layout.find_not_loans`),
    read in one pass over every column as text (about a second a million rows of a CSV
    file); none for Parquet."""
    if table.read_as.header is None:
        return []
    postcode = mapped.fields.get("postcode")
    try:
        lender = find_lender_columns(table.columns, options.columns)
    except LenderColumnError:
        lender = {}
    loan_id, balance = lender.get("loan_id"), lender.get("loan_balance")
    batches = table.raw_batches(_Asked(table.columns, options.batch_rows))
    return layout.find_not_loans(
        (raw for raw, _ in batches), table.columns, postcode, loan_id, balance, options.not_loans
    )


def _open_table(path: Path, options: InputOptions) -> tuple[_Table, str]:
    """The file's table, its format found by content: Parquet's `PAR1` magic, a zip
    archive's or an OLE file's magic (an Excel workbook: read whole here, `input/excel`),
    gzip's 1f 8b (a compressed CSV), else CSV text; and a hint for a missing-column fault.
    The file's name is used only to word a fault."""
    head = read_head(path)
    if head.startswith(_PARQUET_MAGIC):
        if options.sheet is not None:
            raise InputError(
                path, f"is Parquet, not an Excel workbook: it has no sheet {options.sheet!r}"
            )
        if options.header_row is not None:
            raise SettingsError(
                f"{path} is Parquet, whose columns are named by the file: a header row "
                "(--header-row, input.header_row) is for a CSV file or an Excel sheet"
            )
        return _open_parquet(path), ""
    if head.startswith((_ZIP_MAGIC, _OLE2_MAGIC)):
        return _open_workbook(path, options)
    return _open_csv(path, head, options)


def open_input(path: Path, options: InputOptions, *, postcode_only: bool = False) -> InputSource:
    """Checks that the file can be used, reading only its head (but for what the module's
    docstring says); raises InputError if not."""
    path = Path(path)
    table, hint = _open_table(path, options)
    sample = _sample(table) if options.passthrough is None else None
    mapped = resolve_columns(
        path,
        table.columns,
        options,
        hint=hint,
        postcode_only=postcode_only,
        sample=sample,
        hidden=table.read_as.hidden_columns,
    )
    if isinstance(table, _ParquetTable):  # a workbook's sheet too
        include = mapped.fields.get("include")
        _refuse_nested(path, table.schema, include)
        given.check_writable(path, table.passthrough_schema(mapped.passthrough, include))
    return InputSource(path, table, mapped, options, _not_loans(table, mapped, options))


def _sample(table: _Table) -> pl.DataFrame | None:
    """The first rows (`personal.SAMPLE_ROWS`) of the table's text columns, as text: what
    `input/personal` looks at for e-mail addresses, telephone and NI numbers. None when
    they cannot be read: reading the rows will say why where it meets the fault."""
    names = list(table.columns)
    if isinstance(table, _ParquetTable):  # only text holds such values
        names = [n for n in names if _is_text(table.schema.field(n).type)]
    if not names:
        return None
    batches = table.raw_batches(_Asked(names, SAMPLE_ROWS))
    try:
        return next(iter(batches), (None, None))[0]
    except InputError:
        return None
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            close()


def read_as_text(
    path: Path, options: InputOptions
) -> tuple[list[str], Iterator[pl.DataFrame], ReadAs]:
    """Every column of the file as text, batch by batch, with no mapping and no checks,
    and how it is read (its sheet, where its header is): what `batchval init` reads to
    propose a mapping. Raises InputError for a file that cannot be read, as `open_input`
    does (NoTableError for a workbook whose first sheet is a cover)."""
    table, _ = _open_table(Path(path), options)
    columns = list(table.columns)

    def frames() -> Iterator[pl.DataFrame]:
        for raw, _ in table.raw_batches(_Asked(columns, options.batch_rows)):
            yield raw.drop(layout.HIDDEN, strict=False)

    return columns, frames(), table.read_as
