"""The API's clock as its answers show it: a `Date` header plus the monotonic time elapsed
since, never this machine's wall clock (batchval/_internal/api/apiclock.py)."""

from __future__ import annotations

import datetime as dt

import pytest

from batchval._internal.api.apiclock import ApiClock, Offset, http_date

NOON = dt.datetime(2026, 12, 31, 23, 59, 58, tzinfo=dt.UTC)


def header(when: dt.datetime) -> str:
    return when.strftime("%a, %d %b %Y %H:%M:%S GMT")


class Machine:
    """This machine's two clocks, moved by the test: the wall clock `skew` off the API's."""

    def __init__(self, skew: float) -> None:
        self.mono = 1000.0
        self.skew = dt.timedelta(seconds=skew)
        self.api = NOON  # the API's true clock

    def monotonic(self) -> float:
        return self.mono

    def wall(self) -> dt.datetime:
        return self.api + self.skew

    def wait(self, seconds: float) -> None:
        self.mono += seconds
        self.api += dt.timedelta(seconds=seconds)


@pytest.mark.parametrize("skew", [-600.0, -2.0, 0.0, 2.0, 180.0, 600.0])
def test_the_earliest_now_is_the_date_plus_the_time_since_whatever_the_wall_clock(
    skew: float,
) -> None:
    """Heard `Date: 23:59:58` (the API at 23:59:58.7), then 1.5 s later: the API's clock
    reads at least 23:59:59.5, and never more than the truth, whatever this machine's wall
    clock says (ten minutes behind to ten minutes ahead); across midnight and the year."""
    machine = Machine(skew)
    clock = ApiClock(machine.monotonic, machine.wall)
    assert clock.earliest_now() is None
    machine.wait(0.7)
    sent = machine.wall()
    machine.wait(0.05)
    clock.heard(header(NOON), sent)
    machine.wait(1.5)
    earliest = clock.earliest_now()
    assert earliest == NOON + dt.timedelta(seconds=1.5)
    assert earliest <= machine.api
    machine.wait(3600)
    assert clock.earliest_now() == NOON + dt.timedelta(seconds=3601.5)
    assert (clock.earliest_now() or NOON).year == 2027


@pytest.mark.parametrize("skew", [-600.0, 0.0, 2.0, 600.0])
def test_the_offset_is_measured_and_bounded(skew: float) -> None:
    """The wall clock's offset from the API's, as the answers bound it: the API answered
    after the send and before the receipt, less than a second past its `Date`."""
    machine = Machine(skew)
    clock = ApiClock(machine.monotonic, machine.wall)
    assert clock.offset() is None
    for _ in range(5):
        machine.wait(0.37)
        sent = machine.wall()
        answered = machine.api
        machine.wait(0.05)
        clock.heard(header(answered), sent)
    offset = clock.offset()
    assert isinstance(offset, Offset)
    assert offset.at_least <= -skew <= offset.at_most
    assert offset.at_most - offset.at_least <= 1.1
    assert abs(offset.seconds + skew) <= 0.6


def test_the_latest_date_is_followed_if_the_api_clock_is_stepped_back() -> None:
    """An API whose clock is stepped back an hour: the bound follows its latest `Date`, so
    no send is placed later than the API's clock then reads."""
    machine = Machine(0)
    clock = ApiClock(machine.monotonic, machine.wall)
    clock.heard(header(NOON))
    machine.wait(1)
    clock.heard(header(NOON - dt.timedelta(hours=1)))
    assert clock.earliest_now() == NOON - dt.timedelta(hours=1)


@pytest.mark.parametrize("value", ["", "yesterday", "Sun, 06 Nov 1994 08:49:37", "1994-11-06"])
def test_a_date_that_cannot_be_read_says_nothing(value: str) -> None:
    """No header, or one that is not an HTTP date with a zone: nothing is heard."""
    clock = ApiClock()
    clock.heard(value or None)
    assert clock.earliest_now() is None
    assert clock.offset() is None
    assert value == "" or http_date(value) is None


def test_a_past_moment_is_bounded_by_every_answer_heard_since() -> None:
    """The start of an invocation, placed on the API's clock at its end: an API whose clock
    jumped an hour ahead meanwhile does not move the start an hour later."""
    machine = Machine(0)
    clock = ApiClock(machine.monotonic, machine.wall)
    started = machine.monotonic()
    machine.wait(2)
    clock.heard(header(machine.api))
    machine.wait(5)
    clock.heard(header(machine.api + dt.timedelta(hours=1)))
    at_start = clock.earliest_at(started)
    assert at_start is not None
    assert at_start <= NOON
    assert NOON - at_start <= dt.timedelta(seconds=1)
