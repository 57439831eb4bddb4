"""`batchval split` at the command line (in this process: the `batchval` fixture; processes
where the hash seed is the point): stable shards, every row once, types kept."""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import json
import random
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import LIVE, InProcess, Ran, env_for, outputs, portfolio, run_cli

from batchval._internal.admin.split import shard_name
from batchval._internal.sandbox.server import RunningSandbox

ENV = {"PATH": "/usr/bin:/bin"}


def split(
    run: Callable[..., Ran | subprocess.CompletedProcess[str]],
    source: Path,
    out: Path,
    shards: int,
    *extra: str,
    env: dict[str, str] = ENV,
) -> None:
    """`batchval split` by `run`: the `batchval` fixture, or `run_cli` where the process is
    what is tested."""
    done = run("split", str(source), "--shards", str(shards), "--out", str(out), *extra, env=env)
    assert done.returncode == 0, done.stderr
    assert f"split {sum(1 for _ in rows_of(out, shards))} rows into {shards} shards" in done.stdout


def shard_files(out: Path, shards: int) -> list[Path]:
    return [out / shard_name(i, shards) for i in range(shards)]


def rows_of(out: Path, shards: int) -> list[dict[str, Any]]:
    return [row for path in shard_files(out, shards) for row in pq.read_table(path).to_pylist()]


def placement(out: Path, shards: int, key: str = "loan_id") -> dict[Any, int]:
    """Which shard each row (by `key`) landed in."""
    found: dict[Any, int] = {}
    for index, path in enumerate(shard_files(out, shards)):
        for value in pq.read_table(path).column(key).to_pylist():
            found[value] = index
    return found


def reorder_and_grow(source: Path, target: Path, extra: int) -> None:
    """The same rows in another order, with `extra` new rows among them."""
    with source.open(newline="", encoding="utf-8") as stream:
        header, *body = list(csv.reader(stream))
    grown = [
        *body,
        *([f"LN-NEW-{n:03d}", "SW1A 2AA", "flat", str(1 + n % 4), ""] for n in range(extra)),
    ]
    random.Random(7).shuffle(grown)
    with target.open("w", newline="", encoding="utf-8") as stream:
        csv.writer(stream).writerows([header, *grown])


@pytest.mark.parametrize("row_id", [None, "loan_id"], ids=["by-request", "by-row-id"])
@pytest.mark.slow
def test_same_row_same_shard_whatever_the_order_or_other_rows(
    tmp_path: Path, row_id: str | None, batchval: InProcess
) -> None:
    """Reordering the input and adding rows moves no row to another shard."""
    first = portfolio(tmp_path / "first.csv", 60)
    second = tmp_path / "second.csv"
    reorder_and_grow(first, second, extra=25)
    extra = ("--row-id", row_id) if row_id else ()
    split(batchval, first, tmp_path / "a", 5, *extra)
    split(batchval, second, tmp_path / "b", 5, *extra)
    before, after = placement(tmp_path / "a", 5), placement(tmp_path / "b", 5)
    assert len(set(before.values())) > 1, "every row in one shard: the test shows nothing"
    assert {k: after[k] for k in before} == before


@pytest.mark.slow
def test_placement_does_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    """Two processes with different PYTHONHASHSEED place every row alike."""
    source = portfolio(tmp_path / "book.csv", 40)
    split(run_cli, source, tmp_path / "a", 3, env={**ENV, "PYTHONHASHSEED": "1"})
    split(run_cli, source, tmp_path / "b", 3, env={**ENV, "PYTHONHASHSEED": "2"})
    assert placement(tmp_path / "a", 3) == placement(tmp_path / "b", 3)


@pytest.mark.slow
def test_union_of_shards_is_the_input(tmp_path: Path, batchval: InProcess) -> None:
    """Every input row is in exactly one shard, invalid rows and repeats included, and
    shards.json counts them."""
    source = portfolio(tmp_path / "book.csv", 50, duplicates=6)
    with source.open("a", encoding="utf-8") as stream:
        stream.write("LN-BAD-1,NOT A POSTCODE,castle,3,\n")  # refused by validation
    split(batchval, source, tmp_path / "out", 4)
    expected = pl.read_csv(source, infer_schema=False).rows()
    got = [tuple(r.values()) for r in rows_of(tmp_path / "out", 4)]
    assert sorted(got, key=str) == sorted(expected, key=str)
    manifest = json.loads((tmp_path / "out" / "shards.json").read_text())
    assert manifest["rows"] == 51
    assert [f["rows"] for f in manifest["files"]] == [
        pq.read_metadata(p).num_rows for p in shard_files(tmp_path / "out", 4)
    ]


@pytest.mark.slow
def test_parquet_types_and_empty_shards_keep_the_schema(
    tmp_path: Path, batchval: InProcess
) -> None:
    """A Parquet input's column types are kept in every shard, an empty one included."""
    table = pa.table(
        {
            "loan": pa.array([101, 102, 103], pa.int64()),
            "postcode": ["SW1A 2AA", "M1 1AE", "LS6 2AB"],
            "property_type": ["flat", "terraced", "detached"],
            "bedrooms": pa.array([2, 3, 4], pa.int32()),
            "balance": pa.array([decimal.Decimal("1.50")] * 3, pa.decimal128(12, 2)),
            "opened": pa.array([dt.date(2020, 1, d) for d in (1, 2, 3)], pa.date32()),
            "active": [True, False, True],
        }
    )
    source = tmp_path / "book.parquet"
    pq.write_table(table, source)
    split(batchval, source, tmp_path / "out", 8, "--row-id", "loan")
    schemas = [pq.read_schema(p) for p in shard_files(tmp_path / "out", 8)]
    assert all(s.equals(table.schema) for s in schemas), schemas
    assert sum(pq.read_metadata(p).num_rows for p in shard_files(tmp_path / "out", 8)) == 3
    assert sorted(r["loan"] for r in rows_of(tmp_path / "out", 8)) == [101, 102, 103]


@pytest.mark.slow
def test_csv_shards_keep_request_text_and_pass_through_types(
    tmp_path: Path, batchval: InProcess
) -> None:
    """A CSV's request fields stay the text read; other columns are typed as `run` passes
    them through (an integer stays an integer, a leading zero stays text)."""
    source = tmp_path / "book.csv"
    source.write_text(
        "account,seq,postcode,property_type,bedrooms\n"
        "007,1,SW1A 2AA,flat,02\n"
        "120,2,M1 1AE,terraced,3\n"
    )
    split(batchval, source, tmp_path / "out", 2)
    schema = pq.read_schema(shard_files(tmp_path / "out", 2)[0])
    assert schema.field("seq").type == pa.int64()
    assert schema.field("account").type == pa.string()
    assert schema.field("bedrooms").type == pa.string()
    assert {r["bedrooms"] for r in rows_of(tmp_path / "out", 2)} == {"02", "3"}


@pytest.mark.slow
def test_a_shard_makes_the_same_requests_and_keys(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """Each row valued from its shard gets the idempotency key it gets from the whole file."""
    source = portfolio(tmp_path / "book.csv", 12)
    split(batchval, source, tmp_path / "shards", 2, "--row-id", "loan_id")
    env = env_for(served, LIVE)
    whole = batchval(
        "run", str(source), "--out", str(tmp_path / "whole"), "--run-id", "r1", env=env
    )
    assert whole.returncode == 0, whole.stderr
    keys = dict(
        zip(*outputs(tmp_path / "whole")[0].select("loan_id", "idempotency_key"), strict=True)
    )
    for index, path in enumerate(shard_files(tmp_path / "shards", 2)):
        out = tmp_path / f"run-{index}"
        done = batchval("run", str(path), "--out", str(out), "--run-id", "r1", env=env)
        assert done.returncode == 0, done.stderr
        results = outputs(out)[0]
        for loan, key in zip(*results.select("loan_id", "idempotency_key"), strict=True):
            assert keys[loan] == key
    assert served.sandbox.ledger.keys_charged_twice() == []


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--shards", "0"], 64),
        (["--shards", "2", "--row-id", "no_such_column"], 64),
    ],
    ids=["zero-shards", "unknown-row-id"],
)
@pytest.mark.slow
def test_bad_arguments_exit_64(
    tmp_path: Path, args: list[str], code: int, batchval: InProcess
) -> None:
    """A shard count below 1 or a row id the input lacks: 64, nothing written."""
    source = portfolio(tmp_path / "book.csv", 5)
    done = batchval("split", str(source), "--out", str(tmp_path / "out"), *args, env=ENV)
    assert done.returncode == code, done.stderr
    assert not (tmp_path / "out" / "shards.json").exists()


@pytest.mark.slow
def test_another_split_in_dir_exits_64(tmp_path: Path, batchval: InProcess) -> None:
    """A DIR holding a split into another number of shards is refused, not mixed."""
    source = portfolio(tmp_path / "book.csv", 5)
    split(batchval, source, tmp_path / "out", 3)
    done = batchval("split", str(source), "--shards", "4", "--out", str(tmp_path / "out"), env=ENV)
    assert done.returncode == 64, done.stderr
    assert "split into 3" in done.stderr


@pytest.mark.slow
def test_unusable_input_exits_65(tmp_path: Path, batchval: InProcess) -> None:
    """An empty input file: 65 and one line."""
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    done = batchval("split", str(empty), "--shards", "2", "--out", str(tmp_path / "out"), env=ENV)
    assert done.returncode == 65, done.stderr
    assert done.stderr.startswith("batchval: input_unusable: ")
