"""UK postcodes: shape, normal form, and which side of the coverage border they fall.

Shared by input validation (reject rows that are certainly outside England and Wales
before paying for a call) and by the sandbox (answer `outside-coverage` as the API does).
Only postcodes that are *certainly* outside are called so; districts that straddle the
England-Scotland border are `Region.BORDER` and are left for the API to judge.
"""

from __future__ import annotations

import enum
import re

# Outward code: area (1-2 letters), district digit, optional digit or letter.
# Inward code: digit and two letters. Spaces are optional in input.
# A full postcode, compact and in capitals (polars' regex engine reads it alike).
SHAPE_PATTERN = r"^([A-Z]{1,2})([0-9][A-Z0-9]?)([0-9])([A-Z]{2})$"
_SHAPE = re.compile(SHAPE_PATTERN)
# A full postcode standing as a word inside other text (an address in a reference).
POSTCODE_IN_TEXT = r"(?i)\b[A-Z]{1,2}[0-9][A-Z0-9]? ?[0-9][A-Z]{2}\b"
_IN_TEXT = re.compile(POSTCODE_IN_TEXT)


class Region(enum.Enum):
    ENGLAND_WALES = "england_wales"  # a postcode area wholly in England or Wales
    BORDER = "border"  # a district that straddles the England-Scotland border
    SCOTLAND = "scotland"
    NORTHERN_IRELAND = "northern_ireland"
    ISLE_OF_MAN = "isle_of_man"
    CHANNEL_ISLANDS = "channel_islands"
    UNKNOWN = "unknown"  # the shape of a postcode, but not a postcode area in use

    @property
    def outside_coverage(self) -> bool:
        """True when no address in the region is in England or Wales."""
        return self in _OUTSIDE


_OUTSIDE = frozenset(
    {Region.SCOTLAND, Region.NORTHERN_IRELAND, Region.ISLE_OF_MAN, Region.CHANNEL_ISLANDS}
)

# Postcode areas wholly (or, for CH/LD/NP/SY, across the England-Wales border, which
# is inside coverage either way) in England and Wales.
_ENGLAND_WALES_AREAS = frozenset(
    [
        "AL",
        "B",
        "BA",
        "BB",
        "BD",
        "BH",
        "BL",
        "BN",
        "BR",
        "BS",
        "CA",
        "CB",
        "CF",
        "CH",
        "CM",
        "CO",
        "CR",
        "CT",
        "CV",
        "CW",
        "DA",
        "DE",
        "DH",
        "DL",
        "DN",
        "DT",
        "DY",
        "E",
        "EC",
        "EN",
        "EX",
        "FY",
        "GL",
        "GU",
        "HA",
        "HD",
        "HG",
        "HP",
        "HR",
        "HU",
        "HX",
        "IG",
        "IP",
        "KT",
        "L",
        "LA",
        "LD",
        "LE",
        "LL",
        "LN",
        "LS",
        "LU",
        "M",
        "ME",
        "MK",
        "N",
        "NE",
        "NG",
        "NN",
        "NP",
        "NR",
        "NW",
        "OL",
        "OX",
        "PE",
        "PL",
        "PO",
        "PR",
        "RG",
        "RH",
        "RM",
        "S",
        "SA",
        "SE",
        "SG",
        "SK",
        "SL",
        "SM",
        "SN",
        "SO",
        "SP",
        "SR",
        "SS",
        "ST",
        "SW",
        "SY",
        "TA",
        "TF",
        "TN",
        "TQ",
        "TR",
        "TS",
        "TW",
        "UB",
        "W",
        "WA",
        "WC",
        "WD",
        "WF",
        "WN",
        "WR",
        "WS",
        "WV",
        "YO",
    ]
)
_SCOTTISH_AREAS = frozenset(
    ["AB", "DD", "DG", "EH", "FK", "G", "HS", "IV", "KA", "KW", "KY", "ML", "PA", "PH", "TD", "ZE"]
)
# Scottish-area districts with addresses in England: TD9 (Kielder side), TD12 (Cornhill,
# Wark), TD15 (Berwick-upon-Tweed), DG16 (Gretna, bordering Cumbria). Left to the API.
_BORDER_DISTRICTS = frozenset({"TD9", "TD12", "TD15", "DG16"})
_OTHER_AREAS = {
    "BT": Region.NORTHERN_IRELAND,
    "IM": Region.ISLE_OF_MAN,
    "GY": Region.CHANNEL_ISLANDS,
    "JE": Region.CHANNEL_ISLANDS,
}


def normalise(raw: str) -> str | None:
    """The postcode in its normal form (`SW1A 1AA`), or None when it has not the shape
    of a full UK postcode. Case and spaces in the input do not matter."""
    compact = "".join(raw.split())
    # ASCII first: the German sharp s upper-cases to "SS" and the long s to "S", which
    # would turn look-alike text into somebody's real postcode.
    if not compact.isascii():
        return None
    compact = compact.upper()
    if _SHAPE.match(compact) is None:
        return None
    return f"{compact[:-3]} {compact[-3:]}"


def _parts(postcode: str) -> tuple[str, str, str, str]:
    compact = postcode.replace(" ", "").upper()
    match = _SHAPE.match(compact)
    if match is None:
        raise ValueError(f"not a full postcode: {postcode!r}")
    area, district, sector_digit, unit = match.groups()
    return area, district, sector_digit, unit


def area(postcode: str) -> str:
    """The postcode area: `SW` of `SW1A 1AA`."""
    return _parts(postcode)[0]


def district(postcode: str) -> str:
    """The outward code: `SW1A` of `SW1A 1AA`."""
    a, d, _, _ = _parts(postcode)
    return a + d


def sector(postcode: str) -> str:
    """The postcode sector: `SW1A 1` of `SW1A 1AA`."""
    a, d, s, _ = _parts(postcode)
    return f"{a}{d} {s}"


def region(postcode: str) -> Region:
    """Where a well-shaped postcode lies, as far as its area and district tell."""
    a = area(postcode)
    if a in _ENGLAND_WALES_AREAS:
        return Region.ENGLAND_WALES
    if a in _SCOTTISH_AREAS:
        return Region.BORDER if district(postcode) in _BORDER_DISTRICTS else Region.SCOTLAND
    return _OTHER_AREAS.get(a, Region.UNKNOWN)


def contains_postcode(text: str) -> bool:
    """True when a full postcode stands as a word in the text (`12 High St, SW1A 1AA`)."""
    return _IN_TEXT.search(text) is not None
