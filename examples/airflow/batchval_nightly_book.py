"""The nightly book: every night, `batchval run --book` revalues what is stale, new or
changed in a lender's book, within the night's budget, into a run of its own at an
`s3://` place (or `az://`: the places and `storage_conn_id` are params), then writes that
night's report beside it.

The book (`--book`, here at a URL too) is the only memory between nights: the latest
valuation of every loan, carried forward; the rows left for a later night by the budget
are `deferred` and the night still exits 0 (docs/tutorials/nightly-book.md).

The run id. Each night's run is named by the UTC day its first round ran
(`day-YYYY-MM-DD`), kept in the run's memory at its place; `{{ ds }}` names the place
(`{{ params.out_root }}/{{ ds }}`), not the run. A round that resumes the night (a daily
limit, a moved task, a retry) resumes that run with its id and its keys, whatever the day
it runs on; a night cleared and run again from an empty place on a later day is a new run
and values again (docs/explanation/keys-and-charges.md).

Its final round records an event on the asset `batchval_nightly_book`, whose `extra`
says what the night did (run id, place, rows valued, problems, credits, mode):
`batchval_after_the_night` is scheduled on it.
"""

from __future__ import annotations

import datetime as dt
import os

from airflow.sdk import DAG, Asset, Param

from batchval.airflow import BatchvalOperator

ACCOUNT = os.environ.get("BATCHVAL_ACCOUNT", "default")
NIGHTLY_BOOK = Asset(name="batchval_nightly_book")

with DAG(
    dag_id="batchval_nightly_book",
    schedule="30 1 * * *",  # 01:30 UTC, after the API's daily count has restarted
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    max_active_runs=1,  # one night at a time: a night carries the book the last one left
    params={
        "input": Param("s3://my-bucket/books/loans.parquet", type="string"),
        "book": Param("s3://my-bucket/valuations/book.parquet", type="string"),
        "out_root": Param("s3://my-bucket/valuations/nights", type="string"),
        "row_id": Param("loan_id", type="string"),
        "max_calls": Param(4_500, type="integer"),  # the night's budget, under the daily limit
        # The store's connection: `aws` for s3:// places, `wasb` for az:// (airflow.md).
        "storage_conn_id": Param("batchval_storage", type="string"),
    },
    tags=["batchval"],
) as dag:
    night = "{{ params.out_root }}/{{ ds }}"
    value = BatchvalOperator(
        task_id="revalue_book",
        arguments=[
            "run",
            "{{ params.input }}",
            "--out",
            night,
            "--book",
            "{{ params.book }}",
            "--row-id",
            "{{ params.row_id }}",
            "--max-calls",
            "{{ params.max_calls }}",
            "--live",  # a production night never falls back to the embedded sandbox
        ],
        out_dir=night,
        conn_id=f"batchval_{ACCOUNT}",
        storage_conn_id="{{ params.storage_conn_id }}",
        pool=f"batchval_{ACCOUNT}",
        retries=2,  # only for the unexpected (a killed worker): 75 defers, 64/65/70/77 fail
        retry_delay=dt.timedelta(minutes=10),
        outlets=[NIGHTLY_BOOK],
    )
    report = BatchvalOperator(
        task_id="report",
        arguments=["report", night],
        out_dir=night,
        storage_conn_id="{{ params.storage_conn_id }}",
    )
    value >> report
