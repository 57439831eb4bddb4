"""The API's clock as its answers show it, read without this machine's wall clock.

Every answer of the API carries a `Date` header (RFC 9110: whole seconds, rounded down):
the API's clock read at least that when the answer was written, before this process
received it. So at any later moment the API's clock reads at least that `Date` plus the
time elapsed since receipt on this machine's *monotonic* clock, which measures intervals
and nothing else. `ApiClock.earliest_now` is that bound from the latest `Date` received
(the latest, not the largest: should the API's clock be stepped back, the bound follows
it): the earliest instant a request sent now can reach the API, on the API's own clock. A replay is
proven against it (`money/charges`), so a machine whose wall clock is minutes off the
API's counts its money as one on NTP does.

The wall clock is read for one thing only: how far this machine's clock is from the API's
(`offset`), which the summary reports and a warning names beyond a minute; it never
decides anything.

Answers from the token URL count only when it is the API's own host: another server's
clock says nothing of the API's (docs/api.md, section 5 does not say they are one).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import email.utils
import time
from collections.abc import Callable

# The least precision a stamp is taken to have: one with no fraction of a second may
# have been cut to whole seconds.
WHOLE_SECOND = dt.timedelta(seconds=1)


def precision(at: dt.datetime) -> dt.timedelta:
    """How much later than `at` the API's instant may have been: the place of the last
    digit that is not 0 in its fraction of a second (`12:00:01.005` was cut to
    milliseconds at the most), a whole second when it has none. An API that cuts to
    seconds and writes `.000` is read as whole seconds, as it should be."""
    micro = at.microsecond
    if micro == 0:
        return WHOLE_SECOND
    step = 1
    while micro % (step * 10) == 0:
        step *= 10
    return dt.timedelta(microseconds=step)


# Beyond this, the machine's clock is named in a warning (the run goes on: nothing here
# reads it).
WARN_OFFSET = dt.timedelta(minutes=1)


def http_date(value: str) -> dt.datetime | None:
    """An HTTP-date (RFC 9110, `Sun, 06 Nov 1994 08:49:37 GMT`) as an aware datetime, or
    None."""
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError):
        return None
    return when if when.tzinfo is not None else None


@dataclasses.dataclass(frozen=True, slots=True)
class Offset:
    """Bounds of (the API's clock - this machine's wall clock), in seconds, as the answers
    measured them: the API answered after the request was sent and before it was received,
    less than a second past its `Date`."""

    at_least: float
    at_most: float

    @property
    def seconds(self) -> float:
        """The middle of the bounds: the offset as best measured."""
        return (self.at_least + self.at_most) / 2

    def to_json(self) -> dict[str, float]:
        return {
            "seconds": round(self.seconds, 3),
            "at_least_seconds": round(self.at_least, 3),
            "at_most_seconds": round(self.at_most, 3),
        }


class ApiClock:
    """What this process has heard of the API's clock (`heard`, for every answer)."""

    def __init__(
        self,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self._monotonic, self._wall = monotonic, wall
        # The latest answer's (Date - monotonic at receipt), in seconds since the epoch: the
        # API's clock reads at least this plus the monotonic clock, from then on.
        self._base: float | None = None
        # The least of them: a bound that holds for any moment since the first answer, had
        # the API's clock been stepped either way meanwhile.
        self._least: float | None = None
        self._date: tuple[str, dt.datetime | None] = ("", None)  # the last header parsed
        self._low: float | None = None
        self._high: float | None = None

    def heard(self, date: str | None, sent: dt.datetime | None = None) -> None:
        """An answer with `Date` header `date` received now; `sent`: this machine's wall
        clock when its request was sent (for the offset's upper bound)."""
        if not date:
            return
        if self._date[0] != date:  # the answers of one second share a header: parsed once
            self._date = (date, http_date(date))
        when = self._date[1]
        if when is None:
            return
        stamp = when.timestamp()
        self._base = stamp - self._monotonic()
        self._least = self._base if self._least is None else min(self._least, self._base)
        low = stamp - self._wall().timestamp()
        self._low = low if self._low is None else max(self._low, low)
        if sent is not None:
            high = stamp + 1 - sent.timestamp()
            self._high = high if self._high is None else min(self._high, high)

    def earliest_now(self) -> dt.datetime | None:
        """The earliest the API's clock can read now (None before any `Date` was heard)."""
        if self._base is None:
            return None
        return dt.datetime.fromtimestamp(self._base + self._monotonic(), dt.UTC)

    def earliest_at(self, monotonic: float) -> dt.datetime | None:
        """The earliest the API's clock can have read at `monotonic` (a past moment of this
        process's monotonic clock), by every answer heard: the least of their bounds, so
        that a step of the API's clock since (an hour ahead, say) does not move it."""
        if self._least is None:
            return None
        return dt.datetime.fromtimestamp(self._least + monotonic, dt.UTC)

    def offset(self) -> Offset | None:
        """How far the API's clock is from this machine's, as measured (None before any
        answer with a `Date`)."""
        if self._low is None:
            return None
        high = self._high if self._high is not None else self._low + 1
        return Offset(self._low, max(high, self._low))
