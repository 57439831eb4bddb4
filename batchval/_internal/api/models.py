"""The API's bodies as typed, frozen records (docs/api.md, section 4).

Parsing is strict where the API promises a field and tolerant where its meaning is
clear: a missing or mistyped required field is an `UnreadableAnswerError`; a whole
number written as a float (`250000.0`) is read as the integer it is; an unknown extra
field (one the API added later) is kept in `raw` and otherwise ignored. Every parsed
record keeps the exact JSON it came from in `raw`.

A valuation read once is kept as its record (`Valuation.to_record`: its fields as a JSON
array, without `raw`), from which `Valuation.of_record` makes it again without reading the
answer: the checkpoint keeps each valuation's record beside its raw answer, and
results.parquet is written from the records (docs/api.md, section 4).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from batchval._internal.api.errors import UnreadableAnswerError


@dataclasses.dataclass(frozen=True, slots=True)
class ValuationRequest:
    """The body of POST /valuations. A field left None is left out of the JSON."""

    postcode: str
    property_type: str
    bedrooms: int | None = None
    floor_area_sqm: float | None = None
    year_built: int | None = None
    built_form: str | None = None
    walls_energy_efficiency: str | None = None
    reference: str | None = None
    include: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The canonical JSON object: absent fields omitted, `include` sorted and unique."""
        body: dict[str, Any] = {"postcode": self.postcode, "propertyType": self.property_type}
        optional = {
            "bedrooms": self.bedrooms,
            "floorAreaSqm": self.floor_area_sqm,
            "yearBuilt": self.year_built,
            "builtForm": self.built_form,
            "wallsEnergyEfficiency": self.walls_energy_efficiency,
            "reference": self.reference,
        }
        body.update({k: v for k, v in optional.items() if v is not None})
        if self.include:
            body["include"] = sorted(set(self.include))
        return body


_Kind = type[Any] | tuple[type[Any], ...]


def _answer_object(body: Any, where: str) -> Mapping[str, Any]:
    """An answer's body, which must be a JSON object."""
    if not isinstance(body, Mapping):
        raise UnreadableAnswerError(f"{where}: the body is not a JSON object", 200)
    return body


def _get(obj: Mapping[str, Any], name: str, kind: _Kind, where: str) -> Any:
    if (type(obj) is not dict and not isinstance(obj, Mapping)) or name not in obj:
        raise UnreadableAnswerError(f"{where}: required field {name!r} is missing", 200)
    value = obj[name]
    # The common case first, without the ABC checks below, which were most of the cost of
    # reading an answer in a profile (each is read twice: settled, then written): exactly
    # the type asked for, or a JSON object asked for as a Mapping.
    exact = type(value)
    if exact is kind or (exact is dict and kind is Mapping):
        return value
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if int in kinds and float not in kinds and isinstance(value, float) and value.is_integer():
        return int(value)  # JSON has one number type: 250000.0 is the whole number 250000
    # bool is an int to Python, never to JSON.
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise UnreadableAnswerError(f"{where}: field {name!r} has the wrong type", 200)
    return value


def _opt(obj: Mapping[str, Any], name: str, kind: _Kind, where: str) -> Any:
    return _get(obj, name, kind, where) if obj.get(name) is not None else None


_NUMBER = (int, float)
# The layout of `Valuation.to_record`, its first member: a record of another layout (a
# later batchval's) is not made into a `Valuation` by guessing.
RECORD_LAYOUT = 1


@dataclasses.dataclass(frozen=True, slots=True)
class Charge:
    credits: int
    balance_after: int

    @classmethod
    def from_json(cls, charge: Mapping[str, Any] | None, where: str) -> Charge | None:
        if charge is None:
            return None
        return cls(
            credits=_get(charge, "credits", int, where),
            balance_after=_get(charge, "balanceAfter", int, where),
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Figures:
    estimate: int
    low: int
    high: int
    coverage: float | None
    currency: str
    indexed_to: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class ValuationInput:
    """What was valued, including what the API derived (`floor_area_source`)."""

    postcode: str
    property_type: str
    floor_area_sqm: float
    floor_area_source: str
    bedrooms: int | None
    year_built: int | None
    built_form: str | None
    walls_energy_efficiency: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class Valuation:
    id: str
    mode: str | None
    reference: str | None
    valued_at: str
    figures: Figures
    sector: str
    local_authority: str
    data_quality: str
    model_version: str
    input: ValuationInput
    commentary: Mapping[str, Any] | None
    rebuild_cost: Mapping[str, Any] | None
    charge: Charge | None
    raw: Mapping[str, Any] = dataclasses.field(repr=False, compare=False)

    @classmethod
    def from_json(cls, body: Any) -> Valuation:
        w = "valuation"
        body = _answer_object(body, w)
        figures = _get(body, "valuation", Mapping, w)
        price_range = _get(figures, "range", Mapping, "valuation.valuation")
        location = _get(body, "location", Mapping, w)
        given = _get(body, "input", Mapping, w)
        charge = _opt(body, "charge", Mapping, w)
        commentary = _opt(body, "commentary", Mapping, w)
        rebuild = _opt(body, "rebuildCost", Mapping, w)
        wi = "valuation.input"
        return cls(
            id=_get(body, "id", str, w),
            mode=_opt(body, "mode", str, w),
            reference=_opt(body, "reference", str, w),
            valued_at=_get(body, "valuedAt", str, w),
            figures=Figures(
                estimate=_get(figures, "estimate", int, "valuation.valuation"),
                low=_get(price_range, "low", int, "valuation.range"),
                high=_get(price_range, "high", int, "valuation.range"),
                coverage=_opt(price_range, "coverage", _NUMBER, "valuation.range"),
                currency=_get(figures, "currency", str, "valuation.valuation"),
                indexed_to=_opt(figures, "indexedTo", str, "valuation.valuation"),
            ),
            sector=_get(location, "sector", str, "valuation.location"),
            local_authority=_get(location, "localAuthority", str, "valuation.location"),
            data_quality=_get(body, "dataQuality", str, w),
            model_version=_get(_get(body, "model", Mapping, w), "version", str, "valuation.model"),
            input=ValuationInput(
                postcode=_get(given, "postcode", str, wi),
                property_type=_get(given, "propertyType", str, wi),
                floor_area_sqm=float(_get(given, "floorAreaSqm", _NUMBER, wi)),
                floor_area_source=_get(given, "floorAreaSource", str, wi),
                bedrooms=_opt(given, "bedrooms", int, wi),
                year_built=_opt(given, "yearBuilt", int, wi),
                built_form=_opt(given, "builtForm", str, wi),
                walls_energy_efficiency=_opt(given, "wallsEnergyEfficiency", str, wi),
            ),
            commentary=commentary,
            rebuild_cost=rebuild,
            charge=Charge.from_json(charge, "valuation.charge"),
            raw=body,
        )

    def to_record(self) -> str:
        """The valuation as read, every field but `raw`, as a compact JSON array."""
        f, given, charge = self.figures, self.input, self.charge
        fields = [
            RECORD_LAYOUT, self.id, self.mode, self.reference, self.valued_at,
            f.estimate, f.low, f.high, f.coverage, f.currency, f.indexed_to,
            self.sector, self.local_authority, self.data_quality, self.model_version,
            given.postcode, given.property_type, given.floor_area_sqm, given.floor_area_source,
            given.bedrooms, given.year_built, given.built_form, given.walls_energy_efficiency,
            self.commentary, self.rebuild_cost,
            None if charge is None else [charge.credits, charge.balance_after],
        ]  # fmt: skip
        return json.dumps(fields, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def of_record(cls, record: str) -> Valuation:
        """The valuation `to_record` kept, made again without reading its answer: `raw` is
        empty (the answer is kept raw beside the record). ValueError for a text that is
        not such a record."""
        fields = json.loads(record)
        if not isinstance(fields, list) or len(fields) != 26 or fields[0] != RECORD_LAYOUT:
            raise ValueError(f"not a valuation's record of layout {RECORD_LAYOUT}")
        (
            _, id_, mode, reference, valued_at,
            estimate, low, high, coverage, currency, indexed_to,
            sector, local_authority, data_quality, model_version,
            postcode, property_type, floor_area, floor_area_source,
            bedrooms, year_built, built_form, walls,
            commentary, rebuild_cost, charge,
        ) = fields  # fmt: skip
        return cls(
            id_,
            mode,
            reference,
            valued_at,
            Figures(estimate, low, high, coverage, currency, indexed_to),
            sector,
            local_authority,
            data_quality,
            model_version,
            ValuationInput(
                postcode,
                property_type,
                floor_area,
                floor_area_source,
                bedrooms,
                year_built,
                built_form,
                walls,
            ),
            commentary,
            rebuild_cost,
            None if charge is None else Charge(*charge),
            {},
        )


def record_of(body: Any) -> str:
    """The record kept for an answer stored as a valuation: its `Valuation.to_record`, or
    for an answer the parser refuses, a JSON object of why (`unreadable`) and the id it
    gives (`id`, or null), so that the answer is never read twice to say so."""
    try:
        return Valuation.from_json(body).to_record()
    except UnreadableAnswerError as error:
        found = body.get("id") if isinstance(body, Mapping) else None
        why = {"unreadable": str(error), "id": found if isinstance(found, str) else None}
        return json.dumps(why, ensure_ascii=False)


def record_of_text(text: str) -> str:
    """`record_of` an answer kept as text (an answer that is not JSON is unreadable)."""
    try:
        body = json.loads(text)
    except ValueError as error:
        return json.dumps({"unreadable": f"not JSON: {error}", "id": None})
    return record_of(body)


@dataclasses.dataclass(frozen=True, slots=True)
class StreetAnalysis:
    """The street analysis of a postcode. The grouped parts stay JSON objects (or None)."""

    postcode: str
    covered_postcodes: tuple[str, ...]
    generated_at: str
    mode: str | None
    sold_prices: Mapping[str, Any] | None
    crime: Mapping[str, Any] | None
    transport: tuple[Mapping[str, Any], ...]
    rental: Mapping[str, Any] | None
    energy: Mapping[str, Any] | None
    price_index: Mapping[str, Any] | None
    charge: Charge | None
    raw: Mapping[str, Any] = dataclasses.field(repr=False, compare=False)

    @classmethod
    def from_json(cls, body: Any) -> StreetAnalysis:
        w = "street analysis"
        body = _answer_object(body, w)
        covered = _get(body, "coveredPostcodes", list, w)
        transport = _get(body, "transport", list, w)
        charge = _opt(body, "charge", Mapping, w)
        return cls(
            postcode=_get(body, "postcode", str, w),
            covered_postcodes=tuple(str(p) for p in covered),
            generated_at=_get(body, "generatedAt", str, w),
            mode=_opt(body, "mode", str, w),
            sold_prices=_opt(body, "soldPrices", Mapping, w),
            crime=_opt(body, "crime", Mapping, w),
            transport=tuple(t for t in transport if isinstance(t, Mapping)),
            rental=_opt(body, "rental", Mapping, w),
            energy=_opt(body, "energy", Mapping, w),
            price_index=_opt(body, "priceIndex", Mapping, w),
            charge=Charge.from_json(charge, "street analysis.charge"),
            raw=body,
        )
