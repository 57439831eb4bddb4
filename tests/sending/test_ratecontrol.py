"""The shared rate controller and the circuit breaker, on a fake clock."""

from __future__ import annotations

import math

import pytest

from batchval._internal.sending.breaker import CircuitBreaker
from batchval._internal.sending.ratecontrol import (
    BACKOFF,
    HARD_BACKOFF,
    PROBE_GROWTH,
    QUICK_REPEAT,
    RAISE_AFTER,
    TARGET,
    RateController,
)

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


async def test_a_turn_taken_a_little_late_keeps_the_schedule() -> None:
    """A request a little late for its turn (a wake-up's delay) does not push the turns
    after it back; one that comes long after its turn (demand fell short) restarts the
    schedule from now, banking no turns for a burst."""
    time = FakeTime()
    control = controller(time, rate=10.0)
    await control.slot()
    time.now += 0.12  # 20 ms late for the turn at 0.1 s
    await control.slot()
    assert await control.slot() == pytest.approx(1000.2)  # on the schedule, not 1000.22
    time.now += 1.0
    idle = await control.slot()
    assert await control.slot() == pytest.approx(idle + 0.1)


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
    assert control.rate == pytest.approx(5.0)  # halved: the first 429 ends slow start
    control.on_rate_limited(1, early[1])
    control.on_rate_limited(1, early[2])
    assert control.rate == pytest.approx(5.0)
    later = await control.slot()
    control.on_rate_limited(1, later)  # soon after the cut: still well above the limit
    assert control.rate == pytest.approx(5.0 * HARD_BACKOFF)


async def test_slow_start_doubles_while_pacing_holds_requests_back() -> None:
    """With demand above the rate, the rate doubles every quarter second until a 429."""
    time = FakeTime()
    control = controller(time, rate=4.0)
    for _ in range(40):
        await control.slot()
        control.on_success()
    assert control.rate > 64.0
    assert time.now - 1000.0 < 2.0


async def test_rate_does_not_grow_when_pacing_is_not_the_limit() -> None:
    """Successes spaced wider than the rate (a slow API) leave the rate alone."""
    time = FakeTime()
    control = controller(time, rate=4.0)
    for _ in range(10):
        await control.slot()
        time.now += 2.0  # each answer takes two seconds
        control.on_success()
    assert control.rate == pytest.approx(4.0)


async def test_a_429_found_by_probing_cuts_gently() -> None:
    """A 429 long after the last cut came from probing: the rate drops to BACKOFF of it."""
    time = FakeTime()
    control = controller(time, rate=10.0)
    control.on_rate_limited(1, await control.slot())  # slow start over: 5/s
    time.now += QUICK_REPEAT + 1
    control.rate = 8.0
    control.on_rate_limited(1, await control.slot())
    assert control.ceiling == pytest.approx(8.0)
    assert control.rate == pytest.approx(8.0 * BACKOFF)


async def test_growth_is_quick_to_the_target_then_a_slow_probe() -> None:
    """After a cut the rate climbs fast to just under the ceiling, then probes slowly."""
    time = FakeTime()
    control = controller(time, rate=20.0)
    control.on_rate_limited(1, await control.slot())  # slow start over: 10/s, ceiling 10
    control.ceiling = 20.0  # as if the API had accepted 20/s
    for _ in range(150):  # some 8 s of clean answers
        await control.slot()
        control.on_success()
    assert control.rate >= TARGET * 20.0
    assert control.rate < 20.0 * (1 + 10 * PROBE_GROWTH)


async def test_a_ceiling_passed_without_429_follows_the_rate() -> None:
    """Probing past RAISE_AFTER of the ceiling with no 429 raises the ceiling."""
    time = FakeTime()
    control = controller(time, rate=10.0)
    control.ceiling = 10.0
    control.rate = 10.0 * RAISE_AFTER
    await control.slot()
    await control.slot()
    control.on_success()
    assert control.ceiling == pytest.approx(control.rate)


async def test_storm_429s_after_a_cut_are_waited_out_not_cut_for() -> None:
    """A 429 asking for longer than 1 s, and at least the pause the last cut honoured,
    soon after that cut (a storm: 429s whatever the rate) pauses every request again but
    leaves the rate alone; a 1 s 429 soon after a cut still cuts hard."""
    time = FakeTime()
    control = controller(time, rate=10.0)
    control.on_rate_limited(3, await control.slot())  # slow start over: 5/s
    assert control.rate == pytest.approx(5.0)
    sent = await control.slot()
    assert sent == pytest.approx(1003.0)  # not before the Retry-After
    control.on_rate_limited(3, sent)
    assert control.rate == pytest.approx(5.0)
    assert control.paused_until == pytest.approx(1006.0)
    assert control.rate_limited == 2
    hard = controller(FakeTime(), rate=10.0)
    hard.on_rate_limited(3, await hard.slot())
    hard.on_rate_limited(1, await hard.slot())
    assert hard.rate == pytest.approx(5.0 * HARD_BACKOFF)


async def test_a_longer_retry_after_than_the_cut_honoured_is_a_storm_only_soon_after() -> None:
    """Past QUICK_REPEAT after the last cut, a long Retry-After cuts gently again: a limit
    slower than one call a second is still found."""
    time = FakeTime()
    control = controller(time, rate=10.0)
    control.on_rate_limited(2, await control.slot())  # 5/s, the cut honoured 2 s
    control.on_rate_limited(4, await control.slot())  # longer, soon after: a storm
    assert control.rate == pytest.approx(5.0)
    time.now += QUICK_REPEAT + 1
    control.on_rate_limited(4, await control.slot())
    assert control.rate == pytest.approx(5.0 * BACKOFF)


@pytest.mark.parametrize(("limit", "burst"), [(5.0, 5), (20.0, 20), (100.0, 100)])
async def test_a_token_bucket_is_used_with_few_429s(limit: float, burst: int) -> None:
    """Against a token bucket of `limit` a second holding `burst` (the sandbox's shape),
    2,000 calls use over 0.95 of the limit with at most 1.5 % of calls answered 429,
    and none leaves during a pause."""
    time = FakeTime()
    control = RateController(initial_rate=10.0, clock=time, sleep=time.sleep)
    tokens, updated, accepted, refused, first = float(burst), time.now, 0, 0, time.now
    while accepted < 2000:
        sent = await control.slot()
        assert sent >= control.paused_until or control.paused_until == 0
        tokens = min(float(burst), tokens + (sent - updated) * limit)
        updated = sent
        if tokens >= 1.0:
            tokens -= 1.0
            accepted += 1
            control.on_success()
        else:
            refused += 1
            control.on_rate_limited(max(1, math.ceil((1.0 - tokens) / limit)), sent)
    assert (accepted - burst) / limit / (updated - first) >= 0.95
    assert refused / (accepted + refused) <= 0.015


async def test_a_success_answered_during_a_pause_leaves_the_rate_alone() -> None:
    """A call sent before a 429 and answered during its pause neither grows the rate nor
    shrinks it (a negative span once took the rate below zero)."""
    time = FakeTime()
    control = controller(time, rate=20.0)
    sent = [await control.slot() for _ in range(3)]
    control.on_rate_limited(1, sent[0])
    assert control.rate == pytest.approx(10.0)
    time.now += 0.03
    control.on_success()
    assert control.rate == pytest.approx(10.0)


async def test_breaker_opens_after_a_streak_and_lets_one_probe_through() -> None:
    """Past the threshold one probe goes at a time; a success closes the circuit."""
    time = FakeTime()
    breaker = CircuitBreaker(threshold=3, outage_seconds=60, probe_interval=0, monotonic=time)
    for _ in range(3):
        assert await breaker.admit() is False
        breaker.failure("k")
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
    breaker.failure("k")
    assert not breaker.outage
    time.now += 61
    assert breaker.outage
    assert breaker.opened == 1


async def test_success_resets_the_streak() -> None:
    """Failures broken by a success never open the circuit."""
    breaker = CircuitBreaker(threshold=3, outage_seconds=60)
    for _ in range(5):
        breaker.failure("k")
        breaker.failure("k")
        breaker.success()
    assert not breaker.is_open


async def test_release_lets_waiting_workers_go() -> None:
    """A stopping run releases workers waiting on an open circuit at once."""
    import anyio

    breaker = CircuitBreaker(threshold=1, outage_seconds=60, probe_interval=30)
    breaker.failure("k")
    admitted: list[bool] = []

    async def wait() -> None:
        admitted.append(await breaker.admit())

    with anyio.fail_after(2):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)  # becomes the probe, waiting 30 s before it may go
            tg.start_soon(wait)  # waits for the circuit to close
            await anyio.wait_all_tasks_blocked()  # both parked in the breaker
            breaker.release()  # both return at once; the pool's gate then sends nothing
    assert sorted(admitted) == [False, True]


def test_failures_of_several_requests_with_no_success_are_run_wide() -> None:
    """One request failing alone is its own trouble; two failing, nothing answered between,
    is the API's; a success ends the streak."""
    breaker = CircuitBreaker(threshold=100, outage_seconds=60)
    breaker.failure("a")
    assert not breaker.run_wide("a")
    assert breaker.run_wide("b")
    breaker.failure("b")
    assert breaker.run_wide("a")
    breaker.success()
    assert not breaker.run_wide("a")
