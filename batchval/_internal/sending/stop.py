"""`Stop`: the first reason a run stopped, shared by every worker of the pool and by the
signal watcher. Later reasons are ignored: the first one is what
summary.json's `stop` and the exit code report."""

from __future__ import annotations

import datetime as dt

import anyio

from batchval._internal import logs
from batchval._internal.outcome import StopInfo, StopReason

log = logs.get_logger()


class Stop:
    """The first reason the run stopped, shared by every worker (and by the signal
    watcher)."""

    def __init__(self) -> None:
        self.info: StopInfo | None = None
        self.event = anyio.Event()

    def trigger(
        self,
        reason: StopReason,
        detail: str,
        not_before: dt.datetime | None = None,
        status: int | None = None,
    ) -> None:
        if self.info is None:
            self.info = StopInfo(reason, detail, not_before, status)
            # Named `run.` for any product's stop: people's checks read it (docs, the Airflow
            # example's check), so the name is kept, unlike the engine's other events.
            log.warning("run.stopping", reason=reason.value, detail=detail, status=status)
            self.event.set()

    @property
    def is_set(self) -> bool:
        return self.info is not None

    @property
    def reason(self) -> StopReason | None:
        return self.info.reason if self.info else None

    @property
    def detail(self) -> str:
        return self.info.detail if self.info else ""

    @property
    def not_before(self) -> dt.datetime | None:
        return self.info.not_before if self.info else None

    @property
    def status(self) -> int | None:
        return self.info.status if self.info else None
