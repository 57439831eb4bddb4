"""Progress for people and machines: a bar on a terminal, periodic JSON events elsewhere."""

from __future__ import annotations

import time
from types import TracebackType

from rich.progress import BarColumn, TextColumn
from rich.progress import Progress as RichProgress
from rich.table import Column

from batchval._internal import logs
from batchval._internal.sending.pool import PoolStats

log = logs.get_logger()

# What the bar says a job is doing, by the job's name; `run.progress` events carry the
# name itself (`job`), so that a verify's progress in batchval.log is not read as a run's.
LABELS = {"valuation": "valuing", "street": "reading", "verify": "verifying"}


class Progress:
    def __init__(
        self,
        *,
        pending_requests: int,
        bar: bool,
        every_seconds: float,
        job: str = "valuation",
    ) -> None:
        self._job = job
        label = LABELS.get(job, "reading")
        self._pending = pending_requests
        self._every = every_seconds
        self._started = time.monotonic()
        self._last_event = self._started
        self._bar: RichProgress | None = None
        if bar:
            # On the log's console: a warning logged meanwhile is printed above the bar.
            # The bar counts distinct requests (one answer settles every row asking it).
            # Its figures fit 80 columns for a million requests: the bar alone takes
            # what is left (`bar_width=None`, `expand`); the rows are in the summary.
            self._bar = RichProgress(
                TextColumn(label),
                BarColumn(bar_width=None),
                TextColumn(
                    "{task.completed}/{task.total} requests {task.percentage:>3.0f}% "
                    "{task.fields[rate]:.1f}/s {task.fields[credits]} credits "
                    "ETA {task.fields[eta]}",
                    table_column=Column(no_wrap=True),
                ),
                console=logs.console(),
                transient=False,
                expand=True,
            )
            self._task = self._bar.add_task(
                label, total=pending_requests, rate=0.0, credits=0, eta="-:--:--"
            )

    def __enter__(self) -> Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.stop()

    def update(self, stats: PoolStats) -> None:
        """Called after every request the pool finishes with (answered or left pending)."""
        finished = stats.valued + stats.problems + stats.left_pending
        now = time.monotonic()
        rate = finished / max(now - self._started, 1e-6)
        if self._bar is not None:
            left = max(0, self._pending - finished)
            eta = _clock(left / rate) if rate > 0 else "-:--:--"
            self._bar.update(
                self._task, completed=finished, rate=rate, credits=stats.credits, eta=eta
            )
            return
        if now - self._last_event >= self._every:
            self._last_event = now
            remaining = max(0, self._pending - finished)
            # Named `run.` for any product's job: docs/how-to/metrics-and-logs.md documents
            # it and airflow/_tasklog and the report read it, so the name is kept.
            log.info(
                "run.progress",
                job=self._job,
                requests_finished=finished,
                requests_remaining=remaining,
                valued=stats.valued,
                problems=stats.problems,
                left_pending=stats.left_pending,
                calls=stats.calls,
                credits=stats.credits,
                per_second=round(rate, 2),
                eta_seconds=round(remaining / rate) if rate > 0 else None,
            )


def _clock(seconds: float) -> str:
    """`5:55:04`: hours, minutes and seconds, as the bar shows a time left."""
    whole = round(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"
