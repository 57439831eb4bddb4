"""The Arrow schemas of `results.parquet` and `problems.parquet`: a contract.

Scripts, notebooks and warehouse loads read these files by column name and type, so a
column is never renamed, retyped or moved once released, and any change to the columns
comes with a new `SCHEMA_VERSION` (kept in each file's schema metadata).

Layout of both files: `row_number` first, then the pass-through columns (the input's
own columns, such as a loan id, always as strings, named as in the input), then the
fixed columns of `RESULT_COLUMNS` or `PROBLEM_COLUMNS` in that order. A pass-through
column whose name is also a fixed column's (compared case-insensitively, since SQL
engines such as DuckDB fold case) is written as `<name>_input`; see
`passthrough_columns`.

Every field carries its one-line description in its Arrow metadata (`description`), so
that `pq.read_schema(path)` documents the file it is read from. `RESULT_COLUMNS` and
`PROBLEM_COLUMNS` map each fixed column to the same description, for the README.

Timestamps are UTC instants in milliseconds. The nested `commentary` and `rebuild_cost`
columns keep the API's members (docs/api.md, section 4) in snake_case.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence

import pyarrow as pa

# The API's member names; the columns are their snake_case.
from batchval.api.vocabulary import AREA_INSIGHTS_MEMBERS, COMMENTARY_MEMBERS

SCHEMA_VERSION = "2"  # 2: problems gained valuation_id and answer
PASSTHROUGH_SUFFIX = "_input"

_TIMESTAMP = pa.timestamp("ms", tz="UTC")

_REBUILD_COST_MEMBERS: tuple[tuple[str, pa.DataType], ...] = (
    ("estimated", pa.bool_()),
    ("reason", pa.string()),
    ("low", pa.int64()),
    ("typical", pa.int64()),
    ("high", pa.int64()),
    ("pricesAsOf", pa.string()),
)


def snake_case(name: str) -> str:
    """`areaInsights` -> `area_insights`."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _commentary_type(api_names: bool) -> pa.DataType:
    def name(member: str) -> str:
        return member if api_names else snake_case(member)

    insights = pa.struct([(name(m), pa.string()) for m in AREA_INSIGHTS_MEMBERS])
    return pa.struct(
        [(name(m), insights if m == "areaInsights" else pa.string()) for m in COMMENTARY_MEMBERS]
    )


def _rebuild_cost_type(api_names: bool) -> pa.DataType:
    return pa.struct(
        [(m if api_names else snake_case(m), kind) for m, kind in _REBUILD_COST_MEMBERS]
    )


COMMENTARY_TYPE = _commentary_type(api_names=False)
REBUILD_COST_TYPE = _rebuild_cost_type(api_names=False)
# The same layouts under the API's names: the writer converts the JSON objects with these,
# then views the arrays as the snake_case types (same buffers, no copy).
COMMENTARY_JSON_TYPE = _commentary_type(api_names=True)
REBUILD_COST_JSON_TYPE = _rebuild_cost_type(api_names=True)


@dataclasses.dataclass(frozen=True, slots=True)
class _Column:
    name: str
    type: pa.DataType
    description: str
    nullable: bool = True

    def field(self) -> pa.Field:
        return pa.field(
            self.name, self.type, self.nullable, metadata={"description": self.description}
        )


_ROW_NUMBER = _Column(
    "row_number", pa.int64(), "The row's 1-based position in the input.", nullable=False
)

_RESULT_TAIL = (
    _Column("valuation_id", pa.string(), "The API's valuation id (val_...)."),
    _Column("mode", pa.string(), "`test` for a sandbox or test-mode valuation, else `live`."),
    _Column("valued_at", _TIMESTAMP, "When the API made the valuation (UTC)."),
    _Column("estimate", pa.int64(), "Middle figure of the valuation, pounds."),
    _Column("range_low", pa.int64(), "Low end of the likely range, pounds."),
    _Column("range_high", pa.int64(), "High end of the likely range, pounds."),
    _Column("coverage", pa.float64(), "Back-test share of sales that fell inside such ranges."),
    _Column("currency", pa.string(), "Currency of the figures (GBP)."),
    _Column("indexed_to", pa.string(), "Month (YYYY-MM) of the price index the figures use."),
    _Column("sector", pa.string(), "Postcode sector of the home."),
    _Column("local_authority", pa.string(), "Statistical-office local authority code."),
    _Column("data_quality", pa.string(), "`full`, or `partial` when details were filled in."),
    _Column("model_version", _TIMESTAMP, "Build time of the model that made the figures (UTC)."),
    _Column("input_postcode", pa.string(), "Postcode valued, as the API normalised it."),
    _Column("input_property_type", pa.string(), "Property type valued."),
    _Column("bedrooms", pa.int64(), "Bedrooms sent."),
    _Column("floor_area_sqm", pa.float64(), "Floor area valued, square metres."),
    _Column("floor_area_source", pa.string(), "`request` (sent) or `bedrooms` (estimated)."),
    _Column("year_built", pa.int64(), "Year built sent."),
    _Column("built_form", pa.string(), "Built form sent."),
    _Column("walls_energy_efficiency", pa.string(), "Wall energy efficiency sent."),
    _Column("reference", pa.string(), "The request's reference, echoed by the API."),
    _Column("commentary", COMMENTARY_TYPE, "Plain-English commentary; null unless asked for."),
    _Column("rebuild_cost", REBUILD_COST_TYPE, "Rebuild cost for insurance; null unless asked."),
    _Column(
        "credits_charged",
        pa.int64(),
        "Credits charged; rows sharing one request carry it on the first row only.",
    ),
    _Column("idempotency_key", pa.string(), "Idempotency-Key the request was sent with."),
)

_PROBLEM_TAIL = (
    _Column("stage", pa.string(), "`input` (refused before sending) or `api` (refused by it)."),
    _Column("field", pa.string(), "The request field at fault, when known."),
    _Column("type", pa.string(), "The API's error type name, or the validation rule."),
    _Column("code", pa.string(), "The API's more specific reason, when given."),
    _Column("status", pa.int64(), "HTTP status of the API's answer; null for input problems."),
    _Column("detail", pa.string(), "What went wrong and what to do, in words."),
    _Column("retryable", pa.bool_(), "Whether the same row may succeed if sent again later."),
    _Column("attempts", pa.int64(), "Times the request was sent (0 for input problems)."),
    _Column(
        "valuation_id",
        pa.string(),
        "For `unreadable-answer`: the id of the valuation the API made (and charged).",
    ),
    _Column(
        "answer",
        pa.string(),
        "For `unreadable-answer`: the API's answer exactly as received, JSON text.",
    ),
)

RESULT_COLUMNS: dict[str, str] = {c.name: c.description for c in (_ROW_NUMBER, *_RESULT_TAIL)}
PROBLEM_COLUMNS: dict[str, str] = {c.name: c.description for c in (_ROW_NUMBER, *_PROBLEM_TAIL)}


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


def _schema(passthrough: Sequence[str], tail: Sequence[_Column], kind: str) -> pa.Schema:
    # Renamed against both files' columns, so that a pass-through column has one name in
    # results.parquet and problems.parquet alike (a join on it needs no mapping).
    names = passthrough_columns(passthrough, [*RESULT_COLUMNS, *PROBLEM_COLUMNS])
    given = [
        pa.field(
            out,
            pa.string(),
            metadata={
                "description": f"Pass-through input column {name!r}"
                + ("." if out == name else ", renamed: its name is a fixed column's.")
            },
        )
        for name, out in zip(passthrough, names, strict=True)
    ]
    return pa.schema(
        [_ROW_NUMBER.field(), *given, *(c.field() for c in tail)],
        metadata={"batchval.file": kind, "batchval.schema_version": SCHEMA_VERSION},
    )


def results_schema(passthrough: Sequence[str]) -> pa.Schema:
    """The schema of results.parquet for these pass-through input columns."""
    return _schema(passthrough, _RESULT_TAIL, "results")


def problems_schema(passthrough: Sequence[str]) -> pa.Schema:
    """The schema of problems.parquet for these pass-through input columns."""
    return _schema(passthrough, _PROBLEM_TAIL, "problems")
