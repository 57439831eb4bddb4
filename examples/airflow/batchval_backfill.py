"""A multi-day backfill: one book larger than the daily limit, valued over several days
into one directory.

The task runs `batchval run` on the same DIR each round. At the daily limit batchval
stops (exit 75) with `not_before` = midnight UTC; the task defers until then, without a
worker slot, and runs the same command again, which resumes where it stopped. Nothing
is charged twice: rows with an answer are never sent again.
"""

from __future__ import annotations

import datetime as dt
import os

from airflow.sdk import DAG, Param
from batchval_operator import PROJECT, BatchvalOperator

ACCOUNT = os.environ.get("BATCHVAL_ACCOUNT", "default")

with DAG(
    dag_id="batchval_backfill",
    schedule=None,  # started by hand, once
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    params={
        "input": Param(str(PROJECT / "sample_inputs" / "portfolio.csv"), type="string"),
        "out_dir": Param(str(PROJECT / "runs" / "backfill"), type="string"),
    },
    tags=["batchval"],
) as dag:
    BatchvalOperator(
        task_id="backfill",
        arguments=["run", "{{ params.input }}", "--out", "{{ params.out_dir }}"],
        out_dir="{{ params.out_dir }}",
        conn_id=f"batchval_{ACCOUNT}",
        pool=f"batchval_{ACCOUNT}",
        max_rounds=200,  # a 500,000-row book at 5,000 calls a day is 100 days
    )
