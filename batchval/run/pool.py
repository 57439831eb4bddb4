"""The bounded worker pool: every pending request sent, retried by the table, recorded.

`WorkerPool.run()` feeds the checkpoint's pending requests to `concurrency` workers.
Each request is sent through the shared `RateController` and retried with tenacity
following partner-api.md section 8, always with its own idempotency key. What happens
after the last attempt depends on the error's `action` (batchval.api.errors):

- ROW: the request is answered for good with a problem (400, 404, 422).
- RETRY, attempts used up: the request stays pending (never a problem); the run ends 75.
- STOP: the whole run stops (account, credentials, daily limit); in-flight calls may
  finish, nothing new is sent.

A run-wide outage (the circuit breaker open for `outage_seconds`: only probes went out
and every one failed) and a signal stop the run the same way. The pool never decides
exit codes: it reports a `Stop` and the runner maps it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import random
import time
from collections.abc import Callable
from typing import Any, Protocol

import anyio
import structlog
import tenacity

from batchval.api.errors import (
    Action,
    PartnerError,
    ProblemError,
    RateLimitedError,
    RequestInProgressError,
    UnauthorizedError,
)
from batchval.api.models import Valuation
from batchval.run.breaker import CircuitBreaker
from batchval.run.checkpoint import Checkpoint, PendingRequest
from batchval.run.ratecontrol import RateController

log = structlog.get_logger()

VALUATION_CREDITS = 10
# 401s to fresh tokens, in a row across the pool, before the credentials count as refused.
UNAUTHORIZED_STREAK = 5


class ValuationApi(Protocol):
    async def create_valuation(
        self, request: dict[str, Any], *, idempotency_key: str | None
    ) -> Valuation: ...


class StopReason(enum.Enum):
    DAILY_LIMIT = "daily_limit"  # 429 daily_limit: nothing more before midnight UTC
    ACCOUNT = "account"  # insufficient credits, blocked, credentials refused
    OUTAGE = "outage"  # every call failing for outage_seconds
    SIGNAL = "signal"  # SIGTERM or SIGINT
    BUDGET = "max_credits"  # --max-credits reached


@dataclasses.dataclass
class Stop:
    """The first reason the run stopped, shared by every worker."""

    reason: StopReason | None = None
    detail: str = ""
    not_before: dt.datetime | None = None  # with DAILY_LIMIT: when calls may start again
    event: anyio.Event = dataclasses.field(default_factory=anyio.Event)

    def trigger(
        self, reason: StopReason, detail: str, not_before: dt.datetime | None = None
    ) -> None:
        if self.reason is None:
            self.reason, self.detail, self.not_before = reason, detail, not_before
            log.warning("run.stopping", reason=reason.value, detail=detail)
            self.event.set()

    @property
    def is_set(self) -> bool:
        return self.reason is not None


@dataclasses.dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Section 8's retry table as data; tests set the waits to zero."""

    max_attempts: int = 6  # transient failures per request per invocation (429s not counted)
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    in_progress_wait: float = 1.0  # 409: "after a short wait"

    def wait_after(self, error: BaseException | None, failures: int) -> float:
        """Seconds before the next attempt. A 429's wait is the controller's shared pause."""
        if isinstance(error, RateLimitedError):
            return 0.0
        if isinstance(error, RequestInProgressError):
            return self.in_progress_wait * (1.0 + random.random() / 2)
        # Full jitter (AWS architecture blog): spreads retries of a failing fleet.
        ceiling = min(self.backoff_max, self.backoff_initial * 2 ** max(0, failures - 1))
        return random.uniform(0, ceiling)


@dataclasses.dataclass
class PoolStats:
    calls: int = 0
    valued: int = 0
    problems: int = 0
    left_pending: int = 0
    credits: int = 0
    balance: int | None = None
    in_flight: int = 0


class _StoppingError(Exception):
    """The run is stopping: the request is left pending, untouched or to be resent."""


class WorkerPool:
    def __init__(
        self,
        *,
        api: ValuationApi,
        checkpoint: Checkpoint,
        controller: RateController,
        policy: RetryPolicy,
        stop: Stop,
        concurrency: int,
        max_credits: int | None = None,
        outage_seconds: float = 300.0,
        probe_interval: float = 5.0,
        shutdown_grace_seconds: float = 5.0,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        monotonic: Callable[[], float] = time.monotonic,
        on_progress: Callable[[PoolStats], None] | None = None,
    ) -> None:
        self._api = api
        self._checkpoint = checkpoint
        self._controller = controller
        self._policy = policy
        self.stop = stop
        self._concurrency = concurrency
        self._max_credits = max_credits
        self._reserved = 0
        self._breaker = CircuitBreaker(
            threshold=max(20, 4 * concurrency),  # 20 straight failures: 1e-6 at a 50% fault rate
            outage_seconds=outage_seconds,
            probe_interval=probe_interval,
            monotonic=monotonic,
        )
        self._grace = shutdown_grace_seconds
        self._now = now
        self._on_progress = on_progress
        self._unauthorized_streak = 0
        self.stats = PoolStats()

    async def run(self) -> PoolStats:
        """Send every pending request once the pool can; returns when done or stopped."""
        send, receive = anyio.create_memory_object_stream[PendingRequest](self._concurrency)
        async with anyio.create_task_group() as outer:
            outer.start_soon(self._cut_off_after_grace, outer.cancel_scope)
            async with anyio.create_task_group() as workers, receive:
                workers.start_soon(self._feed, send)
                for _ in range(self._concurrency):
                    workers.start_soon(self._work, receive.clone())
            outer.cancel_scope.cancel()
        return self.stats

    async def _cut_off_after_grace(self, scope: anyio.CancelScope) -> None:
        await self.stop.event.wait()
        self._breaker.release()
        await anyio.sleep(self._grace)
        if self.stats.in_flight:
            log.warning("run.grace_over", in_flight=self.stats.in_flight)
        scope.cancel()

    async def _feed(self, send: anyio.abc.ObjectSendStream[PendingRequest]) -> None:
        async with send:
            after = 0
            while not self.stop.is_set:
                page = self._checkpoint.pending(after)
                if not page:
                    return
                for item in page:
                    if self.stop.is_set:
                        return
                    await send.send(item)
                after = page[-1].rowid

    async def _work(self, receive: anyio.abc.ObjectReceiveStream[PendingRequest]) -> None:
        async with receive:
            async for item in receive:
                if self.stop.is_set:
                    return
                await self._value(item)
                if self._on_progress is not None:
                    self._on_progress(self.stats)

    async def _sleep(self, seconds: float) -> None:
        """Wait before a retry, waking at once if the run stops."""
        with anyio.move_on_after(seconds):
            await self.stop.event.wait()

    async def _value(self, item: PendingRequest) -> None:
        body = json.loads(item.request_json)
        failures = 0  # transient failures so far; a 429 is pacing, not the request's fault

        def give_up(state: tenacity.RetryCallState) -> bool:
            nonlocal failures
            error = state.outcome.exception() if state.outcome else None
            # While the circuit is open the failure is the API's, not this request's: the
            # outage rule (outage_seconds) ends the run, not the request's attempts.
            if not isinstance(error, RateLimitedError) and not self._breaker.is_open:
                failures += 1
            return self.stop.is_set or failures >= self._policy.max_attempts

        retrying = tenacity.AsyncRetrying(
            retry=tenacity.retry_if_exception(
                lambda e: isinstance(e, PartnerError) and e.action is Action.RETRY
            ),
            stop=give_up,
            wait=lambda state: self._policy.wait_after(
                state.outcome.exception() if state.outcome else None, failures
            ),
            sleep=self._sleep,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    await self._send_once(item, body)
        except _StoppingError:
            pass  # left as it is: pending or sent, resent next time with the same key
        except PartnerError as error:
            self._settle(item, error)

    async def _send_once(self, item: PendingRequest, body: dict[str, Any]) -> None:
        probe = await self._breaker.admit()
        try:
            await self._send_admitted(item, body)
        finally:
            self._breaker.done(probe)

    async def _send_admitted(self, item: PendingRequest, body: dict[str, Any]) -> None:
        sent_at = await self._controller.slot()
        if self.stop.is_set:
            raise _StoppingError
        if not self._reserve():
            self.stop.trigger(
                StopReason.BUDGET, f"--max-credits {self._max_credits} would be exceeded"
            )
            raise _StoppingError
        self._checkpoint.mark_sent(item.key)
        self.stats.calls += 1
        self.stats.in_flight += 1
        try:
            valuation = await self._api.create_valuation(body, idempotency_key=item.key)
        except PartnerError as error:
            self._observe_failure(error, sent_at)
            raise
        finally:
            self.stats.in_flight -= 1
            self._reserved -= VALUATION_CREDITS
        self._breaker.success()
        self._unauthorized_streak = 0
        self._controller.on_success()
        credits = valuation.charge.credits if valuation.charge else 0
        self.stats.credits += credits
        if valuation.charge:
            self.stats.balance = valuation.charge.balance_after
        self.stats.valued += 1
        self._checkpoint.record_valuation(item.key, json.dumps(valuation.raw), credits)

    def _reserve(self) -> bool:
        """Hold the credits a call may cost, so that concurrent calls never overshoot."""
        if self._max_credits is not None and (
            self.stats.credits + self._reserved + VALUATION_CREDITS > self._max_credits
        ):
            return False
        self._reserved += VALUATION_CREDITS
        return True

    def _observe_failure(self, error: PartnerError, sent_at: float) -> None:
        if isinstance(error, RateLimitedError):
            if error.daily_limit:
                self.stop.trigger(
                    StopReason.DAILY_LIMIT,
                    "the account's daily limit is used",
                    self._resume_after_daily_limit(error.retry_after),
                )
            else:
                self._controller.on_rate_limited(error.retry_after, sent_at)
            return
        if isinstance(error, UnauthorizedError):
            self._unauthorized_streak += 1
            if self._unauthorized_streak >= UNAUTHORIZED_STREAK:
                self.stop.trigger(StopReason.ACCOUNT, f"the API refuses fresh tokens ({error})")
            return
        if error.action is not Action.RETRY:
            self._breaker.success()  # the API is up: it answered this request for good
            return
        self._breaker.failure()
        if self._breaker.outage:
            self.stop.trigger(
                StopReason.OUTAGE,
                f"every call has failed for {self._breaker.open_for():.0f} s (last: {error})",
            )

    def _resume_after_daily_limit(self, retry_after: int | None) -> dt.datetime:
        """The API's Retry-After; without one, midnight UTC (never retried before it)."""
        now = self._now()
        if retry_after:
            return now + dt.timedelta(seconds=retry_after)
        return (now + dt.timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)

    def _settle(self, item: PendingRequest, error: PartnerError) -> None:
        """The request's last error decides where it stands."""
        if error.action is Action.ROW:
            self.stats.problems += 1
            self._checkpoint.record_problem(item.key, problem_record(error, item.attempts))
            log.info("run.request.problem", key=item.key, type=_type_name(error))
            return
        if error.action is Action.STOP and not (
            isinstance(error, RateLimitedError) and error.daily_limit
        ):
            self.stop.trigger(StopReason.ACCOUNT, str(error))
        self.stats.left_pending += 1
        self._checkpoint.record_retry(item.key, str(error))


def _type_name(error: PartnerError) -> str:
    return error.name if isinstance(error, ProblemError) else type(error).__name__


def problem_record(error: PartnerError, attempts: int) -> dict[str, Any]:
    """The problem as the checkpoint keeps it and problems.parquet shows it."""
    detail = error.detail if isinstance(error, ProblemError) else str(error)
    return {
        "type": _type_name(error),
        "status": error.status if isinstance(error, ProblemError) else None,
        "code": error.code if isinstance(error, ProblemError) else None,
        "title": error.title if isinstance(error, ProblemError) else None,
        "detail": detail,
        "retryable": error.action is Action.RETRY,
    }
