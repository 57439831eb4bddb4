"""booking: the order in which a night's budget is spent, and the budget itself."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from batchval._internal.input.options import InputOptions
from batchval._internal.settings import RunOptions, Settings
from batchval._internal.valuations.book import BookEntry
from batchval._internal.valuations.booking import _rank, night_budget, request_fingerprint

# Touches the calendar: `make test-dates` runs it at each hard instant (tests/clocks.py).
pytestmark = pytest.mark.dates

NOW = dt.datetime(2026, 11, 23, 2, 0, tzinfo=dt.UTC)
FRESH_FOR = dt.timedelta(days=30)


def _entry(days_ago: float, ltv: float | None = None, fingerprint: str = "f") -> BookEntry:
    return BookEntry(fingerprint, NOW - dt.timedelta(days=days_ago), ltv)


def test_the_queue_order() -> None:
    """Never valued (largest balance first), then changed, then stale by highest last
    LTV, then, LTV unknown, oldest first; a fresh unchanged row is carried."""
    ranked = {
        "new, 300k": _rank(None, "f", 300_000, NOW, FRESH_FOR),
        "new, 100k": _rank(None, "f", 100_000, NOW, FRESH_FOR),
        "new, no balance": _rank(None, "f", None, NOW, FRESH_FOR),
        "changed": _rank(_entry(1), "g", 50_000, NOW, FRESH_FOR),
        "stale, ltv 0.9": _rank(_entry(40, 0.9), "f", 1, NOW, FRESH_FOR),
        "stale, ltv 0.5": _rank(_entry(400, 0.5), "f", 1, NOW, FRESH_FOR),
        "stale, 400 days": _rank(_entry(400), "f", 1, NOW, FRESH_FOR),
        "stale, 40 days": _rank(_entry(40), "f", 1, NOW, FRESH_FOR),
    }
    order = sorted(ranked, key=lambda name: ranked[name] or ())
    assert order == list(ranked)
    assert _rank(_entry(29), "f", 1, NOW, FRESH_FOR) is None
    assert _rank(_entry(30), "f", 1, NOW, FRESH_FOR) is not None  # 30 days old is stale


@pytest.mark.parametrize(
    ("max_calls", "max_credits", "budget"),
    [
        (None, None, 5_000),
        (20, None, 20),
        (None, 1_000, 100),
        (50, 1_000, 50),
        (None, 99_999, 5_000),
    ],
)
def test_night_budget(max_calls: int | None, max_credits: int | None, budget: int) -> None:
    """The night's valuations: the least of --max-calls, --max-credits at 10 credits a
    valuation, and the daily limit."""
    run = dataclasses.replace(RunOptions(), max_calls=max_calls, max_credits=max_credits)
    assert night_budget(Settings(api=None, input=InputOptions(), run=run)) == budget


def test_the_fingerprint_has_no_day_in_it() -> None:
    """The same request gives the same fingerprint; another request another."""
    assert request_fingerprint('{"a":1}') == request_fingerprint('{"a":1}')
    assert request_fingerprint('{"a":1}') != request_fingerprint('{"a":2}')
