"""Downstream of the nightly book: scheduled on the asset `batchval_nightly_book`, it reads
what the night did from the asset event's `extra` (run id, place, rows valued, problems,
credits, mode), set by BatchvalOperator's final round, and logs it.

A real DAG would load the night's results from `extra["place"]` (`results.parquet` there)
into the lender's warehouse.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from airflow.sdk import DAG, Asset, task

NIGHTLY_BOOK = Asset(name="batchval_nightly_book")

with DAG(
    dag_id="batchval_after_the_night",
    schedule=[NIGHTLY_BOOK],
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    tags=["batchval"],
) as dag:

    @task(inlets=[NIGHTLY_BOOK])
    def read_the_night(*, inlet_events: Any) -> dict[str, Any]:
        night = dict(inlet_events[NIGHTLY_BOOK][-1].extra)  # the latest night's event
        print("the night's asset event:", json.dumps(night, sort_keys=True))
        return night

    read_the_night()
