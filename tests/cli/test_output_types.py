"""Whole runs (the CLI in this process, killed runs as processes, against the sandbox):
pass-through columns keep their input types in results.parquet and problems.parquet, through
a kill and a resume, an --accept-changes run and a DIR of an older checkpoint; commentary
and rebuild_cost are columns only when asked for."""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import BATCHVAL, InProcess, assert_accounted, assert_paid_once, env_for, wait_until
from typed_book import POSTCODES, TYPES, book, write

from batchval._internal.sandbox.config import Faults
from batchval._internal.sandbox.server import RunningSandbox

# End to end: the CLI against the sandbox (`make test-fast` leaves it out).
pytestmark = pytest.mark.slow

EXTRAS = {"commentary", "rebuild_cost"}


def passthrough_of(out: Path, names: list[str]) -> tuple[list[dict[str, Any]], pa.Schema]:
    """Every row's pass-through values, results and problems together in row order, and
    the columns' types, which must be the same in both files."""
    results = pq.read_table(out / "results.parquet")
    problems = pq.read_table(out / "problems.parquet")
    types = [results.schema.field(name).type for name in names]
    assert [problems.schema.field(name).type for name in names] == types
    rows = [
        row
        for table in (results, problems)
        for row in table.select(["row_number", *names]).to_pylist()
    ]
    rows.sort(key=lambda row: row["row_number"])
    assert [row.pop("row_number") for row in rows] == list(range(1, len(rows) + 1))
    return rows, pa.schema(list(zip(names, types, strict=True)))


def assert_passthrough(out: Path, table: pa.Table, names: list[str] = TYPES.names) -> None:
    rows, schema = passthrough_of(out, names)
    assert schema == table.select(names).schema
    assert rows == table.select(names).to_pylist()


def test_parquet_passthrough_types_survive_a_run(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """Int64, Decimal(12,2), Date, Datetime (naive and UTC), Boolean and text pass-through
    columns come out with the same types and values in results and problems; a run
    without extras has no commentary or rebuild_cost column, and converts to CSV."""
    table = book(20)
    out = tmp_path / "out"
    done = batchval("run", str(write(table, tmp_path / "book.parquet")), "--out", str(out),
                   env=env_for(served))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert_passthrough(out, table)
    results = pl.read_parquet(out / "results.parquet")
    problems = pl.read_parquet(out / "problems.parquet")
    assert (results.height, sorted(problems["row_number"].to_list())) == (18, [3, 5])
    assert EXTRAS.isdisjoint(results.columns)
    results.write_csv(tmp_path / "results.csv")
    problems.write_csv(tmp_path / "problems.csv")
    assert pl.read_csv(tmp_path / "results.csv")["loan"].to_list()[:2] == [1000, 1001]


def test_csv_passthrough_keeps_polars_types(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """CSV pass-through columns come out in the types polars infers for them: integers,
    floats, booleans and text."""
    source = tmp_path / "book.csv"
    lines = ["postcode,property_type,bedrooms,loan,rate,active,note,account"]
    lines += [f"{POSTCODES[n % 6]},flat,2,{n},{n / 4},{'true' if n % 2 else 'False'},n{n},0{n}"
              for n in range(6)]  # fmt: skip
    source.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    assert batchval("run", str(source), "--out", str(out), env=env_for(served)).returncode == 0
    names = ["loan", "rate", "active", "note", "account"]
    rows, schema = passthrough_of(out, names)
    assert dict(zip(schema.names, schema.types, strict=True)) == {
        "loan": pa.int64(),
        "rate": pa.float64(),
        "active": pa.bool_(),
        "note": pa.string(),
        "account": pa.string(),  # 00, 01, ...: a leading zero, kept as text
    }
    inferred = pl.read_csv(source, infer_schema_length=None).schema
    assert [inferred[name] for name in names[:4]] == [pl.Int64, pl.Float64, pl.Boolean, pl.String]
    assert rows[1] == {"loan": 1, "rate": 0.25, "active": True, "note": "n1", "account": "01"}


@pytest.mark.parametrize(
    ("cells", "settings", "extras"),
    [
        (["", "commentary", ""], "", {"commentary"}),
        (["", "rebuildCost", ""], "", {"rebuild_cost"}),
        (["", "", ""], "run: {include: [commentary, rebuildCost]}\n", EXTRAS),
        (["", "", ""], "", set()),
    ],
)
def test_extras_columns_exist_only_when_asked(
    served: RunningSandbox,
    tmp_path: Path,
    cells: list[str],
    settings: str,
    extras: set[str],
    batchval: InProcess,
) -> None:
    """commentary and rebuild_cost are columns when the run or any one row asks for them
    (null on the rows that did not), and absent otherwise."""
    source = tmp_path / "book.csv"
    lines = ["postcode,property_type,bedrooms,include"]
    lines += [f"{POSTCODES[n]},terraced,3,{cell}" for n, cell in enumerate(cells)]
    source.write_text("\n".join(lines) + "\n")
    (tmp_path / "run.yaml").write_text(settings or "{}\n")
    out = tmp_path / "out"
    done = batchval("run", str(source), "--out", str(out), "--config", str(tmp_path / "run.yaml"),
                   env=env_for(served))  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = pl.read_parquet(out / "results.parquet")
    assert EXTRAS & set(results.columns) == extras
    for name in extras:
        asked = [bool(cell) or bool(settings) for cell in cells]
        assert [v is not None for v in results[name].to_list()] == asked


def _wait(condition: Callable[[], bool], running: subprocess.Popen[bytes], what: str) -> None:
    # Every millisecond: the kill must land inside the stage it is aimed at.
    wait_until(condition, 60, what, process=running, every=0.001)


def _checkpoint_says(out: Path, query: str) -> Any:
    path = out / "checkpoint.sqlite"
    if not path.exists():
        return None
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0.05)
    try:
        return db.execute(query).fetchone()[0]
    except sqlite3.OperationalError:  # not created yet, or busy: ask again
        return None
    finally:
        db.close()


def _rows_stored(out: Path) -> int:
    return int(_checkpoint_says(out, "SELECT COUNT(*) FROM rows") or 0)


def _ingest_complete(out: Path) -> bool:
    found = _checkpoint_says(out, "SELECT COUNT(*) FROM meta WHERE name = 'ingest_complete'")
    return bool(found)


# Rows of the killed run: two a batch, so that the first kill lands while the input is
# read (each batch a commit; 300 rows took 23 s of CPU over the three invocations).
ROWS_KILLED = 120


def test_killed_and_resumed_runs_keep_the_passthrough(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """kill -9 while the input is being read (some batches stored) and again with calls
    in flight; the resumed run completes with every pass-through value in its place."""
    served.sandbox.set_faults(Faults(latency_ms=40))
    table = book(ROWS_KILLED, distinct=30)
    source = write(table, tmp_path / "book.parquet")
    (tmp_path / "run.yaml").write_text("input: {batch_rows: 2}\nrun: {concurrency: 2}\n")
    out = tmp_path / "out"
    command = [BATCHVAL, "run", str(source), "--out", str(out), "--config",
               str(tmp_path / "run.yaml")]  # fmt: skip

    def kill_when(condition: Callable[[], bool], what: str) -> None:
        with subprocess.Popen(command, env=env_for(served), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) as running:  # fmt: skip
            _wait(condition, running, what)
            running.kill()
            running.wait(timeout=10)

    kill_when(lambda: _rows_stored(out) >= 20, "rows stored")
    assert not _ingest_complete(out), "killed while reading the input"
    assert 20 <= _rows_stored(out) < ROWS_KILLED
    kill_when(lambda: len(served.sandbox.ledger.charges) >= 5, "calls answered")
    assert 5 <= len(served.sandbox.ledger.charges) < 30
    done = batchval("run", *command[2:], env=env_for(served))
    assert done.returncode == 0, done.stderr
    assert_accounted(out, ROWS_KILLED)
    assert_paid_once(served, out)
    assert_passthrough(out, table)


def test_accept_changes_writes_the_new_passthrough(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """With --accept-changes the input is read again: the outputs carry the new values and
    types (a column retyped, one added), and unchanged requests are not paid again."""
    first = book(20)
    source = write(first, tmp_path / "book.parquet")
    out = tmp_path / "out"
    assert batchval("run", str(source), "--out", str(out), env=env_for(served)).returncode == 0
    charged = len(served.sandbox.ledger.charges)
    second = (
        first.set_column(3, "loan", pa.array([f"L-{n}" for n in range(20)]))
        .set_column(2, "bedrooms", pa.array([5, *first["bedrooms"].to_pylist()[1:]]))
        .append_column("rate", pa.array([n / 8 for n in range(20)], pa.float32()))
    )
    write(second, source)
    again = batchval("run", str(source), "--out", str(out), "--accept-changes", env=env_for(served))
    assert again.returncode == 0, again.stderr
    assert_passthrough(out, second, [*TYPES.names, "rate"])
    assert len(served.sandbox.ledger.charges) == charged + 1  # only row 1's new request


def test_a_dir_of_an_older_checkpoint_reads_its_input_again(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A DIR whose checkpoint kept pass-through values as JSON text (schema 2) resumes:
    its input is read again, nothing is sent, and the outputs are typed."""
    table = book(20)
    source = write(table, tmp_path / "book.parquet")
    out = tmp_path / "out"
    assert batchval("run", str(source), "--out", str(out), env=env_for(served)).returncode == 0
    calls = len(served.sandbox.ledger.requests)
    db = sqlite3.connect(out / "checkpoint.sqlite")
    db.executescript(  # as batchval 0.1 and schema 2 left it
        "ALTER TABLE rows ADD COLUMN passthrough TEXT NOT NULL DEFAULT '{}';"
        "DELETE FROM passthrough;"
        "DELETE FROM meta WHERE name = 'passthrough_schema';"
        "UPDATE meta SET value = '2' WHERE name = 'schema_version';"
    )
    db.close()
    done = batchval("run", str(source), "--out", str(out), env=env_for(served))
    assert done.returncode == 0, done.stderr
    assert len(served.sandbox.ledger.requests) == calls
    assert_passthrough(out, table)
