"""One invocation's sending phase: the client, the pool and the waits around it.

`send` opens one `PartnerClient`, waits out a daily limit's `not_before` and a
`Retry-After` an earlier invocation was given (both wake at once on SIGTERM or SIGINT),
reads back by id the paid answers an earlier invocation could not read (`run/recovery`,
with `recover`), runs the pool, and keeps a `Retry-After` that outlives the invocation
in the checkpoint.
With `wait_for_midnight` it goes round again after a daily-limit stop. The runner decides
whether to send at all and what the outcome means for the exit code.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import signal
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import structlog

from batchval.api import Credentials, PartnerClient, Reach, host_of
from batchval.outcome import StopInfo, StopReason
from batchval.run.job import ItemT, Job
from batchval.run.pool import PoolStats, WorkerPool
from batchval.run.progress import Progress
from batchval.run.ratecontrol import RateController, start_rate
from batchval.run.recovery import RecoveryJob, recoverable
from batchval.run.retry import RetryPolicy
from batchval.run.stop import Stop
from batchval.run.valuing import ValuationJob
from batchval.settings import ApiSettings, RunOptions
from batchval.store.checkpoint import Checkpoint, Counts

log = structlog.get_logger()


@dataclasses.dataclass(frozen=True, slots=True)
class SendOutcome:
    """What one invocation's sending phase did."""

    stop: StopInfo | None = None
    calls: int = 0
    rate_limited: int = 0
    credits: int = 0
    balance: int | None = None
    statuses: Mapping[str, int] = dataclasses.field(default_factory=dict)  # calls by status


@dataclasses.dataclass(frozen=True, slots=True)
class Sending:
    """What the sending phase needs from the runner."""

    checkpoint: Checkpoint
    api: ApiSettings
    run: RunOptions
    now: Callable[[], dt.datetime]  # the run's clock (with the test offset)
    progress_bar: bool
    # Called after each round: asyncio gives the signals back to their default handlers
    # when the watcher ends, and the runner notes them itself outside this phase.
    after_round: Callable[[], None]
    # What is sent: the valuations of the checkpoint unless a command gives its own job
    # (`streets`), with where its work stands for the progress bar.
    job_for: Callable[[PartnerClient], Job[Any]] | None = None
    counts: Callable[[], Counts] | None = None
    # Called every `run.metrics_seconds` while sending, with the calls by status, the
    # 429s and the credits so far (the runner rewrites --metrics-file).
    on_metrics: Callable[[Mapping[str, int], int, int], None] | None = None
    # Read back by id the paid answers that could not be read, before sending
    # (`run/recovery`): not against the embedded sandbox, which forgot them.
    recover: bool = False

    async def send(self, not_before: dt.datetime | None) -> SendOutcome:
        run, checkpoint = self.run, self.checkpoint
        controller = RateController(initial_rate=start_rate(run.concurrency))
        credits, balance = 0, None
        latest = [PoolStats()]  # this round's last figures, for the metrics ticker
        recover = self.recover

        async with PartnerClient(
            base_url=self.api.base_url,
            auth_url=self.api.auth_url,
            credentials=Credentials(self.api.client_id, self.api.client_secret),
            timeout=run.timeout_seconds,
            max_connections=run.concurrency,
            reach=self._reach(),
        ) as client:
            while True:  # more than once only with --wait-for-midnight
                stop = Stop()
                async with anyio.create_task_group() as watchers:
                    watchers.start_soon(_stop_on_signals, stop)
                    if self.on_metrics is not None:
                        latest[0] = PoolStats()
                        watchers.start_soon(
                            self._tick_metrics,
                            self.on_metrics,
                            lambda: (client.statuses, controller.rate_limited),
                            lambda spent=credits: spent + latest[0].credits,
                        )
                    if not_before is not None:
                        await self._wait_until(not_before, stop)
                    paused = checkpoint.get("pause_until")
                    if paused is not None and not stop.is_set:
                        # A Retry-After given to an earlier invocation still holds.
                        until = dt.datetime.fromisoformat(paused)
                        await self._wait_until(until, stop, "run.retry_after.waiting")
                    if not stop.is_set:
                        checkpoint.unset("not_before")
                        checkpoint.unset("pause_until")
                    if recover and not stop.is_set:
                        recover = False  # once an invocation, not in a later round
                        await self._recover(client, controller, stop)
                    if not stop.is_set:
                        job = self._job(client)
                        progress = self._progress(job.name)

                        def on_progress(stats: PoolStats, progress: Progress = progress) -> None:
                            latest[0] = stats
                            progress.update(stats)

                        pool = pool_for(
                            job,
                            run,
                            controller=controller,
                            stop=stop,
                            max_credits=None
                            if run.max_credits is None
                            else run.max_credits - credits,
                            now=self.now,
                            on_progress=on_progress,
                        )
                        with progress:
                            stats = await pool.run()
                        credits += stats.credits
                        balance = stats.balance if stats.balance is not None else balance
                    watchers.cancel_scope.cancel()
                self.after_round()
                self._keep_pause(controller, stop)
                not_before = stop.not_before
                if stop.reason is not StopReason.DAILY_LIMIT or not_before is None:
                    break
                checkpoint.set("not_before", not_before.isoformat())
                if not run.wait_for_midnight:
                    break
        return SendOutcome(
            stop.info,
            client.calls,
            controller.rate_limited,
            credits,
            balance,
            dict(client.statuses),
        )

    def _reach(self) -> Reach:
        """The hosts that have answered this DIR, kept in its checkpoint as they answer: a
        host name that does not resolve is a wrong address (64) only if it never has."""
        checkpoint = self.checkpoint
        configured = (host_of(self.api.base_url), host_of(self.api.auth_url))
        return Reach(
            checkpoint.reached_hosts(configured),
            on_new=lambda host: checkpoint.note_reached(host, self.now().isoformat()),
        )

    async def _tick_metrics(
        self,
        write: Callable[[Mapping[str, int], int, int], None],
        calls: Callable[[], tuple[Mapping[str, int], int]],
        credits: Callable[[], int],
    ) -> None:
        """Rewrite the metrics every `run.metrics_seconds` until the round ends (waits for
        a daily limit or a Retry-After included)."""
        while True:
            await anyio.sleep(self.run.metrics_seconds)
            statuses, rate_limited = calls()
            write(dict(statuses), rate_limited, credits())

    def _progress(self, job: str) -> Progress:
        """This round's bar or `run.progress` events, from where the work stands now."""
        counts = (self.counts or self.checkpoint.counts)()
        return Progress(
            total_rows=counts.rows,
            done_rows=counts.rows - counts.pending_rows,
            pending_requests=counts.requests_pending,
            bar=self.progress_bar,
            every_seconds=self.run.progress_seconds,
            job=job,
        )

    def _job(self, client: PartnerClient) -> Job[Any]:
        if self.job_for is not None:
            return self.job_for(client)
        return ValuationJob(client, self.checkpoint, now=self.now)

    async def _recover(self, client: PartnerClient, controller: RateController, stop: Stop) -> None:
        """Read back, by id, the paid answers that could not be read (`run/recovery`),
        once an invocation, before anything is sent."""
        found = recoverable(self.checkpoint)
        if not found:
            return
        job = RecoveryJob(client, self.checkpoint, found)
        log.info("run.recovery.reading", valuations=len(found))
        await pool_for(job, self.run, controller=controller, stop=stop, now=self.now).run()
        log.info("run.recovery.done", valuations=len(found), recovered=job.recovered)

    def _keep_pause(self, controller: RateController, stop: Stop) -> None:
        """A `Retry-After` the API gave outlives this invocation: kept in the checkpoint
        (the next one waits it out before its first call) and in the stop's not_before."""
        remaining = controller.pause_remaining()
        if remaining <= 0:
            return
        until = self.now() + dt.timedelta(seconds=remaining)
        self.checkpoint.set("pause_until", until.isoformat())
        if stop.info is not None and (stop.not_before is None or stop.not_before < until):
            stop.info = dataclasses.replace(stop.info, not_before=until)

    async def _wait_until(
        self, when: dt.datetime, stop: Stop, event: str = "run.daily_limit.sleeping"
    ) -> None:
        """Sleep until `when` (a second after it), waking at once on a signal."""
        if when <= self.now():
            return
        seconds = (when - self.now()).total_seconds() + 1
        log.info(event, until=when.isoformat(), seconds=round(seconds))
        with anyio.move_on_after(seconds):
            await stop.event.wait()


def stored_not_before(checkpoint: Checkpoint, now: Callable[[], dt.datetime]) -> dt.datetime | None:
    """The daily limit's `not_before` kept in the checkpoint (by any command that met it:
    the limit is the account's), while it is still to come on the run's clock `now`, the
    clock the pool took it on; None once it has passed. The gate of run, streets and
    verify: before it, no call."""
    stored = checkpoint.get("not_before")
    not_before = dt.datetime.fromisoformat(stored) if stored else None
    if not_before is None or now() >= not_before:
        return None
    return not_before


def pool_for(
    job: Job[ItemT],
    run: RunOptions,
    *,
    controller: RateController,
    stop: Stop,
    now: Callable[[], dt.datetime],
    max_credits: int | None = None,
    on_progress: Callable[[PoolStats], None] | None = None,
) -> WorkerPool[ItemT]:
    """A pool for `job` with the run's settings: every job is paced, retried and stopped
    alike (valuations, street analyses, read-backs)."""
    return WorkerPool(
        job=job,
        controller=controller,
        policy=RetryPolicy(max_attempts=run.max_attempts),
        stop=stop,
        concurrency=run.concurrency,
        max_credits=max_credits,
        outage_seconds=run.outage_seconds,
        # A few probes within the outage window, never more than 5 s apart.
        probe_interval=min(5.0, run.outage_seconds / 4),
        unrecognised_limit=run.unrecognised_limit,
        shutdown_grace_seconds=run.shutdown_grace_seconds,
        now=now,
        on_progress=on_progress,
    )


async def _stop_on_signals(stop: Stop) -> None:
    """The first SIGTERM or SIGINT stops the run gently; later ones are the same request."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            stop.trigger(StopReason.SIGNAL, f"received {signal.Signals(signum).name}")
