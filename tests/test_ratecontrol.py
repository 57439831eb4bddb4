"""The shared rate controller and the circuit breaker, on a fake clock."""

from __future__ import annotations

import pytest

from batchval.run.breaker import CircuitBreaker
from batchval.run.ratecontrol import BACKOFF, RateController

pytestmark = pytest.mark.anyio


class FakeTime:
    """A clock that only moves when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def controller(time: FakeTime, rate: float = 4.0) -> RateController:
    return RateController(initial_rate=rate, clock=time, sleep=time.sleep)


async def test_requests_are_paced_at_the_rate() -> None:
    """Ten requests at 4 a second take 2.25 s of waiting after the first."""
    time = FakeTime()
    control = controller(time)
    starts = [await control.slot() for _ in range(10)]
    assert starts[0] == 1000.0
    assert starts[-1] - starts[0] == pytest.approx(9 / 4)


async def test_no_request_leaves_before_retry_after() -> None:
    """After a 429 every slot waits until the Retry-After has passed."""
    time = FakeTime()
    control = controller(time)
    sent = await control.slot()
    control.on_rate_limited(3, sent)
    assert await control.slot() >= 1003.0
    assert control.rate_limited == 1


async def test_a_429_cuts_the_rate_once_per_episode() -> None:
    """429s of requests sent before the cut do not cut the rate again."""
    time = FakeTime()
    control = controller(time, rate=10.0)
    early = [await control.slot() for _ in range(3)]
    control.on_rate_limited(1, early[0])
    assert control.rate == pytest.approx(10.0 * BACKOFF)
    control.on_rate_limited(1, early[1])
    control.on_rate_limited(1, early[2])
    assert control.rate == pytest.approx(10.0 * BACKOFF)
    assert control.ceiling == pytest.approx(10.0)
    later = await control.slot()
    control.on_rate_limited(1, later)
    assert control.rate == pytest.approx(10.0 * BACKOFF * BACKOFF)


async def test_slow_start_doubles_while_pacing_holds_requests_back() -> None:
    """With demand above the rate, the rate doubles each second until a 429."""
    time = FakeTime()
    control = controller(time, rate=4.0)
    for _ in range(40):
        await control.slot()
        control.on_success()
    assert control.rate > 16.0


async def test_rate_does_not_grow_when_pacing_is_not_the_limit() -> None:
    """Successes spaced wider than the rate (a slow API) leave the rate alone."""
    time = FakeTime()
    control = controller(time, rate=4.0)
    for _ in range(10):
        await control.slot()
        time.now += 2.0  # each answer takes two seconds
        control.on_success()
    assert control.rate == pytest.approx(4.0)


async def test_growth_slows_near_the_ceiling() -> None:
    """After a 429 the rate grows additively, and only by probes near the ceiling."""
    time = FakeTime()
    control = controller(time, rate=20.0)
    control.on_rate_limited(1, await control.slot())
    assert control.rate == pytest.approx(14.0)
    for _ in range(200):
        await control.slot()
        control.on_success()
    assert control.rate > 14.0
    grown_per_second = (control.rate - 14.0) / (time.now - 1001.0)
    assert grown_per_second < 1.0


async def test_breaker_opens_after_a_streak_and_lets_one_probe_through() -> None:
    """Past the threshold one probe goes at a time; a success closes the circuit."""
    time = FakeTime()
    breaker = CircuitBreaker(threshold=3, outage_seconds=60, probe_interval=0, monotonic=time)
    for _ in range(3):
        assert await breaker.admit() is False
        breaker.failure()
    assert breaker.is_open
    probe = await breaker.admit()
    assert probe is True
    breaker.success()
    breaker.done(probe)
    assert not breaker.is_open
    assert await breaker.admit() is False


async def test_breaker_reports_an_outage_after_outage_seconds() -> None:
    """Open for longer than outage_seconds, the breaker calls it an outage."""
    time = FakeTime()
    breaker = CircuitBreaker(threshold=1, outage_seconds=60, monotonic=time)
    breaker.failure()
    assert not breaker.outage
    time.now += 61
    assert breaker.outage
    assert breaker.opened == 1


async def test_success_resets_the_streak() -> None:
    """Failures broken by a success never open the circuit."""
    breaker = CircuitBreaker(threshold=3, outage_seconds=60)
    for _ in range(5):
        breaker.failure()
        breaker.failure()
        breaker.success()
    assert not breaker.is_open


async def test_release_lets_waiting_workers_go() -> None:
    """A stopping run releases workers waiting on an open circuit at once."""
    import anyio

    breaker = CircuitBreaker(threshold=1, outage_seconds=60, probe_interval=30)
    breaker.failure()
    admitted: list[bool] = []

    async def wait() -> None:
        admitted.append(await breaker.admit())

    with anyio.fail_after(2):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)  # becomes the probe, waiting 30 s before it may go
            tg.start_soon(wait)  # waits for the circuit to close
            await anyio.sleep(0.05)
            breaker.release()  # both return at once; the pool's gate then sends nothing
    assert sorted(admitted) == [False, True]
