"""The index from the API's street analyses, held in the book (issue 56, part 1): which
authorities are read on a night and through which postcode, what a read adds, and the
held months as the index the roll-forward reads. Days are made here, across a month's
and a year's end, never today's."""

from __future__ import annotations

import datetime as dt
from typing import Any

import polars as pl
import pytest

from batchval._internal.contract.indexation import BASE_BEFORE_INDEX, roll_forward_frame
from batchval._internal.input.hpi import month_number, month_text
from batchval._internal.valuations.api_index import REPEAT_WINDOW, HeldIndex, Read


def price_index(authority: str, newest: int, levels: dict[int, float] | None = None) -> Any:
    """A `priceIndex` as the API gives it: 24 months, newest first."""
    months = []
    for back in range(24):
        month = newest - back
        level = (levels or {}).get(month, 100.0 + month % 37)
        months.append({"month": month_text(month), "index": level, "averagePrice": 1})
    return {"localAuthority": authority, "months": months}


BOOK = {
    "E08000003": ["M1 1AE", "M1 1AA", "M2 5DB", "M1 1AA"],
    "E09000033": ["SW1A 2AA"],
}


@pytest.mark.parametrize(
    "today", [dt.date(2026, 12, 31), dt.date(2027, 1, 1), dt.date(2028, 2, 29)]
)
def test_a_first_night_reads_each_authority_once_through_its_lowest_postcode(
    today: dt.date,
) -> None:
    reads = HeldIndex().due(BOOK, {}, today)
    assert reads == [
        Read("E08000003", "M1 1AA", "first"),
        Read("E09000033", "SW1A 2AA", "first"),
    ]


def test_an_index_read_this_month_is_not_read_again_however_often_the_book_runs() -> None:
    """Read on the 2nd: nights after it in the same month read nothing (no later month
    seen, the newest held two months back, as the API publishes)."""
    held, day = HeldIndex(), dt.date(2027, 3, 2)
    newest = month_number(2027, 1)
    for read in held.due(BOOK, {}, day):
        assert held.absorb(read, price_index(read.authority, newest), on=day, charged=True) == 24
    for night in range(1, 29):
        assert held.due(BOOK, {}, day + dt.timedelta(days=night)) == []


def test_a_later_month_seen_is_read_once_through_another_postcode() -> None:
    """A valuation shows `indexedTo` a month after the newest held: the next night reads
    the authority again, through the lowest postcode not read in 30 days; having read
    for that month, it does not read again for it, whatever the answer gave."""
    held, day = HeldIndex(), dt.date(2027, 3, 2)
    newest = month_number(2027, 1)
    for read in held.due(BOOK, {}, day):
        held.absorb(read, price_index(read.authority, newest), on=day, charged=True)
    later = {"E08000003": newest + 1}
    next_night = day + dt.timedelta(days=1)
    reads = held.due(BOOK, later, next_night)
    assert reads == [Read("E08000003", "M1 1AE", "later_month", newest + 1)]
    held.absorb(reads[0], price_index("E08000003", newest), on=next_night, charged=True)
    assert held.due(BOOK, later, next_night + dt.timedelta(days=1)) == []
    assert held.authorities["E08000003"].newest == newest
    # A month after that one is sought again.
    further = {"E08000003": newest + 2}
    assert [r.postcode for r in held.due(BOOK, further, next_night)] == ["M2 5DB"]


def test_every_postcode_read_in_the_window_leaves_the_authority_to_a_later_night() -> None:
    held, day = HeldIndex(), dt.date(2027, 3, 2)
    newest = month_number(2027, 1)
    book = {"E09000033": ["SW1A 2AA"]}
    (read,) = held.due(book, {}, day)
    held.absorb(read, price_index("E09000033", newest), on=day, charged=True)
    seen = {"E09000033": newest + 1}
    assert held.due(book, seen, day + dt.timedelta(days=5)) == []
    again = held.due(book, seen, day + REPEAT_WINDOW)
    assert again == [Read("E09000033", "SW1A 2AA", "later_month", newest + 1)]


@pytest.mark.parametrize(
    ("read_on", "next_month"),
    [(dt.date(2026, 12, 3), dt.date(2027, 1, 1)), (dt.date(2027, 2, 27), dt.date(2027, 3, 1))],
)
def test_a_stale_index_is_read_again_once_in_a_new_month(
    read_on: dt.date, next_month: dt.date
) -> None:
    """Held two months behind the run's month, as published; once the month turns it is
    three behind: read again on the first night of the month (across the year's end
    too), through a postcode out of its window (an authority with one postcode read less
    than 30 days ago waits), and not again that month if the API has not published a
    newer month yet."""
    held = HeldIndex()
    newest = month_number(read_on.year, read_on.month) - 2
    for read in held.due(BOOK, {}, read_on):
        held.absorb(read, price_index(read.authority, newest), on=read_on, charged=True)
    assert held.due(BOOK, {}, next_month - dt.timedelta(days=1)) == []
    stale = held.due(BOOK, {}, next_month)
    assert [(r.authority, r.postcode, r.why) for r in stale] == [("E08000003", "M1 1AE", "stale")]
    # Not published yet: every read of the month gives the same months again; each
    # authority is read at most once that month all the same.
    read_this_month: list[str] = []
    day = next_month
    while day.month == next_month.month:
        for read in held.due(BOOK, {}, day):
            read_this_month.append(read.authority)
            held.absorb(read, price_index(read.authority, newest), on=day, charged=True)
        day += dt.timedelta(days=1)
    assert sorted(read_this_month) == ["E08000003", "E09000033"]


def test_a_404_tries_the_next_postcode_the_next_night_and_a_null_index_a_later_month() -> None:
    held, day = HeldIndex(), dt.date(2027, 3, 2)
    reads = held.due(BOOK, {}, day)
    held.absorb(reads[0], None, on=day, charged=False, found=False)  # 404
    held.absorb(reads[1], None, on=day, charged=True)  # unpublished
    tomorrow = day + dt.timedelta(days=1)
    assert held.due(BOOK, {}, tomorrow) == [Read("E08000003", "M1 1AE", "first")]
    assert held.due(BOOK, {}, dt.date(2027, 3, 31)) == [Read("E08000003", "M1 1AE", "first")]
    # A new month, and 30 days since each postcode was tried: the lowest again, and the
    # unpublished authority tried again.
    assert held.due(BOOK, {}, dt.date(2027, 4, 1)) == [
        Read("E08000003", "M1 1AA", "first"),
        Read("E09000033", "SW1A 2AA", "first"),
    ]


def test_months_accumulate_a_newer_read_s_figure_kept_and_the_text_is_stable() -> None:
    held, day = HeldIndex(), dt.date(2027, 3, 2)
    read = Read("E08000003", "M1 1AA", "first")
    old = month_number(2025, 1)
    held.absorb(read, price_index("E08000003", old + 23, {old + 23: 150.0}), on=day, charged=True)
    later = Read("E08000003", "M1 1AE", "stale")
    held.absorb(later, price_index("E08000003", old + 25, {old + 23: 151.5}), on=day, charged=False)
    kept = held.authorities["E08000003"]
    assert min(kept.months) == old
    assert max(kept.months) == old + 25
    assert len(kept.months) == 26
    assert kept.months[old + 23] == 151.5
    assert (kept.read_on, kept.charged, kept.postcode) == (day, False, "M1 1AE")
    again = HeldIndex.from_text(held.text())
    assert again == held
    assert again.text() == held.text()
    assert HeldIndex.from_text(None) == HeldIndex()
    with pytest.raises(ValueError, match="held index"):
        HeldIndex.from_text('{"version": 99}')


def test_months_without_an_index_or_a_month_are_left_out() -> None:
    held = HeldIndex()
    answer = {
        "months": [
            {"month": "2027-01", "index": 101.5},
            {"month": "2026-12", "index": None},
            {"month": "2026-13", "index": 99.0},
            {"month": "December", "index": 99.0},
            {"month": "2026-11", "index": True},
            {"month": "2026-10", "index": 0},
            "not a month",
        ]
    }
    read = Read("E08000003", "M1 1AA", "first")
    assert held.absorb(read, answer, on=dt.date(2027, 3, 2), charged=True) == 1
    assert held.authorities["E08000003"].months == {month_number(2027, 1): 101.5}


def test_the_held_months_roll_a_loan_forward_and_an_older_base_is_base_before_index() -> None:
    """The held months as the index: a base within them is rolled forward by the ratio
    of the newest month's figure to its own; one before the oldest month held is
    `base_before_index`."""
    held, day = HeldIndex(), dt.date(2027, 3, 2)
    newest = month_number(2027, 1)
    levels = {newest: 120.0, newest - 6: 100.0}
    held.absorb(
        Read("E08000003", "M1 1AA", "first"),
        price_index("E08000003", newest, levels),
        on=day,
        charged=True,
    )
    index = held.house_price_index()
    assert index.latest_for("E08000003") == newest
    assert index.first_for("E08000003") == newest - 23
    loans = pl.DataFrame(
        {
            "authority": ["E08000003", "E08000003"],
            "avm_value": [None, None],
            "avm_month": [None, None],
            "last_valuation_value": [200_000.0, 200_000.0],
            "last_valuation_month": [newest - 6, newest - 30],
            "origination_value": [None, None],
            "origination_month": [None, None],
        },
        schema_overrides={
            "avm_value": pl.Float64,
            "avm_month": pl.Int32,
            "last_valuation_month": pl.Int32,
            "origination_value": pl.Float64,
            "origination_month": pl.Int32,
        },
    )
    rolled = roll_forward_frame(index, loans).to_dicts()
    assert rolled[0]["hpi_value"] == 240_000.0
    assert rolled[0]["hpi_reason"] is None
    assert rolled[1]["hpi_value"] is None
    assert rolled[1]["hpi_reason"] == BASE_BEFORE_INDEX
