"""The sandbox's measure of its own loop's lateness, and its judge of early calls that
allows for it (batchval/_internal/sandbox/lag.py)."""

from __future__ import annotations

import datetime as dt
import time

import anyio
import pytest
from support import LIVE

from batchval._internal.sandbox.clock import SandboxClock
from batchval._internal.sandbox.config import SandboxConfig
from batchval._internal.sandbox.lag import WINDOW, LoopLag
from batchval._internal.sandbox.ledger import Ledger
from batchval._internal.sandbox.limits import Limits


class Ticking:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_lateness_is_remembered_for_the_window_then_forgotten() -> None:
    """The largest lateness noted within WINDOW is recent; older, it is forgotten; a
    timer's own jitter (a millisecond) is never noted."""
    clock = Ticking()
    lag = LoopLag(clock)
    assert lag.recent() == 0.0
    lag.note(clock.now, 0.001)
    assert lag.recent() == 0.0
    lag.note(clock.now, 0.4)
    clock.now += 1
    lag.note(clock.now, 0.1)
    assert lag.recent() == pytest.approx(0.4)
    clock.now += WINDOW - 0.5
    assert lag.recent() == pytest.approx(0.1)
    clock.now += 1
    assert lag.recent() == 0.0


@pytest.mark.anyio
async def test_a_stall_of_the_loop_is_seen_while_it_lasts_and_after() -> None:
    """Code that holds the loop for 0.3 s: the heartbeat is overdue by about as much right
    after it (before it has woken), and remembers it once it has."""
    lag = LoopLag()
    lag.watch()
    await anyio.sleep(0.05)
    time.sleep(0.3)  # noqa: ASYNC251  (the behaviour: the loop held, as a busy machine would)
    assert lag.recent() >= 0.25
    await anyio.sleep(0.05)
    assert lag.recent() >= 0.25


def test_a_call_seen_late_after_a_stall_is_not_early_and_one_past_it_is() -> None:
    """After a 429, a call the sandbox sees 0.3 s later is forgiven when its loop was 0.4 s
    late meanwhile (the call may have been sent before the 429 was heard); at 0.6 s it is
    early; with no lateness, 0.3 s is early too."""
    config = SandboxConfig(rate_limit=None)
    account = config.account(LIVE.client_id)
    assert account is not None
    for lateness, seen_after, early in [(0.4, 0.3, False), (0.4, 0.6, True), (0.0, 0.3, True)]:
        clock, ticking = SandboxClock(), Ticking()
        clock.monotonic = ticking  # type: ignore[method-assign]
        lag = LoopLag(ticking)
        limits = Limits(config, clock, Ledger(), lag)
        with pytest.raises(Exception, match="short time"):
            limits.refuse_short_term(account.client_id, 5)
        lag.note(ticking.now, lateness)
        ticking.now += seen_after
        judged = limits.is_early(account.client_id, dt.datetime.now(dt.UTC), ticking.now)
        assert judged is early, (lateness, seen_after)
