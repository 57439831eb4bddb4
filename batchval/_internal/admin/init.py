"""`batchval init INPUT`: a mapping assistant. It reads a lender's file (every column as
text) and proposes a config: which column feeds each request field and why, the lender
columns found, and every property-type or built-form value it could not place, with its
count. The proposal is a working config (what it could not place is left commented out,
so those rows are problems, never guesses); `init` then reads the file again through the
proposal and says what a run would send and refuse, and at what price.

Each request field's column is chosen by its values first and its name second:
- postcode: the column most of whose values are full UK postcodes;
- propertyType and builtForm: the column most of whose values are the API's codes or the
  wordings batchval reads (`input/wordings`);
- bedrooms, floorAreaSqm, yearBuilt: a column named like the field (`Beds`, `Floor
  Area`, `Year Built`) whose values are whole numbers, or numbers, in the API's range;
- reference: a column named like a reference (`Ref`, `Loan Ref`), also kept as the
  loan id when lenders usually name the loan so;
- the lender columns by their usual names (`input/lender`).
A column the reader finds by itself (named as the API field) is left out of the config.

The proposal lists the pass-through columns (`input.passthrough`): every column no
request field is read from, in the file's order, less those holding a person's data
(`input/personal`, by name and by the first rows' values), which a comment names with
why. A list, not the default, so that what the outputs copy is written where the user
reads and can change it; the postcode is sent, and the loan id and other lender columns
stay.
"""

from __future__ import annotations

import collections
import dataclasses
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import polars as pl

from batchval._internal import postcodes
from batchval._internal.api import VALUATION_CREDITS
from batchval._internal.input import (
    BUILT_FORM_WORDINGS,
    ENUM_VALUES,
    LENDER_FIELDS,
    NEEDS_BUILT_FORM,
    ROW_FIELDS,
    SAMPLE_ROWS,
    WORDINGS,
    Header,
    InputOptions,
    LenderColumnError,
    ReadAs,
    by_heading,
    default_code,
    expanded_key,
    field_name_key,
    find_lender_columns,
    left_out_line,
    left_out_words,
    lender_matches,
    open_input,
    personal_columns,
    wording_key,
)
from batchval._internal.runs import read_line

# Distinct values kept per column: enough for any coded column, bounded for the others.
_DISTINCT_KEPT = 500
_ENOUGH = 0.6  # the share of a column's values that must fit a field for it to be chosen

# Name hints: a column whose name matches is the field's (when its values fit too).
_NAMED = {
    "postcode": re.compile(r"post\s*code|postal|\bpcode\b|\bzip\b"),
    "propertyType": re.compile(r"type|dwelling|property\s*kind"),
    "builtForm": re.compile(r"built\s*form|\bform\b|attachment"),
    "bedrooms": re.compile(r"bed"),
    "floorAreaSqm": re.compile(r"floor|area|sq\s*m|sqm|m2"),
    "yearBuilt": re.compile(r"year|built|construct|age"),
    "wallsEnergyEfficiency": re.compile(r"wall"),
    "reference": re.compile(r"\bref\b|reference|\bcase\b"),
}
_RANGES = {"bedrooms": (0, 20), "floorAreaSqm": (10, 2000), "yearBuilt": (1500, 2100)}


@dataclasses.dataclass(slots=True)
class _Column:
    """What one column's values look like, counted over the whole file."""

    name: str
    filled: int = 0
    postcodes: int = 0
    distinct: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    many: bool = False  # more distinct values than kept: no coded column
    numbers: dict[str, int] = dataclasses.field(default_factory=dict)  # field -> in range
    # The first rows' values as text (`personal.SAMPLE_ROWS`), for `input/personal`.
    head: list[str | None] = dataclasses.field(default_factory=list)

    def share(self, count: int) -> float:
        return count / self.filled if self.filled else 0.0


@dataclasses.dataclass(frozen=True, slots=True)
class Unplaced:
    """A value of a coded field the reader would refuse, with its rows and why."""

    value: str
    rows: int
    why: str


@dataclasses.dataclass(frozen=True, slots=True)
class Proposal:
    """The proposed mapping: field -> column, and why each was chosen."""

    rows: int
    columns: Mapping[str, str]  # request or lender field -> input column
    why: Mapping[str, str]
    automatic: Mapping[str, str]  # found by the reader itself (not written)
    lender: Mapping[str, str]
    unplaced: Mapping[str, tuple[Unplaced, ...]]  # field -> values
    missing: tuple[str, ...]  # required fields no column fits
    # What the outputs copy: every column no request field is read from (the lender
    # columns among them), in the file's order, less `personal`.
    passthrough: tuple[str, ...] = ()
    personal: Mapping[str, str] = dataclasses.field(default_factory=dict)  # column -> why
    # Lender field -> the other columns that name it, or name its kind, left by the rule.
    left: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    def config_columns(self) -> dict[str, str]:
        """What the config must say: every chosen column the reader would not find."""
        return {f: c for f, c in self.columns.items() if self.automatic.get(f) != c}


def _property_type(value: str) -> tuple[str, str] | None:
    """(how, why) a propertyType value reads: code, wording, or a problem's why."""
    code = default_code(value)
    if code in ENUM_VALUES["propertyType"]:
        return "code", code
    wording = WORDINGS.get(wording_key(value))
    if wording is None:
        return None
    if wording.property_type == NEEDS_BUILT_FORM:
        return "needs", "needs a builtForm (a built form column) to say which type"
    if wording.property_type is None:
        return "unplaced", wording.unplaced or ""
    return "wording", wording.property_type


def _built_form(value: str) -> bool:
    return (
        default_code(value) in ENUM_VALUES["builtForm"] or wording_key(value) in BUILT_FORM_WORDINGS
    )


def _walls(value: str) -> bool:
    return default_code(value) in ENUM_VALUES["wallsEnergyEfficiency"]


def survey(
    columns: Sequence[str], frames: Iterable[pl.DataFrame]
) -> tuple[dict[str, _Column], int]:
    """Every column's counts over the whole file (frames: every column as text), and the
    file's data rows."""
    seen = {name: _Column(name) for name in columns}
    rows = 0
    for frame in frames:
        rows += frame.height
        for name in columns:
            column = seen[name]
            if len(column.head) < SAMPLE_ROWS:
                wanted = SAMPLE_ROWS - len(column.head)
                column.head.extend(frame.get_column(name).head(wanted).cast(pl.String).to_list())
            text = frame.get_column(name).cast(pl.String).str.strip_chars()
            text = text.filter(text.is_not_null() & (text != ""))
            column.filled += text.len()
            if not column.many:
                counted = text.value_counts()
                column.distinct.update(
                    dict(
                        zip(
                            counted.to_series(0).to_list(),
                            counted.to_series(1).to_list(),
                            strict=True,
                        )
                    )
                )
                if len(column.distinct) > _DISTINCT_KEPT:
                    column.many, column.distinct = True, collections.Counter()
            compact = text.str.replace_all(r"\s+", "").str.to_uppercase()
            column.postcodes += int(compact.str.contains(postcodes.SHAPE_PATTERN).sum())
            number = text.str.replace_all(",", "").cast(pl.Float64, strict=False)
            for field, (low, high) in _RANGES.items():
                fits = number.is_between(low, high)
                if field != "floorAreaSqm":
                    fits = fits & (number == number.floor())
                column.numbers[field] = column.numbers.get(field, 0) + int(fits.sum())
    return seen, rows


def _coded_share(column: _Column, fits: Callable[[str], bool]) -> float:
    if column.many or not column.filled:
        return 0.0
    return column.share(sum(n for value, n in column.distinct.items() if fits(value)))


def propose(
    columns: Sequence[str],
    surveyed: Mapping[str, _Column],
    rows: int,
    hidden: Sequence[str] = (),
) -> Proposal:
    """The mapping the values and names suggest (see the module's doc); `hidden`, the
    columns a workbook hides, are left out of the pass-through (`input/personal`)."""
    chosen: dict[str, str] = {}
    why: dict[str, str] = {}
    taken: set[str] = set()

    def named(field: str, name: str) -> bool:
        return bool(_NAMED[field].search(name.lower())) or field_name_key(name) == field.lower()

    def pick(field: str, scores: dict[str, float], reason: str) -> None:
        fitting = {c: s for c, s in scores.items() if s >= _ENOUGH and c not in taken}
        if not fitting:
            return
        best = max(fitting, key=lambda c: (fitting[c], named(field, c)))
        chosen[field], why[field] = best, reason.format(share=f"{fitting[best]:.0%}")
        taken.add(best)

    info = list(surveyed.values())
    pick(
        "postcode",
        {c.name: c.share(c.postcodes) for c in info},
        "{share} of its values are full UK postcodes",
    )
    pick(
        "propertyType",
        {c.name: _coded_share(c, lambda v: _property_type(v) is not None) for c in info},
        "{share} of its values are property types the API or batchval's wordings know",
    )
    pick(
        "builtForm",
        {c.name: _coded_share(c, _built_form) for c in info if named("builtForm", c.name)},
        "named like a built form, and {share} of its values are built forms",
    )
    for field in ("bedrooms", "floorAreaSqm", "yearBuilt"):
        low, high = _RANGES[field]
        pick(
            field,
            {c.name: c.share(c.numbers.get(field, 0)) for c in info if named(field, c.name)},
            f"named like {field}, and {{share}} of its values are numbers from {low} to {high}",
        )
    pick(
        "wallsEnergyEfficiency",
        {c.name: _coded_share(c, _walls) for c in info if named("wallsEnergyEfficiency", c.name)},
        "named like wall efficiency, and {share} of its values are its codes",
    )
    # A reference is sent with each request: never a column held back (`input/personal`).
    references = [
        c.name
        for c in info
        if named("reference", c.name) and c.name not in taken and by_heading(c.name, hidden) is None
    ]
    if references:
        chosen["reference"] = references[0]
        why["reference"] = "named like a reference (sent with each request, and echoed back)"
    free = [c for c in columns if c not in taken or c == chosen.get("reference")]
    matches = lender_matches(free)
    try:
        lender = found = find_lender_columns(free, {})
    except LenderColumnError:  # two columns tie: the first (the rule's order), written
        found = {}
        lender = {f: names[0] for f, names in matches.items()}
    for field, column in lender.items():
        chosen[field] = column
        why[field] = "a lender column"
    automatic = {
        field: column
        for field, column in chosen.items()
        if field in ROW_FIELDS and field_name_key(column) == field.lower()
    }
    automatic.update({f: c for f, c in found.items() if chosen.get("reference") != c})
    missing = [f for f in ("postcode", "propertyType") if f not in chosen]
    if "bedrooms" not in chosen and "floorAreaSqm" not in chosen:
        missing.append("bedrooms or floorAreaSqm")
    sent = {c for f, c in chosen.items() if f in ROW_FIELDS} - set(lender.values())
    others = [c for c in columns if c not in sent]
    heads = {c: surveyed[c].head for c in others}
    sample = pl.DataFrame(heads, schema=dict.fromkeys(others, pl.String)) if others else None
    personal = personal_columns(others, sample, kept=set(lender.values()), hidden=hidden)
    return Proposal(
        rows=rows,
        columns=chosen,
        why=why,
        automatic=automatic,
        lender={f: c for f, c in chosen.items() if f in LENDER_FIELDS},
        unplaced=_unplaced(chosen, surveyed),
        missing=tuple(missing),
        passthrough=tuple(c for c in others if c not in personal),
        personal=personal,
        left=_left(lender, matches, set(chosen.values()), free),
    )


# Lender fields and the word (of a heading read out, `expanded_key`) that names their kind:
# a column with it that no field takes may be the one meant.
_KINDS: Mapping[str, str] = {
    "loan_balance": "balance",
    "origination_value": "valu",
    "last_valuation": "valu",
}


def _left(
    lender: Mapping[str, str],
    matches: Mapping[str, list[str]],
    taken: set[str],
    columns: Sequence[str],
) -> dict[str, tuple[str, ...]]:
    """Lender field -> the columns the rule left: others named like the field, and
    columns no field takes whose heading names the field's kind (`Prop Val` beside `Orig
    Val`, a value)."""
    left: dict[str, tuple[str, ...]] = {}
    for field, column in lender.items():
        others = [c for c in matches.get(field, []) if c != column]
        kind = _KINDS.get(field)
        if kind is not None:
            others += [
                c
                for c in columns
                if c not in taken
                and c not in others
                and kind in expanded_key(c)
                and "date" not in expanded_key(c)
            ]
        if others:
            left[field] = tuple(others)
    return left


def _by_count(counts: collections.Counter[str]) -> list[tuple[str, int]]:
    """Values by their count, most first, and ties by the value: the same file gives the
    same lines (a Counter keeps the order values were first seen, which polars does not
    fix)."""
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


# The reason an unplaced wording gives when the row's builtForm places it.
_BY_FORM = "placed where the row's builtForm says which"


def _unplaced(
    chosen: Mapping[str, str], surveyed: Mapping[str, _Column]
) -> dict[str, tuple[Unplaced, ...]]:
    found: dict[str, tuple[Unplaced, ...]] = {}
    column = chosen.get("propertyType")
    if column is not None:
        values = []
        has_form = "builtForm" in chosen
        for value, rows in _by_count(surveyed[column].distinct):
            read = _property_type(value)
            if read is None:
                values.append(Unplaced(value, rows, "none of the API's types or wordings"))
                continue
            elif read[0] == "unplaced":
                values.append(Unplaced(value, rows, "none of the API's types fits"))
            elif read[0] == "needs":
                placed = _BY_FORM if has_form else ""
                values.append(Unplaced(value, rows, f"needs a built form; {placed}".strip("; ")))
        found["propertyType"] = tuple(values)
    column = chosen.get("builtForm")
    if column is not None:
        found["builtForm"] = tuple(
            Unplaced(value, rows, "none of the API's built forms")
            for value, rows in _by_count(surveyed[column].distinct)
            if not _built_form(value)
        )
    return {f: v for f, v in found.items() if v}


# What the figures lose without each lender field: `init` says so for each one it found no
# column for (the run goes on without it).
LOST_WITHOUT: Mapping[str, str] = {
    "loan_balance": "no loan-to-value figures, no balance totals, no large-loan trigger",
    "origination_value": "no loan-to-value at origination; triggers need a last valuation",
    "origination_date": "no loan ages; the age trigger needs a last valuation date",
    "last_valuation": "the fall trigger is measured from the origination value, if any",
    "last_valuation_date": "the age triggers are measured from the origination date, if any",
    "loan_id": "problems and the report name a loan by its line only",
}


def render(
    proposal: Proposal,
    source: str,
    *,
    encoding: str | None = None,
    sheet: Chosen | None = None,
    header: Header | None = None,
    read_as: ReadAs | None = None,
) -> str:
    """The proposal as a commented YAML config: with the workbook's sheet read (`sheet`,
    and why) and the header's line (`header`, when it is not the first), so that a run
    reads the file as `init` did; and, once the file has been read through it
    (`read_as`), the lines it sets aside as not loans and the rows a workbook hides."""
    lines = [
        f"# batchval config proposed by `batchval init` for {source}",
        f"# ({proposal.rows} data rows). Check each mapping; then price it with",
        f"#   batchval run {source} --config THIS_FILE --out DIR --dry-run",
        "input:",
    ]
    if encoding is not None:
        lines.append(f"  encoding: {encoding}")
    if sheet is not None:
        lines.append(f"  # {sheet.why}")
        lines.append(f"  sheet: {_yaml_text(sheet.name)}")
    if header is not None and header.line > 1:
        said = header.said() or f"the header is on line {header.line}"
        lines.append(f"  # {said} ({'as stated' if header.stated else 'found'})")
        lines.append(f"  header_row: {header.line}")
    lines.extend(_not_loans_lines(read_as))
    columns = proposal.config_columns()
    if columns:
        lines.append("  columns:")
        for field, column in columns.items():
            lines.append(f"    # {proposal.why[field]}")
            if field in proposal.left:
                lines.append(f"    # {_left_words(proposal.left[field])}")
            lines.append(f"    {field}: {_yaml_text(column)}")
    else:
        lines.append("  columns: {}")
    for field, column in proposal.automatic.items():
        if field not in columns:
            lines.append(f"  # {field}: {column!r} is found by its name (nothing to map)")
            if field in proposal.left:
                lines.append(f"  #   {_left_words(proposal.left[field])}")
    for field in proposal.missing:
        lines.append(f"  # {field}: no column fits; name yours under columns")
    unfound = [f"{f} ({lost})" for f, lost in LOST_WITHOUT.items() if f not in proposal.lender]
    if unfound:
        said = f"no column found for {'; '.join(unfound)}: name yours under columns."
        wrapped = textwrap.wrap(said, 84, break_long_words=False, break_on_hyphens=False)
        lines.extend(f"  # {line}" for line in wrapped)
    lines.append("  # The columns results.parquet, problems.parquet and exports copy from each row")
    lines.append("  # (the lender columns are read for the figures whether listed or not).")
    if proposal.personal:
        said = (
            f"{left_out_words(proposal.personal)}; list one here only if the outputs must carry it."
        )
        lines.extend(f"  # {line}" for line in textwrap.wrap(said, 84, break_long_words=False))
    listed = "".join(f"\n    - {_yaml_text(c)}" for c in proposal.passthrough)
    lines.append(f"  passthrough:{listed or ' []'}")
    if proposal.unplaced:
        lines.append("  # Values the reader cannot place: their rows are problems until you")
        lines.append("  # map them (uncomment, and choose one of the codes given).")
        lines.append("  values: {}")
        for field, values in proposal.unplaced.items():
            codes = ", ".join(ENUM_VALUES[field])
            lines.append(f"  #   {field}:   # one of {codes}")
            for value in values:
                lines.append(
                    f"  #     {_yaml_text(value.value)}: ...   # {value.rows} rows: {value.why}"
                )
    return "\n".join(lines) + "\n"


# The lines set aside that a proposal lists one by one (the rest are counted).
_LISTED_NOT_LOANS = 30


def _not_loans_lines(read_as: ReadAs | None) -> list[str]:
    """The proposal's comments on the lines set aside as not loans (each with why) and on
    the rows a workbook hides, with the `not_loans` setting that corrects them."""
    if read_as is None:
        return []
    lines = []
    if read_as.not_loans:
        count = len(read_as.not_loans)
        lines.append(
            f"  # {count} line{'s' if count > 1 else ''} of the table set aside as not loans:"
        )
        for not_loan in read_as.not_loans[:_LISTED_NOT_LOANS]:
            lines.append(f"  #   {not_loan.said()}")
        if count > _LISTED_NOT_LOANS:
            lines.append(
                f"  #   and {count - _LISTED_NOT_LOANS} more (a run lists them all in "
                "summary.json, input_read.not_loans)"
            )
        lines.append("  # To correct it: keep reads lines as loans after all, set_aside sets")
        lines.append("  # more aside; by line number (lines move each month) or by pattern.")
        lines.append("  # not_loans:")
        lines.append("  #   keep: []")
        lines.append("  #   set_aside: []")
    if read_as.hidden_rows:
        shown = ", ".join(str(line) for line in read_as.hidden_rows[:10])
        more = f" and {len(read_as.hidden_rows) - 10} more" if len(read_as.hidden_rows) > 10 else ""
        count = len(read_as.hidden_rows)
        lines.append(
            f"  # The workbook hides (or filters out) {count} row{'s' if count > 1 else ''} "
            f"(line {shown}{more}): read as loans, as every row."
        )
    return lines


def _yaml_text(text: str) -> str:
    """`text` as a YAML scalar: quoted (single quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"


@dataclasses.dataclass(frozen=True, slots=True)
class Chosen:
    """The sheet a proposal reads, and why it was chosen."""

    name: str
    why: str
    cover: bool = False  # chosen over a first sheet that holds no table


@dataclasses.dataclass(frozen=True, slots=True)
class Trial:
    """The file read through the proposal, as a run would read it."""

    rows: int
    requests: int  # distinct requests a run would send
    refused: Mapping[str, int]  # rule -> rows
    read_as: ReadAs | None = None

    def lines(self) -> list[str]:
        pounds = self.requests * VALUATION_CREDITS / 100
        sent = self.rows - sum(self.refused.values())
        found = read_line(None if self.read_as is None else self.read_as.to_json())
        found += [
            f"with it: {sent} of {self.rows} rows valued by {self.requests} request(s), "
            f"£{pounds:,.2f} at {VALUATION_CREDITS}p each (a live run; test mode is free)"
        ]
        if self.refused:
            kinds = ", ".join(f"{rule} {n}" for rule, n in sorted(self.refused.items()))
            found.append(f"refused before sending: {kinds} (problems.parquet will say why)")
        return found


def trial(path: Path, options: InputOptions) -> Trial:
    """Read `path` through `options` as a run would; raises InputError when it cannot."""
    rows = 0
    requests: set[str] = set()
    refused: collections.Counter[str] = collections.Counter()
    source = open_input(path, options)
    for batch in source.batches(riding=True):
        checked = batch.checked
        rows += checked.height
        requests.update(checked.get_column("request_json").drop_nulls().to_list())
        refused.update(checked.get_column("rule").drop_nulls().to_list())
    return Trial(rows, len(requests), dict(refused), source.read_as)


def _left_words(left: Sequence[str]) -> str:
    listed = ", ".join(repr(c) for c in left)
    return (
        f"left {listed}, which also {'names' if len(left) == 1 else 'name'} it: "
        "map the one meant under input.columns"
    )


def summary_lines(proposal: Proposal) -> list[str]:
    """What the proposal maps, one line a field, for the terminal."""
    found = []
    for field, column in proposal.columns.items():
        how = ", found by its name" if proposal.automatic.get(field) == column else ""
        found.append(f"  {field} <- {column!r} ({proposal.why[field]}{how})")
        if field in proposal.left:
            found.append(f"    {_left_words(proposal.left[field])}")
    for field in proposal.missing:
        found.append(f"  {field}: no column fits (name yours under input.columns)")
    if proposal.personal:
        found.append(f"  {left_out_line(proposal.personal)}")
    for field, values in proposal.unplaced.items():
        by_form = [v for v in values if v.why.endswith(_BY_FORM)]
        if by_form:
            listed = ", ".join(f"{v.value!r} ({v.rows})" for v in by_form)
            found.append(f"  {field}: {listed}: placed by each row's builtForm where it has one")
        values = tuple(v for v in values if v not in by_form)
        if values:
            listed = ", ".join(f"{v.value!r} ({v.rows})" for v in values[:8])
            more = f" and {len(values) - 8} more" if len(values) > 8 else ""
            found.append(f"  {field}: not placed: {listed}{more}: see the proposal's values")
    return found
