"""One rate controller shared by every worker: how fast requests may leave.

The API publishes no number for its short-term limit, so the controller finds it
(docs/performance.md, "Rate controller design and tuning"):

- Pacing: requests start at most `rate` a second, on a shared schedule.
- Slow start: from `start_rate` (the run's concurrency a second, at least
  `INITIAL_RATE`: the calls in flight it was told to keep would take a second each
  at that rate), until the first 429 the rate doubles every `SLOW_START_STEP` seconds
  while pacing is what holds requests back (never while the workers or the API's latency
  are the limit, so that an unused rate is never inflated). A short run with many calls
  in flight is not wasted waiting for the rate to catch up.
- After a 429: every worker pauses until its `Retry-After` (no request leaves before
  it), and the rate that drew the 429 becomes the ceiling (CUBIC's W_max). The first
  429 ends slow start and halves the rate (the limit lies between the half and the
  whole). Later ones come from slow probing, so the rate drops to `BACKOFF` of the
  ceiling; one that comes within `QUICK_REPEAT` seconds of the last cut shows the rate is
  still well above the limit, and cuts to `HARD_BACKOFF`.
- Then the rate climbs back quickly to `TARGET` of the ceiling, and probes above it
  slowly (`PROBE_GROWTH` of the ceiling per second, quickening the longer no 429 comes):
  a token bucket drains slowly when the rate is just above its refill rate, so 429s stay
  rare and the limit is used. The constants were chosen on a token-bucket model of the
  API (5, 20 and 100 calls a second, bursts of 1 and of a second's worth) and checked
  by `make bench` against the sandbox.
  The probe quickens the longer it finds no limit, and a rate that passes the ceiling
  by `RAISE_AFTER` without a 429 shows the limit was higher: the ceiling follows.

429s answered to requests that were sent before the last decrease belong to the same
episode and do not cut the rate again (they still extend the pause). Nor do storm 429s
(`_storm`): soon after a cut, a pause longer than any fast limit asks for.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import anyio

INITIAL_RATE = 10.0  # calls a second to begin with, at the least
SLOW_START_STEP = 0.25  # seconds per doubling, while pacing holds requests back
BACKOFF = 0.9  # after a 429 found by probing, this share of the rate that drew it
HARD_BACKOFF = 0.75  # after a 429 within QUICK_REPEAT seconds of the last cut
QUICK_REPEAT = 5.0
TARGET = 0.94  # of the ceiling, reached quickly after a cut
CLIMB = 0.5  # of the gap to the target closed per second
PROBE_GROWTH = 0.001  # of the ceiling per second, above the target
PROBE_QUICKENS_AFTER = 20.0  # seconds of probing without a 429 that double the probe
RAISE_AFTER = 1.1  # past this share of the ceiling without a 429, the ceiling follows
MIN_RATE = 0.5
TURN_AHEAD = 0.1  # seconds: how far ahead a request's turn is taken before it waits
ON_TIME = 0.25  # of the interval between turns: a turn this late keeps the schedule


def start_rate(concurrency: int) -> float:
    """The rate slow start begins from: a run told to keep many calls in flight does not
    spend its first seconds catching up from 10 a second."""
    return max(INITIAL_RATE, float(concurrency))


class RateController:
    def __init__(
        self,
        *,
        initial_rate: float = INITIAL_RATE,
        max_rate: float = 1_000.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        on_pause: Callable[[float], None] | None = None,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        # Told the seconds left whenever a 429 makes the pause end later (the sending phase
        # keeps it in the checkpoint at once: a kill must not lose a Retry-After).
        self._on_pause = on_pause
        self.rate = initial_rate
        self.max_rate = max_rate
        self.ceiling: float | None = None  # the rate that last drew a 429
        self.paused_until = 0.0
        self._next_start = 0.0
        self._last_decrease = float("-inf")
        self._last_pause = 0.0  # the Retry-After honoured at the last cut
        self._last_growth = clock()
        self._held_back_at = float("-inf")  # last time pacing, not demand, made a request wait
        self._probing_since = clock()  # when the rate last reached the target
        self.rate_limited = 0  # 429s seen (short-term ones; the daily limit is not pacing)

    async def slot(self) -> float:
        """Wait for this request's turn; returns the moment it may leave (its send time).

        A turn that comes within `TURN_AHEAD` is taken on the shared schedule before the
        wait, so the request sleeps once: workers racing for the same moment woke and
        slept again, about five times a call at a high rate (docs/performance.md). A
        later one is not taken yet: a rate that grows meanwhile (slow start) would leave
        it at the old pace. A 429 that pauses the pool while a request waits for its
        turn sends it back for a new one after the pause."""
        while True:
            now = self._clock()
            start = max(now, self.paused_until, self._next_start)
            if start <= now:
                interval = 1.0 / self.rate
                # A turn taken a little late (a wake-up's delay, the loop busy with
                # answers) keeps the schedule: restarting it from now lost that delay at
                # every call, some 5 % of the rate at 100/s. Later than that, demand fell
                # short, and the schedule restarts from now: no turns banked for a burst.
                on_time = now - self._next_start < ON_TIME * interval
                self._next_start = (self._next_start if on_time else now) + interval
                return now
            if self._next_start > now:
                self._held_back_at = now
            paced = start > self.paused_until  # the schedule holds it, not a pause
            # (within a microsecond: the wait below ends TURN_AHEAD before the turn, and
            # float arithmetic must not leave it a hair short, waiting again forever)
            if paced and start - now <= TURN_AHEAD + 1e-6:
                self._next_start = start + 1.0 / self.rate
                await self._sleep(start - now)
                now = self._clock()
                if self.paused_until <= now:
                    return now
            else:
                await self._sleep(start - now - (TURN_AHEAD if paced else 0.0))

    def pause_remaining(self) -> float:
        return max(0.0, self.paused_until - self._clock())

    def on_success(self) -> None:
        """An answer that was not a 429: the API accepted the call."""
        now = self._clock()
        if now < self._last_growth:
            # Answered during a pause (sent before the 429): no time to grow in, and a
            # negative span would take the rate below zero.
            return
        elapsed = now - self._last_growth
        self._last_growth = now
        if now - self._held_back_at > 1.0:
            return  # the rate is not what limits us: raising it would only be a number
        if self.ceiling is None:
            self.rate = min(self.max_rate, self.rate * 2.0 ** (elapsed / SLOW_START_STEP))
            return
        target = TARGET * self.ceiling
        if self.rate < target:
            # Half the gap a second, and never less than 5% of the ceiling a second, so
            # that the target is reached, not only approached.
            step = max(CLIMB * (target - self.rate), 0.05 * self.ceiling) * elapsed
            self.rate = min(target, self.rate + step)
            self._probing_since = now
        else:
            # The probe quickens the longer it finds no limit (CUBIC's convex part): a
            # ceiling read too low is left behind in seconds, not minutes.
            quicken = 1.0 + (now - self._probing_since) / PROBE_QUICKENS_AFTER
            self.rate += PROBE_GROWTH * self.ceiling * quicken * elapsed
        self.rate = min(self.max_rate, self.rate)
        if self.rate > RAISE_AFTER * self.ceiling:
            self.ceiling = self.rate  # past the old ceiling without a 429: it was higher
            self._probing_since = now

    def on_rate_limited(self, retry_after: float | None, sent_at: float) -> None:
        now = self._clock()
        self.rate_limited += 1
        # Retry-After is whole seconds; without one, a short pause all the same.
        pause = retry_after or 1.0
        if now + pause > self.paused_until:
            self.paused_until = now + pause
            if self._on_pause is not None:
                self._on_pause(pause)
        self._last_growth = max(now, self.paused_until)
        if sent_at <= self._last_decrease:
            return  # the same episode: the cut is already made
        if self._storm(now, pause):
            return
        drew = self.rate
        if self.ceiling is None:
            # Slow start doubles the rate every step, so the limit lies between half the
            # rate that drew the first 429 and that rate: start from the half.
            self.ceiling = drew
            self.rate = max(MIN_RATE, drew / 2)
        elif now - self._last_decrease < QUICK_REPEAT:
            # Another 429 soon after the last cut: still well above the limit. Cut harder,
            # and read the limit no higher than the new rate.
            self.rate = max(MIN_RATE, drew * HARD_BACKOFF)
            self.ceiling = drew
        else:
            # Slow probing found the limit at about the rate that drew this 429.
            self.ceiling = drew
            self.rate = max(MIN_RATE, drew * BACKOFF)
        self._last_decrease = now
        self._last_pause = pause

    def _storm(self, now: float, pause: float) -> bool:
        """A 429 soon after a cut asking for a pause longer than 1 s and at least as long
        as the one that cut honoured: a limit that refills a call a second or more never
        asks for more than 1 s, and the pause already honoured refilled it. Such 429s
        (a storm, an overloaded API) are waited out, never read as the rate: cutting for
        each took a storm's run towards MIN_RATE. A limit slower than a call a second is
        still found, by the cuts that come after QUICK_REPEAT."""
        return (
            now - self._last_decrease < QUICK_REPEAT and pause > 1.0 and pause >= self._last_pause
        )
