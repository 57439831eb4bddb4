"""Make the sample inputs in this folder: fake homes, plausible and reproducible.

    .venv/bin/python sample_inputs/make_samples.py

writes, beside this script:

- `portfolio.csv` and `portfolio.parquet`: the same 2,000 homes in England and Wales,
  with columns named as the snake_case forms of the API fields, so that batchval maps
  them with no config. Pass-through columns: `loan_id`, `branch`.
- `mortgage_book.csv`: the first 200 rows of the portfolio as a mortgage book: the
  same columns and loan ids, with `loan_balance`, `origination_value` and
  `origination_date` (lender outputs: LTVs, bands, flags and portfolio totals). Two rows
  have no balance and two a balance of 0 (loans redeemed). Drawn from a random stream of
  its own, so the other files are unchanged by it.
- `lender_book.xlsx`, `lender_book_windows.csv`, `lender_book.csv`: 66 loans of a
  lender's own book in three forms (a workbook with typed cells; what Excel on Windows
  saves as CSV: cp1252, `£412,500.00`, `15/03/2019`; a UTF-8 CSV), every property-type
  wording batchval reads without a `values` map and three it refuses as ambiguous.
- `lender_extract.csv`: 300 other homes as a lender's system might export them: its own
  column names and codes, semicolon-delimited, UTF-8 with a BOM, CRLF line ends, some
  postcodes in lower case without the space. `configs/lender_extract.yaml` maps it.
- `mi_extract.xlsx`, `mi_extract_windows.csv`, `mi_pack.xlsx`: 150 loans of a building
  society's MI extract as it leaves the warehouse (issue 32): a title merged across the
  table, a "produced by" line and a blank line above the header (line 4), a `Total` line,
  a blank line and a confidentiality footer below the loans; the borrowers' names, birth
  dates, e-mails, telephones (Ofcom's drama ranges) and address lines beside the fields a
  valuation needs. One loan midway has only its account number (a problem row), three are
  in Scotland (outside the API's coverage). As a one-sheet workbook, as Excel on Windows
  saves that sheet as CSV, and as a monthly pack that opens on a cover sheet (`Cover`,
  `Loans`, `Notes`). `mi_extract()` gives what a test looks for: the blank loan's account,
  the surnames, e-mails and birth dates (none found anywhere else).

Every row is a valid request (docs/api.md, sections 3 and 6), and all but three value cleanly
in the sandbox. On purpose:

- 10 rows repeat another row's request fields exactly under another loan id (one
  request is asked for three times): identical requests are valued and charged once.
- 3 rows give bedrooms but no floor area for a home the sandbox has no typical floor
  area for (flats with 7 or more bedrooms, a detached house with none): the API answers
  422 floor-area-required, which batchval reports as a problem asking for a floor area.

The postcodes have the shape of real ones and real outward codes (areas and districts),
but the units are drawn at random: they are not addresses. The same seed gives the same
files, byte for byte (the Parquet file up to the writer's version stamp, the workbooks up
to xlsxwriter's version: their creation date is pinned).
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

SEED = 2026
PORTFOLIO_ROWS = 2_000
LENDER_ROWS = 300
MORTGAGE_ROWS = 200
DUPLICATE_ROWS = 10  # rows repeating another row's request (one source is asked for thrice)
# A workbook's creation moment, written into it (docProps/core.xml; xlsxwriter would write
# the time of the run): the moment lender_book.xlsx was first made, so that it and the other
# workbooks are the same bytes at every run.
WORKBOOKS_CREATED = dt.datetime(2026, 11, 25, 22, 14, 44, tzinfo=dt.UTC)

# Branch -> (share of homes, postcode area -> real districts in it).
_BRANCHES: dict[str, tuple[float, dict[str, tuple[str, ...]]]] = {
    "London": (
        0.20,
        {
            "SW": ("SW1A", "SW1P", "SW1V", "SW4", "SW6", "SW8", "SW11", "SW12", "SW16", "SW19"),
            "SE": ("SE1", "SE5", "SE8", "SE10", "SE13", "SE15", "SE18", "SE22", "SE23", "SE25"),
            "N": ("N1", "N4", "N7", "N8", "N10", "N15", "N16", "N17", "N19", "N22"),
            "E": ("E1", "E1W", "E2", "E3", "E5", "E8", "E10", "E14", "E15", "E17"),
            "W": ("W1H", "W1T", "W2", "W3", "W4", "W5", "W6", "W10", "W12", "W13"),
            "NW": ("NW1", "NW2", "NW3", "NW5", "NW6", "NW8", "NW10", "NW11"),
            "BR": ("BR1", "BR2", "BR3", "BR5", "BR6"),
            "CR": ("CR0", "CR2", "CR4", "CR7", "CR8"),
            "KT": ("KT1", "KT2", "KT3", "KT6", "KT12", "KT19"),
            "RM": ("RM1", "RM3", "RM6", "RM7", "RM10", "RM12"),
        },
    ),
    "South East": (
        0.22,
        {
            "OX": ("OX1", "OX2", "OX4", "OX14", "OX16", "OX26"),
            "CB": ("CB1", "CB2", "CB4", "CB7", "CB9"),
            "BN": ("BN1", "BN2", "BN3", "BN11", "BN21"),
            "GU": ("GU1", "GU2", "GU14", "GU21", "GU34"),
            "RG": ("RG1", "RG2", "RG4", "RG14", "RG21", "RG40"),
            "MK": ("MK3", "MK5", "MK9", "MK40", "MK42"),
            "ME": ("ME1", "ME4", "ME7", "ME10", "ME15", "ME16"),
            "CT": ("CT1", "CT2", "CT9", "CT11", "CT20"),
            "TN": ("TN1", "TN4", "TN9", "TN23", "TN34"),
            "CM": ("CM1", "CM2", "CM7", "CM12", "CM20"),
            "CO": ("CO1", "CO2", "CO4", "CO15"),
            "IP": ("IP1", "IP2", "IP4", "IP28", "IP33"),
            "PE": ("PE1", "PE2", "PE7", "PE13", "PE30"),
            "NR": ("NR1", "NR2", "NR3", "NR5", "NR31"),
            "SO": ("SO14", "SO15", "SO16", "SO17", "SO19", "SO50", "SO53"),
            "PO": ("PO1", "PO4", "PO6", "PO9", "PO19", "PO21"),
        },
    ),
    "South West": (
        0.12,
        {
            "BS": ("BS1", "BS3", "BS5", "BS6", "BS7", "BS16", "BS31", "BS48"),
            "PL": ("PL1", "PL4", "PL5", "PL6", "PL25"),
            "EX": ("EX1", "EX2", "EX4", "EX8", "EX32"),
            "TQ": ("TQ1", "TQ2", "TQ4", "TQ12", "TQ14"),
            "TR": ("TR1", "TR7", "TR11", "TR15", "TR18"),
            "GL": ("GL1", "GL2", "GL4", "GL50", "GL51", "GL52"),
            "SN": ("SN1", "SN2", "SN3", "SN5", "SN25"),
            "BA": ("BA1", "BA2", "BA11", "BA14", "BA21"),
            "TA": ("TA1", "TA2", "TA6", "TA20"),
            "DT": ("DT1", "DT4"),
            "SP": ("SP1", "SP2", "SP10"),
            "BH": ("BH1", "BH8", "BH9", "BH14", "BH23"),
        },
    ),
    "Midlands": (
        0.16,
        {
            "B": ("B5", "B13", "B15", "B23", "B29", "B44", "B73", "B90", "B91", "B92"),
            "NG": ("NG1", "NG3", "NG5", "NG7", "NG9", "NG17"),
            "LE": ("LE1", "LE2", "LE3", "LE4", "LE11", "LE18", "LE67"),
            "CV": ("CV1", "CV2", "CV3", "CV5", "CV11", "CV32", "CV37"),
            "DE": ("DE1", "DE3", "DE21", "DE22", "DE24", "DE56"),
            "ST": ("ST1", "ST4", "ST5", "ST16", "ST17"),
            "LN": ("LN1", "LN2", "LN4", "LN6"),
            "HR": ("HR1", "HR2", "HR4"),
            "WR": ("WR1", "WR2", "WR5", "WR9", "WR14"),
        },
    ),
    "North West": (
        0.12,
        {
            "M": ("M1", "M4", "M14", "M20", "M21", "M33", "M41"),
            "L": ("L1", "L4", "L8", "L15", "L17", "L18", "L25"),
            "SK": ("SK1", "SK2", "SK4", "SK8", "SK9", "SK14"),
            "WA": ("WA1", "WA4", "WA5", "WA8", "WA14", "WA15"),
            "CH": ("CH1", "CH2", "CH41", "CH43", "CH44", "CH62", "CH65"),
            "PR": ("PR1", "PR2", "PR4", "PR7", "PR8", "PR9"),
            "BB": ("BB1", "BB2", "BB5", "BB9", "BB11"),
            "LA": ("LA1", "LA3", "LA4", "LA9", "LA14"),
            "CA": ("CA1", "CA2", "CA3", "CA11", "CA14"),
        },
    ),
    "North East & Yorkshire": (
        0.13,
        {
            "LS": ("LS1", "LS6", "LS7", "LS8", "LS12", "LS17", "LS28"),
            "S": ("S1", "S2", "S6", "S7", "S10", "S11", "S35", "S60", "S66"),
            "NE": ("NE1", "NE2", "NE3", "NE6", "NE15", "NE25", "NE28", "NE63"),
            "YO": ("YO1", "YO8", "YO10", "YO12", "YO24", "YO31"),
            "HU": ("HU1", "HU3", "HU5", "HU8", "HU13"),
            "DN": ("DN1", "DN2", "DN4", "DN15", "DN31", "DN35"),
            "BD": ("BD1", "BD3", "BD5", "BD9", "BD16", "BD18"),
            "HD": ("HD1", "HD2", "HD3", "HD5", "HD8"),
            "WF": ("WF1", "WF2", "WF10", "WF13", "WF17"),
            "DH": ("DH1", "DH2", "DH3", "DH9"),
            "SR": ("SR1", "SR2", "SR3", "SR5", "SR8"),
            "TS": ("TS1", "TS5", "TS7", "TS10", "TS18", "TS24"),
        },
    ),
    "Wales": (
        0.05,
        {
            "CF": ("CF5", "CF10", "CF11", "CF14", "CF23", "CF24", "CF31", "CF37", "CF62", "CF83"),
            "SA": ("SA1", "SA2", "SA6", "SA11", "SA15", "SA31", "SA61", "SA62"),
            "LL": ("LL11", "LL13", "LL18", "LL29", "LL30", "LL57", "LL65"),
            "NP": ("NP7", "NP10", "NP16", "NP19", "NP20", "NP44"),
        },
    ),
}
# The lender's codes for the same branches.
_BRANCH_CODES = {
    "London": ("LON01", "LON02"),
    "South East": ("RDG01", "CAM01"),
    "South West": ("BRS01", "EXE01"),
    "Midlands": ("BHM01", "NOT01"),
    "North West": ("MAN01", "LIV01"),
    "North East & Yorkshire": ("LDS01", "NCL01"),
    "Wales": ("CDF01",),
}
# The letters used in inward codes (never C, I, K, M, O or V).
_UNIT_LETTERS = "ABDEFGHJLNPQRSTUWXYZ"

# Shares of the housing stock (English Housing Survey, roughly); London is flat-heavy.
_TYPES = ("detached", "semi_detached", "terraced", "flat")
_TYPE_SHARES = (0.22, 0.31, 0.28, 0.19)
_LONDON_TYPE_SHARES = (0.07, 0.17, 0.31, 0.45)
_BEDROOMS: dict[str, tuple[tuple[int, ...], tuple[float, ...]]] = {
    "flat": ((0, 1, 2, 3, 4), (0.05, 0.40, 0.45, 0.09, 0.01)),
    "terraced": ((1, 2, 3, 4, 5), (0.05, 0.35, 0.45, 0.12, 0.03)),
    "semi_detached": ((2, 3, 4, 5), (0.15, 0.60, 0.20, 0.05)),
    "detached": ((2, 3, 4, 5, 6), (0.04, 0.25, 0.45, 0.20, 0.06)),
}
# Floor area = base + per bedroom (sqm), then a spread of about 15% either way.
_FLOOR_AREA = {
    "flat": (24.0, 20.0),
    "terraced": (38.0, 17.0),
    "semi_detached": (45.0, 17.0),
    "detached": (55.0, 22.0),
}
# Building eras (first year, last year) and each type's shares of them.
_ERAS = (
    (1850, 1899),
    (1900, 1918),
    (1919, 1944),
    (1945, 1964),
    (1965, 1982),
    (1983, 1999),
    (2000, 2011),
    (2012, 2024),
)
_ERA_SHARES = {
    "terraced": (0.30, 0.15, 0.12, 0.10, 0.13, 0.08, 0.07, 0.05),
    "semi_detached": (0.05, 0.07, 0.25, 0.22, 0.20, 0.10, 0.06, 0.05),
    "detached": (0.04, 0.04, 0.08, 0.12, 0.22, 0.22, 0.15, 0.13),
    "flat": (0.08, 0.05, 0.06, 0.12, 0.22, 0.15, 0.17, 0.15),
}
_WALLS = ("very_good", "good", "average", "poor", "very_poor")
# Wall efficiency by the year built: solid walls before 1919, cavity walls later.
_WALL_SHARES = (
    (1918, (0.00, 0.05, 0.20, 0.40, 0.35)),
    (1944, (0.00, 0.20, 0.40, 0.35, 0.05)),
    (1982, (0.05, 0.35, 0.45, 0.15, 0.00)),
    (9999, (0.25, 0.55, 0.20, 0.00, 0.00)),
)
_TERRACE_FORMS = (
    ("mid_terrace", "end_terrace", "enclosed_mid_terrace", "enclosed_end_terrace"),
    (0.68, 0.28, 0.03, 0.01),
)
_FLAT_FORMS = (("mid_terrace", "end_terrace", "semi_detached", "detached"), (0.4, 0.2, 0.2, 0.2))

# How often a detail is present in the portfolio.
FLOOR_AREA_SHARE = 0.60
YEAR_BUILT_SHARE = 0.70
BUILT_FORM_SHARE = 0.60  # of homes; with flats mostly left out, about half of all rows
WALLS_SHARE = 0.50
FLAT_BUILT_FORM_SHARE = 0.15  # of flats that would have one: EPCs rarely give a flat's form
NO_BEDROOMS_SHARE = 0.02  # of homes with a floor area: bedrooms left out (one is enough)

PORTFOLIO_COLUMNS = (
    "loan_id",
    "branch",
    "postcode",
    "property_type",
    "bedrooms",
    "floor_area_sqm",
    "year_built",
    "built_form",
    "walls_energy_efficiency",
    "reference",
)
LENDER_COLUMNS = (
    "Account No",
    "Branch Code",
    "Post Code",
    "Prop Type",
    "Beds",
    "Floor Area (m2)",
    "Built",
    "Form",
    "Wall Rating",
    "Case Ref",
)


@dataclasses.dataclass(frozen=True, slots=True)
class Home:
    """One home and what the lender knows of it; None is an empty cell."""

    branch: str
    postcode: str
    property_type: str
    bedrooms: int | None
    floor_area_sqm: float | None
    year_built: int | None
    built_form: str | None
    walls_energy_efficiency: str | None


def _pick(rng: random.Random, items: Sequence[str], shares: Sequence[float]) -> str:
    return rng.choices(items, weights=shares)[0]


def _postcode(rng: random.Random, branch: str) -> str:
    return _postcode_in(rng, _BRANCHES[branch][1])


def _postcode_in(rng: random.Random, areas: dict[str, tuple[str, ...]]) -> str:
    district = rng.choice(areas[rng.choice(sorted(areas))])
    while True:
        unit = rng.choice(_UNIT_LETTERS) + rng.choice(_UNIT_LETTERS)
        if unit != "ZZ":  # unit ZZ is the API's "nothing held" marker in street analysis
            return f"{district} {rng.randint(1, 9)}{unit}"


def _walls(rng: random.Random, year: int) -> str:
    shares = next(s for last, s in _WALL_SHARES if year <= last)
    return _pick(rng, _WALLS, shares)


def _built_form(rng: random.Random, property_type: str) -> str | None:
    if property_type in ("detached", "semi_detached"):
        return property_type
    if property_type == "terraced":
        return _pick(rng, *_TERRACE_FORMS)
    if rng.random() < FLAT_BUILT_FORM_SHARE:
        return _pick(rng, *_FLAT_FORMS)
    return None


def make_home(rng: random.Random, *, floor_area_share: float = FLOOR_AREA_SHARE) -> Home:
    """A plausible home; every detail is drawn, then some are left out as in real books."""
    branches = sorted(_BRANCHES)
    branch = _pick(rng, branches, [_BRANCHES[b][0] for b in branches])
    shares = _LONDON_TYPE_SHARES if branch == "London" else _TYPE_SHARES
    property_type = _pick(rng, _TYPES, shares)
    counts, count_shares = _BEDROOMS[property_type]
    bedrooms = rng.choices(counts, weights=count_shares)[0]
    base, per_bedroom = _FLOOR_AREA[property_type]
    area = round(max(18.0, (base + per_bedroom * bedrooms) * rng.uniform(0.85, 1.18)), 1)
    first, last = rng.choices(_ERAS, weights=_ERA_SHARES[property_type])[0]
    year = rng.randint(first, last)
    walls = _walls(rng, year)
    form = _built_form(rng, property_type)
    has_area = rng.random() < floor_area_share
    return Home(
        branch=branch,
        postcode=_postcode(rng, branch),
        property_type=property_type,
        bedrooms=None if has_area and rng.random() < NO_BEDROOMS_SHARE else bedrooms,
        floor_area_sqm=area if has_area else None,
        year_built=year if rng.random() < YEAR_BUILT_SHARE else None,
        built_form=form if rng.random() < BUILT_FORM_SHARE else None,
        walls_energy_efficiency=walls if rng.random() < WALLS_SHARE else None,
    )


def _floor_area_required(rng: random.Random, property_type: str, bedrooms: int) -> Home:
    """A home the sandbox has no typical floor area for, sent with bedrooms alone."""
    home = make_home(rng)
    while home.property_type != property_type:
        home = make_home(rng)
    return dataclasses.replace(home, bedrooms=bedrooms, floor_area_sqm=None)


@dataclasses.dataclass(frozen=True, slots=True)
class PortfolioRow:
    loan_id: str
    home: Home
    reference: str

    def cells(self) -> dict[str, object]:
        return {
            "loan_id": self.loan_id,
            **dataclasses.asdict(self.home),
            "reference": self.reference,
        }


def make_portfolio(rng: random.Random) -> list[PortfolioRow]:
    """The portfolio's rows in file order, loan ids numbered from the top."""
    unique = PORTFOLIO_ROWS - DUPLICATE_ROWS
    homes = [make_home(rng) for _ in range(unique - 3)]
    # A seven-bedroom flat (a house in multiple occupation), an eight-bedroom one, and a
    # detached house with 0 bedrooms (a data entry slip): 422 floor-area-required.
    for property_type, bedrooms in (("flat", 7), ("flat", 8), ("detached", 0)):
        home = _floor_area_required(rng, property_type, bedrooms)
        homes.insert(rng.randrange(len(homes) + 1), home)
    references = rng.sample(range(1, 1_000_000), unique)
    requests = [(h, f"CASE-2026-{r:06d}") for h, r in zip(homes, references, strict=True)]
    # Repeats: nine requests asked for again under another loan id, the first twice.
    sources = rng.sample([r for r in requests if not _needs_floor_area(r[0])], DUPLICATE_ROWS - 1)
    for source in [sources[0], *sources]:
        after = requests.index(source) + 1
        requests.insert(rng.randrange(after, len(requests) + 1), source)
    return [
        PortfolioRow(f"LN-{n:06d}", home, reference)
        for n, (home, reference) in enumerate(requests, start=1)
    ]


def _needs_floor_area(home: Home) -> bool:
    """The sandbox's rule (batchval._internal.sandbox.figures.typical_floor_area), restated."""
    if home.floor_area_sqm is not None or home.bedrooms is None:
        return False
    return (
        home.bedrooms >= 13
        or (home.property_type == "flat" and home.bedrooms >= 7)
        or (home.property_type == "detached" and home.bedrooms == 0)
    )


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def write_portfolio_csv(rows: Sequence[PortfolioRow], path: Path) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(PORTFOLIO_COLUMNS)
        for row in rows:
            cells = row.cells()
            writer.writerow([_cell(cells[c]) for c in PORTFOLIO_COLUMNS])


def write_portfolio_parquet(rows: Sequence[PortfolioRow], path: Path) -> None:
    types = {"bedrooms": pl.Int64, "floor_area_sqm": pl.Float64, "year_built": pl.Int64}
    cells = [row.cells() for row in rows]
    frame = pl.DataFrame(
        [
            pl.Series(c, [r[c] for r in cells], dtype=types.get(c, pl.String))
            for c in PORTFOLIO_COLUMNS
        ]
    )
    frame.write_parquet(path, compression="zstd", statistics=True)


# The lender's spellings: a type or form is written as a code or as words, by system age.
_LENDER_TYPES = {
    "detached": (("D", "Detached"), (0.6, 0.4)),
    "semi_detached": (("S", "Semi-Detached"), (0.5, 0.5)),
    "terraced": (("T", "Terraced"), (0.6, 0.4)),
    "flat": (("F", "Flat/Maisonette", "Flat"), (0.4, 0.4, 0.2)),
}
_LENDER_FORMS = {
    "detached": (("Detached",), (1.0,)),
    "semi_detached": (("Semi-Detached", "Semi"), (0.8, 0.2)),
    "mid_terrace": (("Mid-Terrace", "Mid Terr"), (0.8, 0.2)),
    "end_terrace": (("End Terrace", "End Terr"), (0.8, 0.2)),
    "enclosed_mid_terrace": (("Enclosed Mid-Terrace",), (1.0,)),
    "enclosed_end_terrace": (("Enclosed End-Terrace",), (1.0,)),
}
_LENDER_WALLS = {w: w.replace("_", " ").title() for w in _WALLS}  # very_poor -> Very Poor


def _lender_postcode(rng: random.Random, postcode: str) -> str:
    spelling = rng.random()
    if spelling < 0.15:
        return postcode.replace(" ", "").lower()  # sw1a2aa
    if spelling < 0.25:
        return postcode.lower()  # sw1a 2aa
    if spelling < 0.35:
        return postcode.replace(" ", "")  # SW1A2AA
    return postcode


def make_lender_extract(rng: random.Random) -> list[list[str]]:
    """The lender's rows: cells as its system writes them, header first."""
    accounts = rng.sample(range(100_000, 10_000_000), LENDER_ROWS)
    cases = rng.sample(range(1, 100_000), LENDER_ROWS)
    rows = [list(LENDER_COLUMNS)]
    for account, case in zip(accounts, cases, strict=True):
        home = make_home(rng, floor_area_share=0.5)
        while home.bedrooms is None:  # the lender's system always holds the bedrooms
            home = make_home(rng, floor_area_share=0.5)
        form = home.built_form
        rows.append(
            [
                f"{account:08d}",
                rng.choice(_BRANCH_CODES[home.branch]),
                _lender_postcode(rng, home.postcode),
                _pick(rng, *_LENDER_TYPES[home.property_type]),
                str(home.bedrooms),
                _cell(home.floor_area_sqm),
                _cell(home.year_built),
                "" if form is None else _pick(rng, *_LENDER_FORMS[form]),
                _LENDER_WALLS.get(home.walls_energy_efficiency or "", ""),
                f"MB26-{case:05d}",
            ]
        )
    return rows


def write_lender_extract(rows: Sequence[Sequence[str]], path: Path) -> None:
    # utf-8-sig writes the BOM that spreadsheet exports start with; CRLF as on Windows.
    with path.open("w", encoding="utf-8-sig", newline="") as handle:
        csv.writer(handle, delimiter=";", lineterminator="\r\n").writerows(rows)


def make_mortgage_book(rng: random.Random, rows: Sequence[PortfolioRow]) -> list[list[str]]:
    """The first MORTGAGE_ROWS portfolio rows with a loan each, header first."""
    book = [[*PORTFOLIO_COLUMNS, "loan_balance", "origination_value", "origination_date"]]
    for n, row in enumerate(rows[:MORTGAGE_ROWS]):
        home, cells = row.home, row.cells()
        area = home.floor_area_sqm or 30 + 22 * (home.bedrooms or 2)
        per_sqm = 5_500 if home.branch == "London" else 3_000
        value = round(area * per_sqm * rng.uniform(0.6, 1.1), -3)
        year = rng.randrange(2008, 2026)
        left = max(0.0, 1 - 0.035 * (2026 - year))  # repaid year by year
        balance = round(value * rng.uniform(0.55, 0.95) * left, 2)
        if n in (17, 101):
            balance_cell = ""  # not known to the extract
        elif n in (42, 150):
            balance_cell = "0"  # redeemed
        else:
            balance_cell = f"{balance:.2f}"
        date = f"{year}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"
        book.append(
            [_cell(cells[c]) for c in PORTFOLIO_COLUMNS] + [balance_cell, f"{value:.0f}", date]
        )
    return book


def write_mortgage_book(rows: Sequence[Sequence[str]], path: Path) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerows(rows)


# A lender's own book as a first contact sees it (issue 24): its column names, the
# property-type wordings of lenders, the EPC register and Land Registry, money with pound
# signs and UK dates; in three forms (a workbook, a Windows "Save as CSV", a UTF-8 CSV).
LENDER_BOOK_COLUMNS = (
    "Loan Ref",
    "Property Postcode",
    "Prop Type",
    "Built Form",
    "Beds",
    "Current Balance",
    "Original Valuation",
    "Completion Date",
)
# (wording, built form or None, the API's propertyType or None: a problem, ambiguous)
LENDER_BOOK_WORDINGS: tuple[tuple[str, str | None, str | None], ...] = (
    ("Detached House", None, "detached"),
    ("Semi-Detached House", None, "semi_detached"),
    ("Terraced House", None, "terraced"),
    ("Mid Terrace", None, "terraced"),
    ("End Terrace House", None, "terraced"),
    ("Enclosed End-Terrace", None, "terraced"),
    ("Flat", None, "flat"),
    ("Maisonette", None, "flat"),
    ("Flat/Maisonette", None, "flat"),
    ("Apartment", None, "flat"),
    ("D", None, "detached"),
    ("S", None, "semi_detached"),
    ("T", None, "terraced"),
    ("F", None, "flat"),
    ("House", "Semi-Detached", "semi_detached"),
    ("House", "Mid-Terrace", "terraced"),
    ("Bungalow", "Detached", "detached"),
    ("Flat", "End-Terrace", "flat"),
    ("Maisonette", "NO DATA!", "flat"),
    ("Bungalow", None, None),
    ("Park Home", None, None),
    ("O", None, None),
)
LENDER_BOOK_ROWS = 66  # every wording three times


@dataclasses.dataclass(frozen=True, slots=True)
class LenderLoan:
    loan: str
    postcode: str
    wording: str
    built_form: str | None
    bedrooms: int
    balance: float
    valuation: int
    completed: tuple[int, int, int]  # year, month, day


def make_lender_book(rng: random.Random) -> list[LenderLoan]:
    loans = []
    for n in range(LENDER_BOOK_ROWS):
        wording, form, api_type = LENDER_BOOK_WORDINGS[n % len(LENDER_BOOK_WORDINGS)]
        home = make_home(rng)
        while home.property_type != (api_type or home.property_type):
            home = make_home(rng)
        counts = (1, 2, 3) if api_type == "flat" else (2, 3, 4)
        value = round(rng.uniform(120_000, 650_000), -3)
        loans.append(
            LenderLoan(
                loan=f"LN{rng.randrange(10**6, 10**7)}",
                postcode=home.postcode,
                wording=wording,
                built_form=form,
                bedrooms=rng.choice(counts),
                balance=round(value * rng.uniform(0.3, 0.9), 2),
                valuation=int(value),
                completed=(rng.randrange(2010, 2026), rng.randrange(1, 13), rng.randrange(1, 29)),
            )
        )
    return loans


def write_lender_book_csv(loans: Sequence[LenderLoan], path: Path, *, windows: bool) -> None:
    """`windows`: as Excel on Windows saves CSV (cp1252, CRLF, £412,500.00, 15/03/2019);
    else UTF-8 with plain numbers and ISO dates."""
    encoding, ending = ("cp1252", "\r\n") if windows else ("utf-8", "\n")
    with path.open("w", encoding=encoding, newline="") as handle:
        out = csv.writer(handle, lineterminator=ending)
        out.writerow(LENDER_BOOK_COLUMNS)
        for loan in loans:
            year, month, day = loan.completed
            out.writerow(
                [
                    loan.loan,
                    loan.postcode,
                    loan.wording,
                    loan.built_form or "",
                    loan.bedrooms,
                    f"£{loan.balance:,.2f}" if windows else f"{loan.balance:.2f}",
                    f"£{loan.valuation:,}" if windows else loan.valuation,
                    f"{day:02d}/{month:02d}/{year}" if windows else f"{year}-{month:02d}-{day:02d}",
                ]
            )


def write_lender_book_xlsx(loans: Sequence[LenderLoan], path: Path) -> None:
    """A workbook as a lender keeps it: numbers, money and dates as typed cells."""
    import xlsxwriter

    with xlsxwriter.Workbook(str(path)) as book:
        book.set_properties({"created": WORKBOOKS_CREATED})
        sheet = book.add_worksheet("Loans")
        money = book.add_format({"num_format": "£#,##0.00"})
        day = book.add_format({"num_format": "dd/mm/yyyy"})
        sheet.write_row(0, 0, LENDER_BOOK_COLUMNS)
        for row, loan in enumerate(loans, start=1):
            sheet.write_string(row, 0, loan.loan)
            sheet.write_string(row, 1, loan.postcode)
            sheet.write_string(row, 2, loan.wording)
            if loan.built_form is not None:
                sheet.write_string(row, 3, loan.built_form)
            sheet.write_number(row, 4, loan.bedrooms)
            sheet.write_number(row, 5, loan.balance, money)
            sheet.write_number(row, 6, loan.valuation, money)
            sheet.write_datetime(row, 7, dt.datetime(*loan.completed), day)
        notes = book.add_worksheet("Notes")
        notes.write_string(0, 0, "Extract of the mortgage book, for valuation")


# A building society's MI extract (issue 32): the table as it leaves the warehouse, below a
# title, a "produced by" line and a blank line, above a total and a footer, with the
# borrowers' personal data batchval never needs; as a workbook, as Excel on Windows saves
# it as CSV, and inside a monthly pack that opens on a cover sheet. Lines are counted from 1.
MI_LOANS = 150
MI_TITLE = "Mortgage book extract - 30/11/2026"
MI_PRODUCED = "Produced by MI Reporting, 30/11/2026 06:15"
MI_FOOTER = "Source: MI warehouse (extract MB07). CONFIDENTIAL - not for onward distribution"
MI_COLUMNS = (
    "Account No",
    "Borrower Surname",
    "Borrower Forename",
    "Date of Birth",
    "Email",
    "Telephone",
    "Security Address 1",
    "Security Address 2",
    "Town",
    "Post Code",
    "Prop Type",
    "Beds",
    "Current Balance",
    "Original Valuation",
    "Completion Date",
)
MI_PERSONAL_COLUMNS = MI_COLUMNS[1:9]  # the borrower and the address: never sent, never needed
MI_HEADER_LINE = 4  # title, produced, a blank line, then the header
MI_BLANK_LOAN = 70  # the one loan with only its Account No filled: a problem row
MI_BLANK_LINE = MI_HEADER_LINE + MI_BLANK_LOAN
MI_TOTAL_LINE = MI_HEADER_LINE + MI_LOANS + 1
MI_FOOTER_LINE = MI_TOTAL_LINE + 2  # after one blank line
MI_SCOTTISH_LOANS = 3  # security in Scotland: outside the API's coverage, refused free
MI_PACK_SHEETS = ("Cover", "Loans", "Notes")
MI_PACK_COVER = ("Monthly Mortgage Pack", "November 2026", "Prepared by Credit Risk")
MI_PACK_CONTENTS = "Contents: Loans, Notes"

# Names no other cell, column or answer holds, so that a test can look for them in any
# output: letters only, save for the hyphen of a double-barrelled surname.
_MI_SURNAMES = (
    "Abernathy-Vance",
    "Achterberg",
    "Balasubramanian",
    "Blennerhassett",
    "Castellanos",
    "Cholmondeley",
    "Dunnachie",
    "Ekwueme",
    "Featherstonehaugh",
    "Fitzwarren",
    "Gallacher",
    "Grzybowski",
    "Hargreaves-Lowe",
    "Huxtable",
    "Iredale",
    "Jagielka",
    "Kowalczyk",
    "Lethbridge",
    "Llewellyn-Pryce",
    "Marchbanks",
    "Mbatha",
    "Nakamura",
    "Nwachukwu",
    "Okonkwo",
    "Ostrowska",
    "Pemberton-Hughes",
    "Quarrington",
    "Raghunathan",
    "Rasmussen",
    "Szczepanski",
    "Thistlethwaite",
    "Trelawney",
    "Umeadi",
    "Vanterpool",
    "Villiers-Stuart",
    "Wojciechowski",
    "Wraithmell",
    "Xuereb",
    "Yardley-Birch",
    "Zielinska",
)
_MI_FORENAMES = (
    "Aurelia",
    "Bartholomew",
    "Chidinma",
    "Cosima",
    "Dashiell",
    "Eudora",
    "Fionnuala",
    "Gwendolyn",
    "Hieronymus",
    "Ignatius",
    "Jemima",
    "Kwabena",
    "Leopoldine",
    "Marguerite",
    "Ottoline",
    "Peregrine",
    "Rosalind",
    "Siobhan",
    "Tarquin",
    "Wilhelmina",
)
_MI_STREETS = (
    "Acacia Avenue",
    "Beech Grove",
    "Chapel Street",
    "Elm Drive",
    "Kingsley Gardens",
    "Larch Close",
    "Meadow Lane",
    "Orchard Way",
    "Primrose Hill Road",
    "Victoria Road",
    "Willow Crescent",
)
# The post town of each postcode area drawn from (the area's own, not its districts').
_MI_TOWNS = {
    **dict.fromkeys(("SW", "SE", "N", "E", "W", "NW"), "London"),
    "BR": "Bromley",
    "CR": "Croydon",
    "KT": "Kingston upon Thames",
    "RM": "Romford",
    "OX": "Oxford",
    "CB": "Cambridge",
    "BN": "Brighton",
    "GU": "Guildford",
    "RG": "Reading",
    "MK": "Milton Keynes",
    "ME": "Rochester",
    "CT": "Canterbury",
    "TN": "Tonbridge",
    "CM": "Chelmsford",
    "CO": "Colchester",
    "IP": "Ipswich",
    "PE": "Peterborough",
    "NR": "Norwich",
    "SO": "Southampton",
    "PO": "Portsmouth",
    "BS": "Bristol",
    "PL": "Plymouth",
    "EX": "Exeter",
    "TQ": "Torquay",
    "TR": "Truro",
    "GL": "Gloucester",
    "SN": "Swindon",
    "BA": "Bath",
    "TA": "Taunton",
    "DT": "Dorchester",
    "SP": "Salisbury",
    "BH": "Bournemouth",
    "B": "Birmingham",
    "NG": "Nottingham",
    "LE": "Leicester",
    "CV": "Coventry",
    "DE": "Derby",
    "ST": "Stoke-on-Trent",
    "LN": "Lincoln",
    "HR": "Hereford",
    "WR": "Worcester",
    "M": "Manchester",
    "L": "Liverpool",
    "SK": "Stockport",
    "WA": "Warrington",
    "CH": "Chester",
    "PR": "Preston",
    "BB": "Blackburn",
    "LA": "Lancaster",
    "CA": "Carlisle",
    "LS": "Leeds",
    "S": "Sheffield",
    "NE": "Newcastle upon Tyne",
    "YO": "York",
    "HU": "Hull",
    "DN": "Doncaster",
    "BD": "Bradford",
    "HD": "Huddersfield",
    "WF": "Wakefield",
    "DH": "Durham",
    "SR": "Sunderland",
    "TS": "Middlesbrough",
    "CF": "Cardiff",
    "SA": "Swansea",
    "LL": "Llandudno",
    "NP": "Newport",
    "EH": "Edinburgh",
    "G": "Glasgow",
    "AB": "Aberdeen",
}
_MI_SCOTLAND = {
    "EH": ("EH1", "EH3", "EH10", "EH12"),
    "G": ("G3", "G12", "G41"),
    "AB": ("AB10", "AB15"),
}
# Ofcom's numbers for drama (never allocated): a mobile range and geographic ones; the
# last digits are drawn.
_MI_PHONES = (
    "07700 900",
    "07700 900",
    "07700 900",
    "020 7946 0",
    "0113 496 0",
    "0121 496 0",
    "0161 496 0",
    "0191 498 0",
    "029 2018 0",
    "01632 960",
)
# The wordings of LENDER_BOOK_WORDINGS that place a home alone (no built form column here).
_MI_WORDINGS = {
    api_type: tuple(w for w, form, t in LENDER_BOOK_WORDINGS if form is None and t == api_type)
    for api_type in _TYPES
}


@dataclasses.dataclass(frozen=True, slots=True)
class MiDetails:
    """Everything of an MI loan but its account number."""

    surname: str
    forename: str
    born: dt.date
    email: str
    telephone: str
    address_1: str
    address_2: str | None
    town: str
    postcode: str
    wording: str
    bedrooms: int
    balance: float
    valuation: int
    completed: dt.date


@dataclasses.dataclass(frozen=True, slots=True)
class MiLoan:
    """A line of the MI extract; `details` None: only the account number is filled."""

    account: str
    details: MiDetails | None


@dataclasses.dataclass(frozen=True, slots=True)
class MiExtract:
    """The MI extract's loans in table order, and what a test looks for in outputs."""

    loans: tuple[MiLoan, ...]

    @property
    def blank_account(self) -> str:
        """The account number of the loan with every other cell blank."""
        return self.loans[MI_BLANK_LOAN - 1].account

    @property
    def surnames(self) -> tuple[str, ...]:
        return tuple(sorted({d.surname for d in self._details()}))

    @property
    def emails(self) -> tuple[str, ...]:
        return tuple(d.email for d in self._details())

    @property
    def birth_dates(self) -> tuple[dt.date, ...]:
        return tuple(d.born for d in self._details())

    @property
    def telephones(self) -> tuple[str, ...]:
        return tuple(d.telephone for d in self._details())

    @property
    def scottish_accounts(self) -> tuple[str, ...]:
        """The loans secured on homes in Scotland."""
        return tuple(
            loan.account
            for loan in self.loans
            if loan.details is not None and _mi_area(loan.details.postcode) in _MI_SCOTLAND
        )

    @property
    def balance_total(self) -> float:
        return round(sum(d.balance for d in self._details()), 2)

    @property
    def valuation_total(self) -> int:
        return sum(d.valuation for d in self._details())

    def _details(self) -> list[MiDetails]:
        return [loan.details for loan in self.loans if loan.details is not None]


def _mi_area(postcode: str) -> str:
    return postcode[: 2 if postcode[1].isalpha() else 1]


# Births before any completion date (2010 on) and any answer's date: a birth date found in
# an output can only have come from the file.
_MI_BORN = (dt.date(1946, 1, 1).toordinal(), dt.date(2000, 1, 1).toordinal())


def _mi_details(
    rng: random.Random, home: Home, emails: set[str], births: set[dt.date]
) -> MiDetails:
    """A borrower and a loan on `home`; the e-mail and the birth date not in `emails` and
    `births` (each loan's own), which they join."""
    surname, forename = rng.choice(_MI_SURNAMES), rng.choice(_MI_FORENAMES)
    while True:
        digits = rng.randrange(1_000, 10_000)
        email = f"{forename[0].lower()}.{surname.lower().replace('-', '')}{digits}@example.com"
        if email not in emails:
            break
    while (born := dt.date.fromordinal(rng.randrange(*_MI_BORN))) in births:
        pass
    emails.add(email)
    births.add(born)
    street = rng.choice(_MI_STREETS)
    if home.property_type == "flat":
        address_1, address_2 = f"Flat {rng.randrange(1, 25)}", f"{rng.randrange(1, 120)} {street}"
    else:
        address_1, address_2 = f"{rng.randrange(1, 200)} {street}", None
    value = round(rng.uniform(120_000, 650_000), -3)
    counts = (1, 2, 3) if home.property_type == "flat" else (2, 3, 4, 5)
    completed = dt.date(rng.randrange(2010, 2026), rng.randrange(1, 13), rng.randrange(1, 29))
    return MiDetails(
        surname=surname,
        forename=forename,
        born=born,
        email=email,
        telephone=f"{rng.choice(_MI_PHONES)}{rng.randrange(1_000):03d}",
        address_1=address_1,
        address_2=address_2,
        town=_MI_TOWNS[_mi_area(home.postcode)],
        postcode=home.postcode,
        wording=rng.choice(_MI_WORDINGS[home.property_type]),
        bedrooms=rng.choice(counts),
        balance=round(value * rng.uniform(0.3, 0.9), 2),
        valuation=int(value),
        completed=completed,
    )


def make_mi_extract(rng: random.Random) -> MiExtract:
    """MI_LOANS loans: homes as the portfolio's (Welsh ones among them), MI_SCOTTISH_LOANS
    in Scotland, and the MI_BLANK_LOAN-th with only its account number."""
    accounts = rng.sample(range(1_000_000, 100_000_000), MI_LOANS)
    scottish = set(
        rng.sample([n for n in range(MI_LOANS) if n != MI_BLANK_LOAN - 1], MI_SCOTTISH_LOANS)
    )
    emails: set[str] = set()
    births: set[dt.date] = set()
    loans = []
    for n, account in enumerate(accounts):
        if n == MI_BLANK_LOAN - 1:
            loans.append(MiLoan(f"{account:08d}", None))
            continue
        home = make_home(rng)
        if n in scottish:
            home = dataclasses.replace(home, postcode=_postcode_in(rng, _MI_SCOTLAND))
        loans.append(MiLoan(f"{account:08d}", _mi_details(rng, home, emails, births)))
    return MiExtract(tuple(loans))


def mi_extract() -> MiExtract:
    """The MI extract the sample files hold (the same stream as `main` draws)."""
    return make_mi_extract(random.Random(SEED + 3))


# A cell of the MI sheet as typed in the workbook; None is an empty cell.
_MiCell = str | int | float | dt.date | None


def _mi_cells(loan: MiLoan) -> list[_MiCell]:
    """A loan's cells in MI_COLUMNS order."""
    d = loan.details
    if d is None:
        return [loan.account, *[None] * (len(MI_COLUMNS) - 1)]
    return [
        loan.account,
        d.surname,
        d.forename,
        d.born,
        d.email,
        d.telephone,
        d.address_1,
        d.address_2,
        d.town,
        d.postcode,
        d.wording,
        d.bedrooms,
        d.balance,
        d.valuation,
        d.completed,
    ]


_MI_MONEY = ("Current Balance", "Original Valuation")


def _mi_lines(extract: MiExtract) -> list[list[_MiCell]]:
    """Every line of the sheet, title to footer, cells typed, as wide as the table."""
    width = len(MI_COLUMNS)

    def line(*cells: str | None) -> list[_MiCell]:
        return [*cells, *[None] * (width - len(cells))]

    total: list[_MiCell] = line("Total")
    total[MI_COLUMNS.index("Current Balance")] = extract.balance_total
    total[MI_COLUMNS.index("Original Valuation")] = extract.valuation_total
    return [
        line(MI_TITLE),
        line(MI_PRODUCED),
        line(),
        list(MI_COLUMNS),
        *[_mi_cells(loan) for loan in extract.loans],
        total,
        line(),
        line(MI_FOOTER),
    ]


def write_mi_csv(extract: MiExtract, path: Path) -> None:
    """As Excel on Windows saves the sheet as CSV: cp1252, CRLF, every line as wide as the
    used range, cells as displayed (`£412,500.00`, `15/03/2019`)."""
    money = [MI_COLUMNS.index(c) for c in _MI_MONEY]
    with path.open("w", encoding="cp1252", newline="") as handle:
        out = csv.writer(handle, lineterminator="\r\n")
        for cells in _mi_lines(extract):
            shown = []
            for column, cell in enumerate(cells):
                if cell is None:
                    shown.append("")
                elif isinstance(cell, dt.date):
                    shown.append(cell.strftime("%d/%m/%Y"))
                elif column in money and isinstance(cell, int | float):
                    shown.append(f"£{cell:,.2f}")
                else:
                    shown.append(str(cell))
            out.writerow(shown)


def _write_mi_sheet(book: Any, sheet: Any, extract: MiExtract) -> None:
    """The extract's lines into `sheet`: the title merged across the table, typed cells."""
    bold = book.add_format({"bold": True})
    title = book.add_format({"bold": True, "font_size": 14})
    money = book.add_format({"num_format": "£#,##0.00"})
    total_money = book.add_format({"num_format": "£#,##0.00", "bold": True, "top": 1})
    day = book.add_format({"num_format": "dd/mm/yyyy"})
    lines = _mi_lines(extract)
    sheet.merge_range(0, 0, 0, len(MI_COLUMNS) - 1, MI_TITLE, title)
    sheet.write_string(1, 0, MI_PRODUCED)
    sheet.write_row(MI_HEADER_LINE - 1, 0, MI_COLUMNS, bold)
    for row, cells in enumerate(lines[MI_HEADER_LINE:], start=MI_HEADER_LINE):
        is_total = row == MI_TOTAL_LINE - 1
        for column, cell in enumerate(cells):
            if cell is None:
                continue
            if isinstance(cell, dt.date):
                sheet.write_datetime(row, column, dt.datetime.combine(cell, dt.time()), day)
            elif isinstance(cell, str):
                sheet.write_string(row, column, cell, bold if is_total else None)
            elif MI_COLUMNS[column] in _MI_MONEY:
                sheet.write_number(row, column, cell, total_money if is_total else money)
            else:
                sheet.write_number(row, column, cell)
    sheet.set_column(0, 0, 12)
    sheet.set_column(1, 8, 18)
    sheet.set_column(9, 11, 11)
    sheet.set_column(12, 14, 16)


def write_mi_xlsx(extract: MiExtract, path: Path) -> None:
    """The MI system's export: one sheet, `Extract`."""
    import xlsxwriter

    with xlsxwriter.Workbook(str(path)) as book:
        book.set_properties({"created": WORKBOOKS_CREATED})
        _write_mi_sheet(book, book.add_worksheet("Extract"), extract)


def write_mi_pack(extract: MiExtract, path: Path) -> None:
    """The monthly pack: a cover page first (text down column B, no table), the extract's
    sheet as `Loans`, then `Notes`."""
    import xlsxwriter

    with xlsxwriter.Workbook(str(path)) as book:
        book.set_properties({"created": WORKBOOKS_CREATED})
        cover = book.add_worksheet(MI_PACK_SHEETS[0])
        cover.set_column(1, 1, 40)
        cover.write_string(1, 1, MI_PACK_COVER[0], book.add_format({"bold": True, "font_size": 18}))
        for row, text in enumerate([*MI_PACK_COVER[1:], MI_PACK_CONTENTS], start=1):
            cover.write_string(1 + 2 * row, 1, text)
        _write_mi_sheet(book, book.add_worksheet(MI_PACK_SHEETS[1]), extract)
        notes = book.add_worksheet(MI_PACK_SHEETS[2])
        notes.write_string(0, 0, "Balances as at close of business 30/11/2026.")
        notes.write_string(1, 0, "Valuations are those at origination, not indexed.")


# A book for revaluation monitoring (issue 34): the mortgage book's first loans with the
# lender's figures as its warehouse writes them (money with pound signs, UK dates) and
# each loan's last valuation and its date. Some loans have none (their origination stands
# in); two are large (over the rule's £2.6 m).
REVALUATION_LOANS = 120
REVALUATION_COLUMNS = (
    "Loan Ref",
    "Postcode",
    "Property Type",
    "Bedrooms",
    "Current Balance",
    "Original Valuation",
    "Completion Date",
    "Last Valuation",
    "Last Valuation Date",
)
REVALUATION_UNKNOWN = (5, 33, 64, 90)  # no last valuation: the origination stands in
REVALUATION_LARGE = (7, 71)  # balances over £2.6 m


def make_revaluation_book(rng: random.Random, book: Sequence[Sequence[str]]) -> list[list[str]]:
    """REVALUATION_LOANS loans of the mortgage book (`make_mortgage_book`), header first."""
    header = list(book[0])
    at = {name: header.index(name) for name in header}
    rows = [list(REVALUATION_COLUMNS)]
    for n, loan in enumerate(book[1 : REVALUATION_LOANS + 1]):
        began = dt.date.fromisoformat(loan[at["origination_date"]])
        value = float(loan[at["origination_value"]])
        balance = loan[at["loan_balance"]]
        if n in REVALUATION_LARGE:
            value, balance = 4_250_000.0, f"{rng.uniform(2_650_000, 2_900_000):.2f}"
        last_day = began + dt.timedelta(days=rng.randrange(0, max(1, (LAST_DAY - began).days)))
        grown = value * rng.uniform(0.95, 1.6) if n not in REVALUATION_LARGE else value
        last, last_date = f"£{grown:,.0f}", f"{last_day:%d/%m/%Y}"
        if n in REVALUATION_UNKNOWN:
            last, last_date = "", ""
        rows.append(
            [
                loan[at["loan_id"]],
                loan[at["postcode"]],
                loan[at["property_type"]],
                loan[at["bedrooms"]],
                f"£{float(balance):,.2f}" if balance else "",
                f"£{value:,.0f}",
                f"{began:%d/%m/%Y}",
                last,
                last_date,
            ]
        )
    return rows


# The last day a sample's valuation may be dated.
LAST_DAY = dt.date(2026, 10, 31)


def main(out_dir: Path | None = None) -> None:
    out = out_dir or Path(__file__).resolve().parent
    rng = random.Random(SEED)
    portfolio = make_portfolio(rng)
    write_portfolio_csv(portfolio, out / "portfolio.csv")
    write_portfolio_parquet(portfolio, out / "portfolio.parquet")
    write_lender_extract(make_lender_extract(rng), out / "lender_extract.csv")
    # Its own stream, drawn last: the files above stay byte for byte as they were.
    book = make_mortgage_book(random.Random(SEED + 1), portfolio)
    write_mortgage_book(book, out / "mortgage_book.csv")
    revaluation = make_revaluation_book(random.Random(SEED + 4), book)
    write_mortgage_book(revaluation, out / "revaluation_book.csv")
    loans = make_lender_book(random.Random(SEED + 2))
    write_lender_book_csv(loans, out / "lender_book.csv", windows=False)
    write_lender_book_csv(loans, out / "lender_book_windows.csv", windows=True)
    write_lender_book_xlsx(loans, out / "lender_book.xlsx")
    extract = make_mi_extract(random.Random(SEED + 3))
    write_mi_xlsx(extract, out / "mi_extract.xlsx")
    write_mi_csv(extract, out / "mi_extract_windows.csv")
    write_mi_pack(extract, out / "mi_pack.xlsx")


if __name__ == "__main__":
    main()
