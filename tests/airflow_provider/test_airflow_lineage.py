"""batchval/airflow/_lineage.py: a task's datasets named as OpenLineage's naming spec names
them, and what a round's status adds (rows, bytes, columns, the run's figures). The events
themselves, through the OpenLineage provider's file transport, are `make airflow-check`'s."""

from __future__ import annotations

import os
from typing import Any

import pytest

from batchval.airflow._lineage import Dataset, azure_account, lineage_of, named

ACCOUNT = {"AZURE_STORAGE_ACCOUNT_NAME": "lenderdata"}


@pytest.mark.parametrize(
    ("place", "environ", "expected"),
    [
        ("s3://books/nights/2026-11-25/results.parquet", {},
         ("s3://books", "nights/2026-11-25/results.parquet")),
        ("az://valuations/nights/results.parquet", ACCOUNT,
         ("wasbs://valuations@lenderdata.dfs.core.windows.net", "nights/results.parquet")),
        ("abfs://valuations/book.parquet", ACCOUNT,
         ("abfss://valuations@lenderdata.dfs.core.windows.net", "book.parquet")),
        ("abfss://valuations@other.dfs.core.windows.net/book.parquet", ACCOUNT,
         ("abfss://valuations@other.dfs.core.windows.net", "book.parquet")),
        ("az://valuations/book.parquet", {},  # no account known: the container alone
         ("wasbs://valuations", "book.parquet")),
        ("/data/loans.csv", {}, ("file", "/data/loans.csv")),
        ("file:///data/loans.csv", {}, ("file", "/data/loans.csv")),
        ("loans.csv", {}, ("file", os.path.abspath("loans.csv"))),
    ],
)  # fmt: skip
def test_places_are_named_as_the_naming_spec_says(
    place: str, environ: dict[str, str], expected: tuple[str, str]
) -> None:
    assert named(place, environ) == expected


@pytest.mark.parametrize(
    ("environ", "account"),
    [
        ({"AZURE_STORAGE_ACCOUNT": "one"}, "one"),
        ({"AZURE_STORAGE_CONNECTION_STRING": "DefaultEndpointsProtocol=https;AccountName=two;"
          "AccountKey=c2VjcmV0"}, "two"),
        ({"AZURE_STORAGE_ENDPOINT": "http://127.0.0.1:10000/devstoreaccount1"}, "devstoreaccount1"),
        ({"AZURE_STORAGE_ENDPOINT": "https://three.blob.core.windows.net"}, "three"),
        ({}, ""),
    ],
)  # fmt: skip
def test_the_azure_account_comes_from_the_round_s_environment(
    environ: dict[str, str], account: str
) -> None:
    assert azure_account(environ) == account


def _status(**more: Any) -> dict[str, Any]:
    columns = [{"name": "row_number", "type": "int64", "description": "The row's position."}]
    return {
        "run_id": "day-2026-11-25",
        "mode": "live",
        "exit_code": 0,
        "invocations": 2,
        "rows": {"valued": 38, "problems": 2},
        "credits_charged": {"this_invocation": 100, "total": 380},
        "files": [
            {"name": "results.parquet", "rows": 38, "bytes": 23_000, "columns": columns},
            {"name": "problems.parquet", "rows": 2, "bytes": 9_000, "columns": columns},
            {"name": "charges.parquet", "rows": 38, "bytes": 8_000, "columns": columns},
        ],
        **more,
    }


def test_before_the_run_the_input_book_and_written_files_are_named() -> None:
    arguments = ["run", "s3://in/loans.csv", "--out", "s3://out/night",
                 "--book", "s3://out/book.parquet", "--live"]  # fmt: skip
    seen = lineage_of(arguments, "s3://out/night/", {})
    assert seen.inputs == (Dataset("s3://in", "loans.csv"), Dataset("s3://out", "book.parquet"))
    assert seen.outputs == (
        Dataset("s3://out", "night/results.parquet"),
        Dataset("s3://out", "night/problems.parquet"),
        Dataset("s3://out", "book.parquet"),
    )
    assert seen.run["command"] == "run"
    assert seen.run["runId"] is None


def test_after_a_round_each_file_has_its_rows_bytes_columns_and_the_run_its_figures() -> None:
    status = _status(book={"path": "az://books/book.parquet", "rows": {"carried": 4}})
    seen = lineage_of(
        ["run", "az://books/loans.csv", "--out", "az://books/night"],
        "az://books/night",
        ACCOUNT,
        status=status,
        exit_code=0,
        rounds=3,
    )
    namespace = "wasbs://books@lenderdata.dfs.core.windows.net"
    assert [(d.namespace, d.name, d.rows, d.size) for d in seen.outputs] == [
        (namespace, "night/results.parquet", 38, 23_000),
        (namespace, "night/problems.parquet", 2, 9_000),
        (namespace, "night/charges.parquet", 38, 8_000),
        (namespace, "book.parquet", None, None),  # the book's place from the summary
    ]
    assert seen.outputs[0].columns[0]["description"] == "The row's position."
    assert Dataset(namespace, "book.parquet") in seen.inputs
    assert seen.run == {
        "command": "run",
        "place": "az://books/night",
        "runId": "day-2026-11-25",
        "mode": "live",
        "invocations": 2,
        "taskRounds": 3,
        "creditsThisInvocation": 100,
        "creditsTotal": 380,
        "rowsValued": 38,
        "rowsWithProblems": 2,
        "exitCode": 0,
    }


def test_a_report_reads_the_run_s_files_and_writes_its_page_only() -> None:
    """The status a report's round reads is the run's: its files are not the report's."""
    seen = lineage_of(["report", "/runs/night"], "/runs/night", {}, status=_status())
    assert seen.inputs == (
        Dataset("file", "/runs/night/results.parquet"),
        Dataset("file", "/runs/night/problems.parquet"),
    )
    assert seen.outputs == (Dataset("file", "/runs/night/report.html"),)


def test_a_failed_round_keeps_its_exit_code_in_the_run_facet() -> None:
    seen = lineage_of(["run", "/in.csv", "--out", "/o"], "/o", {}, status={}, exit_code=77)
    assert seen.run["exitCode"] == 77
    assert [d.name for d in seen.outputs] == ["/o/results.parquet", "/o/problems.parquet"]
