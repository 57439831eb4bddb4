"""sending/midnight: a daily-limit answer's not_before, read as the API's midnight when its
Retry-After ends near one, and never earlier than now + Retry-After."""

from __future__ import annotations

import datetime as dt
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from batchval._internal.sending.midnight import (
    MIDNIGHT_WINDOW,
    TOLERATED_SKEW,
    nearest_midnight,
    next_midnight,
    resume_after_daily_limit,
)

# Touches the calendar: `make test-dates` runs it at each hard instant (tests/clocks.py).
pytestmark = pytest.mark.dates

UTC = dt.UTC
DAY = dt.timedelta(days=1)

instants = st.datetimes(
    min_value=dt.datetime(2020, 1, 1), max_value=dt.datetime(2040, 1, 1), timezones=st.just(UTC)
)
skews = st.floats(
    min_value=-TOLERATED_SKEW.total_seconds(), max_value=TOLERATED_SKEW.total_seconds()
)
# From the API deciding its answer to the pool reading it (the client's timeout is 35 s).
latencies = st.floats(min_value=0.0, max_value=35.0)
retry_afters = st.one_of(st.none(), st.integers(min_value=0, max_value=3 * 86_400))


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_the_brief_s_case_a_clock_a_minute_ahead() -> None:
    """The API at 23:59:30 says 30 s; the client's clock, a minute ahead, reads 00:00:30:
    not before 00:01:00 on the client's clock (the API's midnight), not the next day."""
    assert resume_after_daily_limit(at("2026-03-02T00:00:30"), 30) == at("2026-03-02T00:01:00")


def test_a_clock_a_minute_behind() -> None:
    """The client reads 23:58:30 when the API says 30 s: not before 23:59:00 on the
    client's clock, which is the API's midnight (not the client's, a minute later)."""
    assert resume_after_daily_limit(at("2026-03-01T23:58:30"), 30) == at("2026-03-01T23:59:00")


def test_without_retry_after_the_next_midnight_of_the_client() -> None:
    assert resume_after_daily_limit(at("2026-11-22T15:30:00"), None) == at("2026-11-23T00:00:00")
    assert resume_after_daily_limit(at("2026-11-22T00:00:30"), None) == at("2026-11-23T00:00:00")
    assert resume_after_daily_limit(at("2026-11-22T00:00:30"), 0) == at("2026-11-23T00:00:00")


def test_a_retry_after_far_from_midnight_is_the_safe_reading() -> None:
    """60 s at 15:30 cannot be the API's midnight: the next midnight of the client's clock;
    a Retry-After ending after it still wins."""
    noon = at("2026-11-22T15:30:00")
    assert resume_after_daily_limit(noon, 60) == at("2026-11-23T00:00:00")
    assert resume_after_daily_limit(noon, 86_400) == at("2026-11-23T15:30:00")
    # Just outside the window after a midnight: the safe reading, a day later.
    late = at("2026-11-22T00:00:00") + MIDNIGHT_WINDOW
    assert resume_after_daily_limit(late, 1) == at("2026-11-23T00:00:00")


def test_nearest_and_next_midnight() -> None:
    assert next_midnight(at("2026-11-22T00:00:00")) == at("2026-11-23T00:00:00")
    assert next_midnight(at("2026-11-22T23:59:59")) == at("2026-11-23T00:00:00")
    assert nearest_midnight(at("2026-11-22T11:59:59")) == at("2026-11-22T00:00:00")
    assert nearest_midnight(at("2026-11-22T12:00:01")) == at("2026-11-23T00:00:00")
    other_zone = dt.datetime(2026, 11, 22, 1, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert next_midnight(other_zone) == at("2026-11-22T00:00:00")


@given(now=instants, retry_after=retry_afters)
def test_never_before_the_api_s_word(now: dt.datetime, retry_after: int | None) -> None:
    """now + Retry-After is a floor, whatever the Retry-After; and a not_before that is
    not exactly it is the client's next midnight or later."""
    not_before = resume_after_daily_limit(now, retry_after)
    floor = now + dt.timedelta(seconds=retry_after or 0)
    assert not_before >= floor
    assert not_before > now or (retry_after or 0) > 0
    if not_before != floor:
        assert not_before == max(next_midnight(now), floor)


@given(api_now=instants, skew=skews, latency=latencies)
def test_the_api_s_midnight_within_the_tolerated_skew(
    api_now: dt.datetime, skew: float, latency: float
) -> None:
    """The API, at `api_now` on its clock, answers daily_limit with the whole seconds to
    its midnight; the client's clock is `skew` seconds off and reads the answer `latency`
    seconds later. On the API's clock, not_before is its midnight (never before it) and
    never a day late: within the answer's latency and the Retry-After's rounding."""
    api_midnight = next_midnight(api_now)
    retry_after = max(1, math.ceil((api_midnight - api_now).total_seconds()))
    off = dt.timedelta(seconds=skew)
    client_now = api_now + dt.timedelta(seconds=latency) + off
    not_before = resume_after_daily_limit(client_now, retry_after)
    on_api_clock = not_before - off
    assert on_api_clock >= api_midnight
    assert on_api_clock <= api_midnight + dt.timedelta(seconds=latency + 1), (
        client_now,
        retry_after,
        not_before,
    )
