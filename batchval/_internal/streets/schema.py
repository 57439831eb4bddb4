"""The Arrow schema of `street_analysis.parquet` (and the street columns of
`homes_with_street.parquet`): a contract, like `contract/schemas`.

Every section of a street analysis (docs/api.md, section 2.5) is a typed nested column
under its snake_case name: structs for objects, lists of structs for arrays, int64 for
the API's integers, float64 for its numbers, date32 for its dates. A section the API gave
as null is null; a member of the wrong type is null (never a stopped write).

`rental.byBedroom` and `rental.byPropertyType` are objects whose inner fields the API
does not show ("rent and annual change ... where published"). They are kept as a list of
structs, one per member of the object: `group` (the member's name, such as `two` or
`flat`), the two numbers a reader wants typed (`average_rent` from `averageRent`,
`annual_change_pct` from `annualChangePct`, null when the API names them otherwise), and
`fields_json`, the member's whole JSON object, so that nothing the API sent is lost.

Each field, nested ones included, carries its description (`description`) and the API
member it is read from (`api`) in its Arrow metadata; `from_api` converts an answer's
section by walking the type, and `contract/schemas.markdown_table` documents it (nested
fields too) in docs/outputs.md.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from batchval._internal.contract import snake_case
from batchval._internal.place import Column
from batchval._internal.store import whole_number

# 1: the first street_analysis.parquet.
STREET_SCHEMA_VERSION = "1"

_TIMESTAMP = pa.timestamp("ms", tz="UTC")
_S, _I64, _F64, _DATE = pa.string(), pa.int64(), pa.float64(), pa.date32()
# A list field whose API value is an object: one struct per member (`group`, `fields_json`).
_ENTRIES = "entries"


def _f(api: str, kind: pa.DataType, description: str, shape: str | None = None) -> pa.Field:
    """A nested field named as the API member in snake_case, with its metadata."""
    metadata = {"description": description, "api": api}
    if shape is not None:
        metadata["shape"] = shape
    return pa.field(snake_case(api), kind, metadata=metadata)


# A nested field as a row of its struct's table: (API member, type, description), and the
# shape after them where it has one (`_f`).
_Member = tuple[str, pa.DataType, str] | tuple[str, pa.DataType, str, str]


def _struct(*fields: _Member | pa.Field) -> pa.StructType:
    """A struct read from the API: a row (`_Member`) for each member, in order; a field of
    batchval's own making, which no member is read into, as the field itself."""
    return pa.struct([field if isinstance(field, pa.Field) else _f(*field) for field in fields])


BY_YEAR = _struct(
    ("year", _I64, "Calendar year."),
    ("average", _I64, "Average sale price that year, pounds."),
    ("median", _I64, "Median sale price that year, pounds."),
    ("sales", _I64, "Sales that year."),
)
SOLD_PRICES = _struct(
    ("totalSold", _I64, "Sales in the covered postcodes."),
    ("firstSale", _DATE, "Date of the first sale."),
    ("lastSale", _DATE, "Date of the last sale."),
    ("overallMedian", _I64, "Median of every sale, pounds."),
    ("overallAverage", _I64, "Average of every sale, pounds."),
    ("recentMedian", _I64, "Median over the last recent_median_years years, pounds."),
    ("recentMedianYears", _I64, "Years the recent median looks back."),
    ("highestSale", _I64, "Highest sale, pounds."),
    ("lowestSale", _I64, "Lowest sale, pounds."),
    ("byYear", pa.list_(pa.field("item", BY_YEAR)), "Per year, oldest first."),
)
CRIME_BY_TYPE = _struct(
    ("crimeType", _S, "Police-reported crime type."),
    ("crimeCount", _I64, "Crimes of that type in the month."),
)
CRIME = _struct(
    ("month", _S, "Month (YYYY-MM) the figures are for."),
    ("byType", pa.list_(pa.field("item", CRIME_BY_TYPE)), "Crimes by type."),
)
STOP = _struct(
    ("name", _S, "Name of the stop."),
    ("mode", _S, "rail, metro, bus, air, ferry or other."),
    ("distanceBand", _S, "under 500 m, 500 m to 1 km, 1 to 2 km or over 2 km."),
)
RENT_GROUP = _struct(
    pa.field("group", _S, metadata={"description": "The member's name (two, flat, ...)."}),
    ("averageRent", _F64, "Monthly rent, pounds, when the API names it averageRent."),
    ("annualChangePct", _F64, "Annual change, percent, when named annualChangePct."),
    pa.field(
        "fields_json",
        _S,
        metadata={"description": "The member's whole JSON object (fields not shown)."},
    ),
)
_GROUPS = pa.list_(pa.field("item", RENT_GROUP))
RENTAL = _struct(
    ("averageRent", _F64, "Average monthly rent, pounds."),
    ("grossYield", _F64, "Gross yield, percent."),
    ("netYield", _F64, "Net yield, percent."),
    ("rentGrowth", _F64, "Annual rent change, percent."),
    ("rentToIncome", _F64, "Rent as a share of income, percent."),
    ("basis", _S, "The geography the yield is measured over."),
    ("byBedroom", _GROUPS, "Rent by bedrooms, one item a published group.", _ENTRIES),
    ("byPropertyType", _GROUPS, "Rent by property type, one item a group.", _ENTRIES),
)
FUEL_USE = _struct(
    ("medianKwh", _F64, "Median use a meter, kWh a year."),
    ("meanKwh", _F64, "Mean use a meter, kWh a year."),
    ("meters", _I64, "Meters counted."),
)
ENERGY = _struct(
    ("year", _I64, "Year of use."),
    ("granularity", _S, "Geography of the figures (postcode, lsoa)."),
    ("electricity", FUEL_USE, "Electricity (FuelUse)."),
    ("electricityEconomy7", FUEL_USE, "Economy 7 electricity (FuelUse)."),
    ("gas", FUEL_USE, "Gas (FuelUse)."),
    ("gasPenetration", _F64, "Share of homes on gas."),
    ("vsElectricityPct", _F64, "Electricity against the national median, percent."),
    ("vsGasPct", _F64, "Gas against the national median, percent."),
    ("englandWalesElectricityMedianKwh", _F64, "National electricity median, kWh."),
    ("englandWalesGasMedianKwh", _F64, "National gas median, kWh."),
)
INDEX_MONTH = _struct(
    ("month", _S, "Month (YYYY-MM)."),
    ("averagePrice", _I64, "Average price, pounds."),
    ("index", _F64, "Index value."),
    ("twelveMonthChangePct", _F64, "Change over twelve months, percent."),
    ("salesVolume", _I64, "Sales in the month."),
)
PRICE_INDEX = _struct(
    ("localAuthority", _S, "Local authority code."),
    ("months", pa.list_(pa.field("item", INDEX_MONTH)), "Up to 24 months, newest first."),
)


@dataclasses.dataclass(frozen=True, slots=True)
class StreetRecord:
    """One postcode's street analysis, read (`data`: the answer's JSON; None: no read)."""

    row_number: int  # homes_with_street: the input row; street_analysis: 0
    postcode: str | None
    data: Mapping[str, Any] | None
    rows: int = 0
    credits: int = 0
    read_at: str | None = None


def _section(api: str, kind: pa.DataType, description: str) -> Column[StreetRecord]:
    """A column read from the answer's member `api`, typed by walking `kind`."""
    field = pa.field(snake_case(api), kind, metadata={"api": api})

    def value(record: StreetRecord) -> Any:
        return None if record.data is None else from_api(record.data.get(api), field)

    return Column(snake_case(api), kind, description, value)


POSTCODE: Column[StreetRecord] = Column(
    "postcode", _S, "Postcode read, in normal form (SW1A 2AA).", lambda r: r.postcode
)
# The columns a street analysis gives, in both files.
STREET_SECTIONS: tuple[Column[StreetRecord], ...] = (
    Column(
        "mode",
        _S,
        "`test` for a sandbox or test-mode answer, else `live`.",
        lambda r: None if r.data is None else "test" if r.data.get("mode") == "test" else "live",
    ),
    _section("generatedAt", _TIMESTAMP, "When the API put the figures together (UTC)."),
    _section(
        "coveredPostcodes", pa.list_(_S), "Postcodes the figures come from, the one read first."
    ),
    _section("soldPrices", SOLD_PRICES, "Land registry sales in the covered postcodes."),
    _section("crime", CRIME, "Street-level crime near the postcode, latest month."),
    _section("transport", pa.list_(pa.field("item", STOP)), "Stops near the postcode."),
    _section("rental", RENTAL, "Private rents and yields for the area."),
    _section("energy", ENERGY, "Metered gas and electricity use against the national median."),
    _section("priceIndex", PRICE_INDEX, "House price index for the local authority."),
)
STREET_TAIL: tuple[Column[StreetRecord], ...] = (
    POSTCODE,
    Column("rows", _I64, "Input rows that asked for the postcode.", lambda r: r.rows),
    *STREET_SECTIONS,
    Column(
        "credits_charged",
        _I64,
        "Credits the read was charged (0: a free repeat within 30 days, or test mode).",
        lambda r: r.credits,
    ),
    Column("read_at", _TIMESTAMP, "When batchval read it (UTC).", lambda r: r.read_at),
)
# homes_with_street.parquet: row_number, the pass-through columns, then these.
HOME_TAIL: tuple[Column[StreetRecord], ...] = (POSTCODE, *STREET_SECTIONS)


def street_schema() -> pa.Schema:
    return pa.schema(
        [c.field() for c in STREET_TAIL],
        metadata={
            "batchval.file": "street_analysis",
            "batchval.schema_version": STREET_SCHEMA_VERSION,
        },
    )


# --- from the API's JSON to the columns' values ---------------------------------------


def from_api(value: Any, field: pa.Field) -> Any:
    """The API's value for `field`, shaped as its Arrow type; None where it does not fit."""
    kind = field.type
    if value is None:
        return None
    if _metadata(field, "shape") == _ENTRIES:
        if not isinstance(value, Mapping):
            return None
        return [_entry(str(name), member, kind.value_type) for name, member in value.items()]
    if pa.types.is_struct(kind):
        if not isinstance(value, Mapping):
            return None
        return {f.name: from_api(value.get(_metadata(f, "api") or f.name), f) for f in kind}
    if pa.types.is_list(kind):
        if not isinstance(value, list):
            return None
        return [from_api(item, kind.value_field) for item in value]
    return _scalar(value, kind)


def _entry(name: str, member: Any, kind: pa.StructType) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for f in kind:
        if f.name == "group":
            values[f.name] = name
        elif f.name == "fields_json":
            values[f.name] = json.dumps(member, ensure_ascii=False, sort_keys=True)
        else:
            inner = member.get(_metadata(f, "api")) if isinstance(member, Mapping) else None
            values[f.name] = from_api(inner, f)
    return values


def _scalar(value: Any, kind: pa.DataType) -> Any:
    if pa.types.is_timestamp(kind):
        return value if isinstance(value, str) else None  # parsed by the writer
    if pa.types.is_string(kind):
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if pa.types.is_integer(kind):
        return whole_number(value)
    if pa.types.is_floating(kind):
        number = not isinstance(value, bool) and isinstance(value, int | float)
        return float(value) if number else None
    if pa.types.is_date(kind):
        try:
            return dt.date.fromisoformat(value) if isinstance(value, str) else None
        except ValueError:
            return None
    return None


def _metadata(field: pa.Field, name: str) -> str | None:
    found = (field.metadata or {}).get(name.encode())
    return None if found is None else found.decode()
