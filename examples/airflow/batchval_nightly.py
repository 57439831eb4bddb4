"""Nightly revaluation: value the portfolio into a run of its own each night, then write
the run's report beside it.

One task at a time per API account (the pool `batchval_<account>` has one slot): two
runs on one account would only share its rate limit. A daily-limit stop defers the task
until midnight UTC (see batchval.airflow.BatchvalOperator); a stop a person must fix fails it at
once. With several workers keep the runs on object storage (`out_root` an `s3://` URL,
credentials from the `batchval_storage` connection): the report task may run on another
worker than the run did.
"""

from __future__ import annotations

import datetime as dt
import os

from airflow.sdk import DAG, Param

from batchval.airflow import BatchvalOperator

ACCOUNT = os.environ.get("BATCHVAL_ACCOUNT", "default")

with DAG(
    dag_id="batchval_nightly",
    schedule="30 1 * * *",  # 01:30 UTC, after the day's daily limit has reset
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    max_active_runs=1,
    params={
        "input": Param("s3://my-bucket/books/portfolio.parquet", type="string"),
        "out_root": Param("s3://my-bucket/valuations/nightly", type="string"),
    },
    tags=["batchval"],
) as dag:
    out_dir = "{{ params.out_root }}/{{ ds }}"
    value = BatchvalOperator(
        task_id="value_portfolio",
        arguments=["run", "{{ params.input }}", "--out", out_dir],
        out_dir=out_dir,
        conn_id=f"batchval_{ACCOUNT}",
        storage_conn_id="batchval_storage",
        pool=f"batchval_{ACCOUNT}",
        retries=2,  # only for the unexpected (a killed worker): 75 defers, 64/65/70/77 fail
        retry_delay=dt.timedelta(minutes=10),
    )
    report = BatchvalOperator(
        task_id="report",
        arguments=["report", out_dir],
        out_dir=out_dir,
        storage_conn_id="batchval_storage",
    )
    value >> report
