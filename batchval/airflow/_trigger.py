"""RoundTrigger: the wait between two rounds of BatchvalOperator, run by the triggerer.

It waits for a moment, as Airflow's DateTimeTrigger does, and its event also carries
the next round's number and the run's id (`rounds.round_event`). It stands on Airflow's
own `BaseTrigger`, not on the standard provider's DateTimeTrigger, whose package declares no
types (`py.typed`): a type checker knows this class whole. The real triggerer
resumes the task with the deferral's own kwargs and the event; `airflow dags test` runs
the trigger inline and resumes the task with the event alone (Airflow 3.3), which
dropped the round and the run's id before: carried in both, `max_rounds` counts and the
run keeps its id whichever path Airflow takes.

The triggerer imports this module by its path: batchval must be installed in the
triggerer's environment too (docs/how-to/airflow.md).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from batchval.airflow import _rounds as rounds

# The longest sleep before the clock is read again: whatever the clock does meanwhile (set
# back or forward), the wait ends within this much of the moment as the clock reads it.
STEP_SECONDS = 60.0


class RoundTrigger(BaseTrigger):
    """Fires at `moment` with the next round's number and the run's id in its event."""

    def __init__(self, moment: dt.datetime, *, round_number: int, run_id: str | None) -> None:
        super().__init__()
        if moment.tzinfo is None:
            raise ValueError("RoundTrigger needs an aware moment, not a naive one")
        self.moment = moment
        self.round_number = round_number
        self.run_id = run_id

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"moment": self.moment, "round_number": self.round_number, "run_id": self.run_id},
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        # A moment on the clock, read again after each step: there is no event to wait on.
        while (left := (self.moment - dt.datetime.now(dt.UTC)).total_seconds()) > 0:  # noqa: ASYNC110
            await asyncio.sleep(min(left, STEP_SECONDS))
        yield TriggerEvent(rounds.round_event(self.round_number, self.run_id, self.moment))
