"""Where the table is in a lender's sheet or CSV file: the header below banner lines, and
the rows inside it that are not loans.

An MI system's extract rarely starts with its header. A title (`Mortgage book extract -
30/11/2026`, often merged across the table), a line saying who produced it, and a blank
line come first; loans grouped by region may have a subtotal after each group, and a
`Total` row and a footer (`Source: ...`, `CONFIDENTIAL`, footnotes) follow the last loan.
Excel's "Save as CSV" keeps all of them.

**The header** is found by the evidence `batchval init` uses for a mapping: among the
first `HEADER_SEARCH_LINES` lines, the first with at least two cells, none of them a
number or a postcode, that either names fields (two or more cells named as a request
field, a lender field or one of its usual names, or a column the config maps), or stands
above a column most of whose next `_BELOW` values are full UK postcodes. When no line
does, the header is the first line that holds a value, as it always was (and a missing
column is then refused naming what the header has). `--header-row N` (`input.header_row`)
states the line instead.

**Rows that are not loans**, wherever they stand in the table (`find_not_loans`): a
subtotal after each group, a group's heading, a grand total, a footnote, a footer. Rules
that do not depend on one file's words, tried on each row that has no full postcode (a
loan has one; a row that merely lacks it is a loan, and a problem):

- its label: a cell, in any column, that reads as a total or a note (`MARK_PATTERN`:
  `Subtotal North West`, `TOTAL`, `Note: ...`, `* Balances exclude arrears`, `Source:
  ...`), when it is the row's first value or the row has no loan id;
- its balance (a row with no loan id): the sum of the loans since the last line set
  aside (a subtotal, in any language), of all the loans above it, or of the subtotals
  since the last total (a grand total), within a pound a row added, as a CSV holds
  displayed amounts;
- its values (a row with no loan id): only amounts, or a single value (a heading).

A loan id is a value with a digit and no space that reads as neither (`00012345`,
`ACC-123`): a footnote is never one. `input.not_loans` (`Corrections`) sets lines aside, or
keeps them as loans, by line or by pattern. Each line set aside is a `NotLoan`, with its
reason (`REASONS`) and label.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import io
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from batchval._internal import postcodes
from batchval._internal.input.lender import LENDER_FIELDS, USUAL_NAMES
from batchval._internal.input.mapping import field_name_key
from batchval._internal.input.options import (
    DETECTED_DELIMITERS,
    ROW_FIELDS,
    Corrections,
    InputError,
    InputOptions,
)
from batchval._internal.input.sniff import detect_delimiter

HEADER_SEARCH_LINES = 50  # a banner is a few lines; a header further down is stated
_BELOW = 20  # the values looked at under a header candidate
_POSTCODES_BELOW = 0.5  # the share of them that must be postcodes
# Spellings of a postcode column that no request field's own name covers.
_POSTCODE_NAMES = ("post code", "postal code", "pcode", "security postcode", "property postcode")
_NUMBER = re.compile(r"^[£$€]?\s*[-+]?[\d,]*\.?\d+%?$")

# The hidden column a reader adds to each raw batch of a CSV or a sheet (`input/reader`):
# the row's line as the user's program numbers it.
LINE = "batchval.line"
HIDDEN = (LINE,)
# What `label_columns` says of a row that may not be a loan: its first value, the first of
# its cells that reads as a total or a note (`MARK_PATTERN`), how many of its cells hold a
# value, and how many of those are amounts.
LABEL = "batchval.label"
MARK = "batchval.mark"
VALUES = "batchval.values"
AMOUNTS = "batchval.amounts"
# The first pass-through column of every batch a run stores (`InputSource.batches`): each
# row's line, written as `source_row` (contract/schemas), a name no input column is taken
# to have.
SOURCE_ROW = "batchval.source_row"


@dataclasses.dataclass(frozen=True, slots=True)
class Header:
    """Where a CSV's or a sheet's header is: its 1-based line (of the file, or of the
    sheet as Excel numbers it), and how it was known; and the extract's reporting date
    when a line above it gives one (`reporting_date`)."""

    line: int
    found: bool = False  # found below the first line by its evidence (`find_header`)
    stated: bool = False  # stated (`--header-row`, `input.header_row`)
    first_line: int = 1  # a sheet's first line that holds a value (calamine starts there)
    reporting: ReportingDate | None = None

    def said(self) -> str:
        """What the lines above the header are, in words ("" when there are none)."""
        return skipped_words(self.line, self.first_line) if self.line > self.first_line else ""


@dataclasses.dataclass(frozen=True, slots=True)
class ReportingDate:
    """The date an extract's banner says its figures are at, and the line that says so."""

    date: dt.date
    line: int
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"date": self.date.isoformat(), "line": self.line, "text": self.text}


# Words before the date the figures are at (`Reporting date: 31/10/2026`, `As at ...`).
_AT = re.compile(
    r"(?i)\b(?:reporting|report|extract|data|position|balances?|figures)\s+(?:date|as\s+at|at|as\s+of)"
    r"|\bas\s+(?:at|of)\b|\b(?:period|month|quarter|year)[\s\-]+end(?:ing)?\b"
)
# A line that says when the file was made, not what its figures are at.
_MADE = re.compile(r"(?i)^\W*(?:prepared|produced|generated|printed|extracted|run|created)\b")
_MONTHS = {
    m: i
    for i, m in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1
    )
}
_DATES = re.compile(
    r"(?P<iso>\b(?P<y1>\d{4})-(?P<m1>\d{1,2})-(?P<d1>\d{1,2}))"
    r"|(?P<uk>\b(?P<d2>\d{1,2})[/.\-](?P<m2>\d{1,2})[/.\-](?P<y2>\d{4}|\d{2})\b)"
    r"|(?P<words>\b(?P<d3>\d{1,2})(?:st|nd|rd|th)?\s+(?P<m3>[A-Za-z]{3,9})\.?,?\s+(?P<y3>\d{4})\b)"
)


def _dates_in(text: str) -> list[dt.date]:
    """The dates a text holds, day first (`31/10/2026`, `31.10.26`, `31 October 2026`,
    `2026-10-31`)."""
    found = []
    for match in _DATES.finditer(text):
        try:
            if match.group("iso"):
                day, month, year = match.group("d1", "m1", "y1")
            elif match.group("uk"):
                day, month, year = match.group("d2", "m2", "y2")
                year = f"20{year}" if len(year) == 2 else year
            else:
                day, name, year = match.group("d3", "m3", "y3")
                month = str(_MONTHS.get(name[:3].lower(), 0))
            found.append(dt.date(int(year), int(month), int(day)))
        except ValueError:
            continue  # not a date after all (31/02, a month that is none)
    return found


def reporting_date(lines: Sequence[tuple[int, Sequence[str | None]]]) -> ReportingDate | None:
    """The reporting date the banner's `lines` (each with its line number) give: after
    words that say so (`Reporting date:`, `As at`, `Balances at`, `Month end`), else the
    one date of the first line that holds exactly one and does not say when the file was
    made (a title: `Mortgage book extract - 30/11/2026`); None when none does."""
    texts = [(n, " ".join(c.strip() for c in cells if c and c.strip())) for n, cells in lines]
    texts = [(n, t) for n, t in texts if t]
    for n, text in texts:
        said = _AT.search(text)
        dates = _dates_in(text[said.end() :]) if said else []
        if dates:
            return ReportingDate(dates[0], n, text)
    for n, text in texts:
        dates = _dates_in(text)
        if len(dates) == 1 and not _MADE.match(text):
            return ReportingDate(dates[0], n, text)
    return None


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
        reporting = reporting_date(_banner(lines, at))
        return (
            delimiter,
            skip,
            _chars(text, lines, at),
            Header(at + 1, stated=True, reporting=reporting),
        )
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
    header = Header(at + 1, found=at > 0, reporting=reporting_date(_banner(lines, at)))
    return delimiter, skip, _chars(text, lines, at), header


def _banner(
    records: list[tuple[list[str], int]], at: int
) -> list[tuple[int, Sequence[str | None]]]:
    """The records above record `at`, each with the file's line it starts on."""
    return [(records[i - 1][1] + 1 if i else 1, cells) for i, (cells, _) in enumerate(records[:at])]


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


# --- rows that are not loans ----------------------------------------------------------------

# A cell that reads as a total or a note (compared whatever its case): a total's word
# anywhere (`Subtotal North West`, `North West total`, `*** TOTAL ***`); a note's or a
# footer's word first, after any marks (`Note:`, `-- Source: MI --`, `Prepared by ...`);
# a footnote's mark before words (`* Balances exclude arrears`, `(1) ...`, `† ...`).
MARK_PATTERN = (
    r"(?i)\b(?:grand\s*|sub[\s\-]?)?totals?\b"
    r"|^[^\p{L}\p{N}]*(?:source|confidential|notes?|n\.?b\b|average|count"
    r"|end\s+of\s+(?:the\s+)?(?:report|extract|file|data))\b"
    r"|^[^\p{L}\p{N}]*(?:prepared|produced|generated|printed|extracted|run)\s+(?:by|on|at)\b"
    r"|^\s*(?:[*†‡§¹²³⁴⁵⁶⁷⁸⁹]+|\(\d{1,2}\)|\[\d{1,2}\])\s*\p{L}"
)
# An amount or a count as a cell shows it: `68,100,000`, `£1,234.50`, `(12.00)`, `3`, `2.5%`.
_AMOUNT = r"^\(?\s*(?:£|\$|€|GBP)?\s*[-+]?[\d,]*\.?\d+%?\s*\)?$"
# A full postcode, in any case, with or without its space (`postcodes.SHAPE_PATTERN`).
_POSTCODE = r"(?i)^[A-Z]{1,2}[0-9][A-Z0-9]?\s*[0-9][A-Z]{2}$"
# A loan id: a value with a digit and no space (`00012345`, `ACC-123`), not a label.
_ID = r"^\S*\d\S*$"

# Why a row is not a loan (`NotLoan.reason`), in words for `init`, the run and the report,
# at length and in short.
REASONS: Mapping[str, str] = {
    "label": "a cell reads as a total or a note",
    "subtotal": "its balance is the sum of the loans above it, and it has no postcode",
    "total": "its balance is the sum of all the loans (or subtotals) above it",
    "only_amounts": "it holds only amounts, with no postcode or loan id",
    "one_value": "it holds a single value and no postcode (a heading or a note)",
    "set_aside": "input.not_loans.set_aside names it",
}
SHORT_REASONS: Mapping[str, str] = {
    "label": "a total or note",
    "subtotal": "a subtotal, by its sum",
    "total": "a total, by its sum",
    "only_amounts": "only amounts",
    "one_value": "a single value",
    "set_aside": "input.not_loans",
}
_PENNIES = 0.005  # a float's error, over the pound a row a displayed amount may lose
_RECENT = 10_000  # a group's last loans a subtotal may add up (all of them: any number)


@dataclasses.dataclass(frozen=True, slots=True)
class NotLoan:
    """A line of the table that is not a loan: where it is, why, and what it says (its
    `label`: the cell that reads as a total or note, else its first value)."""

    line: int
    reason: str
    label: str

    def to_json(self) -> dict[str, int | str]:
        # `text` (the label) was the only word before `reason` and `label`: kept for scripts.
        return {"line": self.line, "reason": self.reason, "label": self.label, "text": self.label}

    def said(self) -> str:
        """`line 12 'Subtotal North West': a cell reads as a total or a note`."""
        return f"line {self.line} {quoted(self.label)}: {REASONS[self.reason]}"


def quoted(text: str, most: int = 40) -> str:
    """`text` in quotes, cut to `most` characters (`'Source: MI warehouse...'`)."""
    return repr(text if len(text) <= most else text[: most - 3] + "...")


def _hits(corrections: Corrections, which: str) -> pl.Expr:
    """Whether each row (with its `LINE`, `LABEL` and `MARK`) is named in `corrections`'
    `which` (`set_aside` or `keep`): by its line, or a pattern found in its label."""
    items: tuple[int | str, ...] = getattr(corrections, which)
    lines = [item for item in items if isinstance(item, int)]
    hit = pl.col(LINE).is_in(lines) if lines else pl.lit(False)
    for pattern in (item for item in items if isinstance(item, str)):
        for column in (LABEL, MARK):
            hit = hit | pl.col(column).str.contains(f"(?i){pattern}").fill_null(False)
    return hit


def label_columns(text: Sequence[pl.Expr]) -> list[pl.Expr]:
    """`LABEL`, `MARK`, `VALUES` and `AMOUNTS` of a frame whose cells, in file order, are
    `text` (each a text expression)."""
    stripped = [t.str.strip_chars() for t in text]
    filled = [s.fill_null("") != "" for s in stripped]
    first = pl.coalesce([pl.when(f).then(s) for f, s in zip(filled, stripped, strict=True)])
    mark = pl.coalesce([pl.when(s.str.contains(MARK_PATTERN)).then(s) for s in stripped])
    pairs = zip(filled, stripped, strict=True)
    amounts = [f & s.str.contains(_AMOUNT).fill_null(False) for f, s in pairs]
    return [
        first.alias(LABEL),
        mark.alias(MARK),
        pl.sum_horizontal([f.cast(pl.Int32) for f in filled]).alias(VALUES),
        pl.sum_horizontal([a.cast(pl.Int32) for a in amounts]).alias(AMOUNTS),
    ]


@dataclasses.dataclass(slots=True)
class _Sums:
    """What the rows read so far add up to: the loans' balances (all, and since the last
    line set aside: the group), the subtotals since the last total, and, for the search
    of a subtotal of the last loans of a group (`suffix`), the running total after each
    of the group's last `_RECENT` loans that have a postcode or an id (`sure`)."""

    total: float = 0.0
    loans: int = 0
    group_total: float = 0.0
    group_loans: int = 0
    subtotals: float = 0.0
    subtotal_count: int = 0
    sure: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(1))
    sure_counts: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(1, np.int64))

    def matches(self, balance: float) -> str | None:
        """`subtotal` or `total` when `balance` is the group's, the book's or the
        subtotals' sum (within a pound a row added), else None."""
        if _near(balance, self.total - self.group_total, self.loans - self.group_loans):
            return "subtotal"
        if _near(balance, self.total, self.loans) or (
            self.subtotal_count > 1 and _near(balance, self.subtotals, self.subtotal_count)
        ):
            return "total"
        return None

    def set_aside(self, reason: str, balance: float | None) -> None:
        self.group_total, self.group_loans = self.total, self.loans
        if reason == "total":
            self.subtotals, self.subtotal_count = 0.0, 0
        elif balance is not None:
            self.subtotals += balance
            self.subtotal_count += 1


def _near(balance: float, total: float, count: int) -> bool:
    return count > 0 and abs(balance - total) <= count + _PENNIES


def _suffix(balance: float, totals: np.ndarray, counts: np.ndarray, least: int) -> bool:
    """Whether `balance` is the sum of the last `least` or more loans of `totals`
    (running totals after each, the last the total now; `counts` their loans), within a
    pound a loan."""
    if len(totals) <= least:
        return False
    now, loans = totals[-1], counts[-1]
    window = slice(max(0, len(totals) - _RECENT), len(totals) - least)
    before, had = totals[window], counts[window]
    slack = float(loans - had[0]) + _PENNIES if len(had) else 0.0
    if len(before) and np.all(np.diff(before) >= 0):  # balances >= 0: a sorted search
        low = np.searchsorted(before, now - balance - slack, side="left")
        high = np.searchsorted(before, now - balance + slack, side="right")
        before, had = before[low:high], had[low:high]
    hit = np.abs(now - before - balance) <= (loans - had) + _PENNIES
    return bool(np.any(hit & (loans - had >= least)))


def find_not_loans(
    frames: Iterable[pl.DataFrame],
    columns: Sequence[str],
    postcode: str | None,
    loan_id: str | None,
    balance: str | None,
    corrections: Corrections | None = None,
) -> list[NotLoan]:
    """The rows of a CSV's or a sheet's table that are not loans (see the module), from a
    reading's raw batches: every one of its `columns` as text, and `LINE`."""
    sums = _Sums()
    found: list[NotLoan] = []
    fields = _Fields(columns, postcode, loan_id, balance, corrections or Corrections())
    for raw in frames:
        found.extend(_batch_not_loans(raw, fields, sums))
    return found


@dataclasses.dataclass(frozen=True, slots=True)
class _Fields:
    """What the search reads: the table's columns, those of a loan's postcode, id and
    balance, and the corrections."""

    columns: Sequence[str]
    postcode: str | None
    loan_id: str | None
    balance: str | None
    corrections: Corrections

    def text(self, column: str | None) -> pl.Expr:
        if column is None:
            return pl.lit(None, pl.String)
        return pl.col(column).cast(pl.String).str.strip_chars()


def _batch_not_loans(raw: pl.DataFrame, fields: _Fields, sums: _Sums) -> list[NotLoan]:
    if raw.height == 0:
        return []
    corrections = fields.corrections
    shaped = fields.text(fields.postcode).str.contains(_POSTCODE).fill_null(False)
    ident = fields.text(fields.loan_id)
    is_id = ident.str.contains(_ID) & ~ident.str.contains(MARK_PATTERN)
    given = raw.select(
        pl.col(LINE), shaped.alias("shaped"), _money(fields.text(fields.balance)).alias("money")
    ).with_row_index("at")
    # What a row says is read only of the rows that may not be loans: those without a
    # full postcode (every row, when the corrections name lines or patterns).
    text = [pl.col(c).cast(pl.String) for c in fields.columns]
    maybe = raw.with_row_index("at")
    if not corrections:
        maybe = maybe.filter(~given.get_column("shaped"))
    flags = maybe.select(pl.col("at"), is_id.fill_null(False).alias("is_id"), *label_columns(text))
    rows = given.join(flags, on="at", how="inner")
    set_hit = _hits(corrections, "set_aside") if corrections else pl.lit(False)
    keep_hit = _hits(corrections, "keep") if corrections else pl.lit(False)
    mark = pl.col(MARK)
    words = ~pl.col("is_id") & (
        mark.is_not_null()
        | pl.col("money").is_not_null()
        | (pl.col(VALUES) <= pl.col(AMOUNTS))
        | (pl.col(VALUES) == 1)
    )
    may = ((~pl.col("shaped") | set_hit) & ~keep_hit) & (
        set_hit | (mark == pl.col(LABEL)).fill_null(False) | words
    )
    rows = (
        rows.with_columns(pl.col(LABEL).fill_null(""), set_hit.alias("set_hit"), may.alias("may"))
        .filter(pl.col("may"))
        .sort("at")
    )
    undecided = np.zeros(raw.height, dtype=bool)
    undecided[rows.get_column("at").to_numpy()] = True
    # The running totals of the loans sure to be loans (the rows not decided below).
    balances = given.get_column("money").fill_null(0.0).to_numpy().copy()
    balances[undecided] = 0.0
    running = np.cumsum(balances)
    counted = np.cumsum(~undecided)
    loans_at = np.flatnonzero(~undecided)
    base, base_count = sums.sure[-1], sums.sure_counts[-1]
    totals = np.concatenate([sums.sure, base + running[loans_at]])
    counts = np.concatenate([sums.sure_counts, base_count + counted[loans_at]])
    start = 0  # where the group's history begins in `totals`
    before_total, before_count = sums.total, sums.loans
    added_total, added_count = 0.0, 0  # rows decided below that are loans after all
    found: list[NotLoan] = []
    for row in rows.iter_rows(named=True):
        at = int(row["at"])
        sums.total = before_total + float(running[at]) + added_total
        sums.loans = before_count + int(counted[at]) + added_count
        end = len(sums.sure) + int(counted[at])  # the history up to this row
        group = (totals[start:end], counts[start:end])
        reason = _reason(row, sums, group)
        if reason is None:
            added_total += row["money"] or 0.0
            added_count += 1
            continue
        label = row[MARK] if reason == "label" else row[LABEL]
        found.append(NotLoan(int(row[LINE]), reason, str(label)))
        sums.set_aside(reason, row["money"])
        start = end - 1  # the total now begins the next group's history
    sums.total = before_total + float(running[-1]) + added_total
    sums.loans = before_count + int(counted[-1]) + added_count
    sums.sure, sums.sure_counts = totals[start:][-_RECENT:], counts[start:][-_RECENT:]
    return found


def _reason(
    row: Mapping[str, Any], sums: _Sums, group: tuple[np.ndarray, np.ndarray]
) -> str | None:
    """Why a row that may not be a loan is not one (a `REASONS` key), or None: a loan."""
    if row["set_hit"]:
        return "set_aside"
    if row[MARK] is not None and (row[MARK] == row[LABEL] or not row["is_id"]):
        return "label"
    if row["is_id"]:
        return None
    if row["money"] is not None:
        matched = sums.matches(row["money"])
        if matched is not None:
            return matched
        # Of the group's last loans (a group above had no subtotal): two or more, or one
        # beside at most one word (a label), as a loan holds more.
        words = row[VALUES] - row[AMOUNTS]
        if words <= 2 and _suffix(row["money"], *group, least=1 if words <= 1 else 2):
            return "subtotal"
    if 0 < row[VALUES] <= row[AMOUNTS]:
        return "only_amounts"
    if row[VALUES] == 1:
        return "one_value"
    return None


def _money(text: pl.Expr) -> pl.Expr:
    """An amount as a lender's file shows it (`input/lender_values`), negative in
    brackets too; null when the text is none."""
    negative = text.str.contains(r"^\(.*\)$").fill_null(False)
    bare = text.str.replace_all(r"[()£$€,\s]|GBP|gbp", "")
    number = pl.when(bare.str.contains(r"^[-+]?(?:\d+\.?\d*|\.\d+)$")).then(bare)
    value = number.cast(pl.Float64, strict=False)
    return pl.when(negative).then(-value).otherwise(value)
