"""The sandbox's idea of the date, which tests move forward without waiting.

Wall-clock time (token expiry, the UTC day of the daily limit, the 30-day street
analysis window, `valuedAt`) is real UTC time plus an offset that only grows. Short
waits (`Retry-After` of the short-term limit, latency) use the monotonic clock and are
not moved, so that pacing stays real.
"""

from __future__ import annotations

import datetime as dt
import math
import time


class SandboxClock:
    def __init__(self, start: dt.datetime | None = None) -> None:
        self._offset = dt.timedelta(0)
        if start is not None:
            self._offset = start.astimezone(dt.UTC) - dt.datetime.now(dt.UTC)

    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC) + self._offset

    def advance(self, seconds: float) -> dt.datetime:
        """Move the clock forward (never back: an expired token stays expired)."""
        if seconds < 0:
            raise ValueError("the sandbox clock only moves forward")
        self._offset += dt.timedelta(seconds=seconds)
        return self.now()

    def set(self, when: dt.datetime) -> dt.datetime:
        return self.advance(max(0.0, (when - self.now()).total_seconds()))

    @staticmethod
    def monotonic() -> float:
        return time.monotonic()

    def seconds_to_midnight(self) -> int:
        """Whole seconds until the next midnight UTC, at least 1 (a `Retry-After`)."""
        now = self.now()
        midnight = (now + dt.timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
        return max(1, math.ceil((midnight - now).total_seconds()))
