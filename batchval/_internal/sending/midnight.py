"""When calls may start again after the daily limit: midnight UTC as the API sees it.

The API's daily count restarts at midnight UTC *on the API's clock*, and it answers
`429 rate-limited`, code `daily_limit`, with a `Retry-After` in seconds: a duration, so
it is free of any difference between the two clocks. The client's own clock may be a
little off the API's. Reading the wait as "the next midnight on the client's clock"
then goes wrong in two ways: a clock ahead of the API's, just past its own midnight,
hears the API's last seconds of the day and waits for the *following* midnight (a day
lost to a minute's skew); a clock behind waits the difference past the API's midnight.

So `resume_after_daily_limit` reads a daily-limit answer this way:

- **The API's midnight.** When now + `Retry-After` ends within `MIDNIGHT_WINDOW` of a
  midnight UTC on the client's clock (the one before or after it), the `Retry-After`
  is the API's midnight: not before now + `Retry-After`, exactly. A client clock up to
  `TOLERATED_SKEW` off the API's, either way, neither loses a day nor calls before the
  API's midnight.
- **The safe reading.** Without a `Retry-After` (or with 0), or with one that ends far
  from every midnight (an answer that cannot be the API's midnight, such as a gateway's
  own `Retry-After: 60`), the next midnight UTC on the client's clock, or later when
  the `Retry-After` ends later. A client clock ahead of the API's by more than the
  window may then lose a day, and one behind waits the difference.

Either way now + `Retry-After` is a floor: nothing is sent before the API's word.
`now` must be the clock that later decides whether `not_before` has passed (the run's
clock, with the test seam's offset: `RunOptions.now`).
"""

from __future__ import annotations

import datetime as dt

# How far the client's clock may be off the API's, either way, and the daily limit still
# end at the API's midnight: NTP keeps real clocks within a second; five minutes covers
# a machine whose time sync is broken or a VM resumed with a stale clock, and is far
# smaller than any wait that is not the API's midnight.
TOLERATED_SKEW = dt.timedelta(minutes=5)
# Around a midnight on the client's clock, the end of a Retry-After read as the API's
# midnight: the skew, plus a minute for the answer's time on the way and in the pool
# before it is read, and `Retry-After`'s rounding up to whole seconds.
MIDNIGHT_WINDOW = TOLERATED_SKEW + dt.timedelta(minutes=1)

_DAY = dt.timedelta(days=1)


def resume_after_daily_limit(now: dt.datetime, retry_after: int | None) -> dt.datetime:
    """When calls may start again after a `daily_limit` answer read at `now` (an aware
    datetime on the run's clock) with `retry_after` seconds (None: no `Retry-After`)."""
    floor = now + dt.timedelta(seconds=retry_after or 0)
    if retry_after and abs(floor - nearest_midnight(floor)) <= MIDNIGHT_WINDOW:
        return floor  # the API's midnight
    return max(next_midnight(now), floor)


def next_midnight(now: dt.datetime) -> dt.datetime:
    """The first midnight UTC after `now`."""
    return _midnight_of(now.astimezone(dt.UTC)) + _DAY


def nearest_midnight(when: dt.datetime) -> dt.datetime:
    """The midnight UTC nearest `when` (the one before it on a tie)."""
    before = _midnight_of(when.astimezone(dt.UTC))
    return before if when - before <= _DAY / 2 else before + _DAY


def _midnight_of(when: dt.datetime) -> dt.datetime:
    return when.replace(hour=0, minute=0, second=0, microsecond=0)
