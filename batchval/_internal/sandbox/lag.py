"""How late the sandbox's own event loop has lately been: the allowance its judge of early
calls adds to the time a call spends on the wire.

The sandbox marks a call early when it arrives later after a `Retry-After` was given than a
call already sent can take to arrive (`Limits.early_grace_seconds`). But "arrives" is when
the sandbox gets round to the call: on a machine whose cores are busy (or in a process whose
other threads hold the interpreter), its loop may run hundreds of milliseconds late, and a
call the client sent before it could have heard the 429 is then seen long after it. A
heartbeat on the loop measures that lateness; a call is judged with the grace plus the
lateness seen around it, so a slow machine forgives no more than it delayed, and a quiet one
judges as tightly as ever.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable

PERIOD = 0.01  # the heartbeat's interval, seconds
WINDOW = 5.0  # how far back lateness is remembered, seconds
_NOTED = 0.002  # lateness below this is the timer's own jitter, not a stall


class LoopLag:
    """A heartbeat on the event loop that serves the sandbox (started with its first call)."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._late: collections.deque[tuple[float, float]] = collections.deque()
        self._due: float | None = None  # when the heartbeat is next due to wake
        self._task: asyncio.Task[None] | None = None

    def watch(self) -> None:
        """Start the heartbeat on the running loop, once (again after a new loop)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._beat())

    async def _beat(self) -> None:
        while True:
            self._due = self._monotonic() + PERIOD
            await asyncio.sleep(PERIOD)
            woke = self._monotonic()
            self.note(woke, woke - self._due)

    def note(self, at: float, late: float) -> None:
        """Remember that the loop was `late` seconds late at `at`."""
        if late > _NOTED:
            self._late.append((at, late))
        while self._late and self._late[0][0] < at - WINDOW:
            self._late.popleft()

    def recent(self) -> float:
        """The most the loop has been late within `WINDOW`, the heartbeat that is overdue
        right now included (a stall the heartbeat has not woken from yet)."""
        now = self._monotonic()
        overdue = 0.0 if self._due is None else now - self._due
        seen = [late for at, late in self._late if at >= now - WINDOW]
        return max([0.0, overdue, *seen])
