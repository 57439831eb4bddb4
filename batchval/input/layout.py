"""Where the table is in a lender's sheet or CSV file: the header below banner lines, and
the lines below the table that are not loans.

An MI system's extract rarely starts with its header. A title (`Mortgage book extract -
30/11/2026`, often merged across the table), a line saying who produced it, and a blank
line come first; a `Total` row and a footer (`Source: ...`, `CONFIDENTIAL`) follow the
last loan. Excel's "Save as CSV" keeps all of them.

**The header** is found by the evidence `batchval init` uses for a mapping: among the
first `HEADER_SEARCH_LINES` lines, the first with at least two cells, none of them a
number or a postcode, that either names fields (two or more cells named as a request
field, a lender field or one of its usual names, or a column the config maps), or stands
above a column most of whose next `_BELOW` values are full UK postcodes. When no line
does, the header is the first line that holds a value, as it always was (and a missing
column is then refused naming what the header has). `--header-row N` (`input.header_row`)
states the line instead.

**Below the table** means after the last row that holds a postcode or a loan id (a loan-id
cell that reads as a total or a footer, `Total` in an `Account No` column, holds none).
A row there is not a loan when its first cell that holds a value reads as a total or a
footer (`FOOTER`: `Total`, `Grand Total`, `Sub-total`, `Source: ...`, `Confidential ...`,
`Notes`, `Prepared by ...`, `End of report`; case forgiven), or when only its first cell
holds a value. Such rows are left out of the rows, the requests and the problems, and
listed (`NotLoan`). A subtotal, or a row with no postcode, in the middle of the table is
still a row: only what follows the last loan can be below it.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import polars as pl

from batchval import postcodes
from batchval.input.lender import LENDER_FIELDS, USUAL_NAMES
from batchval.input.mapping import field_name_key
from batchval.input.options import DETECTED_DELIMITERS, ROW_FIELDS, InputError, InputOptions
from batchval.input.sniff import detect_delimiter

HEADER_SEARCH_LINES = 50  # a banner is a few lines; a header further down is stated
_BELOW = 20  # the values looked at under a header candidate
_POSTCODES_BELOW = 0.5  # the share of them that must be postcodes
# Spellings of a postcode column that no request field's own name covers.
_POSTCODE_NAMES = ("post code", "postal code", "pcode", "security postcode", "property postcode")
_NUMBER = re.compile(r"^[£$€]?\s*[-+]?[\d,]*\.?\d+%?$")

# What a total or footer line starts with (compared in lower case, spaces trimmed).
FOOTER = re.compile(
    r"^(?:grand\s+|sub[\s\-]?)?totals?\b"
    r"|^(?:source|confidential|notes?|end\s+of\s+(?:report|extract|file|data))\b"
    r"|^(?:prepared|produced|generated|printed|extracted|run)\s+(?:by|on|at)\b"
)

# Hidden columns a reader adds to each raw batch of a CSV or a sheet (`input/reader`):
# the row's line as the user's program numbers it, its first value as text, and whether
# that value is the only one and in the first column.
LINE = "batchval.line"
LABEL = "batchval.label"
ONLY_FIRST = "batchval.only_first"
HIDDEN = (LINE, LABEL, ONLY_FIRST)
# The first pass-through column of every batch a run stores (`InputSource.batches`): each
# row's line, written as `source_row` (contract/schemas), a name no input column is taken
# to have.
SOURCE_ROW = "batchval.source_row"


@dataclasses.dataclass(frozen=True, slots=True)
class Header:
    """Where a CSV's or a sheet's header is: its 1-based line (of the file, or of the
    sheet as Excel numbers it), and how it was known."""

    line: int
    found: bool = False  # found below the first line by its evidence (`find_header`)
    stated: bool = False  # stated (`--header-row`, `input.header_row`)
    first_line: int = 1  # a sheet's first line that holds a value (calamine starts there)

    def said(self) -> str:
        """What the lines above the header are, in words ("" when there are none)."""
        return skipped_words(self.line, self.first_line) if self.line > self.first_line else ""


@dataclasses.dataclass(frozen=True, slots=True)
class NotLoan:
    """A line below the table that is not a loan: where it is and what it says."""

    line: int
    text: str

    def to_json(self) -> dict[str, int | str]:
        return {"line": self.line, "text": self.text}


def _names(configured: Mapping[str, str]) -> frozenset[str]:
    """Every header word that names a field, as `field_name_key` compares them."""
    names = {field_name_key(field) for field in (*ROW_FIELDS, *LENDER_FIELDS)}
    names |= {field_name_key(usual) for usual in (*_POSTCODE_NAMES, *_usual_names())}
    names |= {field_name_key(column) for column in configured.values()}
    return frozenset(names)


def _usual_names() -> Iterable[str]:
    for names in USUAL_NAMES.values():
        yield from names


def find_header(rows: Sequence[Sequence[str | None]], configured: Mapping[str, str]) -> int | None:
    """The index in `rows` (the first lines of a sheet or file, every cell as text or None)
    of the table's header, or None when no line looks like one (see the module)."""
    names = _names(configured)
    for i, row in enumerate(rows[:HEADER_SEARCH_LINES]):
        cells = [(j, cell.strip()) for j, cell in enumerate(row) if cell and cell.strip()]
        if len(cells) < 2:
            continue
        texts = [text for _, text in cells]
        if any(_NUMBER.match(text) or postcodes.normalise(text) is not None for text in texts):
            continue
        naming = sum(field_name_key(text) in names for text in texts)
        below = rows[i + 1 : i + 1 + _BELOW]
        if naming >= 2 or any(_postcodes_under(below, j) for j, _ in cells):
            return i
    return None


def _postcodes_under(rows: Sequence[Sequence[str | None]], column: int) -> bool:
    """Whether the column below a line holds postcodes: most of its values, and the first
    (a line whose cell there is text, such as the header below a banner, says otherwise)."""
    cells = (row[column] if column < len(row) else None for row in rows)
    values = [cell.strip() for cell in cells if cell and cell.strip()]
    hits = [postcodes.normalise(value) is not None for value in values]
    return bool(hits) and hits[0] and sum(hits) >= _POSTCODES_BELOW * len(values)


def skipped_words(header_line: int, first_line: int = 1) -> str:
    """What a header below the first line says of the lines above it."""
    if header_line == first_line + 1:
        above = f"line {first_line} is"
    else:
        above = f"lines {first_line}-{header_line - 1} are"
    return f"header on line {header_line}; {above} above the table, not read"


# --- a CSV file's header ------------------------------------------------------------------

# A CSV's header: (delimiter, the file's lines above it, their characters in the head, where).
Located = tuple[str, int, int, Header]


def locate_csv_header(path: Path, text: str, options: InputOptions) -> Located | None:
    """Where a CSV's header is, from the whole lines of its head: on the line
    `options.header_row` states, else on the first line that looks like one
    (`layout.find_header`) with the delimiter that gives the widest such header (the
    delimiter given, when one is), else None."""
    delimiters = (options.delimiter,) if options.delimiter else DETECTED_DELIMITERS
    if options.header_row is not None:
        lines = _records(text, options.delimiter or ",")
        if options.header_row > len(lines):
            raise InputError(
                path, f"has no line {options.header_row} (the header row stated) in its head"
            )
        at = options.header_row - 1
        line = text[_chars(text, lines, at) :].partition("\n")[0]
        delimiter = options.delimiter or detect_delimiter(line)
        lines = _records(text, delimiter)
        skip = lines[at - 1][1] if at else 0
        return delimiter, skip, _chars(text, lines, at), Header(at + 1, stated=True)
    best: tuple[int, int, str, list[tuple[list[str], int]]] | None = None
    for delimiter in delimiters:
        lines = _records(text, delimiter)
        found = find_header([record for record, _ in lines], options.columns)
        if found is None:
            continue
        width = sum(bool(cell.strip()) for cell in lines[found][0])
        if best is None or (width, -found) > (best[0], -best[1]):
            best = (width, found, delimiter, lines)
    if best is None:
        return None
    _, at, delimiter, lines = best
    skip = lines[at - 1][1] if at else 0
    return delimiter, skip, _chars(text, lines, at), Header(at + 1, found=at > 0)


def _records(text: str, delimiter: str) -> list[tuple[list[str], int]]:
    """The first records of a CSV head, each with the number of the file's lines read by
    its end (a quoted line break makes a record of two lines); an empty line is a record
    of no cell, as a spreadsheet shows a blank row."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, quotechar='"')
    records: list[tuple[list[str], int]] = []
    try:
        for record in reader:
            records.append((record, reader.line_num))
            if len(records) >= HEADER_SEARCH_LINES + 25:
                break
    except csv.Error:
        pass  # what was read is what there is to look at
    return records


def _chars(text: str, records: list[tuple[list[str], int]], at: int) -> int:
    """Where record `at` starts in `text`: after the lines the records before it took."""
    lines = records[at - 1][1] if at else 0
    offset = 0
    for _ in range(lines):
        offset = text.index("\n", offset) + 1
    return offset


# --- below the table ------------------------------------------------------------------------


def is_footer(text: pl.Expr) -> pl.Expr:
    """Whether a cell's text reads as a total or a footer."""
    return text.str.strip_chars().str.to_lowercase().str.contains(FOOTER.pattern)


def holds_loan(frame: pl.DataFrame, postcode: str | None, loan_id: str | None) -> pl.Series:
    """Whether each row of a raw batch holds a postcode or a loan id (its text columns)."""
    held = pl.lit(False)
    for column in (postcode, loan_id):
        if column is None or column not in frame.columns:
            continue
        text = pl.col(column).cast(pl.String).str.strip_chars()
        filled = text.is_not_null() & (text != "")
        if column == loan_id:
            filled = filled & ~is_footer(text)
        held = held | filled
    return frame.select(held.alias("held")).to_series()


def last_line_holds_loan(
    lines: Sequence[str], width: int, delimiter: str, places: Sequence[int]
) -> bool:
    """Whether the last of a CSV file's `lines` that holds a value (each a whole line of
    `width` fields) has a postcode or a loan id (at `places`); False when that cannot be
    told from the line alone (a record over several lines, a short one)."""
    for line in reversed(lines):
        try:
            cells = next(csv.reader([line], delimiter=delimiter, quotechar='"'), [])
        except csv.Error:
            return False
        if not any(cell.strip() for cell in cells):
            continue  # a blank line or a row of delimiters: not a row
        if len(cells) != width or '"' in line:
            return False
        return any(cells[i].strip() and not FOOTER.match(cells[i].strip().lower()) for i in places)
    return False


def below_the_table(
    frames: Iterable[pl.DataFrame], postcode: str | None, loan_id: str | None
) -> list[NotLoan]:
    """The lines that are not loans after the last row holding a postcode or a loan id,
    from a reading's raw batches (with the `HIDDEN` columns); only those are held."""
    held: list[pl.DataFrame] = []  # candidates after the last row holding a loan
    for raw in frames:
        loans = holds_loan(raw, postcode, loan_id)
        if loans.any():
            held = []
            raw = raw.slice(int(loans.arg_true()[-1]) + 1)
        below = raw.filter(not_loans(raw)).select(LINE, LABEL)
        if below.height:
            held.append(below)
    if not held:
        return []
    return [NotLoan(int(line), str(text)) for line, text in pl.concat(held).iter_rows()]


def not_loans(frame: pl.DataFrame) -> pl.Series:
    """Of rows below the table (a raw batch with the `HIDDEN` columns): which are not loans."""
    label = pl.col(LABEL).fill_null("")
    return frame.select((is_footer(label) | pl.col(ONLY_FIRST)).alias("not")).to_series()


def label_columns(columns: Sequence[str], text: Sequence[pl.Expr]) -> list[pl.Expr]:
    """The `LABEL` and `ONLY_FIRST` columns of a frame whose cells, in file order, are
    `text` (each a text expression): its first value, and whether that is the only one and
    in the first column."""
    assert len(columns) == len(text)
    filled = [t.str.strip_chars().fill_null("") != "" for t in text]
    first = pl.coalesce(
        [pl.when(f).then(t.str.strip_chars()) for f, t in zip(filled, text, strict=True)]
    )
    count = pl.sum_horizontal([f.cast(pl.Int32) for f in filled])
    return [first.alias(LABEL), ((count == 1) & filled[0]).alias(ONLY_FIRST)]
