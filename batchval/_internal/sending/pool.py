"""The bounded worker pool: every pending item sent, retried by the table, recorded.

`WorkerPool.run()` feeds a `Job`'s pending items (`sending/job`: valuations, street
analyses, read-backs) to `concurrency` workers. Each item is sent through the shared
`RateController` and retried with tenacity following the API's retry table
(docs/api.md), always under its own key.
What every answer means is decided once, in `batchval._internal.api.errors` (`Action`); here each
action has one arm:

- RETRY (409, 503, 504, a cut connection, a timeout): the same key after a backoff. Once
  the request's attempts are used up it stays pending (never a problem) and the run
  stops `api_unavailable`.
- PAUSE (429): every worker waits for the `Retry-After`; the same key after it.
- UNRECOGNISED (an HTML page, an unknown status or type): the same key again; after
  `unrecognised_limit` of them, or the first few with nothing recognised before them,
  the run stops. Never a row's problem.
- ROW: the API says the row is at fault: its problem is recorded.
- STOP, ACCOUNT, CONFIG, DEFECT: the whole run stops with the matching `StopReason`;
  in-flight calls may finish, nothing new is sent.

One circuit breaker serves the pool: when every call fails for `outage_seconds`
(counted from the first failure after the last success), the run stops rather than
letting each row back off on its own. The pool never decides exit codes: it reports a
`Stop` and the runner maps it.

The job records each success (a valuation is kept raw in the checkpoint before it is
read, so a paid answer is never lost to a parser or a crash).
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import time
from collections.abc import Callable
from typing import Generic

import anyio
import tenacity
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from batchval._internal import logs
from batchval._internal.api import (
    PROBLEM_TYPES,
    AccountBlockedError,
    Action,
    InsufficientCreditsError,
    PartnerError,
    ProblemError,
    RateLimitedError,
    UnauthorizedError,
)
from batchval._internal.outcome import StopInfo, StopReason
from batchval._internal.sending.breaker import CircuitBreaker
from batchval._internal.sending.job import ItemT, Job
from batchval._internal.sending.midnight import resume_after_daily_limit
from batchval._internal.sending.ratecontrol import RateController
from batchval._internal.sending.retry import RetryPolicy
from batchval._internal.sending.stop import Stop
from batchval._internal.settings import RunOptions

log = logs.get_logger()

# Fresh tokens the API refused (each once, however many calls bore it), with no answer
# between that it gave as it does, before the credentials count as refused.
UNAUTHORIZED_STREAK = 5
# How often the checkpoint's writes are committed while sending: one fsync per group,
# not per answer. A kill loses at most this much: sent again, same keys, answered free.
GROUP_COMMIT_SECONDS = 0.2
# Unrecognised answers with nothing recognised before them: the address is wrong.
FIRST_CALLS = 3
# Actions after which the same request is sent again.
_RETRIED = frozenset({Action.RETRY, Action.PAUSE, Action.UNRECOGNISED})
_STOPS = {
    Action.STOP: StopReason.DAILY_LIMIT,
    Action.CONFIG: StopReason.WRONG_ADDRESS,
    Action.DEFECT: StopReason.INTERNAL_ERROR,
}


@dataclasses.dataclass
class PoolStats:
    calls: int = 0
    valued: int = 0  # items answered and recorded (valuations, street analyses, reads)
    problems: int = 0
    left_pending: int = 0
    credits: int = 0
    uncertain: int = 0  # credits of charges that may be this invocation's (never counted spent)
    balance: int | None = None
    in_flight: int = 0
    unrecognised: int = 0


@dataclasses.dataclass
class Declines:
    """The keys an invocation sent whose every send the API answered without valuing:
    a 429 (`rate-limited`, a `daily_limit` among them; docs/api.md, section 7, says why
    this is read as not valued) or an answer its table says is never charged. A `--book`
    night defers them as it defers requests never sent (`valuations/booking`). A key one
    of whose sends has no known outcome (in flight at a stop, a drop, a 504, an answer not
    understood) is never one: only its own key may settle it."""

    sends: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    _open: set[str] = dataclasses.field(default_factory=set)  # a send without an outcome
    _doubt: set[str] = dataclasses.field(default_factory=set)  # sent again while open
    _declined: set[str] = dataclasses.field(default_factory=set)

    def sent(self, key: str) -> None:
        self.sends[key] += 1
        if key in self._open:
            self._doubt.add(key)
        self._open.add(key)

    def answered(self, key: str, error: PartnerError | None) -> None:
        """A send of `key` ended: with an answer read (`error` None: settled), with a
        refusal that values nothing (a 429, an answer the contract never charges:
        declined), or otherwise (a 504, a cut connection, an answer not understood: its
        outcome stays unknown)."""
        if error is None:
            self._open.discard(key)
            self._declined.discard(key)
        elif isinstance(error, RateLimitedError) or (
            isinstance(error, ProblemError) and error.never_charged
        ):
            self._open.discard(key)
            self._declined.add(key)

    def declined(self) -> dict[str, int]:
        """Key -> this invocation's sends of it, for each key whose every send was
        refused."""
        settled = self._declined - self._open - self._doubt
        return {key: self.sends[key] for key in sorted(settled)}


@dataclasses.dataclass
class _Attempts:
    """One request's failures in this invocation; the retry policy reads it."""

    failures: int = 0
    last: PartnerError | None = None


class _StoppingError(Exception):
    """The run is stopping: the request is left pending, untouched or to be resent."""


@dataclasses.dataclass(frozen=True, slots=True)
class PoolSettings:
    """How a pool sends, whatever its job: the run's settings as the pool reads them
    (`of`), one record however many rounds and jobs use it; tests build one with near-zero
    waits."""

    concurrency: int  # workers, each with at most one call in flight
    policy: RetryPolicy = dataclasses.field(default_factory=RetryPolicy)
    outage_seconds: float = 120.0  # every call failing this long stops the run (the breaker)
    probe_interval: float = 5.0  # in an outage, how often one call probes the API
    unrecognised_limit: int = 10  # answers the API does not give, before the run stops
    shutdown_grace_seconds: float = 5.0  # once stopping, how long in-flight calls may finish

    @classmethod
    def of(cls, run: RunOptions) -> PoolSettings:
        """The settings of a pool for `run`: every job is paced, retried and stopped alike
        (valuations, street analyses, read-backs)."""
        return cls(
            concurrency=run.concurrency,
            policy=RetryPolicy(max_attempts=run.max_attempts),
            outage_seconds=run.outage_seconds,
            # A few probes within the outage window, never more than 5 s apart.
            probe_interval=min(5.0, run.outage_seconds / 4),
            unrecognised_limit=run.unrecognised_limit,
            shutdown_grace_seconds=run.shutdown_grace_seconds,
        )


class WorkerPool(Generic[ItemT]):
    def __init__(
        self,
        *,
        job: Job[ItemT],
        settings: PoolSettings,
        controller: RateController,
        stop: Stop,
        max_credits: int | None = None,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        monotonic: Callable[[], float] = time.monotonic,
        on_progress: Callable[[PoolStats], None] | None = None,
        hold_lost: Callable[[], StopInfo | None] = lambda: None,
        declines: Declines | None = None,
    ) -> None:
        self._job = job
        self.declines = Declines() if declines is None else declines
        self._settings = settings
        self._hold_lost = hold_lost
        self._controller = controller
        self.stop = stop
        self._max_credits = max_credits
        # Keys sent in this invocation whose charge is not known yet: in flight, or last
        # ended without an answer (a drop, a 504). Each may have cost one valuation; a
        # resend of the same key cannot cost more.
        self._exposed: set[str] = set()
        self._breaker = CircuitBreaker(
            # 20 straight failures: 1e-6 at a 50% fault rate
            threshold=max(20, 4 * settings.concurrency),
            outage_seconds=settings.outage_seconds,
            probe_interval=settings.probe_interval,
            monotonic=monotonic,
        )
        self._recognised = False  # some answer of this invocation was the API's own
        # The run's clock (`RunOptions.now`): a daily limit's not_before is taken on it,
        # and the runner and `sending/sending` check it on the same one.
        self._now = now
        self._on_progress = on_progress
        # The fresh tokens the API refused since it last answered as it does.
        self._refused_tokens: list[object] = []
        self._exhausted: PartnerError | None = None  # the last error of a request given up
        self.stats = PoolStats()

    async def run(self) -> PoolStats:
        """Send every pending request once the pool can; returns when done or stopped."""
        send, receive = anyio.create_memory_object_stream[ItemT](self._settings.concurrency)
        self._job.begin_group()
        try:
            async with anyio.create_task_group() as outer:
                outer.start_soon(self._cut_off_after_grace, outer.cancel_scope)
                outer.start_soon(self._commit_groups)
                async with anyio.create_task_group() as workers, receive:
                    workers.start_soon(self._feed, send)
                    for _ in range(self._settings.concurrency):
                        workers.start_soon(self._work, receive.clone())
                outer.cancel_scope.cancel()
        finally:
            self._job.commit_group()
        if self._exhausted is not None and self.stats.left_pending:
            self.stop.trigger(
                StopReason.API_UNAVAILABLE,
                f"{self.stats.left_pending} request(s) still failing after "
                f"{self._settings.policy.max_attempts} attempts each (last: {self._exhausted})",
                status=self._exhausted.status,
            )
        return self.stats

    async def _commit_groups(self) -> None:
        """Commit the checkpoint's writes every GROUP_COMMIT_SECONDS (group commits)."""
        while True:
            await anyio.sleep(GROUP_COMMIT_SECONDS)
            self._job.commit_group()
            self._job.begin_group()

    async def _cut_off_after_grace(self, scope: anyio.CancelScope) -> None:
        await self.stop.event.wait()
        self._breaker.release()
        await anyio.sleep(self._settings.shutdown_grace_seconds)
        if self.stats.in_flight:
            log.warning("engine.pool.grace_over", in_flight=self.stats.in_flight)
        scope.cancel()

    async def _feed(self, send: MemoryObjectSendStream[ItemT]) -> None:
        async with send:
            after = 0
            while not self.stop.is_set:
                page = self._job.pending(after)
                if not page:
                    return
                for item in page:
                    if self.stop.is_set:
                        return
                    try:
                        send.send_nowait(item)  # no trip through the event loop when there is room
                    except anyio.WouldBlock:
                        await send.send(item)
                after = page[-1].rowid

    async def _work(self, receive: MemoryObjectReceiveStream[ItemT]) -> None:
        async with receive:
            while (item := await _take(receive)) is not None:
                if self.stop.is_set:
                    return
                await self._value(item)
                if self._on_progress is not None:
                    self._on_progress(self.stats)

    async def _sleep(self, seconds: float) -> None:
        """Wait, waking at once if the run stops."""
        with anyio.move_on_after(seconds):
            await self.stop.event.wait()

    async def gate(self) -> None:
        """Awaited right before any request leaves, the retry after a 401 and a token wait
        included: never during a `Retry-After` pause, never once the run is stopping, never
        once this process may no longer hold the run (`hold_lost`)."""
        while True:
            if self.stop.is_set:
                raise _StoppingError
            lost = self._hold_lost()
            if lost is not None:
                self.stop.trigger(lost.reason, lost.detail)
                raise _StoppingError
            remaining = self._controller.pause_remaining()
            if remaining <= 0:
                return
            await self._sleep(remaining)

    async def _value(self, item: ItemT) -> None:
        attempts, policy = _Attempts(), self._settings.policy
        try:
            try:
                # The first attempt, outside tenacity: nearly every request needs only one,
                # and building a retry loop for each cost about 5 % of the client's CPU.
                await self._send_once(item, attempts)
                return
            except PartnerError as error:
                if not self._retried(error) or self._given_up(attempts):
                    raise
            await self._sleep(policy.wait_after(attempts.last, attempts.failures))
            retrying = tenacity.AsyncRetrying(
                retry=tenacity.retry_if_exception(self._retried),
                stop=lambda _: self._given_up(attempts),
                wait=lambda _: policy.wait_after(attempts.last, attempts.failures),
                sleep=self._sleep,
                reraise=True,
            )
            async for attempt in retrying:
                with attempt:
                    await self._send_once(item, attempts)
        except _StoppingError:
            pass  # left as it is: pending or sent, resent next time with the same key
        except PartnerError as error:
            self._settle_failure(item, error)

    @staticmethod
    def _retried(error: BaseException) -> bool:
        return isinstance(error, PartnerError) and error.action in _RETRIED

    def _given_up(self, attempts: _Attempts) -> bool:
        return self.stop.is_set or attempts.failures >= self._settings.policy.max_attempts

    async def _send_once(self, item: ItemT, attempts: _Attempts) -> None:
        probe = await self._breaker.admit()
        try:
            await self._send_admitted(item, attempts)
        finally:
            self._breaker.done(probe)

    async def _send_admitted(self, item: ItemT, attempts: _Attempts) -> None:
        sent_at = await self._controller.slot()
        await self.gate()
        if not self._reserve(item.key):
            self.stop.trigger(
                StopReason.MAX_CREDITS,
                f"--max-credits {self._max_credits} would be exceeded by the next call",
            )
            raise _StoppingError
        self._job.mark_sent(item)
        self.declines.sent(item.key)
        self.stats.calls += 1
        self.stats.in_flight += 1
        try:
            answer = await self._job.send(item, self.gate)
        except PartnerError as error:
            attempts.last = error
            self.declines.answered(item.key, error)
            self._observe_failure(item.key, error, sent_at, attempts)
            raise
        finally:
            self.stats.in_flight -= 1
        self.declines.answered(item.key, None)
        self._exposed.discard(item.key)  # the answer says what it cost
        self._recognise()
        self._breaker.success()
        self._controller.on_success()
        settled = self._job.settle(item, answer)
        self.stats.credits += settled.credits
        self.stats.uncertain += settled.uncertain
        if settled.balance is not None:
            self.stats.balance = settled.balance
        if settled.stop is not None:
            self.stop.trigger(*settled.stop)
        elif settled.problem:
            self.stats.problems += 1
            log.warning(
                "engine.pool.answer.unreadable",
                **self._job.describe(item),
                job=self._job.name,
                detail=settled.problem,
            )
        else:
            self.stats.valued += 1

    def _reserve(self, key: str) -> bool:
        """Whether one more send of `key` keeps the spend under --max-credits, counting
        every call whose charge may be this invocation's as charged: fresh, uncertain, and
        not known yet (in flight, or its answer lost)."""
        cost = self._job.call_credits
        if self._max_credits is None or cost == 0 or key in self._exposed:
            return True
        spent = self.stats.credits + self.stats.uncertain
        exposure = spent + cost * (len(self._exposed) + 1)
        if exposure > self._max_credits:
            return False
        self._exposed.add(key)
        return True

    def _recognise(self) -> None:
        """The API answered as it does: the address is right, the token was taken."""
        self._recognised = True
        self._refused_tokens.clear()

    def _observe_failure(
        self, key: str, error: PartnerError, sent_at: float, attempts: _Attempts
    ) -> None:
        action = error.action
        if isinstance(error, ProblemError) and type(error) in PROBLEM_TYPES.values():
            self._recognise()
            if error.never_charged:
                self._exposed.discard(key)
            if action is not Action.RETRY:
                self._breaker.success()  # the API is up: it answered this request for good
        if action is Action.PAUSE:
            self._controller.on_rate_limited(error.retry_after, sent_at)
            return
        if action in _STOPS:
            not_before = None
            if isinstance(error, RateLimitedError):
                not_before = resume_after_daily_limit(self._now(), error.retry_after)
            self.stop.trigger(_STOPS[action], str(error), not_before, status=error.status)
            return
        if action is Action.ACCOUNT:
            self.stop.trigger(_account_reason(error), str(error), status=error.status)
            return
        if action is Action.UNRECOGNISED:
            self._unrecognised(error)
            attempts.failures += 1
            return
        if isinstance(error, UnauthorizedError):
            # Counted by token: the calls in flight with one fresh token that a rotation
            # (or a fault) revoked are refused together, and are one refusal, not several.
            token = error.token if error.token is not None else error
            if not any(token is seen for seen in self._refused_tokens):
                self._refused_tokens.append(token)
            if len(self._refused_tokens) >= UNAUTHORIZED_STREAK:
                self.stop.trigger(
                    StopReason.CREDENTIALS_REFUSED, f"the API refuses fresh tokens ({error})"
                )
        if action is not Action.RETRY:
            return
        # While nothing but failures comes back, for more than this request (an outage,
        # whether the circuit has opened yet or not: with few workers it opens late), the
        # failure is the API's: the outage rule (outage_seconds) ends the run, not the
        # request's attempts.
        if not self._breaker.run_wide(key):
            attempts.failures += 1
        self._breaker.failure(key)
        if self._breaker.outage:
            self.stop.trigger(
                StopReason.API_UNAVAILABLE,
                f"every call has failed for {self._breaker.failing_for():.0f} s (last: {error})",
                status=error.status,
            )

    def _unrecognised(self, error: PartnerError) -> None:
        self.stats.unrecognised += 1
        log.warning("engine.pool.answer.unrecognised", detail=str(error))
        url = error.url
        if not self._recognised and self.stats.unrecognised >= FIRST_CALLS:
            self.stop.trigger(
                StopReason.WRONG_ADDRESS,
                f"the first {FIRST_CALLS} answers were none of the API's: {error}; "
                f"check the base and auth URLs ({url})",
                status=error.status,
            )
        elif self.stats.unrecognised >= self._settings.unrecognised_limit:
            self.stop.trigger(
                StopReason.UNRECOGNISED_ANSWERS,
                f"{self.stats.unrecognised} answers the API does not give (last: {error})",
                status=error.status,
            )

    def _settle_failure(self, item: ItemT, error: PartnerError) -> None:
        """The item's last error decides where it stands."""
        if error.action is Action.ROW:
            self.stats.problems += 1
            self._job.record_problem(item, error)
            log.info(
                "engine.pool.request.problem",
                **self._job.describe(item),
                job=self._job.name,
                type=_type_name(error),
            )
            return
        if error.action in _RETRIED and not self.stop.is_set:
            self._exhausted = error
        self.stats.left_pending += 1
        self._job.record_retry(item, error)


async def _take(receive: MemoryObjectReceiveStream[ItemT]) -> ItemT | None:
    """The next item, or None once the feed has ended. One that is waiting is taken
    without a trip through the event loop (`receive` makes one for every item)."""
    try:
        return receive.receive_nowait()
    except anyio.WouldBlock:
        pass
    except anyio.EndOfStream:
        return None
    try:
        return await receive.receive()
    except anyio.EndOfStream:
        return None


def _account_reason(error: PartnerError) -> StopReason:
    if isinstance(error, InsufficientCreditsError):
        return StopReason.INSUFFICIENT_CREDITS
    if isinstance(error, AccountBlockedError):
        return StopReason.ACCOUNT_BLOCKED
    return StopReason.CREDENTIALS_REFUSED


def _type_name(error: PartnerError) -> str:
    return error.name if isinstance(error, ProblemError) else type(error).__name__
