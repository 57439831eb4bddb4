"""The Arrow schemas of `results.parquet` and `problems.parquet`: a contract.

Scripts, notebooks and warehouse loads read these files by column name and type, so a
column is never renamed, retyped or moved once released, and any change to the columns
comes with a new `SCHEMA_VERSION` (kept in each file's schema metadata) and a line in
docs/outputs.md.

One table per file says, for each fixed column, its name, its Arrow type, its one-line
description and how its value is taken from the row's record (`contract/records`): a
result from the `Valuation` read once from the answer (kept as its record in the
checkpoint), a problem from the `ProblemRow`. The
Parquet schema, the writer's columns and docs/outputs.md all come from these tables.

Layout of both files: `row_number` first, then the pass-through columns (the input's own
columns, such as a loan id, named and typed as in the input: `pa.Schema` kept in the
checkpoint at ingest), then the fixed columns in the table's order. A pass-through
column whose name is also a fixed column's (compared case-insensitively, since SQL
engines such as DuckDB fold case) is written as `<name>_input`; see
`passthrough_columns`. `commentary` and `rebuild_cost` are there only when the run asked
for them (`extras`), and the lender columns only when the input has what they are made
from (a loan balance, an origination value or date, a last valuation or its date:
`contract/lender`): a column that could only be null is left out.

Every field carries its one-line description in its Arrow metadata (`description`), so
that `pq.read_schema(path)` documents the file it is read from. Timestamps are UTC
instants in milliseconds. The nested `commentary` and `rebuild_cost` columns keep the
API's members (docs/api.md, section 4) in snake_case.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa

# The API's member names; the columns are their snake_case.
from batchval._internal.api import AREA_INSIGHTS_MEMBERS, COMMENTARY_MEMBERS, Valuation
from batchval._internal.contract.lender import (
    FLAG_COLUMNS,
    LTV_COLUMNS,
    ORIGINATION_COLUMNS,
    ORIGINATION_DATE_COLUMNS,
    REVALUATION_COLUMNS,
)
from batchval._internal.contract.records import ProblemRow, ValuedRow
from batchval._internal.input import SOURCE_ROW as PASSTHROUGH_ROW
from batchval._internal.place import Column

# 9: with `index.source` (`ukhpi`), the index columns last (`INDEX_DESCRIPTIONS`): each
#    loan rolled forward by the UK House Price Index, its value method and the
#    market-fall trigger.
# 8: the revaluation columns (revaluation_basis, fall_since_last_valuation,
#    valuation_age_years, trigger_fall, trigger_age, trigger_large_loan_age) after
#    model_changed, last, when the input has a last valuation or an origination
#    value or date; `last_valuation` and `last_valuation_date` read as lender money and
#    dates.
# 7: `source_row` (each row's line in the input) after `row_number`; lender columns found
#    by their names are passed through whether listed under `passthrough` or not, and
#    personal columns are not by default. 6: a lender's money and dates read as numbers
#    and dates; months_since_origination.
# 5: `source` (`api`, or `book` for a row carried from `--book`) after the pass-through
#    columns. 4: the lender columns, when the input has a balance or an origination value; the run's
#    manifest in the file metadata. 3: pass-through columns keep their input types;
#    commentary and rebuild_cost only when asked for. 2: problems gained valuation_id
#    and answer.
SCHEMA_VERSION = "9"
PASSTHROUGH_SUFFIX = "_input"

_TIMESTAMP = pa.timestamp("ms", tz="UTC")
_S, _I64, _F64 = pa.string(), pa.int64(), pa.float64()

_REBUILD_COST_MEMBERS: tuple[tuple[str, pa.DataType], ...] = (
    ("estimated", pa.bool_()),
    ("reason", _S),
    ("low", _I64),
    ("typical", _I64),
    ("high", _I64),
    ("pricesAsOf", _S),
)


def snake_case(name: str) -> str:
    """`areaInsights` -> `area_insights`."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _commentary_type(api_names: bool) -> pa.DataType:
    def name(member: str) -> str:
        return member if api_names else snake_case(member)

    insights = pa.struct([(name(m), _S) for m in AREA_INSIGHTS_MEMBERS])
    return pa.struct(
        [(name(m), insights if m == "areaInsights" else _S) for m in COMMENTARY_MEMBERS]
    )


def _rebuild_cost_type(api_names: bool) -> pa.DataType:
    return pa.struct(
        [(m if api_names else snake_case(m), kind) for m, kind in _REBUILD_COST_MEMBERS]
    )


COMMENTARY_TYPE = _commentary_type(api_names=False)
REBUILD_COST_TYPE = _rebuild_cost_type(api_names=False)
# The same layouts under the API's names: the columns' `json_type`, under which the JSON
# objects are converted before the arrays are viewed as the snake_case types.
COMMENTARY_JSON_TYPE = _commentary_type(api_names=True)
REBUILD_COST_JSON_TYPE = _rebuild_cost_type(api_names=True)


# The part of a result row the answer columns read (`Column.part`): read once a batch.
_VALUATION = operator.attrgetter("valuation")


def _answer(
    name: str,
    kind: pa.DataType,
    description: str,
    get: Callable[[Valuation], Any],
    asked_by: str | None = None,
    json_type: pa.DataType | None = None,
) -> Column[ValuedRow]:
    """A result column read from the valuation: null when the answer cannot be read."""

    def value(row: ValuedRow) -> Any:
        return None if row.valuation is None else get(row.valuation)

    return Column(
        name,
        kind,
        description,
        value,
        asked_by=asked_by,
        part=_VALUATION,
        of_part=get,
        json_type=json_type,
    )


def _lender(name: str, kind: pa.DataType, description: str, asked_by: str) -> Column[ValuedRow]:
    """A lender column: the LenderFigures member of the same name."""
    get = operator.attrgetter(name)

    def value(row: ValuedRow) -> Any:
        return None if row.lender is None else get(row.lender)

    return Column(name, kind, description, value, asked_by=asked_by)


ROW_NUMBER: Column[Any] = Column(
    "row_number",
    _I64,
    "The row's 1-based position in the input.",
    operator.attrgetter("row_number"),
    nullable=False,
)

# Taken from the stored pass-through values (`input/layout.SOURCE_ROW`), not a record.
SOURCE_ROW: Column[Any] = Column(
    "source_row",
    _I64,
    "The row's line as the user's program numbers it: the sheet's row, or the CSV file's"
    " line, the lines above the header counted; a Parquet file's row position.",
    lambda _: None,
)

RESULT_TAIL: tuple[Column[ValuedRow], ...] = (
    Column(
        "source",
        _S,
        "`api`: valued by this run; `book`: carried from the --book, with its own "
        "valued_at; `index`: not valued, there for its index columns (index.source).",
        operator.attrgetter("source"),
    ),
    Column("valuation_id", _S, "The API's valuation id (val_...).", lambda r: r.valuation_id),
    _answer(
        "mode",
        _S,
        "`test` for a sandbox or test-mode valuation, else `live`.",
        lambda v: "test" if v.mode == "test" else "live",
    ),
    _answer(
        "valued_at", _TIMESTAMP, "When the API made the valuation (UTC).", lambda v: v.valued_at
    ),
    _answer(
        "estimate", _I64, "Middle figure of the valuation, pounds.", lambda v: v.figures.estimate
    ),
    _answer("range_low", _I64, "Low end of the likely range, pounds.", lambda v: v.figures.low),
    _answer("range_high", _I64, "High end of the likely range, pounds.", lambda v: v.figures.high),
    _answer(
        "coverage",
        _F64,
        "Back-test share of sales that fell inside such ranges.",
        lambda v: v.figures.coverage,
    ),
    _answer("currency", _S, "Currency of the figures (GBP).", lambda v: v.figures.currency),
    _answer(
        "indexed_to",
        _S,
        "Month (YYYY-MM) of the price index the figures use.",
        lambda v: v.figures.indexed_to,
    ),
    _answer("sector", _S, "Postcode sector of the home.", lambda v: v.sector),
    _answer(
        "local_authority",
        _S,
        "Statistical-office local authority code.",
        lambda v: v.local_authority,
    ),
    _answer(
        "data_quality",
        _S,
        "`full`, or `partial` when details were filled in.",
        lambda v: v.data_quality,
    ),
    _answer(
        "model_version",
        _TIMESTAMP,
        "Build time of the model that made the figures (UTC).",
        lambda v: v.model_version,
    ),
    _answer(
        "input_postcode",
        _S,
        "Postcode valued, as the API normalised it.",
        lambda v: v.input.postcode,
    ),
    _answer("input_property_type", _S, "Property type valued.", lambda v: v.input.property_type),
    _answer("bedrooms", _I64, "Bedrooms sent.", lambda v: v.input.bedrooms),
    _answer(
        "floor_area_sqm",
        _F64,
        "Floor area valued, square metres.",
        lambda v: v.input.floor_area_sqm,
    ),
    _answer(
        "floor_area_source",
        _S,
        "`request` (sent) or `bedrooms` (estimated).",
        lambda v: v.input.floor_area_source,
    ),
    _answer("year_built", _I64, "Year built sent.", lambda v: v.input.year_built),
    _answer("built_form", _S, "Built form sent.", lambda v: v.input.built_form),
    _answer(
        "walls_energy_efficiency",
        _S,
        "Wall energy efficiency sent.",
        lambda v: v.input.walls_energy_efficiency,
    ),
    _answer("reference", _S, "The request's reference, echoed by the API.", lambda v: v.reference),
    _answer(
        "commentary",
        COMMENTARY_TYPE,
        "Plain-English commentary, if the run or the row asked for it; show its disclaimer.",
        lambda v: v.commentary,
        asked_by="commentary",
        json_type=COMMENTARY_JSON_TYPE,
    ),
    _answer(
        "rebuild_cost",
        REBUILD_COST_TYPE,
        "Rebuild cost for insurance, if the run or the row asked for it.",
        lambda v: v.rebuild_cost,
        asked_by="rebuildCost",
        json_type=REBUILD_COST_JSON_TYPE,
    ),
    Column(
        "credits_charged",
        _I64,
        "Credits this DIR's call was charged (a fresh charge; 0 for a replay answered free"
        " or an uncertain one, see charges.parquet); rows sharing one request carry it on"
        " the first row only.",
        lambda r: r.credits,
    ),
    Column("idempotency_key", _S, "Idempotency-Key the request was sent with.", lambda r: r.key),
    _lender(
        "indexed_ltv",
        _F64,
        "Loan balance / estimate, a ratio (0.75 is 75 %); null without a usable balance.",
        LTV_COLUMNS,
    ),
    _lender(
        "ltv_low_estimate",
        _F64,
        "Loan balance / range_low: the conservative LTV; null as indexed_ltv is.",
        LTV_COLUMNS,
    ),
    _lender(
        "ltv_band",
        _S,
        "Band of indexed_ltv in percent (0-60, 60-75, ..., over 100): upper edge included.",
        LTV_COLUMNS,
    ),
    _lender(
        "change_since_origination",
        _F64,
        "estimate / origination_value - 1 (0.12 is 12 % up); null without a value above 0.",
        ORIGINATION_COLUMNS,
    ),
    _lender(
        "months_since_origination",
        _I64,
        "Whole months from origination_date to the run's date; null without a date.",
        ORIGINATION_DATE_COLUMNS,
    ),
    _lender(
        "partial_data",
        pa.bool_(),
        "data_quality is not `full`: some details were filled from typical values.",
        FLAG_COLUMNS,
    ),
    _lender(
        "wide_range",
        pa.bool_(),
        "(range_high - range_low) / estimate is above lender.wide_range (default 0.3).",
        FLAG_COLUMNS,
    ),
    _lender(
        "stale_index",
        pa.bool_(),
        "indexed_to is over lender.stale_after_months (6) months before the run's month.",
        FLAG_COLUMNS,
    ),
    _lender(
        "model_changed",
        pa.bool_(),
        "The run's valuations came from more than one model build (see model_version).",
        FLAG_COLUMNS,
    ),
    _lender(
        "revaluation_basis",
        _S,
        "What the revaluation figures are measured from: `last_valuation` (the loan's last "
        "valuation and its date), else `origination` (its origination value and date stand "
        "in); null with neither.",
        REVALUATION_COLUMNS,
    ),
    _lender(
        "fall_since_last_valuation",
        _F64,
        "1 - estimate / the basis's value (0.12 is a 12 % fall; below 0 a rise); null "
        "without a value above 0.",
        REVALUATION_COLUMNS,
    ),
    _lender(
        "valuation_age_years",
        _F64,
        "Years from the basis's date to the run's UTC date (days / 365.25); null without a "
        "date, or for one after the run's.",
        REVALUATION_COLUMNS,
    ),
    _lender(
        "trigger_fall",
        pa.bool_(),
        "fall_since_last_valuation is above lender.revaluation.fall_share (0.10); null without it.",
        REVALUATION_COLUMNS,
    ),
    _lender(
        "trigger_age",
        pa.bool_(),
        "The basis's date is at least lender.revaluation.max_age_years (5) before the run's "
        "date (its anniversary reached); null without a date.",
        REVALUATION_COLUMNS,
    ),
    _lender(
        "trigger_large_loan_age",
        pa.bool_(),
        "The balance is above lender.revaluation.large_loan_balance (2,600,000) and the "
        "basis's date at least large_loan_max_age_years (3) before the run's date; null "
        "without a balance, or a large loan without a date.",
        REVALUATION_COLUMNS,
    ),
)


def _problem(name: str, kind: pa.DataType, description: str) -> Column[ProblemRow]:
    """A problems column: the ProblemRow member of the same name."""
    return Column(name, kind, description, operator.attrgetter(name))


PROBLEM_TAIL: tuple[Column[ProblemRow], ...] = (
    _problem("stage", _S, "`input` (refused before sending) or `api` (refused by it)."),
    _problem("field", _S, "The request field at fault, when known."),
    _problem("type", _S, "The API's error type name, or the validation rule."),
    _problem("code", _S, "The API's more specific reason, when given."),
    _problem("status", _I64, "HTTP status of the API's answer; null for input problems."),
    _problem("detail", _S, "What went wrong and what to do, in words."),
    _problem("retryable", pa.bool_(), "Whether the same row may succeed if sent again later."),
    _problem("attempts", _I64, "Times the request was sent (0 for input problems)."),
    _problem(
        "valuation_id",
        _S,
        "For `unreadable-answer`: the id of the valuation the API made (and charged).",
    ),
    _problem(
        "answer",
        _S,
        "For `unreadable-answer`: the API's answer exactly as received, JSON text.",
    ),
)

# The columns `index.source` adds after every other (valuations/indexing), in order, with
# their types: `contract/indexation.INDEX_COLUMNS`.
INDEX_DESCRIPTIONS: dict[str, tuple[pa.DataType, str]] = {
    "hpi_value": (
        _F64,
        "The loan's base (hpi_basis) rolled forward by its local authority's index (the UK "
        "House Price Index, or the API's own with index.source api) to the index's latest "
        "month: base x I(hpi_to) / I(hpi_from), to the penny. "
        "Monitoring, never a valuation; null with hpi_reason.",
    ),
    "hpi_ltv": (_F64, "The loan balance / hpi_value; null without either."),
    "hpi_basis": (
        _S,
        "What hpi_value is rolled from, the newest by its month: `avm` (the estimate, at its "
        "indexed_to), `last_valuation` (the lender's, at its date's month), `origination`; "
        "`none`.",
    ),
    "hpi_from": (_S, "The base's month (YYYY-MM)."),
    "hpi_to": (
        _S,
        "The index month the value is rolled to: the latest for the authority (YYYY-MM); the "
        "base's own when it is not older.",
    ),
    "hpi_change": (_F64, "I(hpi_to) / I(hpi_from) - 1: a rise is positive."),
    "hpi_reason": (
        _S,
        "Why a loan is not rolled forward: `no_base`, `no_authority`, "
        "`authority_not_in_index`, `base_before_index`, `month_missing`; null when it is.",
    ),
    "value_method": (
        _S,
        "`avm` (valued tonight), `avm_indexed` (a valuation carried from the book, rolled "
        "forward), `indexed` (rolled from the lender's own figures), `none`.",
    ),
    "trigger_market_fall": (
        pa.bool_(),
        "The authority's index fell by more than lender.revaluation.fall_share (0.10) from "
        "the month of the lender's last valuation (else the origination) to its latest: "
        "exact, never from an estimate; null when the index cannot say.",
    ),
}


def index_fields() -> list[pa.Field]:
    """The index columns' fields, each with its description, as results.parquet has them."""
    return [
        pa.field(name, kind, metadata={"description": description})
        for name, (kind, description) in INDEX_DESCRIPTIONS.items()
    ]


RESULT_COLUMNS: dict[str, str] = {
    c.name: c.description for c in (ROW_NUMBER, SOURCE_ROW, *RESULT_TAIL)
}
PROBLEM_COLUMNS: dict[str, str] = {
    c.name: c.description for c in (ROW_NUMBER, SOURCE_ROW, *PROBLEM_TAIL)
}


def result_columns(extras: Collection[str] = ()) -> tuple[Column[ValuedRow], ...]:
    """The fixed result columns of a run that asked for these include items (and lender
    column groups)."""
    return tuple(c for c in RESULT_TAIL if c.asked_by is None or c.asked_by in extras)


def passthrough_columns(passthrough: Sequence[str], fixed: Iterable[str]) -> list[str]:
    """The output names of the pass-through columns, in order: the input's own names, with
    `_input` added to one that clashes with a fixed column (or with an earlier name)."""
    taken = {name.casefold() for name in fixed}
    names: list[str] = []
    for name in passthrough:
        out = name
        while out.casefold() in taken:
            out += PASSTHROUGH_SUFFIX
        taken.add(out.casefold())
        names.append(out)
    return names


def given_fields(passthrough: pa.Schema, fixed: Iterable[str]) -> list[pa.Field]:
    """The stored pass-through columns as written: each row's line first as `source_row`
    (none in a DIR begun before lines were kept), then the input's own columns, renamed
    `_input` where a name is a fixed column's (`passthrough_columns`)."""
    fields = list(passthrough)
    lines = [SOURCE_ROW.field()] if fields and fields[0].name == PASSTHROUGH_ROW else []
    fields = fields[len(lines) :]
    names = passthrough_columns([f.name for f in fields], [*fixed, SOURCE_ROW.name])
    return lines + [
        pa.field(
            out,
            field.type,
            metadata={
                "description": f"Pass-through input column {field.name!r}"
                + ("." if out == field.name else ", renamed: its name is a fixed column's.")
            },
        )
        for field, out in zip(fields, names, strict=True)
    ]


def _schema(
    passthrough: pa.Schema,
    tail: Sequence[Column[Any]],
    kind: str,
    metadata: Mapping[str, str] | None = None,
) -> pa.Schema:
    # Renamed against both files' columns, so that a pass-through column has one name in
    # results.parquet and problems.parquet alike (a join on it needs no mapping).
    given = given_fields(passthrough, [*RESULT_COLUMNS, *PROBLEM_COLUMNS, *INDEX_DESCRIPTIONS])
    return pa.schema(
        [ROW_NUMBER.field(), *given, *(c.field() for c in tail)],
        metadata={
            **(metadata or {}),
            "batchval.file": kind,
            "batchval.schema_version": SCHEMA_VERSION,
        },
    )


def results_schema(
    passthrough: pa.Schema,
    extras: Collection[str] = (),
    metadata: Mapping[str, str] | None = None,
) -> pa.Schema:
    """The schema of results.parquet for these pass-through input columns, in a run that
    asked for these include items (`commentary`, `rebuildCost`) and lender column groups;
    `metadata` joins the schema's key-value metadata (the run's manifest)."""
    return _schema(passthrough, result_columns(extras), "results", metadata)


def problems_schema(passthrough: pa.Schema, metadata: Mapping[str, str] | None = None) -> pa.Schema:
    """The schema of problems.parquet for these pass-through input columns."""
    return _schema(passthrough, PROBLEM_TAIL, "problems", metadata)


def type_name(kind: pa.DataType) -> str:
    """An Arrow type as docs/outputs.md names it (`list of ...` in words: a `<` in a
    Markdown table would be read as HTML)."""
    if pa.types.is_timestamp(kind):
        return f"timestamp ({kind.unit}, {kind.tz or 'no zone'})"
    if pa.types.is_struct(kind):
        return "struct"
    if pa.types.is_list(kind):
        return f"list of {type_name(kind.value_type)}"
    return {"double": "float64", "date32[day]": "date32"}.get(str(kind), str(kind))


def _nested(prefix: str, kind: pa.DataType) -> Iterator[tuple[str, pa.Field]]:
    """Every field inside `kind`, with its dotted path (`[]` for a list's items)."""
    if pa.types.is_list(kind):
        prefix, kind = prefix + "[]", kind.value_type
    if not pa.types.is_struct(kind):
        return
    for f in kind:
        path = f"{prefix}.{f.name}"
        yield path, f
        yield from _nested(path, f.type)


def markdown_table(columns: Iterable[Column[Any]], *, nested: bool = False) -> str:
    """The columns as the Markdown table docs/outputs.md shows (tests hold the two equal);
    `nested`: each column's nested fields too, each with the description in its metadata
    (street_analysis.parquet's sections)."""
    lines = ["| column | type | meaning |", "|---|---|---|"]
    for c in columns:
        lines.append(f"| `{c.name}` | {type_name(c.type)} | {c.description} |")
        for path, f in _nested(c.name, c.type) if nested else ():
            said = (f.metadata or {}).get(b"description", b"").decode()
            lines.append(f"| `{path}` | {type_name(f.type)} | {said} |")
    return "\n".join(lines) + "\n"
