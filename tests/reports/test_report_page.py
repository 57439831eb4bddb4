"""The pieces of report.html (`reports/report_page`): readable times and the banner of
the mode and the money."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from batchval._internal.reports.report_page import banner, duration, when


@pytest.mark.parametrize(
    ("instant", "shown"),
    [
        ("2026-11-25T14:07:21.827123+00:00", "25 Nov 2026 14:07 UTC"),
        ("2026-11-25T14:07:21.827Z", "25 Nov 2026 14:07 UTC"),
        ("2026-11-25T15:07:00+01:00", "25 Nov 2026 14:07 UTC"),
        ("2026-03-05T09:00:00", "5 Mar 2026 09:00 UTC"),
        (dt.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=dt.UTC), "2 Jan 2026 03:04 UTC"),
        ("not a time", "not a time"),
        (None, "–"),
    ],
)
def test_times_are_shown_to_the_minute_in_utc(instant: Any, shown: str) -> None:
    """No raw ISO with microseconds: day, month, year, hours and minutes, in UTC."""
    assert when(instant) == shown


@pytest.mark.parametrize(
    ("seconds", "shown"), [(2.877, "2.9 s"), (252, "4 min 12 s"), (93_900, "26 h 5 min")]
)
def test_durations_read_as_a_person_says_them(seconds: float, shown: str) -> None:
    """Seconds, minutes or hours, whichever the length needs."""
    assert duration(seconds) == shown


def test_a_live_banner_says_the_credits_and_the_pounds() -> None:
    """Live: what the last invocation and the run in all charged, in credits and pounds,
    and the account's balance."""
    said = banner(
        {
            "mode": "live",
            "credits_charged": {"this_invocation": 1990, "total": 4000},
            "last_known_balance": 996_010,
            "charges": {"replayed_calls": 3},
        }
    )
    assert "class='banner live'" in said
    assert "1,990 credits (£19.90) charged by the last invocation" in said
    assert "4,000 credits (£40.00) in all" in said
    assert "996,010 credits left" in said
    assert "3 replays answered free" in said


def test_a_test_banner_says_the_figures_are_fake() -> None:
    """Test mode: said first, with no money."""
    said = banner({"mode": "test", "credits_charged": {"this_invocation": 0}})
    assert "Test mode" in said
    assert "fake" in said
    assert "£" not in said
