"""The worker pool against the sandbox over loopback: retries, stops, pacing, budget."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from support import LIVE, POOR, apart_on_the_clock, client_for

from batchval._internal.api import Answer, Credentials, DataUnavailableError, RateLimitedError
from batchval._internal.api.errors import ApiTimeoutError, UnauthorizedError
from batchval._internal.outcome import StopInfo, StopReason
from batchval._internal.sandbox.config import Faults, RateLimit, SandboxConfig
from batchval._internal.sandbox.server import RunningSandbox
from batchval._internal.sending.keys import idempotency_key
from batchval._internal.sending.pool import Declines, PoolSettings, PoolStats, WorkerPool
from batchval._internal.sending.ratecontrol import RateController
from batchval._internal.sending.retry import RetryPolicy
from batchval._internal.sending.stop import Stop
from batchval._internal.store.checkpoint import Checkpoint
from batchval._internal.store.database import Database
from batchval._internal.valuations.valuing import ValuationJob

pytestmark = pytest.mark.anyio

FAST = RetryPolicy(max_attempts=6, backoff_initial=0.01, backoff_max=0.05, in_progress_wait=0.05)


def request(n: int, postcode: str = "SW1A 2AA") -> str:
    body = {
        "postcode": postcode,
        "propertyType": "terraced",
        "bedrooms": 1 + n % 6,
        "reference": f"CASE-{n:05d}",
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def checkpoint_with(tmp_path: Path, bodies: list[str]) -> Checkpoint:
    """One row per body; identical bodies share a key, as the ingest makes them."""
    checkpoint = Checkpoint(Database.open(tmp_path))
    keys = [idempotency_key("test-run", body) for body in bodies]
    checkpoint.rows.add(
        [(i + 1, key, None, None, None) for i, key in enumerate(keys)],
        list(dict(zip(keys, bodies, strict=True)).items()),
    )
    checkpoint.rows.finish()
    return checkpoint


async def run_pool(
    served: RunningSandbox,
    checkpoint: Checkpoint,
    credentials: Credentials = LIVE,
    *,
    concurrency: int = 4,
    policy: RetryPolicy = FAST,
    grace: float = 2,
    max_credits: int | None = None,
    **settings: Any,
) -> tuple[PoolStats, Stop]:
    stop = Stop()
    async with client_for(served, credentials) as api:
        pool = WorkerPool(
            job=ValuationJob(api, checkpoint),
            settings=PoolSettings(
                concurrency=concurrency, policy=policy, shutdown_grace_seconds=grace, **settings
            ),
            controller=RateController(initial_rate=50),
            stop=stop,
            max_credits=max_credits,
        )
        stats = await pool.run()
    return stats, stop


async def test_every_request_valued_and_duplicates_once(
    served: RunningSandbox, tmp_path: Path
) -> None:
    """Twenty rows with five duplicates: fifteen calls, fifteen charges, all rows valued."""
    bodies = [request(n) for n in range(15)] + [request(n) for n in range(5)]
    checkpoint = checkpoint_with(tmp_path, bodies)
    stats, stop = await run_pool(served, checkpoint)
    assert not stop.is_set
    counts = checkpoint.counts()
    assert (counts.valued_rows, counts.pending_rows, counts.requests) == (20, 0, 15)
    assert stats.calls == 15
    ledger = served.sandbox.ledger
    assert len(ledger.charges_by_key()) == 15
    assert ledger.keys_charged_twice() == []
    assert counts.credits == ledger.credits_charged() == 150


@pytest.mark.parametrize(
    "faults",
    [
        Faults(error_503_share=0.5),
        Faults(timeout_504_after_commit_share=0.5),
        Faults(drop_after_commit_share=0.5),
        Faults(malformed_share=0.5),
        Faults(revoke_token_share=0.3),
    ],
    ids=["503", "504-after-commit", "drop-after-commit", "malformed", "revoked-tokens"],
)
@pytest.mark.slow
async def test_transient_faults_are_retried_with_the_same_key(
    served: RunningSandbox, tmp_path: Path, faults: Faults
) -> None:
    """Under each transient fault every request ends valued and no key is charged twice."""
    served.sandbox.set_faults(faults)
    checkpoint = checkpoint_with(tmp_path, [request(n) for n in range(20)])
    policy = RetryPolicy(max_attempts=30, backoff_initial=0.001, backoff_max=0.01)
    await run_pool(served, checkpoint, policy=policy)
    counts = checkpoint.counts()
    assert counts.valued_rows == 20
    assert served.sandbox.ledger.keys_charged_twice() == []
    assert counts.credits == served.sandbox.ledger.credits_charged() == 200


async def test_row_problems_are_recorded_not_retried(
    served: RunningSandbox, tmp_path: Path
) -> None:
    """Outside coverage and floor-area-required become problems after one call each."""
    flat = json.dumps(
        {"postcode": "M1 1AE", "propertyType": "flat", "bedrooms": 9},
        sort_keys=True,
        separators=(",", ":"),
    )
    checkpoint = checkpoint_with(tmp_path, [request(1, "EH1 1AA"), flat, request(2)])
    stats, _ = await run_pool(served, checkpoint)
    assert stats.calls == 3
    assert checkpoint.problem_types() == {"floor-area-required": 1, "outside-coverage": 1}
    details = [row.problem for batch in checkpoint.problem_rows() for row in batch]
    assert any("floor area" in json.loads(d)["detail"] for d in details if d)


async def test_insufficient_credits_stops_the_run(served: RunningSandbox, tmp_path: Path) -> None:
    """With 25 credits: two valued, then a stop; the rest untouched and pending."""
    checkpoint = checkpoint_with(tmp_path, [request(n) for n in range(10)])
    stats, stop = await run_pool(served, checkpoint, POOR, concurrency=1)
    assert stop.reason is StopReason.INSUFFICIENT_CREDITS
    assert stop.status == 403
    assert "insufficient" in stop.detail
    counts = checkpoint.counts()
    assert counts.valued_rows == 2
    assert counts.pending_rows == 8
    assert counts.api_problem_rows == 0
    assert stats.calls == 3


async def test_daily_limit_stops_with_a_time_to_resume(
    served: RunningSandbox, tmp_path: Path
) -> None:
    """At the daily limit the pool stops and says when calls may start again."""
    served.sandbox.account(LIVE.client_id).daily_limit = 3
    checkpoint = checkpoint_with(tmp_path, [request(n) for n in range(10)])
    _, stop = await run_pool(served, checkpoint, concurrency=1)
    assert stop.reason is StopReason.DAILY_LIMIT
    assert stop.not_before is not None
    midnight = served.sandbox.clock.now() + dt.timedelta(
        seconds=served.sandbox.clock.seconds_to_midnight()
    )
    assert apart_on_the_clock((stop.not_before - midnight).total_seconds(), 0) < 5
    assert checkpoint.counts().valued_rows == 3
    assert served.sandbox.ledger.early_requests() == []


@pytest.mark.parametrize("config", [SandboxConfig(rate_limit=RateLimit(10.0, 5))])
@pytest.mark.slow
async def test_short_term_limit_is_honoured(served: RunningSandbox, tmp_path: Path) -> None:
    """Past the bucket, every worker waits out Retry-After: no early call, all valued."""
    checkpoint = checkpoint_with(tmp_path, [request(n) for n in range(40)])
    _, stop = await run_pool(served, checkpoint, concurrency=8)
    assert not stop.is_set
    assert served.sandbox.ledger.deadlines, "the limit was never reached"
    assert checkpoint.counts().valued_rows == 40
    assert served.sandbox.ledger.early_requests() == []
    assert served.sandbox.ledger.keys_charged_twice() == []


async def test_outage_stops_the_run(served: RunningSandbox, tmp_path: Path) -> None:
    """Every call failing past outage_seconds stops the pool, rows left pending."""
    served.sandbox.set_faults(Faults(outage_seconds=60))
    checkpoint = checkpoint_with(tmp_path, [request(n) for n in range(30)])
    stats, stop = await run_pool(
        served,
        checkpoint,
        outage_seconds=0.3,
        probe_interval=0.05,
        policy=RetryPolicy(max_attempts=100, backoff_initial=0.01, backoff_max=0.02),
    )
    assert stop.reason is StopReason.API_UNAVAILABLE
    counts = checkpoint.counts()
    assert counts.pending_rows == 30
    assert counts.api_problem_rows == 0
    assert stats.calls < 30 * 3  # the breaker kept most rows from burning their retries


class _OneRowAlwaysFailsApi:
    """503 for one request, a valuation-shaped answer for every other."""

    def __init__(self, failing_key: str) -> None:
        self.failing_key = failing_key
        self.failures = 0

    async def post_valuation(
        self,
        body: bytes,
        *,
        idempotency_key: str | None,
        gate: Callable[[], Awaitable[None]] | None = None,
    ) -> Answer:
        await anyio.sleep(0.001)  # a call takes time: the other workers go meanwhile
        if idempotency_key == self.failing_key:
            self.failures += 1
            raise DataUnavailableError(
                status=503, type="x/data-unavailable", title="", detail="down for this one"
            )
        return Answer(201, b'{"id": "val_x"}', {"id": "val_x"})


async def test_a_request_failing_among_successes_spends_its_attempts(tmp_path: Path) -> None:
    """One request failing while others succeed uses its max_attempts, stays pending (not
    a problem), and the run stops api_unavailable once the rest are done."""
    bodies = [request(n) for n in range(40)]
    checkpoint = checkpoint_with(tmp_path, bodies)
    failing = idempotency_key("test-run", bodies[0])
    api = _OneRowAlwaysFailsApi(failing)
    stop = Stop()
    pool = WorkerPool(
        job=ValuationJob(api, checkpoint),
        settings=PoolSettings(concurrency=2, policy=FAST),
        controller=RateController(initial_rate=500),
        stop=stop,
    )
    stats = await pool.run()
    assert stats.left_pending == 1
    assert api.failures >= FAST.max_attempts
    assert stop.reason is StopReason.API_UNAVAILABLE
    assert "still failing after 6 attempts" in stop.detail
    assert checkpoint.counts().pending_rows == 1
    assert [p.key for p in checkpoint.requests.pending()] == [failing]  # pending, not a problem


async def test_a_process_that_no_longer_holds_the_run_sends_nothing_more(tmp_path: Path) -> None:
    """A run kept at a URL whose lease lapses mid-run (`Database.holds_run`): the calls
    stop at once, before another leaves, and the run stops dir_locked (75) with the rest
    pending, to be sent by whoever holds the run now."""
    bodies = [request(n) for n in range(40)]
    checkpoint = checkpoint_with(tmp_path, bodies)
    api = _OneRowAlwaysFailsApi("no such key")
    calls_allowed = 10

    def hold_lost() -> StopInfo | None:
        if api_calls() < calls_allowed:
            return None
        return StopInfo(StopReason.DIR_LOCKED, "this process no longer surely holds the run")

    def api_calls() -> int:
        return pool.stats.calls

    stop = Stop()
    pool = WorkerPool(
        job=ValuationJob(api, checkpoint),
        settings=PoolSettings(concurrency=2, policy=FAST),
        controller=RateController(initial_rate=500),
        stop=stop,
        hold_lost=hold_lost,
    )
    stats = await pool.run()
    assert stats.calls == calls_allowed
    assert stop.reason is StopReason.DIR_LOCKED
    assert "no longer surely holds the run" in stop.detail
    assert checkpoint.counts().pending_rows == 40 - calls_allowed


@pytest.mark.slow
async def test_failures_with_nothing_else_answered_are_the_apis(
    served: RunningSandbox, tmp_path: Path
) -> None:
    """Every call of two requests failing: neither spends its attempts; the outage window
    ends the run."""
    served.sandbox.set_faults(Faults(error_503_share=1.0))
    checkpoint = checkpoint_with(tmp_path, [request(1), request(2)])
    stats, stop = await run_pool(served, checkpoint, concurrency=2, outage_seconds=1.0)
    assert stats.calls > FAST.max_attempts  # not given up after its own attempts
    assert stop.reason is StopReason.API_UNAVAILABLE
    assert "every call has failed" in stop.detail
    counts = checkpoint.counts()
    assert (counts.pending_rows, counts.api_problem_rows) == (2, 0)


async def test_max_credits_is_never_exceeded(served: RunningSandbox, tmp_path: Path) -> None:
    """A budget of 35 credits pays for at most three valuations, however many workers.
    Three are reserved; a reserved call not yet on the wire when the fourth's reservation
    stops the pool (waiting for the first token, on a loaded machine) is never sent, so
    fewer may be paid, and each paid one is in the checkpoint."""
    checkpoint = checkpoint_with(tmp_path, [request(n) for n in range(10)])
    # The calls in flight when the budget stops the pool are let finish.
    _, stop = await run_pool(served, checkpoint, concurrency=8, max_credits=35, grace=60)
    assert stop.reason is StopReason.MAX_CREDITS
    charged = served.sandbox.ledger.credits_charged()
    assert charged <= 30
    assert charged == 10 * checkpoint.counts().valued_rows


async def test_tokens_refused_again_and_again_stop_the_run(
    served: RunningSandbox, tmp_path: Path
) -> None:
    """When every fresh token is refused, the run stops as an account problem."""
    served.sandbox.set_faults(Faults(revoke_token_share=1.0))
    checkpoint = checkpoint_with(tmp_path, [request(n) for n in range(10)])
    _, stop = await run_pool(served, checkpoint, concurrency=2)
    assert stop.reason is StopReason.CREDENTIALS_REFUSED
    assert "fresh tokens" in stop.detail
    assert checkpoint.counts().pending_rows == 10


class _OneTokenRevokedInFlight:
    """The sandbox's client, but the first `refused` calls are answered as calls that all
    bore one fresh token the API then refused (a rotation, or a fault): one refusal."""

    def __init__(self, api: object, refused: int) -> None:
        self._api = api
        self._refused = refused
        self._token = object()

    async def post_valuation(
        self,
        body: bytes,
        *,
        idempotency_key: str | None,
        gate: Callable[[], Awaitable[None]] | None = None,
    ) -> Answer:
        if self._refused > 0:
            self._refused -= 1
            await anyio.sleep(0.01)
            raise UnauthorizedError("POST /valuations: refused (401)", token=self._token)
        post: Callable[..., Awaitable[Answer]] = self._api.post_valuation  # type: ignore[attr-defined]
        return await post(body, idempotency_key=idempotency_key, gate=gate)


async def test_one_fresh_token_refused_for_many_calls_is_one_refusal(
    served: RunningSandbox, tmp_path: Path
) -> None:
    """Eight calls in flight with one fresh token, all refused when it is revoked: one
    refusal, not a streak of eight; the run goes on with the next token and values every
    row (it stopped 77 under combined faults before)."""
    checkpoint = checkpoint_with(tmp_path, [request(n) for n in range(10)])
    stop = Stop()
    async with client_for(served, LIVE) as api:
        pool = WorkerPool(
            job=ValuationJob(_OneTokenRevokedInFlight(api, refused=8), checkpoint),
            settings=PoolSettings(concurrency=8, policy=FAST, shutdown_grace_seconds=2),
            controller=RateController(initial_rate=50),
            stop=stop,
        )
        await pool.run()
    assert stop.reason is None
    assert checkpoint.counts().valued_rows == 10


class _DailyLimitWithoutRetryAfter:
    """An API that answers every call with a daily_limit 429 lacking Retry-After."""

    async def post_valuation(
        self,
        body: bytes,
        *,
        idempotency_key: str | None,
        gate: Callable[[], Awaitable[None]] | None = None,
    ) -> Answer:
        raise RateLimitedError(
            status=429,
            type="x/errors/rate-limited",
            title="Rate limited",
            detail="daily limit",
            code="daily_limit",
            retry_after=None,
        )


async def test_daily_limit_without_retry_after_waits_for_midnight(tmp_path: Path) -> None:
    """A daily_limit 429 with no Retry-After still means nothing before midnight UTC."""
    checkpoint = checkpoint_with(tmp_path, [request(1)])
    stop = Stop()
    pool = WorkerPool(
        job=ValuationJob(_DailyLimitWithoutRetryAfter(), checkpoint),
        settings=PoolSettings(concurrency=1, policy=FAST),
        controller=RateController(initial_rate=50),
        stop=stop,
        now=lambda: dt.datetime(2026, 11, 22, 15, 30, tzinfo=dt.UTC),
    )
    await pool.run()
    assert stop.reason is StopReason.DAILY_LIMIT
    assert stop.not_before == dt.datetime(2026, 11, 23, tzinfo=dt.UTC)


class _TokenWaitApi:
    """The first call is answered 429 (Retry-After 1 s) after 0.1 s; the second spends
    0.3 s waiting for a token, then goes through the gate and records when it left."""

    def __init__(self) -> None:
        self.calls = 0
        self.limited_at = 0.0
        self.left_at: list[float] = []

    async def post_valuation(
        self,
        body: bytes,
        *,
        idempotency_key: str | None,
        gate: Callable[[], Awaitable[None]] | None = None,
    ) -> Answer:
        self.calls += 1
        if self.calls == 1:
            await anyio.sleep(0.1)
            self.limited_at = time.monotonic()
            raise RateLimitedError(
                status=429, type="x/rate-limited", title="", detail="slow down", retry_after=1
            )
        await anyio.sleep(0.3)  # a token fetch by another task, say
        assert gate is not None
        await gate()
        self.left_at.append(time.monotonic())
        return Answer(201, b'{"id": "val_x"}', {"id": "val_x"})


@pytest.mark.slow
async def test_no_call_leaves_during_a_pause_after_a_token_wait(tmp_path: Path) -> None:
    """A call that waited for a token while a 429 arrived still waits out Retry-After."""
    checkpoint = checkpoint_with(tmp_path, [request(1), request(2)])
    api = _TokenWaitApi()
    pool = WorkerPool(
        job=ValuationJob(api, checkpoint),
        settings=PoolSettings(concurrency=2, policy=FAST),
        controller=RateController(initial_rate=50),
        stop=Stop(),
    )
    await pool.run()
    assert api.left_at, "the second call never went out"
    assert min(api.left_at) >= api.limited_at + 1.0


def _refusal(code: str | None = "daily_limit") -> RateLimitedError:
    return RateLimitedError(
        status=429, type="x/errors/rate-limited", title="Rate limited", detail="", code=code
    )


def test_declines_are_the_keys_every_send_of_which_was_refused() -> None:
    """A key is declined when each of its sends was answered with a refusal that values
    nothing; one with a send of unknown outcome (cut, a 504, in flight at the stop) never
    is, whatever came after; one answered is done, not declined."""
    declines = Declines()
    for key in ("refused", "cut-then-refused", "in-flight", "answered", "refused-twice"):
        declines.sent(key)
    declines.answered("refused", _refusal())
    declines.answered("cut-then-refused", ApiTimeoutError(status=504, type="x/timeout",
                                                          title="Timeout", detail=""))  # fmt: skip
    declines.sent("cut-then-refused")
    declines.answered("cut-then-refused", _refusal())
    declines.answered("answered", _refusal(None))
    declines.sent("answered")
    declines.answered("answered", None)
    declines.answered("refused-twice", _refusal(None))
    declines.sent("refused-twice")
    declines.answered("refused-twice", _refusal())
    assert declines.declined() == {"refused": 1, "refused-twice": 2}
