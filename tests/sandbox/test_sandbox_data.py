"""Tests of the sandbox's deterministic figures (batchval._internal.sandbox.data)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openapi_check import validate_component

from batchval._internal import postcodes
from batchval._internal.sandbox import commentary, market, streets
from batchval._internal.sandbox.data import (
    FloorAreaUnknown,
    local_authority,
    street_analysis_body,
    typical_floor_area,
    valuation_parts,
)

# Touches the calendar: `make test-dates` runs it at each hard instant (tests/clocks.py).
pytestmark = pytest.mark.dates

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

NOW = datetime(2026, 11, 21, 23, 58, 42, tzinfo=UTC)
TYPES = ("detached", "semi_detached", "terraced", "flat")
BUILT_FORMS = (
    "detached",
    "semi_detached",
    "mid_terrace",
    "end_terrace",
    "enclosed_mid_terrace",
    "enclosed_end_terrace",
)
WALLS = ("very_good", "good", "average", "poor", "very_poor")
# A spread of areas in England and Wales: London, metropolitan, shire, Welsh.
AREAS = (
    "SW", "E", "N", "BR", "KT", "M", "LS", "B", "NE", "S", "OX", "GU", "BN", "CB", "EX",
    "PL", "TR", "YO", "CA", "LN", "NR", "CF", "SA", "LL", "NP", "LD", "CH", "SY", "DH", "TS",
)  # fmt: skip
YEAR_MONTH = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")
ONE_DECIMAL = re.compile(r"^\d+\.\d$")


def full_request(**changes: Any) -> dict[str, Any]:
    """A request with every detail sent, changed by `changes` (None removes a field)."""
    request: dict[str, Any] = {
        "postcode": "LS1 4AP",
        "propertyType": "semi_detached",
        "bedrooms": 3,
        "floorAreaSqm": 96.0,
        "yearBuilt": 1935,
        "builtForm": "semi_detached",
        "wallsEnergyEfficiency": "average",
    }
    request.update(changes)
    return {name: value for name, value in request.items() if value is not None}


def candidates() -> Iterator[str]:
    """Well-formed postcodes in England and Wales, in a fixed order."""
    for area in AREAS:
        for district in range(1, 10):
            for sector in range(10):
                yield f"{area}{district} {sector}AB"


def first(predicate: Callable[[str], bool]) -> str:
    """The first candidate postcode meeting `predicate`."""
    return next(postcode for postcode in candidates() if predicate(postcode))


def as_served(parts: dict[str, Any]) -> dict[str, Any]:
    """The parts with the fields the server adds, as a Valuation body."""
    return {"id": "val_" + "0" * 26, "valuedAt": "2026-11-21T23:58:42Z", **parts}


# --- local authority -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("postcode", "prefixes"),
    [
        ("SW1A 1AA", ("E09",)),
        ("BR1 1AA", ("E09",)),
        ("M1 1AE", ("E08",)),
        ("LS1 4AP", ("E08",)),
        ("CF10 1AA", ("W06",)),
        ("SA1 1AA", ("W06",)),
        ("LL11 1AA", ("W06",)),
        ("NP20 1AA", ("W06",)),
        ("LD1 5AA", ("W06",)),
        ("OX1 1AA", ("E06", "E07")),
        ("TD15 1AA", ("E06", "E07")),
    ],
)
def test_local_authority_code_shape(postcode: str, prefixes: tuple[str, ...]) -> None:
    """The code is a statistical-office prefix for the kind of area and six digits."""
    code = local_authority(postcode)
    assert code[:3] in prefixes
    assert re.fullmatch(r"[EW]0[6-9]\d{6}", code)


def test_local_authority_fixed_per_district() -> None:
    """Postcodes of one district share a local authority; spacing and case do not matter."""
    assert local_authority("SW1A 1AA") == local_authority("SW1A 2BB") == local_authority("sw1a1aa")


# --- typical floor area --------------------------------------------------------------


@pytest.mark.parametrize(
    ("property_type", "bedrooms"),
    [
        ("flat", 7),
        ("flat", 12),
        ("flat", 20),
        ("terraced", 13),
        ("semi_detached", 13),
        ("detached", 13),
        ("detached", 20),
        ("detached", 0),
    ],
)
@pytest.mark.parametrize("postcode", ["SW1A 1AA", "LS1 4AP", "CF10 1AA"])
def test_typical_floor_area_none(postcode: str, property_type: str, bedrooms: int) -> None:
    """No typical area for large flats, 13+ bedrooms, or a detached house with none."""
    assert typical_floor_area(postcode, property_type, bedrooms) is None


@pytest.mark.parametrize(
    ("property_type", "bedrooms"),
    [
        ("flat", 0),
        ("flat", 6),
        ("terraced", 0),
        ("semi_detached", 0),
        ("detached", 1),
        ("terraced", 12),
        ("detached", 12),
    ],
)
@pytest.mark.parametrize("postcode", ["SW1A 1AA", "LS1 4AP", "CF10 1AA"])
def test_typical_floor_area_present(postcode: str, property_type: str, bedrooms: int) -> None:
    """At the edges of the documented set a typical area exists, in sqm to 1 decimal."""
    area = typical_floor_area(postcode, property_type, bedrooms)
    assert area is not None
    assert 10 <= area <= 2000
    assert ONE_DECIMAL.match(f"{area}")


@pytest.mark.parametrize("property_type", TYPES)
@pytest.mark.parametrize("postcode", ["SW1A 1AA", "LS1 4AP", "CF10 1AA", "TR1 1AA"])
def test_typical_floor_area_grows_with_bedrooms(postcode: str, property_type: str) -> None:
    """More bedrooms, more floor area."""
    areas = [typical_floor_area(postcode, property_type, n) for n in range(13)]
    known = [area for area in areas if area is not None]
    assert known == sorted(known)
    assert len(set(known)) == len(known)


# --- valuation: floor area, input, quality -------------------------------------------


@pytest.mark.parametrize(
    ("property_type", "bedrooms"), [("flat", 7), ("detached", 0), ("terraced", 15)]
)
def test_floor_area_unknown_raised(property_type: str, bedrooms: int) -> None:
    """Bedrooms without a typical area and no floorAreaSqm raise FloorAreaUnknown."""
    request = {"postcode": "LS1 4AP", "propertyType": property_type, "bedrooms": bedrooms}
    with pytest.raises(FloorAreaUnknown):
        valuation_parts(request, now=NOW)


def test_floor_area_sent_takes_the_place_of_bedrooms() -> None:
    """With floorAreaSqm sent, bedrooms without a typical area are no obstacle."""
    request = {"postcode": "LS1 4AP", "propertyType": "flat", "bedrooms": 9, "floorAreaSqm": 180}
    parts = valuation_parts(request, now=NOW)
    assert parts["input"] == {
        "postcode": "LS1 4AP",
        "propertyType": "flat",
        "bedrooms": 9,
        "floorAreaSqm": 180.0,
        "floorAreaSource": "request",
    }


def test_floor_area_from_bedrooms() -> None:
    """Without floorAreaSqm the typical area is used and the source says so."""
    request = {"postcode": "CF10 1AA", "propertyType": "terraced", "bedrooms": 2}
    parts = valuation_parts(request, now=NOW)
    assert parts["input"]["floorAreaSource"] == "bedrooms"
    assert parts["input"]["floorAreaSqm"] == typical_floor_area("CF10 1AA", "terraced", 2)


def test_input_echoes_only_what_was_sent() -> None:
    """Optional details appear in `input` exactly when sent."""
    everything = valuation_parts(full_request(), now=NOW)["input"]
    assert everything == {
        "postcode": "LS1 4AP",
        "propertyType": "semi_detached",
        "bedrooms": 3,
        "floorAreaSqm": 96.0,
        "floorAreaSource": "request",
        "yearBuilt": 1935,
        "builtForm": "semi_detached",
        "wallsEnergyEfficiency": "average",
    }
    bare = valuation_parts(full_request(bedrooms=None, yearBuilt=None, builtForm=None), now=NOW)
    assert set(bare["input"]) == {
        "postcode",
        "propertyType",
        "floorAreaSqm",
        "floorAreaSource",
        "wallsEnergyEfficiency",
    }


@pytest.mark.parametrize(
    ("missing", "quality"),
    [
        ((), "full"),
        (("bedrooms",), "full"),
        (("yearBuilt",), "partial"),
        (("builtForm",), "partial"),
        (("wallsEnergyEfficiency",), "partial"),
        (("floorAreaSqm",), "partial"),
        (("yearBuilt", "builtForm", "wallsEnergyEfficiency", "floorAreaSqm"), "partial"),
    ],
)
def test_data_quality_rule(missing: tuple[str, ...], quality: str) -> None:
    """`full` only when floor area, year built, built form and walls were all sent."""
    request = full_request(**dict.fromkeys(missing))
    assert valuation_parts(request, now=NOW)["dataQuality"] == quality


@pytest.mark.parametrize("postcode", ["SW1A 1AA", "LS1 4AP", "CF10 1AA", "TR1 1AA"])
def test_partial_data_widens_the_range(postcode: str) -> None:
    """The same home gets a wider range when details were filled in."""
    full = valuation_parts(full_request(postcode=postcode), now=NOW)["valuation"]
    partial = valuation_parts(full_request(postcode=postcode, yearBuilt=None), now=NOW)["valuation"]

    def width(figures: dict[str, Any]) -> float:
        return float((figures["range"]["high"] - figures["range"]["low"]) / figures["estimate"])

    assert width(partial) > width(full)


def test_exact_top_level_keys() -> None:
    """Without include only the valuation fields are given; with it, the extras too."""
    base = {"valuation", "location", "dataQuality", "model", "input"}
    assert set(valuation_parts(full_request(), now=NOW)) == base
    assert set(valuation_parts(full_request(include=[]), now=NOW)) == base
    extras = valuation_parts(full_request(include=["commentary", "rebuildCost"]), now=NOW)
    assert set(extras) == base | {"commentary", "rebuildCost"}


def test_include_order_and_repeats_do_not_matter() -> None:
    """A repeated include item equals one, and order is irrelevant."""
    one = valuation_parts(full_request(include=["commentary", "rebuildCost"]), now=NOW)
    other = valuation_parts(
        full_request(include=["rebuildCost", "commentary", "commentary"]), now=NOW
    )
    assert one == other


@pytest.mark.parametrize("reference", ["case-1", "case-2", "x" * 64])
def test_reference_does_not_affect_output(reference: str) -> None:
    """The caller's reference changes nothing in the figures."""
    request = full_request(include=["commentary", "rebuildCost"])
    assert valuation_parts({**request, "reference": reference}, now=NOW) == valuation_parts(
        request, now=NOW
    )


def test_location_and_model() -> None:
    """Location is the sector and local authority; the model version is a fixed date-time."""
    parts = valuation_parts(full_request(postcode="SW1A 1AA"), now=NOW)
    assert parts["location"] == {"sector": "SW1A 1", "localAuthority": local_authority("SW1A 1AA")}
    assert parts["model"] == {"version": "2024-11-04T09:30:00Z"}


# --- valuation: figures ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("now", "indexed_to"),
    [
        (datetime(2026, 11, 21, tzinfo=UTC), "2026-09"),
        (datetime(2026, 1, 1, tzinfo=UTC), "2025-11"),
        (datetime(2026, 2, 28, 23, 59, tzinfo=UTC), "2025-12"),
        (datetime(2027, 3, 1, tzinfo=UTC), "2027-01"),
    ],
)
def test_indexed_to_two_months_back(now: datetime, indexed_to: str) -> None:
    """indexedTo is the year-month two months before `now`."""
    postcode = first(lambda p: market.index_published(local_authority(p)))
    parts = valuation_parts(full_request(postcode=postcode), now=now)
    assert parts["valuation"]["indexedTo"] == indexed_to


def test_indexed_to_absent_where_index_unpublished() -> None:
    """Where the council's index is unpublished indexedTo is absent and priceIndex null."""
    postcode = first(lambda p: not market.index_published(local_authority(p)))
    parts = valuation_parts(full_request(postcode=postcode, include=["commentary"]), now=NOW)
    assert "indexedTo" not in parts["valuation"]
    assert parts["commentary"]["marketMomentum"] == "unknown"
    body = street_analysis_body(postcode, now=NOW)
    assert body is not None
    assert body["priceIndex"] is None


def test_same_month_same_output() -> None:
    """Any moment within one month gives identical output."""
    request = full_request(include=["commentary", "rebuildCost"])
    early = valuation_parts(request, now=datetime(2026, 11, 1, tzinfo=UTC))
    late = valuation_parts(request, now=datetime(2026, 11, 30, 23, 59, 59, tzinfo=UTC))
    assert early == late


@pytest.mark.parametrize("postcode", ["SW1A 1AA", "E1 6AN", "LS1 4AP", "CF10 1AA", "TR1 1AA"])
def test_bigger_homes_are_dearer(postcode: str) -> None:
    """The estimate grows with floor area."""
    estimates = [
        valuation_parts(full_request(postcode=postcode, floorAreaSqm=area), now=NOW)["valuation"][
            "estimate"
        ]
        for area in (40, 80, 160)
    ]
    assert estimates == sorted(estimates)
    assert len(set(estimates)) == 3


def test_london_is_dearer() -> None:
    """The same home costs more in inner London than in Leeds or Cardiff."""

    def estimate(postcode: str) -> int:
        figures = valuation_parts(full_request(postcode=postcode), now=NOW)["valuation"]
        return int(figures["estimate"])

    assert estimate("SW1A 1AA") > estimate("LS1 4AP")
    assert estimate("SW1A 1AA") > estimate("CF10 1AA")


# --- rebuild cost ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"propertyType": "flat"}, "flat"),
        ({"propertyType": "flat", "floorAreaSqm": 2000}, "flat"),
        ({"floorAreaSqm": 29.9}, "size"),
        ({"floorAreaSqm": 10}, "size"),
        ({"floorAreaSqm": 1000.1}, "size"),
        ({"propertyType": "detached", "floorAreaSqm": 2000}, "size"),
    ],
)
def test_rebuild_cost_reasons(changes: dict[str, Any], expected: str) -> None:
    """Flats and sizes outside 30..1000 sqm get no range, with the reason."""
    parts = valuation_parts(full_request(include=["rebuildCost"], **changes), now=NOW)
    assert parts["rebuildCost"] == {"estimated": False, "reason": expected}


@pytest.mark.parametrize("floor_area", [30, 96.5, 1000])
@pytest.mark.parametrize("property_type", ["detached", "semi_detached", "terraced"])
@pytest.mark.parametrize("postcode", ["SW1A 1AA", "LS1 4AP", "CF10 1AA"])
def test_rebuild_cost_estimated(postcode: str, property_type: str, floor_area: float) -> None:
    """Houses of 30..1000 sqm get low <= typical <= high, in thousands, with a month."""
    request = full_request(
        postcode=postcode,
        propertyType=property_type,
        floorAreaSqm=floor_area,
        include=["rebuildCost"],
    )
    cost = valuation_parts(request, now=NOW)["rebuildCost"]
    assert set(cost) == {"estimated", "low", "typical", "high", "pricesAsOf"}
    assert cost["estimated"] is True
    assert 0 < cost["low"] <= cost["typical"] <= cost["high"]
    assert all(cost[name] % 1000 == 0 for name in ("low", "typical", "high"))
    # The last quarter-end month at least three months before November 2026.
    assert cost["pricesAsOf"] == "2026-06"


# --- commentary ------------------------------------------------------------------------

REQUIRED_COMMENTARY = (
    "summary",
    "rangeWidth",
    "rangeNote",
    "property",
    "location",
    "marketMomentum",
    "marketConditions",
    "energyEfficiency",
    "dataQuality",
    "disclaimer",
)


@pytest.mark.parametrize("postcode", list(candidates())[::97])
def test_commentary_has_every_required_field(postcode: str) -> None:
    """Every required commentary field is a non-empty string, with valid enums."""
    request = full_request(postcode=postcode, include=["commentary"])
    parts = valuation_parts(request, now=NOW)
    text = parts["commentary"]
    for name in REQUIRED_COMMENTARY:
        assert isinstance(text[name], str)
        assert text[name]
    assert text["rangeWidth"] in {"narrow", "moderate", "wide"}
    assert text["marketMomentum"] in {"accelerating", "steady", "cooling", "declining", "unknown"}
    assert text["disclaimer"] == commentary.DISCLAIMER
    assert set(text.get("areaInsights", {})) <= set(commentary.INSIGHT_MEMBERS)
    assert f"£{parts['valuation']['estimate']:,}" in text["summary"]
    validate_component("Valuation", as_served(parts))


def test_commentary_optional_parts_absent_for_thin_sectors() -> None:
    """Thin-market sectors lose marketSignals and areaInsights; others have them."""
    thin = first(lambda p: commentary.thin_market(postcodes.sector(p)))
    rich = first(lambda p: not commentary.thin_market(postcodes.sector(p)))
    thin_text = valuation_parts(full_request(postcode=thin, include=["commentary"]), now=NOW)
    rich_text = valuation_parts(full_request(postcode=rich, include=["commentary"]), now=NOW)
    assert "marketSignals" not in thin_text["commentary"]
    assert "areaInsights" not in thin_text["commentary"]
    assert thin_text["commentary"]["marketMomentum"] == "unknown"
    assert "marketSignals" in rich_text["commentary"]
    assert "areaInsights" in rich_text["commentary"]


def test_area_insight_members_sometimes_absent() -> None:
    """Across sectors every insight member is sometimes present and sometimes absent."""
    seen: dict[str, set[bool]] = {name: set() for name in commentary.INSIGHT_MEMBERS}
    for postcode in list(candidates())[::7]:
        request = full_request(postcode=postcode, include=["commentary"])
        insights = valuation_parts(request, now=NOW)["commentary"].get("areaInsights")
        if insights is not None:
            for name in seen:
                seen[name].add(name in insights)
    assert all(flags == {True, False} for flags in seen.values())


def test_commentary_names_the_station_of_the_street_analysis() -> None:
    """The commentary's location names the nearest station the street analysis lists."""

    def station(postcode: str) -> str | None:
        stops = streets.transport_stops(postcode)
        names = [stop["name"] for stop in stops if stop["mode"] in {"rail", "metro"}]
        return names[0] if names else None

    postcode = first(lambda p: station(p) is not None)
    request = full_request(postcode=postcode, include=["commentary"])
    text = valuation_parts(request, now=NOW)["commentary"]["location"]
    assert f"The nearest station, {station(postcode)}, is " in text
    body = street_analysis_body(postcode, now=NOW)
    assert body is not None
    assert body["transport"] == streets.transport_stops(postcode)


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({}, "Every detail the model uses was sent"),
        ({"yearBuilt": None}, "(year built)"),
        ({"floorAreaSqm": None, "builtForm": None}, "(floor area, built form)"),
    ],
)
def test_commentary_data_quality_names_missing_details(
    changes: dict[str, Any], fragment: str
) -> None:
    """The commentary's dataQuality text names the details filled from typical values."""
    request = full_request(include=["commentary"], **changes)
    assert fragment in valuation_parts(request, now=NOW)["commentary"]["dataQuality"]


# --- determinism -----------------------------------------------------------------------

_CHILD = """
import json, sys
from datetime import datetime, UTC
from batchval._internal.sandbox import data
now = datetime(2026, 11, 21, 23, 58, 42, tzinfo=UTC)
request = json.loads(sys.argv[1])
print(json.dumps([
    data.valuation_parts(request, now=now),
    data.street_analysis_body(request["postcode"], now=now),
    data.local_authority(request["postcode"]),
    data.typical_floor_area(request["postcode"], "flat", 2),
], sort_keys=True))
"""


@pytest.mark.parametrize("hash_seed", ["1", "2"])
def test_same_output_in_another_process(hash_seed: str) -> None:
    """Another process with another hash seed gives identical figures."""
    request = full_request(postcode="CF10 1AA", include=["commentary", "rebuildCost"])
    here = json.dumps(
        [
            valuation_parts(request, now=NOW),
            street_analysis_body("CF10 1AA", now=NOW),
            local_authority("CF10 1AA"),
            typical_floor_area("CF10 1AA", "flat", 2),
        ],
        sort_keys=True,
    )
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(request)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": hash_seed},
    )
    assert child.stdout.strip() == here


_POSTCODE = st.builds(
    lambda area, district, sector, unit: f"{area}{district} {sector}{unit}",
    st.sampled_from(AREAS),
    st.integers(1, 99),
    st.integers(0, 9),
    st.text(alphabet="ABDEFGHJLNPQRSTUWXYZ", min_size=2, max_size=2),
)


@st.composite
def valid_requests(draw: st.DrawFn) -> dict[str, Any]:
    """Any ValuationRequest that passed the server's validation."""
    request: dict[str, Any] = {
        "postcode": draw(_POSTCODE),
        "propertyType": draw(st.sampled_from(TYPES)),
    }
    sizes = draw(st.sampled_from(["bedrooms", "floorAreaSqm", "both"]))
    if sizes in {"bedrooms", "both"}:
        request["bedrooms"] = draw(st.integers(0, 20))
    if sizes in {"floorAreaSqm", "both"}:
        request["floorAreaSqm"] = draw(
            st.integers(10, 2000) | st.floats(10, 2000, allow_nan=False, allow_infinity=False)
        )
    optional = {
        "yearBuilt": st.integers(1500, 2100),
        "builtForm": st.sampled_from(BUILT_FORMS),
        "wallsEnergyEfficiency": st.sampled_from(WALLS),
        "include": st.lists(st.sampled_from(["commentary", "rebuildCost"]), max_size=3),
    }
    for name, strategy in optional.items():
        if draw(st.booleans()):
            request[name] = draw(strategy)
    return request


@settings(max_examples=300, deadline=None)
@given(
    request=valid_requests(),
    now=st.datetimes(datetime(2025, 1, 1), datetime(2030, 12, 31), timezones=st.just(UTC)),
    reference=st.text(max_size=64),
)
@pytest.mark.slow
def test_any_valid_request(request: dict[str, Any], now: datetime, reference: str) -> None:
    """For any valid request: low < estimate < high, plausible figures, deterministic."""
    try:
        parts = valuation_parts(request, now=now)
    except FloorAreaUnknown:
        assert "floorAreaSqm" not in request
        postcode, kind, bedrooms = request["postcode"], request["propertyType"], request["bedrooms"]
        assert typical_floor_area(postcode, kind, bedrooms) is None
        return
    figures = parts["valuation"]
    assert figures["range"]["low"] < figures["estimate"] < figures["range"]["high"]
    assert 60_000 <= figures["estimate"] <= 5_000_000
    assert all(isinstance(figures["range"][name], int) for name in ("low", "high"))
    assert 0.6 <= figures["range"]["coverage"] <= 0.95
    assert figures["currency"] == "GBP"
    assert YEAR_MONTH.match(figures.get("indexedTo", "2000-01"))
    assert valuation_parts(request, now=now) == parts
    assert valuation_parts({**request, "reference": reference}, now=now) == parts
    validate_component("Valuation", as_served(parts))


# --- street analysis -------------------------------------------------------------------


@pytest.mark.parametrize(
    "postcode",
    [
        "SW1A 1ZZ",  # unit ZZ
        "CF10 9ZZ",
        "ZZ1 4AA",  # not a postcode area in use
        "ZZ1 5AA",
        "EH1 1AA",  # Scotland
        "TD1 1AA",
        "BT1 1AA",  # Northern Ireland
        "IM1 1AA",  # Isle of Man
        "JE2 3AA",  # Channel Islands
        "GY1 1AA",
    ],
)
def test_street_analysis_nothing_held(postcode: str) -> None:
    """Unit ZZ and postcodes outside England, Wales and the border hold nothing."""
    assert street_analysis_body(postcode, now=NOW) is None


@pytest.mark.parametrize("postcode", ["TD15 1AA", "DG16 5AA", "sw1a1aa", "CF10 1AZ"])
def test_street_analysis_held(postcode: str) -> None:
    """Border districts and any other England and Wales unit are held, postcode normalised."""
    body = street_analysis_body(postcode, now=NOW)
    assert body is not None
    assert body["postcode"] == postcodes.normalise(postcode)


def test_street_analysis_refuses_malformed_postcode() -> None:
    """A string that is not a full postcode is a caller's error, not "nothing held"."""
    with pytest.raises(ValueError, match="not a full postcode"):
        street_analysis_body("SW1A", now=NOW)


@pytest.mark.parametrize("postcode", list(candidates())[::61])
def test_street_analysis_shape(postcode: str) -> None:
    """Every field of section 2.5 but mode and charge, with the documented shapes."""
    body = street_analysis_body(postcode, now=NOW)
    assert body is not None
    validate_component("StreetAnalysis", body)
    assert set(body) == {
        "postcode",
        "coveredPostcodes",
        "soldPrices",
        "crime",
        "transport",
        "rental",
        "energy",
        "priceIndex",
        "generatedAt",
    }
    assert body["generatedAt"] == "2026-11-21T23:58:42Z"
    covered = body["coveredPostcodes"]
    assert covered[0] == postcode
    assert 3 <= len(covered) <= 6
    assert len(set(covered)) == len(covered)
    assert {postcodes.sector(p) for p in covered} == {postcodes.sector(postcode)}
    assert 0 <= len(body["transport"]) <= 6
    for stop in body["transport"]:
        assert set(stop) == {"name", "mode", "distanceBand"}


def test_street_analysis_same_month_same_figures() -> None:
    """Within a month only generatedAt changes."""
    early = street_analysis_body("LS1 4AP", now=datetime(2026, 11, 1, tzinfo=UTC))
    late = street_analysis_body("LS1 4AP", now=datetime(2026, 11, 30, 12, tzinfo=UTC))
    assert early is not None
    assert late is not None
    assert early.pop("generatedAt") != late.pop("generatedAt")
    assert early == late


def _held_bodies() -> list[dict[str, Any]]:
    bodies = (street_analysis_body(p, now=NOW) for p in list(candidates())[::5])
    return [body for body in bodies if body is not None]


@pytest.mark.parametrize("member", ["soldPrices", "crime", "rental", "energy", "priceIndex"])
@pytest.mark.slow
def test_street_analysis_members_sometimes_null(member: str) -> None:
    """Each nullable member is null for some postcodes and an object for most."""
    bodies = _held_bodies()
    nulls = sum(body[member] is None for body in bodies)
    assert 0 < nulls < len(bodies) / 4


@pytest.mark.slow
def test_street_analysis_inner_nulls_occur() -> None:
    """Callers see nulls inside rental, energy and priceIndex too."""
    bodies = _held_bodies()
    rentals = [b["rental"] for b in bodies if b["rental"] is not None]
    energies = [b["energy"] for b in bodies if b["energy"] is not None]
    assert any(r["grossYield"] is None for r in rentals)
    assert any(r["grossYield"] is not None for r in rentals)
    assert any(e["gas"] is None for e in energies)
    assert any(e["electricityEconomy7"] is None for e in energies)
    assert any(e["electricityEconomy7"] is not None for e in energies)
    assert any(b["transport"] == [] for b in bodies)


@pytest.mark.slow
def test_sold_prices_consistent() -> None:
    """byYear is oldest first and agrees with the totals, lowest and highest sale."""
    for body in _held_bodies():
        sold = body["soldPrices"]
        if sold is None:
            continue
        years = [row["year"] for row in sold["byYear"]]
        assert years == sorted(years)
        assert len(set(years)) == len(years)
        assert sum(row["sales"] for row in sold["byYear"]) == sold["totalSold"]
        assert sold["firstSale"] <= sold["lastSale"] <= "2026-09-30"
        assert int(sold["firstSale"][:4]) == years[0]
        assert int(sold["lastSale"][:4]) == years[-1]
        assert sold["lowestSale"] <= sold["overallMedian"] <= sold["highestSale"]
        assert sold["lowestSale"] <= sold["recentMedian"] <= sold["highestSale"]
        assert 2026 - sold["recentMedianYears"] < int(sold["lastSale"][:4])
        for row in sold["byYear"]:
            assert all(isinstance(row[name], int) for name in ("year", "average", "median"))


def test_price_index_months() -> None:
    """24 months newest first, ending two months before now, for the body's council."""
    postcode = first(lambda p: market.index_published(local_authority(p)))
    body = street_analysis_body(postcode, now=NOW)
    assert body is not None
    index = body["priceIndex"]
    assert index["localAuthority"] == local_authority(postcode)
    months = [row["month"] for row in index["months"]]
    assert len(months) == 24
    assert months[0] == "2026-09"
    assert months[-1] == "2024-10"
    assert months == sorted(months, reverse=True)
    # The newest two months' sales are still being registered.
    assert [row["salesVolume"] is None for row in index["months"][:3]] == [True, True, False]


@pytest.mark.slow
def test_energy_fuel_use_shape() -> None:
    """Each FuelUse is an object with medianKwh, meanKwh and meters, or null."""
    for body in _held_bodies():
        energy = body["energy"]
        if energy is None:
            continue
        assert energy["year"] == 2024
        for fuel in ("electricity", "electricityEconomy7", "gas"):
            use = energy[fuel]
            if use is None:
                continue
            assert set(use) == {"medianKwh", "meanKwh", "meters"}
            assert isinstance(use["meters"], int)
            assert use["meanKwh"] >= use["medianKwh"] > 0
        assert (energy["gas"] is None) == (energy["vsGasPct"] is None)


@settings(max_examples=150, deadline=None)
@given(postcode=_POSTCODE)
@pytest.mark.slow
def test_any_held_postcode_matches_the_schema(postcode: str) -> None:
    """For any postcode: nothing held exactly by the documented rule, else a valid body."""
    body = street_analysis_body(postcode, now=NOW)
    assert (body is None) == streets.nothing_held(postcode)
    if body is not None:
        validate_component("StreetAnalysis", body)
        assert body == street_analysis_body(postcode, now=NOW)
