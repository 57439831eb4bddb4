"""UK postcodes: normal form, parts, region, and spotting one inside other text."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from batchval._internal import postcodes
from batchval._internal.postcodes import Region

NORMAL_FORM = re.compile(r"[A-Z]{1,2}[0-9][A-Z0-9]? [0-9][A-Z]{2}")


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("sw1a1aa", "SW1A 1AA"),
        (" ec1a 1bb ", "EC1A 1BB"),
        ("W1A0AX", "W1A 0AX"),
        ("M1 1AE", "M1 1AE"),
        ("B33 8TH", "B33 8TH"),
        ("CR2 6XH", "CR2 6XH"),
        ("DN55 1PT", "DN55 1PT"),
        ("SW1A\t1AA\n", "SW1A 1AA"),
        ("s w 1 a 1 a a", "SW1A 1AA"),
        ("Cf10  1aA", "CF10 1AA"),
    ],
)
def test_normalise_gives_the_normal_form(raw: str, normal: str) -> None:
    """Case and spaces do not matter; the normal form is upper case with one space."""
    assert postcodes.normalise(raw) == normal


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "   ",
        "SW1A",  # outward code only
        "12345",
        "SW1A 1A",  # inward code one letter short
        "SW1A1AAA",  # one letter too many
        "SWA1 1AA",  # three letters before the district digit
        "1SW 1AA",  # starts with a digit
        "SW1A 11A",  # inward code is digit, letter, letter
        "SW1A-1AA",  # a dash is not a space
        "ＳＷ１Ａ １ＡＡ",  # full-width letters and digits are not ASCII
    ],
)
def test_normalise_refuses_what_is_not_a_full_postcode(raw: str) -> None:
    """A string without the shape of a full UK postcode gives None."""
    assert postcodes.normalise(raw) is None


@pytest.mark.parametrize(
    ("postcode", "area", "district", "sector"),
    [
        ("SW1A 1AA", "SW", "SW1A", "SW1A 1"),
        ("W1A 0AX", "W", "W1A", "W1A 0"),
        ("M1 1AE", "M", "M1", "M1 1"),
        ("B33 8TH", "B", "B33", "B33 8"),
        ("CR2 6XH", "CR", "CR2", "CR2 6"),
        ("DN55 1PT", "DN", "DN55", "DN55 1"),
        ("ec1a1bb", "EC", "EC1A", "EC1A 1"),
    ],
)
def test_area_district_and_sector(postcode: str, area: str, district: str, sector: str) -> None:
    """A postcode splits into area, district (outward code) and sector."""
    assert postcodes.area(postcode) == area
    assert postcodes.district(postcode) == district
    assert postcodes.sector(postcode) == sector


@pytest.mark.parametrize("part", [postcodes.area, postcodes.district, postcodes.sector])
@pytest.mark.parametrize("raw", ["", "SW1A", "SW1A 1A", "12345"])
def test_parts_of_a_malformed_postcode_raise(part: object, raw: str) -> None:
    """Asking for a part of something that is not a full postcode raises ValueError."""
    assert callable(part)
    with pytest.raises(ValueError, match="not a full postcode"):
        part(raw)


@pytest.mark.parametrize(
    ("postcode", "region"),
    [
        ("SW1A 1AA", Region.ENGLAND_WALES),
        ("M1 1AE", Region.ENGLAND_WALES),
        ("DN55 1PT", Region.ENGLAND_WALES),
        ("CA1 1AA", Region.ENGLAND_WALES),  # Carlisle, just south of the border
        ("CF10 1AA", Region.ENGLAND_WALES),  # Cardiff
        ("SA1 1AA", Region.ENGLAND_WALES),  # Swansea
        ("LL11 1AA", Region.ENGLAND_WALES),  # Wrexham
        ("EH1 1AA", Region.SCOTLAND),
        ("G1 1AA", Region.SCOTLAND),
        ("AB10 1AA", Region.SCOTLAND),
        ("TD1 1AA", Region.SCOTLAND),  # Galashiels: a TD district wholly in Scotland
        ("DG1 1AA", Region.SCOTLAND),
        ("TD15 1AA", Region.BORDER),  # Berwick-upon-Tweed
        ("TD12 4AA", Region.BORDER),
        ("TD9 0AA", Region.BORDER),
        ("DG16 5AA", Region.BORDER),  # Gretna
        ("BT1 1AA", Region.NORTHERN_IRELAND),
        ("IM1 1AA", Region.ISLE_OF_MAN),
        ("GY1 1AA", Region.CHANNEL_ISLANDS),
        ("JE2 3AA", Region.CHANNEL_ISLANDS),
        ("ZZ1 4AA", Region.UNKNOWN),
        ("Q1 1AA", Region.UNKNOWN),
        ("sw1a1aa", Region.ENGLAND_WALES),
    ],
)
def test_region(postcode: str, region: Region) -> None:
    """The area (and, on the Scottish border, the district) tells the region."""
    assert postcodes.region(postcode) is region


OUTSIDE_COVERAGE = {
    Region.ENGLAND_WALES: False,
    Region.BORDER: False,  # some addresses are in England: left for the API to judge
    Region.UNKNOWN: False,  # not certainly outside
    Region.SCOTLAND: True,
    Region.NORTHERN_IRELAND: True,
    Region.ISLE_OF_MAN: True,
    Region.CHANNEL_ISLANDS: True,
}


@pytest.mark.parametrize("region", list(Region))
def test_outside_coverage(region: Region) -> None:
    """Only regions with no address in England or Wales are certainly outside coverage."""
    assert region.outside_coverage is OUTSIDE_COVERAGE[region]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Loan 12 High St SW1A 1AA", True),
        ("12 High St, SW1A 1AA", True),
        ("sw1a1aa", True),  # lower case, no space
        ("case for m1 1ae, flat 3", True),
        ("X-SW1A 1AA-2", True),  # dashes are word boundaries
        ("AB12CD", True),  # reads as AB1 2CD without its space
        ("REF-2024-0001", False),
        ("LOAN-000123", False),
        ("SW1A", False),  # outward code alone
        ("REFSW1A1AA", False),  # not a word of its own
        ("SW1A1AA7", False),
        ("", False),
    ],
)
def test_contains_postcode(text: str, found: bool) -> None:
    """A full postcode standing as a word anywhere in the text is found."""
    assert postcodes.contains_postcode(text) is found


POSTCODE_LIKE = st.from_regex(
    r"\s*[A-Za-z]{1,2}\s*[0-9]\s*[A-Za-z0-9]?\s*[0-9]\s*[A-Za-z]{2}\s*", fullmatch=True
)


@given(st.one_of(st.text(), POSTCODE_LIKE))
@example("sw1a1aa")
@example("ſw1a1aa")  # the long s upper-cases to an ASCII S
def test_normalise_is_idempotent_and_gives_the_normal_form(raw: str) -> None:
    """Whatever the input, the result is None or a fixed point in the normal form."""
    normal = postcodes.normalise(raw)
    if normal is None:
        return
    assert postcodes.normalise(normal) == normal
    assert NORMAL_FORM.fullmatch(normal), normal


@given(POSTCODE_LIKE)
def test_any_case_and_spacing_of_a_well_shaped_postcode_normalises(raw: str) -> None:
    """Letters and digits in the shape of a postcode normalise whatever the case and spaces."""
    normal = postcodes.normalise(raw)
    assert normal is not None
    assert normal.replace(" ", "") == "".join(raw.split()).upper()
