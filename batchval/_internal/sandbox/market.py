"""The fake housing market behind every sandbox figure: places, price levels, the index.

Shared by the valuation, its commentary and the street analysis so that they tell one
story: a local authority whose index is unpublished has no `indexedTo` on valuations
and a null `priceIndex` in street analyses; the index that moves valuations since the
model build is the one street analyses list month by month.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from batchval._internal import postcodes
from batchval._internal.sandbox import seeded

# The model build every valuation names in `model.version`; figures are at its price
# level and moved by the local index since.
MODEL_VERSION = "2024-11-04T09:30:00Z"

# Postcode areas by group: packed rows read better here than one code per line.
# fmt: off
INNER_LONDON = frozenset(("E", "EC", "N", "NW", "SE", "SW", "W", "WC"))
OUTER_LONDON = frozenset(("BR", "CR", "DA", "EN", "HA", "IG", "KT", "RM", "SM", "TW", "UB"))
WELSH = frozenset(("CF", "LD", "LL", "NP", "SA"))
# Areas mostly inside the six metropolitan counties, whose councils are E08.
_METROPOLITAN = frozenset((
    "B", "BD", "BL", "CV", "DY", "HD", "HX", "L", "LS", "M", "NE", "OL", "S", "SK", "SR", "WF",
    "WN", "WS", "WV",
))
_SOUTH = frozenset((
    "AL", "BA", "BH", "BN", "BS", "CB", "CM", "CO", "CT", "GU", "HP", "LU", "ME", "MK", "OX", "PO",
    "RG", "RH", "SG", "SL", "SO", "SP", "SS", "TN", "WD",
))
_NORTH = frozenset((
    "BB", "BD", "BL", "CA", "DH", "DL", "DN", "FY", "HD", "HU", "HX", "L", "LA", "LS", "M", "NE",
    "OL", "PR", "S", "SK", "SR", "TS", "WA", "WF", "WN",
))
# fmt: on

# Asking price per square metre at the model build, by broad market; the spread between
# them follows the national land registry averages loosely (inner London about four times
# the North East).
_PRICE_PER_SQM_INNER_LONDON = 8_600.0
_PRICE_PER_SQM_OUTER_LONDON = 5_600.0
_PRICE_PER_SQM_SOUTH = 3_900.0
_PRICE_PER_SQM_NORTH = 2_200.0
_PRICE_PER_SQM_WALES = 2_300.0
_PRICE_PER_SQM_ELSEWHERE = 2_900.0

# Share of local authorities whose house price index is not published (a new council,
# a merger): no `indexedTo`, null `priceIndex`, momentum "unknown".
UNPUBLISHED_INDEX_SHARE = 0.06

# Before the recent index window (which starts where the official index is rebased,
# January 2023 = 100) prices are taken to have grown 6% a year, roughly the national
# average since 1995.
_HISTORIC_GROWTH = 0.06

# fmt: off
STREET_WORDS = (
    "Church", "Mill", "Station", "Park", "Victoria", "Queens", "Kings", "High", "Manor",
    "Orchard", "Meadow", "Chapel", "Grove", "Elm", "Oak", "Willow", "Albert", "George", "York",
    "Windsor", "Beech", "Cedar", "Ash", "Hollow", "Bridge", "Brook", "Castle",
)
STREET_KINDS = (
    "Road", "Street", "Lane", "Avenue", "Close", "Drive", "Gardens", "Way", "Terrace", "Crescent",
)
# fmt: on


# --- months ------------------------------------------------------------------------
# A month is an integer count (year * 12 + month - 1) so that "two months before" is a
# subtraction.


def month_of(when: datetime) -> int:
    """The month count of `when` (naive datetimes are taken as UTC)."""
    if when.tzinfo is not None:
        when = when.astimezone(UTC)
    return when.year * 12 + when.month - 1


def month_label(month: int) -> str:
    """`YYYY-MM` of a month count."""
    return f"{month // 12:04d}-{month % 12 + 1:02d}"


def latest_published_month(now: datetime) -> int:
    """The latest month the index and crime data are published for: two months back."""
    return month_of(now) - 2


MODEL_MONTH = 2024 * 12 + 10  # November 2024, the month of MODEL_VERSION
INDEX_BASE_MONTH = 2023 * 12  # January 2023 = 100


# --- places ------------------------------------------------------------------------


def local_authority(postcode: str) -> str:
    """A fake but well-formed statistical-office code of the postcode's council.

    Fixed per postcode district: London boroughs E09, metropolitan districts E08,
    Welsh principal areas W06, elsewhere a unitary (E06, about a third) or a shire
    district (E07). Numbers stay inside the ranges the real codes use.
    """
    district = postcodes.district(postcode)
    area = postcodes.area(postcode)
    if area in INNER_LONDON or area in OUTER_LONDON:
        return f"E09{seeded.integer(1, 33, 'la', district):06d}"
    if area in _METROPOLITAN:
        return f"E08{seeded.integer(1, 37, 'la', district):06d}"
    if area in WELSH:
        return f"W06{seeded.integer(1, 24, 'la', district):06d}"
    if seeded.chance(0.35, "la-kind", district):
        return f"E06{seeded.integer(1, 66, 'la', district):06d}"
    return f"E07{seeded.integer(8, 246, 'la', district):06d}"


def price_per_sqm(postcode: str) -> float:
    """Price per square metre of a typical home in the district, at the model build."""
    area = postcodes.area(postcode)
    if area in INNER_LONDON:
        base = _PRICE_PER_SQM_INNER_LONDON
    elif area in OUTER_LONDON:
        base = _PRICE_PER_SQM_OUTER_LONDON
    elif area in _SOUTH:
        base = _PRICE_PER_SQM_SOUTH
    elif area in _NORTH:
        base = _PRICE_PER_SQM_NORTH
    elif area in WELSH:
        base = _PRICE_PER_SQM_WALES
    else:
        base = _PRICE_PER_SQM_ELSEWHERE
    # Districts within an area differ (a seaside town against its hinterland).
    return base * seeded.between(0.85, 1.2, "ppsqm", postcodes.district(postcode))


def street_name(*parts: seeded.Part) -> str:
    """A plausible street name, fixed by `parts`."""
    return (
        f"{seeded.pick(STREET_WORDS, 'street', *parts)} {seeded.pick(STREET_KINDS, 'kind', *parts)}"
    )


# --- the house price index -----------------------------------------------------------


def index_published(authority: str) -> bool:
    """False for the documented small share of councils without a published index."""
    return not seeded.chance(UNPUBLISHED_INDEX_SHARE, "hpi-unpublished", authority)


def annual_growth(authority: str) -> float:
    """The council's underlying yearly price growth over the recent index window."""
    return seeded.between(-0.015, 0.055, "hpi-growth", authority)


def index_value(authority: str, month: int) -> float:
    """The council's house price index for `month` (January 2023 = about 100)."""
    years = (month - INDEX_BASE_MONTH) / 12
    # A trend with a slow cycle of a few years around it, so that the twelve-month change
    # (and with it the momentum) moves from month to month.
    amplitude = seeded.between(0.015, 0.04, "hpi-cycle-size", authority)
    period = seeded.between(4.0, 8.0, "hpi-cycle-years", authority)
    start = seeded.between(0.0, 2 * math.pi, "hpi-cycle-start", authority)
    cycle = amplitude * (math.sin(2 * math.pi * years / period + start) - math.sin(start))
    trend = math.log1p(annual_growth(authority)) * years
    # Spring and summer sales run dearer; the phase differs a little between councils.
    phase = seeded.between(-0.6, 0.6, "hpi-phase", authority)
    season = 0.012 * math.sin(2 * math.pi * (month % 12 - 2) / 12 + phase)
    return 100 * math.exp(trend + cycle) * (1 + season)


def price_level(authority: str, month: int) -> float:
    """Prices in `month` relative to the model build (1.0 at MODEL_MONTH)."""
    return _raw_level(authority, month) / _raw_level(authority, MODEL_MONTH)


def _raw_level(authority: str, month: int) -> float:
    if month >= INDEX_BASE_MONTH:
        return index_value(authority, month)
    years_before = (INDEX_BASE_MONTH - month) / 12
    return index_value(authority, INDEX_BASE_MONTH) / math.pow(1 + _HISTORIC_GROWTH, years_before)


def average_price(authority: str, month: int) -> int:
    """The council's average sale price in `month`, in pounds."""
    # London boroughs average about two and a half times the rest.
    london = 2.5 if authority.startswith("E09") else 1.0
    at_base = seeded.between(170_000, 380_000, "hpi-average", authority) * london
    return round(at_base * index_value(authority, month) / 100)


def twelve_month_change_pct(authority: str, month: int) -> float:
    """Change of the index over the twelve months to `month`, in percent."""
    now, year_ago = index_value(authority, month), index_value(authority, month - 12)
    return round((now / year_ago - 1) * 100, 1)


def momentum(authority: str, month: int) -> str:
    """`marketMomentum` of the council in `month`, read from its index."""
    if not index_published(authority):
        return "unknown"
    change = twelve_month_change_pct(authority, month)
    if change >= 3.5:
        return "accelerating"
    if change >= 1.0:
        return "steady"
    if change >= -0.5:
        return "cooling"
    return "declining"
