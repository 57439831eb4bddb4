"""A book too large for one account or one worker, valued in shards.

`batchval split` cuts the input into N shards by a stable hash of the row identity (the
same row always lands in the same shard, so a re-run or a retry values the same rows in
the same shard's DIR). Dynamic task mapping runs one task per shard, each with its own
DIR, its own account's credentials (the Airflow connection `batchval_account_<k>`) and
that account's one-slot pool, so Airflow's executors (Celery, Kubernetes) spread the
work over machines while batchval itself never coordinates machines.

This example reads `shards.json` from a directory, which the shards' tasks then read:
with several workers, `out_root` must be a disk every worker sees. (`split --out
s3://...` publishes the shards at a URL instead, and `run` takes a shard's URL as its
INPUT; reading `shards.json` there is the part this example leaves out.)
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, task

from batchval.airflow import BatchvalOperator

# The batchval the operator runs too: BATCHVAL_BIN, else the one beside this interpreter.
BATCHVAL = (
    [os.environ["BATCHVAL_BIN"]]
    if os.environ.get("BATCHVAL_BIN")
    else [sys.executable, "-m", "batchval"]
)

with DAG(
    dag_id="batchval_sharded",
    schedule=None,
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    catchup=False,
    params={
        "input": Param("/data/books/portfolio.parquet", type="string"),
        "out_root": Param("/data/valuations/sharded", type="string"),
        "shards": Param(2, type="integer", minimum=1),
        "accounts": Param(2, type="integer", minimum=1),
        "row_id": Param("loan_id", type=["string", "null"]),
    },
    tags=["batchval"],
) as dag:

    @task
    def split(params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Write the shards; one set of task arguments per shard."""
        assert params is not None
        out = Path(params["out_root"])
        command = [*BATCHVAL, "split", params["input"]]
        command += ["--shards", str(params["shards"])]
        command += ["--out", str(out / "shards")]
        if params["row_id"]:
            command += ["--row-id", params["row_id"]]
        subprocess.run(command, check=True)
        listing = json.loads((out / "shards" / "shards.json").read_text())
        shards = []
        for number, shard in enumerate(listing["files"]):
            if shard["rows"] == 0:  # nothing to value, and `run` refuses an empty input (65)
                continue
            account = number % int(params["accounts"])
            shard_dir = str(out / f"shard-{number}")
            shards.append(
                {
                    "arguments": ["run", str(out / "shards" / shard["path"]), "--out", shard_dir],
                    "out_dir": shard_dir,
                    "conn_id": f"batchval_account_{account}",
                    "pool": f"batchval_account_{account}",
                }
            )
        return shards

    BatchvalOperator.partial(task_id="value_shard", retries=2).expand_kwargs(split())
