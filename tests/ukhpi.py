"""A small UK House Price Index full file with known figures, as HM Land Registry lays it
out (day-first dates, the index beside columns batchval does not read), for the tests of
the roll-forward (issue 55). `sample_inputs/ukhpi_sample.csv` is `sample_text()` as
committed (a test holds the two together): every authority from January 2015 to
September 2026, but `GAP_AREA`, which lacks `GAP_MONTH`, and `LATE_AREA`, whose series
begins in `LATE_START` (an authority made in 2020 has no older months).
"""

from __future__ import annotations

import csv
import io
import random
import sys
from pathlib import Path

from batchval._internal.sandbox.market import local_authority

# ONS codes and names of real authorities (the figures are made up).
AREAS: dict[str, str] = {
    "E09000033": "Westminster",
    "E08000003": "Manchester",
    "E08000035": "Leeds",
    "W06000015": "Cardiff",
    "E06000023": "Bristol, City of",
    "E08000021": "Newcastle upon Tyne",
    "E07000178": "Oxford",
    "E06000060": "Buckinghamshire",
}
FIRST = (2015, 1)
LATEST = (2026, 9)
GAP_AREA, GAP_MONTH = "E08000021", (2021, 6)
LATE_AREA, LATE_START = "E06000060", (2020, 4)
HEADER = (
    "Date",
    "RegionName",
    "AreaCode",
    "AveragePrice",
    "Index",
    "IndexSA",
    "1m%Change",
    "12m%Change",
    "SalesVolume",
)


def months(first: tuple[int, int] = FIRST) -> list[tuple[int, int]]:
    found, (year, month) = [], first
    while (year, month) <= LATEST:
        found.append((year, month))
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return found


def sample_text() -> str:
    """The file's text: each authority's index a seeded walk, to two decimals."""
    draws = random.Random(55)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(HEADER)
    for code, name in AREAS.items():
        level = draws.uniform(62.0, 80.0)
        for year, month in months():
            level *= 1 + draws.gauss(0.0035, 0.008)
            if (code, (year, month)) == (GAP_AREA, GAP_MONTH):
                continue
            if code == LATE_AREA and (year, month) < LATE_START:
                continue
            price = round(level * 2_900)
            writer.writerow(
                (f"01/{month:02d}/{year}", name, code, price, f"{level:.2f}", f"{level:.2f}",
                 "0.4", "3.1", draws.randint(40, 900))
            )  # fmt: skip
    return out.getvalue()


# The index and postcode directory of the nightly-book tutorial: the sandbox's own
# authorities (`sandbox.market.local_authority`, made-up codes) of every postcode of
# `sample_inputs/mortgage_book.csv`, each a seeded walk from January 2008 (before the
# book's first origination) to `LATEST`, in the four columns batchval reads.
BOOK = "mortgage_book.csv"
BOOK_FIRST = (2008, 1)


def book_postcodes(book: Path) -> list[str]:
    with book.open(encoding="utf-8", newline="") as file:
        return sorted({row["postcode"] for row in csv.DictReader(file)})


def book_index_text(book: Path) -> str:
    draws = random.Random(56)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(("Date", "RegionName", "AreaCode", "Index"))
    for code in sorted({local_authority(p) for p in book_postcodes(book)}):
        level = draws.uniform(45.0, 60.0)
        for year, month in months(BOOK_FIRST):
            level *= 1 + draws.gauss(0.003, 0.008)
            writer.writerow((f"01/{month:02d}/{year}", code, code, f"{level:.2f}"))
    return out.getvalue()


def book_postcodes_text(book: Path) -> str:
    """An ONS Postcode Directory's two columns batchval reads, for the book's postcodes."""
    lines = ["pcds,oslaua", *(f"{p},{local_authority(p)}" for p in book_postcodes(book))]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # python tests/ukhpi.py [book-index|book-postcodes]
    samples = Path(__file__).resolve().parents[1] / "sample_inputs"
    which = sys.argv[1] if len(sys.argv) > 1 else ""
    if which == "book-index":
        print(book_index_text(samples / BOOK), end="")
    elif which == "book-postcodes":
        print(book_postcodes_text(samples / BOOK), end="")
    else:
        print(sample_text(), end="")
