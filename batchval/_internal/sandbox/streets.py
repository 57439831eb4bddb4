"""The street analysis body (docs/api.md, street analysis), without `mode` and `charge`.

See `sandbox.data` for the rules, stated once for the docs (docs/explanation/sandbox.md).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from datetime import UTC, date, datetime
from typing import Any

from batchval._internal import postcodes
from batchval._internal.sandbox import market, seeded

# Postcodes with this unit (the last two letters) have nothing held: 404 not-found.
NOTHING_HELD_UNIT = "ZZ"
_HELD_REGIONS = frozenset({postcodes.Region.ENGLAND_WALES, postcodes.Region.BORDER})

# Shares of null members, each drawn on the geography the data is published for.
SOLD_PRICES_NULL_SHARE = 0.10  # per postcode
CRIME_NULL_SHARE = 0.08  # per sector
RENTAL_NULL_SHARE = 0.12  # per district
ENERGY_NULL_SHARE = 0.10  # per postcode
# priceIndex is null exactly when the local authority's index is unpublished
# (market.UNPUBLISHED_INDEX_SHARE of councils), as `indexedTo` is then absent.

# Letters the Royal Mail uses in the unit of a postcode (never C, I, K, M, O, V).
_UNIT_LETTERS = "ABDEFGHJLNPQRSTUWXYZ"
_BANDS = ("under 500 m", "500 m to 1 km", "1 to 2 km", "over 2 km")
# Typical street-level crimes a month within a mile of a town postcode, by police.uk type.
_CRIME_RATES = {
    "anti-social-behaviour": 12.0,
    "violence-and-sexual-offences": 14.0,
    "criminal-damage-arson": 4.0,
    "shoplifting": 5.0,
    "other-theft": 4.0,
    "public-order": 4.0,
    "burglary": 3.0,
    "vehicle-crime": 3.0,
    "drugs": 2.0,
    "bicycle-theft": 1.0,
    "robbery": 1.0,
    "theft-from-the-person": 1.0,
    "possession-of-weapons": 0.5,
    "other-crime": 1.0,
}
# England and Wales medians of metered domestic use, kWh a year.
ENGLAND_WALES_ELECTRICITY_MEDIAN_KWH = 2_700.0
ENGLAND_WALES_GAS_MEDIAN_KWH = 11_500.0
PRICE_INDEX_MONTHS = 24


def nothing_held(postcode: str) -> bool:
    """True when the API holds nothing for the (normalised) postcode: unit ZZ, or a
    region other than England and Wales or the Scottish border districts."""
    return postcode.endswith(NOTHING_HELD_UNIT) or postcodes.region(postcode) not in (_HELD_REGIONS)


def street_analysis_body(postcode: str, *, now: datetime) -> dict[str, Any] | None:
    """The StreetAnalysis fields but `mode` and `charge`, or None when nothing is held.

    Raises ValueError when `postcode` has not the shape of a full postcode (a 400, which
    the server answers before asking for figures).
    """
    normal = postcodes.normalise(postcode)
    if normal is None:
        raise ValueError(f"not a full postcode: {postcode!r}")
    if nothing_held(normal):
        return None
    month = market.latest_published_month(now)
    authority = market.local_authority(normal)
    return {
        "postcode": normal,
        "coveredPostcodes": covered_postcodes(normal),
        "soldPrices": _sold_prices(normal, authority, month),
        "crime": _crime(normal, month),
        "transport": transport_stops(normal),
        "rental": _rental(normal, authority, month),
        "energy": _energy(normal, now),
        "priceIndex": _price_index(authority, month),
        "generatedAt": _rfc3339(now),
    }


def covered_postcodes(postcode: str) -> list[str]:
    """The postcode, then 2 to 5 neighbours in its sector (none with unit ZZ)."""
    sector = postcodes.sector(postcode)
    wanted = seeded.integer(2, 5, "neighbours", postcode)
    covered = [postcode]
    attempt = 0
    while len(covered) <= wanted:
        unit = "".join(seeded.pick(_UNIT_LETTERS, "unit", postcode, attempt, i) for i in (0, 1))
        neighbour = f"{sector}{unit}"
        if unit != NOTHING_HELD_UNIT and neighbour not in covered:
            covered.append(neighbour)
        attempt += 1
    return covered


def _sold_prices(postcode: str, authority: str, month: int) -> dict[str, Any] | None:
    if seeded.chance(SOLD_PRICES_NULL_SHARE, "sold-null", postcode):
        return None
    sales = _sales(postcode, authority, month)
    if not sales:
        return None
    prices = [price for _, price in sales]
    # The recent median looks back from the data's year, widening when a quiet
    # postcode had no sale in the last five (then ten) years.
    data_year = month // 12
    for window in (5, 10, data_year - sales[0][0].year + 1):
        recent = [price for day, price in sales if day.year > data_year - window]
        if recent:
            break
    by_year: dict[int, list[int]] = defaultdict(list)
    for day, price in sales:
        by_year[day.year].append(price)
    return {
        "totalSold": len(sales),
        "firstSale": sales[0][0].isoformat(),
        "lastSale": sales[-1][0].isoformat(),
        "overallMedian": round(statistics.median(prices)),
        "overallAverage": round(statistics.fmean(prices)),
        "recentMedian": round(statistics.median(recent)),
        "recentMedianYears": window,
        "highestSale": max(prices),
        "lowestSale": min(prices),
        "byYear": [
            {
                "year": year,
                "average": round(statistics.fmean(year_prices)),
                "median": round(statistics.median(year_prices)),
                "sales": len(year_prices),
            }
            for year, year_prices in sorted(by_year.items())
        ],
    }


def _sales(postcode: str, authority: str, month: int) -> list[tuple[date, int]]:
    # Drawn per calendar year, so that a later `now` only adds sales and never rewrites
    # the history already shown.
    base = market.price_per_sqm(postcode) * 90
    first_year = 1995 + seeded.integer(0, 20, "first-year", postcode)
    sales: list[tuple[date, int]] = []
    for year in range(first_year, month // 12 + 1):
        for i in range(seeded.integer(0, 3, "sales", postcode, year)):
            sale_month = year * 12 + seeded.integer(0, 11, "sale-month", postcode, year, i)
            if sale_month > month:
                continue
            day = date(year, sale_month % 12 + 1, seeded.integer(1, 28, "day", postcode, year, i))
            spread = seeded.between(0.6, 1.6, "sale-price", postcode, year, i)
            price = base * market.price_level(authority, sale_month) * spread
            sales.append((day, max(500, round(price / 500) * 500)))
    return sorted(sales)


def _crime(postcode: str, month: int) -> dict[str, Any] | None:
    sector = postcodes.sector(postcode)
    if seeded.chance(CRIME_NULL_SHARE, "crime-null", sector):
        return None
    area = postcodes.area(postcode)
    if area in market.INNER_LONDON:
        scale = 3.0
    elif area in market.OUTER_LONDON:
        scale = 1.8
    else:
        scale = seeded.between(0.3, 1.5, "crime-scale", sector)
    counts = {
        crime_type: int(rate * scale * seeded.between(0.3, 1.7, "crime", sector, month, crime_type))
        for crime_type, rate in _CRIME_RATES.items()
    }
    by_type = sorted(
        ((count, crime_type) for crime_type, count in counts.items() if count > 0),
        key=lambda item: (-item[0], item[1]),
    )
    return {
        "month": market.month_label(month),
        "byType": [{"crimeType": name, "crimeCount": count} for count, name in by_type],
    }


def transport_stops(postcode: str) -> list[dict[str, str]]:
    """0 to 6 stops near the (normalised) postcode, nearest band first."""
    london = postcodes.area(postcode) in market.INNER_LONDON | market.OUTER_LONDON
    # (mode, cumulative share, the bands it is found in)
    modes = (
        ("bus", 0.62, _BANDS[:2]),
        ("rail", 0.80, _BANDS),
        ("metro", 0.90 if london else 0.84, _BANDS),
        ("ferry", 0.93, _BANDS[2:]),
        ("air", 0.95, _BANDS[3:]),
        ("other", 1.0, _BANDS),
    )
    stops = []
    for i in range(seeded.integer(0, 6, "stops", postcode)):
        draw = seeded.fraction("stop-mode", postcode, i)
        mode, _, bands = next(m for m in modes if draw < m[1])
        band = seeded.pick(bands, "stop-band", postcode, i)
        stops.append(
            {"name": _stop_name(mode, london, postcode, i), "mode": mode, "distanceBand": band}
        )
    return sorted(stops, key=lambda stop: (_BANDS.index(stop["distanceBand"]), stop["name"]))


def _stop_name(mode: str, london: bool, postcode: str, i: int) -> str:
    word = seeded.pick(market.STREET_WORDS, "stop-word", postcode, i)
    if mode == "bus":
        letter = seeded.pick("ABCDEFGHJK", "stop", postcode, i)
        return f"{market.street_name(postcode, i)} (Stop {letter})"
    suffix = {
        "rail": "Station",
        "metro": "Underground Station" if london else "Tram Stop",
        "ferry": "Ferry Terminal",
        "air": "Airport",
        "other": "Coach Station",
    }[mode]
    return f"{word} {suffix}"


def _rental(postcode: str, authority: str, month: int) -> dict[str, Any] | None:
    district = postcodes.district(postcode)
    if seeded.chance(RENTAL_NULL_SHARE, "rental-null", district):
        return None
    london = postcodes.area(postcode) in market.INNER_LONDON | market.OUTER_LONDON
    # Yields are thinner where prices are high.
    gross = seeded.between(3.5, 7.0, "gross-yield", district) * (0.75 if london else 1.0)
    price = market.price_per_sqm(postcode) * 75 * market.price_level(authority, month)
    average = price * gross / 100 / 12
    growth = round(seeded.between(-2.0, 9.0, "rent-growth", district), 1)
    yields_published = not seeded.chance(0.15, "yield-null", district)
    net = gross - seeded.between(1.0, 1.8, "costs", district)
    return {
        "averageRent": float(round(average)),
        "grossYield": round(gross, 2) if yields_published else None,
        "netYield": round(net, 2) if yields_published else None,
        "rentGrowth": growth,
        "rentToIncome": (
            None
            if seeded.chance(0.2, "rti-null", district)
            else round(seeded.between(22.0, 45.0, "rti", district), 1)
        ),
        "basis": (
            seeded.pick(("postcode district", "local authority"), "basis", district)
            if yields_published
            else None
        ),
        "byBedroom": _rents(
            district, average, growth, {"one": 0.75, "two": 1.0, "three": 1.25, "fourOrMore": 1.7}
        ),
        "byPropertyType": _rents(
            district,
            average,
            growth,
            {"flat": 0.85, "terraced": 1.0, "semi_detached": 1.1, "detached": 1.4},
        ),
    }


def _rents(
    district: str, average: float, growth: float, ratios: dict[str, float]
) -> dict[str, dict[str, float]]:
    # The inner shape is not given by the API description; {averageRent, annualChangePct}
    # is the sandbox's choice. A group is left out where it is not published.
    return {
        name: {
            "averageRent": float(round(average * ratio)),
            "annualChangePct": round(growth + seeded.between(-1.5, 1.5, "rent", district, name), 1),
        }
        for name, ratio in ratios.items()
        if not seeded.chance(0.2, "rent-unpublished", district, name)
    }


def _energy(postcode: str, now: datetime) -> dict[str, Any] | None:
    if seeded.chance(ENERGY_NULL_SHARE, "energy-null", postcode):
        return None
    # Postcodes with too few meters are published only for their small area (LSOA).
    by_postcode = not seeded.chance(0.2, "granularity", postcode)
    meters = (
        seeded.integer(6, 45, "meters", postcode)
        if by_postcode
        else seeded.integer(450, 900, "meters", postcode)
    )
    electricity = _fuel(postcode, "electricity", 1_900.0, 3_900.0, meters)
    economy7 = (
        None
        if seeded.chance(0.55, "economy7-null", postcode)
        else _fuel(postcode, "economy7", 3_500.0, 6_500.0, max(1, meters // 4))
    )
    # Off the gas grid for a share of postcodes: no gas figures at all.
    gas = (
        None
        if seeded.chance(0.12, "gas-null", postcode)
        else _fuel(postcode, "gas", 8_500.0, 15_000.0, max(1, round(meters * 0.85)))
    )
    return {
        "year": market.month_of(now) // 12 - 2,  # a year's use is published late the next year
        "granularity": "postcode" if by_postcode else "lsoa",
        "electricity": electricity,
        "electricityEconomy7": economy7,
        "gas": gas,
        "gasPenetration": None if gas is None else round(gas["meters"] / meters, 2),
        "vsElectricityPct": _versus(electricity["medianKwh"], ENGLAND_WALES_ELECTRICITY_MEDIAN_KWH),
        "vsGasPct": None
        if gas is None
        else _versus(gas["medianKwh"], ENGLAND_WALES_GAS_MEDIAN_KWH),
        "englandWalesElectricityMedianKwh": ENGLAND_WALES_ELECTRICITY_MEDIAN_KWH,
        "englandWalesGasMedianKwh": ENGLAND_WALES_GAS_MEDIAN_KWH,
    }


def _fuel(postcode: str, fuel: str, low: float, high: float, meters: int) -> dict[str, Any]:
    median = seeded.between(low, high, "median-kwh", postcode, fuel)
    # A few heavy users pull the mean above the median.
    mean = median * seeded.between(1.05, 1.3, "mean-kwh", postcode, fuel)
    return {"medianKwh": round(median, 1), "meanKwh": round(mean, 1), "meters": meters}


def _versus(local: float, national: float) -> float:
    return round((local / national - 1) * 100, 1)


def _price_index(authority: str, month: int) -> dict[str, Any] | None:
    if not market.index_published(authority):
        return None
    volume = seeded.between(80.0, 900.0, "volume", authority)
    months = []
    for back in range(PRICE_INDEX_MONTHS):
        at = month - back
        months.append(
            {
                "month": market.month_label(at),
                "averagePrice": market.average_price(authority, at),
                "index": round(market.index_value(authority, at), 2),
                "twelveMonthChangePct": market.twelve_month_change_pct(authority, at),
                # The land registry is still receiving the latest two months' sales.
                "salesVolume": None
                if back < 2
                else round(volume * seeded.between(0.8, 1.2, "volume", authority, at)),
            }
        )
    return {"localAuthority": authority, "months": months}


def _rfc3339(now: datetime) -> str:
    aware = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
    return aware.strftime("%Y-%m-%dT%H:%M:%SZ")
