"""A multi-day backfill: one book larger than the daily limit, valued over several days
into one run kept on object storage.

The task runs `batchval run` on the same run's place each round. At the daily limit
batchval stops (exit 75) with `not_before` = midnight UTC; the task defers until then,
without a worker slot, and runs the same command again, perhaps on another worker with a
blank disk: the run's memory, its lease and its outputs live at `out_dir` (an `s3://`
or `az://` URL), so the round resumes where the last one stopped and nothing is charged twice.

Connections: `batchval_<account>` for the API, `batchval_storage` (an `aws` connection,
or Azure's `wasb`) for the object store; the operator reads the latter only when a URL is
involved, so a local `out_dir` works on one machine without it.
"""

from __future__ import annotations

import datetime as dt
import os

from airflow.sdk import DAG, Param

from batchval.airflow import BatchvalOperator

ACCOUNT = os.environ.get("BATCHVAL_ACCOUNT", "default")

with DAG(
    dag_id="batchval_backfill",
    schedule=None,  # started by hand, once
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    params={
        "input": Param("s3://my-bucket/books/backfill.parquet", type="string"),
        "out_dir": Param("s3://my-bucket/valuations/backfill", type="string"),
    },
    tags=["batchval"],
) as dag:
    BatchvalOperator(
        task_id="backfill",
        arguments=["run", "{{ params.input }}", "--out", "{{ params.out_dir }}"],
        out_dir="{{ params.out_dir }}",
        conn_id=f"batchval_{ACCOUNT}",
        storage_conn_id="batchval_storage",
        pool=f"batchval_{ACCOUNT}",
        max_rounds=200,  # a 500,000-row book at 5,000 calls a day is 100 days
    )
