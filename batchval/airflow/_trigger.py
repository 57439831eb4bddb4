"""RoundTrigger: the wait between two rounds of BatchvalOperator, run by the triggerer.

It is Airflow's DateTimeTrigger (the same wait for a moment), whose event also carries
the next round's number and the run's id (`rounds.round_event`). The real triggerer
resumes the task with the deferral's own kwargs and the event; `airflow dags test` runs
the trigger inline and resumes the task with the event alone (Airflow 3.3), which
dropped the round and the run's id before: carried in both, `max_rounds` counts and the
run keeps its id whichever path Airflow takes.

The triggerer imports this module by its path: batchval must be installed in the
triggerer's environment too (docs/how-to/airflow.md).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

from airflow.providers.standard.triggers.temporal import DateTimeTrigger
from airflow.triggers.base import TriggerEvent

from batchval.airflow import _rounds as rounds


class RoundTrigger(DateTimeTrigger):
    """Fires at `moment` with the next round's number and the run's id in its event."""

    def __init__(self, moment: dt.datetime, *, round_number: int, run_id: str | None) -> None:
        super().__init__(moment=moment)
        self.round_number = round_number
        self.run_id = run_id

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"moment": self.moment, "round_number": self.round_number, "run_id": self.run_id},
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        async for _ in super().run():  # DateTimeTrigger's own wait, then its one event
            yield TriggerEvent(rounds.round_event(self.round_number, self.run_id, self.moment))
