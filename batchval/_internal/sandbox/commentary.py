"""The valuation's written commentary (docs/api.md, section 4), from fixed templates.

As in the real service no text is generated freely: each field is one template with the
figures filled in, so a test can match it and a caller can show it beside the numbers.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from batchval._internal import postcodes
from batchval._internal.api import AREA_INSIGHTS_MEMBERS
from batchval._internal.sandbox import market, seeded, streets

# Sectors whose market data is too thin: no marketSignals, no areaInsights, and a
# marketMomentum of "unknown".
THIN_MARKET_SHARE = 0.15
# Each areaInsights member is absent for this share of sectors, drawn per member.
INSIGHT_ABSENT_SHARE = 0.25
INSIGHT_MEMBERS = AREA_INSIGHTS_MEMBERS
DISCLAIMER = (
    "This is an automated estimate from a statistical model, not a formal valuation by a "
    "surveyor. It has not been checked by anyone who has seen the home and should not be "
    "relied on as the sole basis for lending, buying or selling."
)

_TYPE_WORDS = {
    "detached": ("detached house", "detached houses"),
    "semi_detached": ("semi-detached house", "semi-detached houses"),
    "terraced": ("terraced house", "terraced houses"),
    "flat": ("flat", "flats"),
}
_DETAIL_WORDS = {
    "floorAreaSqm": "floor area",
    "yearBuilt": "year built",
    "builtForm": "built form",
    "wallsEnergyEfficiency": "wall efficiency",
}
# fmt: off
_MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)
# fmt: on


@dataclasses.dataclass(frozen=True, slots=True)
class Facts:
    """What the commentary speaks about, worked out by the valuation."""

    postcode: str
    property_type: str
    floor_area: float
    estimate: int
    low: int
    high: int
    coverage: float
    missing: tuple[str, ...]  # request fields filled from typical values, in request order
    walls: str | None
    authority: str
    month: int  # the latest published month (the valuation's indexedTo, if any)
    sector_area: float  # typical floor area of this property type in the sector
    sector_median: int  # median price of this property type in the sector


def range_width(estimate: int, low: int, high: int) -> str:
    """`narrow`, `moderate` or `wide`, by the range's width against the estimate."""
    relative = (high - low) / estimate
    if relative < 0.20:
        return "narrow"
    if relative < 0.30:
        return "moderate"
    return "wide"


def thin_market(sector: str) -> bool:
    """True for the documented share of sectors with too little market data."""
    return seeded.chance(THIN_MARKET_SHARE, "thin-market", sector)


def commentary(facts: Facts) -> dict[str, Any]:
    """The Commentary object: every required field, and the optional ones unless the
    sector's market data is thin (or, per insight, unavailable)."""
    sector = postcodes.sector(facts.postcode)
    thin = thin_market(sector)
    width = range_width(facts.estimate, facts.low, facts.high)
    momentum = "unknown" if thin else market.momentum(facts.authority, facts.month)
    text: dict[str, Any] = {
        "summary": (
            f"We estimate this {_TYPE_WORDS[facts.property_type][0]} at "
            f"{_money(facts.estimate)}, most likely between {_money(facts.low)} and "
            f"{_money(facts.high)}."
        ),
        "rangeWidth": width,
        "rangeNote": (
            f"A {width} range, {_pct((facts.high - facts.low) / facts.estimate * 100)}% of "
            f"the estimate. In back-tests about {round(facts.coverage * 100)}% of sales at "
            "this price level fell inside a range like this one; that describes the model "
            "across many sales, not the odds for this home."
        ),
        "property": _property(facts, sector),
        "location": _location(facts, sector),
        "marketMomentum": momentum,
        "marketConditions": _conditions(facts, momentum),
        "energyEfficiency": _energy(facts, sector),
        "dataQuality": _data_quality(facts),
    }
    if not thin:
        text["marketSignals"] = _signals(sector)
        insights = _insights(facts, sector, momentum)
        if insights:
            text["areaInsights"] = insights
    text["disclaimer"] = DISCLAIMER
    return text


def _money(pounds: int) -> str:
    return f"£{pounds:,}"


def _pct(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _property(facts: Facts, sector: str) -> str:
    # A logistic curve turns "how much bigger than typical" into a believable percentile.
    ratio = facts.floor_area / facts.sector_area
    larger = min(99, max(1, round(100 / (1 + math.exp(-6 * (ratio - 1))))))
    plural = _TYPE_WORDS[facts.property_type][1]
    return (
        f"At {facts.floor_area:g} sqm this home is larger than about {larger}% of {plural} "
        f"in {sector}, where the typical one has {facts.sector_area:g} sqm and a median "
        f"price of {_money(facts.sector_median)}."
    )


def _location(facts: Facts, sector: str) -> str:
    decile = seeded.integer(1, 10, "deprivation", sector)
    crime = seeded.pick(
        ("well below", "below", "close to", "above", "well above"), "crime-level", sector
    )
    # The same stops as the postcode's street analysis lists, so the two never disagree.
    stops = streets.transport_stops(facts.postcode)
    stations = [stop for stop in stops if stop["mode"] in {"rail", "metro"}]
    if stations:
        access = (
            f"The nearest station, {stations[0]['name']}, is {stations[0]['distanceBand']} away."
        )
    elif stops:
        access = (
            f"No station is listed nearby; the nearest stop is {stops[0]['distanceBand']} away."
        )
    else:
        access = "No public transport stop is listed nearby."
    return (
        f"{facts.postcode} lies in a neighbourhood in decile {decile} of the index of "
        f"deprivation (1 = most deprived). {access} Police-recorded crime is {crime} the "
        f"average for {facts.authority}."
    )


def _conditions(facts: Facts, momentum: str) -> str:
    if momentum == "unknown":
        return (
            f"Too few recent sales in {facts.authority} to judge momentum; volatility and "
            "activity are not reported."
        )
    change = market.twelve_month_change_pct(facts.authority, facts.month)
    volatility = seeded.pick(("low", "moderate", "high"), "volatility", facts.authority)
    sales = seeded.integer(60, 900, "monthly-sales", facts.authority)
    direction = "risen" if change >= 0 else "fallen"
    return (
        f"Prices in {facts.authority} have {direction} {_pct(abs(change))}% over the twelve "
        f"months to {market.month_label(facts.month)}. Momentum is {momentum}, volatility "
        f"is {volatility} and about {sales} homes a month change hands."
    )


def _energy(facts: Facts, sector: str) -> str:
    good = seeded.integer(18, 72, "epc-c-or-better", sector)
    common = seeded.pick(("C", "D", "D", "E"), "epc-common", sector)
    text = (
        f"In {sector}, {good}% of homes with an energy certificate are rated C or better; "
        f"the most common rating is {common}."
    )
    if facts.walls is not None:
        text += f" The walls of this home were given as {facts.walls.replace('_', ' ')}."
    return text


def _data_quality(facts: Facts) -> str:
    if not facts.missing:
        return (
            "Every detail the model uses was sent: floor area, year built, built form and "
            "wall efficiency."
        )
    missing = ", ".join(_DETAIL_WORDS[name] for name in facts.missing)
    return (
        f"Some details were filled from typical values for the area ({missing}). Sending "
        "them can narrow the range."
    )


def _signals(sector: str) -> str:
    change = seeded.between(-4.0, 5.0, "asking-change", sector)
    days = seeded.integer(18, 95, "days-to-offer", sector)
    reduced = seeded.integer(8, 45, "reduced", sector)
    return (
        f"Asking prices in {sector} are {'up' if change >= 0 else 'down'} "
        f"{_pct(abs(change))}% on the quarter; homes take about {days} days to go under "
        f"offer and {reduced}% of listings have been reduced. The figures above are never "
        "adjusted for these signals."
    )


def _insights(facts: Facts, sector: str, momentum: str) -> dict[str, str]:
    la = facts.authority
    best, worst = seeded.integer(0, 11, "best-month", la), seeded.integer(0, 11, "worst", la)
    if worst == best:
        worst = (best + 6) % 12
    growth = seeded.between(15.0, 90.0, "ten-year", la)
    real = growth - 32.0  # consumer prices rose about a third over the same ten years
    gap = seeded.between(-4.0, 4.0, "benchmark", la)
    mix = [seeded.between(0.05, 1.0, "mix", sector, kind) for kind in _TYPE_WORDS]
    shares = [round(100 * part / sum(mix)) for part in mix]
    shares[0] += 100 - sum(shares)  # so the four shares add up to exactly 100
    first, second = market.street_name(sector, 1), market.street_name(sector, 2)
    premium = seeded.between(-6.0, 18.0, "new-build", sector)
    quarter = facts.sector_median * seeded.between(0.62, 0.8, "entry", sector)
    top = facts.sector_median * seeded.between(1.3, 1.9, "premium", sector)
    side = {"accelerating": "sellers", "declining": "buyers", "cooling": "buyers"}
    every = {
        "seasonality": (
            f"Prices in {la} have tended to peak in {_MONTHS[best]} and dip in {_MONTHS[worst]}."
        ),
        "growth": (
            f"Over ten years prices in {la} grew {_pct(growth)}% ({_pct(real)}% after "
            f"inflation), with {seeded.pick(('low', 'moderate', 'high'), 'volatility', la)} "
            "year-to-year volatility."
        ),
        "benchmark": (
            f"Local growth ran {_pct(abs(gap))} points {'above' if gap >= 0 else 'below'} "
            "the regional average over five years."
        ),
        "priceVelocity": (
            f"Prices moved about {_pct(seeded.between(-3.0, 5.0, 'six-month', sector))}% "
            "over the last six months."
        ),
        "marketStructure": (
            f"Sales in {sector} over five years: {shares[0]}% detached, {shares[1]}% "
            f"semi-detached, {shares[2]}% terraced and {shares[3]}% flats; about "
            f"{seeded.integer(35, 85, 'owners', sector)}% of homes are owner-occupied."
        ),
        "timing": f"Conditions currently favour {side.get(momentum, 'neither side')}.",
        "recovery": (
            f"The deepest fall since 2007 was {_pct(seeded.between(4.0, 24.0, 'fall', la))}%, "
            f"and prices took {seeded.integer(2, 9, 'recover', la)} years to regain their peak."
        ),
        "investors": (
            f"About {seeded.integer(2, 14, 'short-holds', sector)}% of homes sold in "
            f"{sector} were resold within two years; investor interest is "
            f"{seeded.pick(('low', 'moderate', 'high'), 'investors', sector)}."
        ),
        "resaleReturns": (
            f"Homes sold more than once since 2000 gained a median "
            f"{seeded.integer(20, 160, 'resale', sector)}% between sales."
        ),
        "newBuild": (
            f"New homes sold at a {'premium' if premium >= 0 else 'discount'} of "
            f"{_pct(abs(premium))}% against older homes nearby."
        ),
        "propertyTypes": (
            f"The median price of {_TYPE_WORDS[facts.property_type][1]} in {sector} is "
            f"{_money(facts.sector_median)}."
        ),
        "streets": (
            f"The dearest street in {sector} by median price is {first}; the fastest "
            f"growing is {second}."
        ),
        "priceSpread": (
            f"Entry-level homes (the cheapest quarter) sell for up to "
            f"{_money(round(quarter / 1_000) * 1_000)}; premium homes (the dearest quarter) from "
            f"{_money(round(top / 1_000) * 1_000)}."
        ),
        "overview": (
            f"{sector} is a {seeded.pick(('quiet', 'steady', 'busy'), 'activity', sector)} "
            f"market with a median price of {_money(facts.sector_median)} and momentum "
            f"{momentum}."
        ),
    }
    return {
        name: every[name]
        for name in INSIGHT_MEMBERS
        if not seeded.chance(INSIGHT_ABSENT_SHARE, "insight", sector, name)
    }
