"""The valuation body (docs/api.md, section 4): floor area, estimate, range, rebuild cost.

See `sandbox.data` for the rules, stated once for the docs (docs/explanation/sandbox.md).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from batchval._internal import postcodes
from batchval._internal.sandbox import commentary, market, seeded

if TYPE_CHECKING:
    from collections.abc import Mapping
    from datetime import datetime

# Typical floor area = base + per_bedroom * bedrooms (sqm), before the district factor.
# Close to the English Housing Survey medians: a 3-bed semi about 96 sqm, a 2-bed flat 64.
_FLOOR_AREA = {
    "flat": (24.0, 20.0),
    "terraced": (38.0, 17.0),
    "semi_detached": (45.0, 17.0),
    "detached": (55.0, 22.0),
}
# Past these there are too few homes of the kind for a typical area (floor-area-required).
MAX_TYPICAL_BEDROOMS = 12
MAX_TYPICAL_FLAT_BEDROOMS = 6

# Price per sqm against a semi-detached house of the same size: detached homes sit on
# bigger plots; flats carry service charges and shorter leases.
_TYPE_FACTOR = {"detached": 1.12, "semi_detached": 1.0, "terraced": 0.95, "flat": 0.92}
_WALLS_FACTOR = {
    "very_good": 1.04,
    "good": 1.02,
    "average": 1.0,
    "poor": 0.97,
    "very_poor": 0.94,
}
_BUILT_FORM_FACTOR = {
    "detached": 1.03,
    "semi_detached": 1.0,
    "end_terrace": 1.0,
    "mid_terrace": 0.98,
    "enclosed_end_terrace": 0.96,
    "enclosed_mid_terrace": 0.95,
}
# The model's clamp: below and above these there were too few sales to learn from.
MIN_ESTIMATE = 60_000
MAX_ESTIMATE = 5_000_000

# Rebuild cost per sqm at the base month, before region and age; flats never get here.
_REBUILD_PER_SQM = {"detached": 2_300.0, "semi_detached": 2_050.0, "terraced": 1_950.0}
_REBUILD_BASE_MONTH = 2024 * 12 + 8  # September 2024
_BUILD_COST_INFLATION = 0.03
REBUILD_MIN_SQM = 30.0
REBUILD_MAX_SQM = 1_000.0

_DETAILS = ("floorAreaSqm", "yearBuilt", "builtForm", "wallsEnergyEfficiency")


# The name is the sandbox's published interface (app.py catches it), hence no Error suffix.
class FloorAreaUnknown(Exception):  # noqa: N818
    """No typical floor area exists for that bedroom count, area and property type."""


def typical_floor_area(postcode: str, property_type: str, bedrooms: int) -> float | None:
    """The typical floor area (sqm, 1 decimal) of such a home in the postcode's district.

    None for flats with 7 or more bedrooms, any home with 13 or more, and detached
    houses with no bedroom.
    """
    if bedrooms > MAX_TYPICAL_BEDROOMS:
        return None
    if property_type == "flat" and bedrooms > MAX_TYPICAL_FLAT_BEDROOMS:
        return None
    if property_type == "detached" and bedrooms == 0:
        return None
    base, per_bedroom = _FLOOR_AREA[property_type]
    district_factor = seeded.between(0.9, 1.1, "floor-area", postcodes.district(postcode))
    return round((base + per_bedroom * bedrooms) * district_factor, 1)


def valuation_parts(request: Mapping[str, Any], *, now: datetime) -> dict[str, Any]:
    """The figures of a Valuation for a validated request: every field but id, mode,
    reference, valuedAt and charge. Depends on the request (never its reference) and on
    the month of `now` only."""
    postcode = postcodes.normalise(request["postcode"])
    if postcode is None:
        raise ValueError(f"not a full postcode: {request['postcode']!r}")
    property_type: str = request["propertyType"]
    floor_area, source = _floor_area(request, postcode)
    full = all(name in request for name in _DETAILS)
    authority = market.local_authority(postcode)
    sector = postcodes.sector(postcode)
    published = market.latest_published_month(now)
    indexed = market.index_published(authority)

    estimate = _estimate(request, postcode, floor_area, indexed, published)
    low, high = _range(estimate, sector, full)
    coverage = _coverage(sector, full)
    valuation: dict[str, Any] = {
        "estimate": estimate,
        "range": {"low": low, "high": high, "coverage": coverage},
        "currency": "GBP",
    }
    if indexed:
        valuation["indexedTo"] = market.month_label(published)

    parts: dict[str, Any] = {
        "valuation": valuation,
        "location": {"sector": sector, "localAuthority": authority},
        "dataQuality": "full" if full else "partial",
        "model": {"version": market.MODEL_VERSION},
        "input": _input(request, postcode, floor_area, source),
    }
    include = set(request.get("include") or ())
    if "commentary" in include:
        facts = commentary.Facts(
            postcode=postcode,
            property_type=property_type,
            floor_area=floor_area,
            estimate=estimate,
            low=low,
            high=high,
            coverage=coverage,
            missing=tuple(name for name in _DETAILS if name not in request),
            walls=request.get("wallsEnergyEfficiency"),
            authority=authority,
            month=published,
            sector_area=_sector_area(postcode, property_type),
            sector_median=_sector_median(postcode, property_type, indexed, published),
        )
        parts["commentary"] = commentary.commentary(facts)
    if "rebuildCost" in include:
        parts["rebuildCost"] = _rebuild_cost(request, postcode, floor_area, now)
    return parts


def _floor_area(request: Mapping[str, Any], postcode: str) -> tuple[float, str]:
    if "floorAreaSqm" in request:
        return float(request["floorAreaSqm"]), "request"
    typical = typical_floor_area(postcode, request["propertyType"], request["bedrooms"])
    if typical is None:
        raise FloorAreaUnknown(
            f"no typical floor area for a {request['bedrooms']}-bedroom "
            f"{request['propertyType']} in {postcodes.district(postcode)}"
        )
    return typical, "bedrooms"


def _input(
    request: Mapping[str, Any], postcode: str, floor_area: float, source: str
) -> dict[str, Any]:
    echoed: dict[str, Any] = {"postcode": postcode, "propertyType": request["propertyType"]}
    if "bedrooms" in request:
        echoed["bedrooms"] = request["bedrooms"]
    echoed["floorAreaSqm"] = floor_area
    echoed["floorAreaSource"] = source
    for name in ("yearBuilt", "builtForm", "wallsEnergyEfficiency"):
        if name in request:
            echoed[name] = request[name]
    return echoed


def _year_factor(year_built: int | None) -> float:
    # Period homes fetch a premium; post-war estates a discount; new builds a premium
    # that fades as they are resold.
    if year_built is None:
        return 1.0
    if year_built < 1919:
        return 1.06
    if year_built < 1945:
        return 0.99
    if year_built < 1980:
        return 0.94
    if year_built < 2000:
        return 0.98
    return 1.04


def _estimate(
    request: Mapping[str, Any], postcode: str, floor_area: float, indexed: bool, month: int
) -> int:
    authority = market.local_authority(postcode)
    # Figures are at the model build's price level, moved by the published index since.
    moved = market.price_level(authority, month) if indexed else 1.0
    raw = (
        floor_area
        * market.price_per_sqm(postcode)
        * _TYPE_FACTOR[request["propertyType"]]
        * _year_factor(request.get("yearBuilt"))
        * _WALLS_FACTOR.get(request.get("wallsEnergyEfficiency", "average"), 1.0)
        * _BUILT_FORM_FACTOR.get(request.get("builtForm", "semi_detached"), 1.0)
        * moved
    )
    return _to_thousand(min(max(raw, MIN_ESTIMATE), MAX_ESTIMATE))


def _range(estimate: int, sector: str, full: bool) -> tuple[int, int]:
    half_width = seeded.between(0.06, 0.11, "range", sector) * (1.0 if full else 1.6)
    # Skewed upwards as sale prices are: the dear surprises are larger than the cheap ones.
    low = min(_to_thousand(estimate * (1 - half_width)), estimate - 1_000)
    high = max(_to_thousand(estimate * (1 + 1.15 * half_width)), estimate + 1_000)
    return low, high


def _coverage(sector: str, full: bool) -> float:
    # Filled-in details make the model miss more often even with its wider range.
    coverage = seeded.between(0.80, 0.90, "coverage", sector) - (0.0 if full else 0.06)
    return round(coverage, 2)


def _sector_area(postcode: str, property_type: str) -> float:
    typical = typical_floor_area(postcode, property_type, 2 if property_type == "flat" else 3)
    assert typical is not None  # two and three bedrooms always have a typical area
    return typical


def _sector_median(postcode: str, property_type: str, indexed: bool, month: int) -> int:
    moved = market.price_level(market.local_authority(postcode), month) if indexed else 1.0
    raw = (
        _sector_area(postcode, property_type)
        * market.price_per_sqm(postcode)
        * _TYPE_FACTOR[property_type]
        * seeded.between(0.9, 1.1, "sector-median", postcodes.sector(postcode))
        * moved
    )
    return _to_thousand(min(max(raw, MIN_ESTIMATE), MAX_ESTIMATE))


def _rebuild_cost(
    request: Mapping[str, Any], postcode: str, floor_area: float, now: datetime
) -> dict[str, Any]:
    property_type: str = request["propertyType"]
    if property_type == "flat":
        return {"estimated": False, "reason": "flat"}
    if not REBUILD_MIN_SQM <= floor_area <= REBUILD_MAX_SQM:
        return {"estimated": False, "reason": "size"}
    # Building cost indices are quarterly and lag: the last quarter-end at least three
    # months back.
    prices_month = market.month_of(now) - 3
    prices_month -= (prices_month % 12 + 1) % 3
    years = (prices_month - _REBUILD_BASE_MONTH) / 12
    area = postcodes.area(postcode)
    if area in market.INNER_LONDON:
        regional = 1.25
    elif area in market.OUTER_LONDON:
        regional = 1.15
    elif area in market.WELSH:
        regional = 0.95
    else:
        regional = 1.0
    year_built = request.get("yearBuilt")
    # Solid walls, lime plaster and sash windows cost more to put back as they were.
    period = 1.2 if year_built is not None and year_built < 1919 else 1.0
    typical = (
        floor_area
        * _REBUILD_PER_SQM[property_type]
        * regional
        * period
        * seeded.between(0.96, 1.04, "rebuild", postcodes.district(postcode))
        * math.pow(1 + _BUILD_COST_INFLATION, years)
    )
    return {
        "estimated": True,
        "low": _to_thousand(typical * 0.88),
        "typical": _to_thousand(typical),
        "high": _to_thousand(typical * 1.15),
        "pricesAsOf": market.month_label(prices_month),
    }


def _to_thousand(pounds: float) -> int:
    return round(pounds / 1_000) * 1_000
