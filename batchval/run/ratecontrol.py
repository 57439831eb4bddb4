"""One rate controller shared by every worker: how fast requests may leave.

The API publishes no number for its short-term limit, so the controller finds it:

- Pacing: requests start at most `rate` a second, on a shared schedule.
- Slow start: until the first 429 the rate doubles every second of clean answers.
  It grows only while pacing is what holds requests back, so that a pool limited by
  its workers or by the API's latency does not inflate a rate it never uses.
- After a 429: every worker pauses until its `Retry-After` (no request leaves before
  it), the rate drops to `BACKOFF` of what it was, and the rate that drew the 429 is
  remembered as the ceiling.
- Then additive growth, `GROWTH` requests a second per second, slowing to a probe
  near the ceiling, so that a long run keeps close to the limit with few 429s.

429s answered to requests that were sent before the last decrease belong to the same
episode and do not cut the rate again (they still extend the pause).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import anyio

BACKOFF = 0.7
GROWTH = 1.0  # requests/s gained per second of clean answers, far from the ceiling
PROBE_GROWTH = 0.1  # the same within 10% of the ceiling
MIN_RATE = 0.5


class RateController:
    def __init__(
        self,
        *,
        initial_rate: float = 10.0,
        max_rate: float = 1_000.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self.rate = initial_rate
        self.max_rate = max_rate
        self.ceiling: float | None = None
        self.paused_until = 0.0
        self._next_start = 0.0
        self._last_decrease = float("-inf")
        self._last_growth = clock()
        self._held_back_at = float("-inf")  # last time pacing, not demand, made a request wait
        self.rate_limited = 0  # 429s seen (short-term ones; the daily limit is not pacing)

    async def slot(self) -> float:
        """Wait for this request's turn; returns the moment it may leave (its send time)."""
        while True:
            now = self._clock()
            start = max(now, self.paused_until, self._next_start)
            if start <= now:
                self._next_start = max(self._next_start, now) + 1.0 / self.rate
                return now
            if self._next_start > now:
                self._held_back_at = now
            await self._sleep(start - now)

    def pause_remaining(self) -> float:
        return max(0.0, self.paused_until - self._clock())

    def on_success(self) -> None:
        now = self._clock()
        elapsed = now - self._last_growth
        self._last_growth = now
        if now - self._held_back_at > 1.0:
            return  # the rate is not what limits us: raising it would only be a number
        if self.ceiling is None:
            self.rate = min(self.max_rate, self.rate * 2.0**elapsed)
            return
        near = self.rate >= 0.9 * self.ceiling
        self.rate = min(self.max_rate, self.rate + (PROBE_GROWTH if near else GROWTH) * elapsed)
        if self.rate > self.ceiling:
            # Past the old ceiling without a 429: the limit was higher than we thought.
            self.ceiling = self.rate

    def on_rate_limited(self, retry_after: float | None, sent_at: float) -> None:
        now = self._clock()
        self.rate_limited += 1
        # Retry-After is whole seconds; without one, a short pause all the same.
        self.paused_until = max(self.paused_until, now + (retry_after or 1.0))
        self._last_growth = max(now, self.paused_until)
        if sent_at <= self._last_decrease:
            return  # the same episode: the cut is already made
        self.ceiling = self.rate
        self.rate = max(MIN_RATE, self.rate * BACKOFF)
        self._last_decrease = now
