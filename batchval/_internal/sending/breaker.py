"""A circuit breaker for run-wide outages.

When every call fails for a while, sending each row through its own retries would only
burn every row's attempts. After `threshold` transient failures in a row, across the
whole pool, the circuit opens: one probe at a time goes out, every `probe_interval`
seconds, and the other workers wait. The first success closes it. When only failures
have come back for longer than `outage_seconds` (counted from the first failure after
the last success, so that a dead API is given up on within that window however few rows
there are), it reports an outage and the run stops with 75.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio


class CircuitBreaker:
    def __init__(
        self,
        *,
        threshold: int,
        outage_seconds: float,
        probe_interval: float = 5.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._threshold = threshold
        self._outage_seconds = outage_seconds
        self._probe_interval = probe_interval
        self._monotonic = monotonic
        self._streak = 0
        self._opened_at: float | None = None
        self._failing_since: float | None = None  # first failure after the last success
        self._failing_keys: set[str] = set()  # requests that failed since the last success
        self._probe = anyio.Lock()
        self._closed = anyio.Event()
        self._closed.set()
        self._released = anyio.Event()
        self.opened = 0  # times the circuit opened, for the summary

    @property
    def is_open(self) -> bool:
        return self._opened_at is not None

    def run_wide(self, key: str) -> bool:
        """Whether a failure of request `key` now is the API's rather than the request's:
        the circuit is open, or only failures have come back since the last success and
        some of them were other requests'. (One request failing alone, however often,
        is that request's own trouble: its attempts decide.)"""
        return self.is_open or bool(self._failing_keys - {key})

    def failing_for(self) -> float:
        """Seconds since the first failure with no success after it (0 when none)."""
        return 0.0 if self._failing_since is None else self._monotonic() - self._failing_since

    @property
    def outage(self) -> bool:
        """Only failures, for longer than the run accepts."""
        return self.failing_for() > self._outage_seconds

    def release(self) -> None:
        """The run is stopping: let every waiting worker go (they will send nothing)."""
        self._released.set()
        self._closed.set()

    async def admit(self) -> bool:
        """Wait until a call may go out. True when this call is the probe of an open
        circuit: the caller must report its outcome with success() or failure()."""
        while self.is_open and not self._released.is_set():
            if not self._probe.locked():
                await self._probe.acquire()
                if not self.is_open:  # closed while we waited for the lock
                    self._probe.release()
                    return False
                with anyio.move_on_after(self._probe_interval):
                    await self._released.wait()  # a stopping run does not wait for a probe
                return True
            await self._closed.wait()
        return False

    def success(self) -> None:
        """The API answered (any answer that is not a transient failure)."""
        self._streak = 0
        self._failing_since = None
        self._failing_keys.clear()
        if self._opened_at is not None:
            self._opened_at = None
            self._closed.set()

    def failure(self, key: str) -> None:
        """A transient failure of request `key`: 503, 504, 409, a cut, a timeout."""
        self._streak += 1
        self._failing_keys.add(key)
        if self._failing_since is None:
            self._failing_since = self._monotonic()
        if self._opened_at is None and self._streak >= self._threshold:
            self._opened_at = self._monotonic()
            self._closed = anyio.Event()
            self.opened += 1

    def done(self, probe: bool) -> None:
        """The probe's call is over, however it ended: the next probe may go."""
        if probe:
            self._probe.release()
