"""One invocation's sending phase: the client, the pool and the waits around it, for
whichever product hands in its job (valuations, street analyses, read-backs): it names
none of them.

`Sending.phase` is the phase behind its gates (a signal noted before it, a daily limit's
`not_before` kept in DIR's database). `send` opens one `PartnerClient`; each round
(`_Rounds`) waits out a daily limit's `not_before` and a `Retry-After` an earlier
invocation was given (both wake at once on SIGTERM or SIGINT), sends the product's
`before` job once if it has one, runs the pool on the round's job, and keeps a
`Retry-After` that outlives the invocation in DIR's database. With `wait_for_midnight`
it goes round again after a daily-limit stop. The command decides what the outcome
means for the exit code.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio

from batchval._internal import logs
from batchval._internal.api import ApiClock, Credentials, PartnerClient, Reach, host_of
from batchval._internal.outcome import StopInfo, StopReason
from batchval._internal.place import NotedSignals
from batchval._internal.sending.job import ItemT, Job
from batchval._internal.sending.loops import run_async
from batchval._internal.sending.pool import Declines, PoolSettings, PoolStats, WorkerPool
from batchval._internal.sending.progress import Progress
from batchval._internal.sending.ratecontrol import RateController, start_rate
from batchval._internal.sending.stop import Stop
from batchval._internal.settings import ApiSettings, RunOptions
from batchval._internal.store import Counts, Database

log = logs.get_logger()

# How often the sending looks for a signal noted (a handler only notes it).
NOTED_POLL_SECONDS = 0.05


@dataclasses.dataclass(frozen=True, slots=True)
class SendOutcome:
    """What one invocation's sending phase did."""

    stop: StopInfo | None = None
    calls: int = 0
    rate_limited: int = 0
    credits: int = 0
    balance: int | None = None
    statuses: Mapping[str, int] = dataclasses.field(default_factory=dict)  # calls by status
    # Key -> sends, of the keys whose every send this invocation was refused, valuing
    # nothing (`pool.Declines`): a `--book` night defers them.
    declined: Mapping[str, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, slots=True)
class Sending:
    """One invocation's sending phase, for whichever product hands in its job."""

    database: Database
    # Where the calls go, opened only once the gates let the phase send (`command`:
    # the configured API, or the embedded sandbox, which is started for it).
    api: Callable[[], contextlib.AbstractContextManager[ApiSettings]]
    run: RunOptions
    now: Callable[[], dt.datetime]  # the run's clock (with the test offset)
    progress_bar: bool
    # The signals the command notes (or an interrupt the Python API passes on): one noted
    # before sending stops it at once, one noted while sending stops the round.
    signals: NotedSignals
    # What is sent in each round (a new job a round: a round after midnight starts over),
    # and where the work stands, for the progress bar.
    job_for: Callable[[PartnerClient], Job[Any]]
    counts: Callable[[], Counts]
    # Jobs sent once, in order, before the first round, those that have work (run:
    # reading back the paid answers that could not be read, `valuations/recovery`; a
    # book night's reads of the API's index, `valuations/index_reads`). Their credits
    # count against `run.max_credits` as the round's do.
    before: Callable[[PartnerClient], Sequence[Job[Any] | None]] | None = None
    # Called every `run.metrics_seconds` while sending, with the calls by status, the
    # 429s and the credits so far (the runner rewrites --metrics-file).
    on_metrics: Callable[[Mapping[str, int], int, int], None] | None = None
    # What `wait_for_midnight` is called where a person sets it (the refusal line).
    wait_option: str = "--wait-for-midnight"
    # What the answers show of the API's clock, heard by the client (a product that classes
    # its charges on it hands in its own, `money/charges.Evidence`).
    api_clock: ApiClock | None = None

    def phase(self) -> SendOutcome:
        """The phase from the command's (synchronous) code, behind its two gates: a signal
        noted before it, and the daily limit's `not_before` kept by any command (the limit
        is the account's): before it, no call, unless `run.wait_for_midnight` waits."""
        if self.signals.received:
            log.warning(
                "engine.sending.signal", signal=self.signals.received, while_="before sending"
            )
            detail = f"received {self.signals.received} before sending"
            return SendOutcome(StopInfo(StopReason.SIGNAL, detail))
        not_before = stored_not_before(self.database, self.now)
        if not_before is not None and not self.run.wait_for_midnight:
            log.warning("engine.sending.daily_limit.waiting", not_before=not_before.isoformat())
            detail = (
                "the daily limit was reached; nothing is sent before "
                f"{not_before.isoformat()} (or use {self.wait_option})"
            )
            return SendOutcome(StopInfo(StopReason.DAILY_LIMIT, detail, not_before))
        with self.api() as api:
            # In a thread that runs an event loop (a notebook's), on a loop of its own.
            interrupted = functools.partial(self.signals.note, "SIGINT")
            outcome: SendOutcome = run_async(self.send, not_before, api, interrupted=interrupted)
        return outcome

    async def send(self, not_before: dt.datetime | None, api: ApiSettings) -> SendOutcome:
        """Round after round (more than one only with `wait_for_midnight`) on one client."""
        async with PartnerClient(
            base_url=api.base_url,
            auth_url=api.auth_url,
            credentials=Credentials(api.client_id, api.client_secret),
            timeout=self.run.timeout_seconds,
            max_connections=self.run.concurrency,
            reach=self._reach(api),
            api_clock=self.api_clock,
        ) as client:
            return await _Rounds(self, client).send(not_before)

    def _reach(self, api: ApiSettings) -> Reach:
        """The hosts that have answered this DIR, kept in its database as they answer: a
        host name that does not resolve is a wrong address (64) only if it never has."""
        database = self.database
        configured = (host_of(api.base_url), host_of(api.auth_url))
        return Reach(
            database.invocations.reached_hosts(configured),
            on_new=lambda host: database.invocations.note_reached(host, self.now().isoformat()),
        )

    def progress(self, job: str) -> Progress:
        """This round's bar or `run.progress` events, from where the work stands now."""
        counts = self.counts()
        return Progress(
            pending_requests=counts.requests_pending,
            bar=self.progress_bar,
            every_seconds=self.run.progress_seconds,
            job=job,
        )

    def keep_pause(self, controller: RateController, stop: Stop) -> None:
        """A `Retry-After` the API gave outlives this invocation: in the stop's not_before
        (the database has it since the 429 was heard, `_Rounds._keep_pause`)."""
        remaining = controller.pause_remaining()
        if remaining <= 0:
            return
        until = self.now() + dt.timedelta(seconds=remaining)
        if stop.info is not None and (stop.not_before is None or stop.not_before < until):
            stop.info = dataclasses.replace(stop.info, not_before=until)

    async def wait_until(
        self, when: dt.datetime, stop: Stop, event: str = "engine.sending.daily_limit.sleeping"
    ) -> None:
        """Sleep until `when` (a second after it), waking at once on a signal."""
        if when <= self.now():
            return
        seconds = (when - self.now()).total_seconds() + 1
        log.info(event, until=when.isoformat(), seconds=round(seconds))
        with anyio.move_on_after(seconds):
            await stop.event.wait()


class _Rounds:
    """The sending phase's state across its rounds: one rate controller, the credits spent
    in the rounds so far, and the figures of the round under way (for the metrics)."""

    def __init__(self, sending: Sending, client: PartnerClient) -> None:
        self.sending = sending
        self.client = client
        self.controller = RateController(
            initial_rate=start_rate(sending.run.concurrency), on_pause=self._keep_pause
        )
        self.credits = 0
        self.uncertain = 0  # credits that may be spent: counted against --max-credits
        self.declines = Declines()  # every round's sends the API refused
        self.balance: int | None = None
        self.round_stats = PoolStats()  # this round's figures so far
        self.before = sending.before  # sent in the first round only

    def _keep_pause(self, seconds: float) -> None:
        """A 429's `Retry-After`, committed as it is heard (the group under way with it):
        an invocation killed inside the pause leaves it to the next, on this machine or,
        once shipped, at a URL on another."""
        until = self.sending.now() + dt.timedelta(seconds=seconds)
        self.sending.database.set_now("pause_until", until.isoformat())

    async def send(self, not_before: dt.datetime | None) -> SendOutcome:
        sending, database = self.sending, self.sending.database
        while True:
            stop = await self.round(not_before)
            sending.keep_pause(self.controller, stop)
            not_before = stop.not_before
            if stop.reason is not StopReason.DAILY_LIMIT or not_before is None:
                break
            database.set("not_before", not_before.isoformat())
            if not sending.run.wait_for_midnight:
                break
        return SendOutcome(
            stop.info,
            self.client.calls,
            self.controller.rate_limited,
            self.credits,
            self.balance,
            dict(self.client.statuses),
            self.declines.declined(),
        )

    async def round(self, not_before: dt.datetime | None) -> Stop:
        """Wait for a daily limit's `not_before` and a kept `Retry-After`, send the job
        run before the first round (if any) then the round's job; stop on a signal."""
        stop = Stop()
        self.round_stats = PoolStats()
        async with anyio.create_task_group() as watchers:
            watchers.start_soon(_stop_on_noted, self.sending.signals, stop)
            if self.sending.on_metrics is not None:
                watchers.start_soon(self._tick_metrics, self.sending.on_metrics)
            await self._wait(not_before, stop)
            if not stop.is_set and self.before is not None:
                jobs, self.before = self.before(self.client), None
                for job in jobs:
                    if job is not None and not stop.is_set:
                        await self._counted(job, stop)
            if not stop.is_set:
                await self._main(stop)
            watchers.cancel_scope.cancel()
        return stop

    async def _wait(self, not_before: dt.datetime | None, stop: Stop) -> None:
        sending, database = self.sending, self.sending.database
        if not_before is not None:
            await sending.wait_until(not_before, stop)
        paused = database.get("pause_until")
        if paused is not None and not stop.is_set:
            # A Retry-After given to an earlier invocation still holds.
            until = dt.datetime.fromisoformat(paused)
            await sending.wait_until(until, stop, "engine.sending.retry_after.waiting")
        if not stop.is_set:
            database.unset("not_before")
            database.unset("pause_until")

    async def _main(self, stop: Stop) -> None:
        job = self.sending.job_for(self.client)
        progress = self.sending.progress(job.name)

        def on_progress(stats: PoolStats) -> None:
            self.round_stats = stats
            progress.update(stats)

        with progress:
            await self._counted(job, stop, on_progress)

    async def _counted(
        self,
        job: Job[ItemT],
        stop: Stop,
        on_progress: Callable[[PoolStats], None] | None = None,
    ) -> None:
        """Run `job`'s pool within what --max-credits leaves, its credits counted."""
        limit = self.sending.run.max_credits
        pool = self._pool(
            job,
            stop,
            max_credits=None if limit is None else limit - self.credits - self.uncertain,
            on_progress=on_progress,
        )
        stats = await pool.run()
        self.credits += stats.credits
        self.uncertain += stats.uncertain
        self.balance = stats.balance if stats.balance is not None else self.balance
        self.round_stats = PoolStats()  # counted in `credits` now

    def _pool(
        self,
        job: Job[ItemT],
        stop: Stop,
        *,
        max_credits: int | None = None,
        on_progress: Callable[[PoolStats], None] | None = None,
    ) -> WorkerPool[ItemT]:
        """A pool for `job` with the run's settings (`PoolSettings.of`), which asks the
        database before every call whether the run is still held (`Database.hold_lost`: a
        run kept at a URL sends only while its lease holds)."""
        return WorkerPool(
            job=job,
            settings=PoolSettings.of(self.sending.run),
            controller=self.controller,
            stop=stop,
            now=self.sending.now,
            max_credits=max_credits,
            on_progress=on_progress,
            hold_lost=self.sending.database.hold_lost,
            declines=self.declines,
        )

    def spent(self) -> int:
        """The credits this invocation has spent so far, the round under way included."""
        return self.credits + self.round_stats.credits

    async def _tick_metrics(self, write: Callable[[Mapping[str, int], int, int], None]) -> None:
        """Rewrite the metrics every `run.metrics_seconds` until the round ends (waits for
        a daily limit or a Retry-After included)."""
        while True:
            await anyio.sleep(self.sending.run.metrics_seconds)
            write(dict(self.client.statuses), self.controller.rate_limited, self.spent())


def stored_not_before(database: Database, now: Callable[[], dt.datetime]) -> dt.datetime | None:
    """The daily limit's `not_before` kept in the database (by any command that met it:
    the limit is the account's), while it is still to come on the run's clock `now`, the
    clock the pool took it on; None once it has passed. The gate of run, streets and
    verify: before it, no call."""
    stored = database.get("not_before")
    not_before = dt.datetime.fromisoformat(stored) if stored else None
    if not_before is None or now() >= not_before:
        return None
    return not_before


async def _stop_on_noted(signals: NotedSignals, stop: Stop) -> None:
    """A SIGTERM or SIGINT noted while sending (or an interrupt the Python API passed on)
    stops the round gently; later ones are the same request. Noted, not received here: a
    signal handler is the main thread's, and the round may run on a worker thread's loop
    (`sending/loops`)."""
    # Polled: a signal handler, or a thread that waits, cannot set an anyio.Event.
    while not signals.received:  # noqa: ASYNC110
        await anyio.sleep(NOTED_POLL_SECONDS)
    stop.trigger(StopReason.SIGNAL, f"received {signals.received}")
