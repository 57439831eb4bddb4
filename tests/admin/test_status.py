"""batchval/_internal/admin/status.py: `status DIR --json` after a run gives that run's last
invocation's own figures (calls, credits, 429s, times), as its summary.json did."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from support import InProcess, env_for, portfolio

from batchval._internal.sandbox.server import RunningSandbox

# The figures of one invocation, in summary.json and `status --json` alike.
OWN = ("calls", "credits_charged", "rate_limited", "started_at", "finished_at", "seconds")


class _Cli:
    """`run` and `status --json` by the command line in this process (`batchval`)."""

    def __init__(self, batchval: InProcess, served: RunningSandbox) -> None:
        self._batchval, self._env = batchval, env_for(served)

    def run(self, source: Path, out: Path, *more: str) -> int:
        ran = self._batchval("run", str(source), "--out", str(out), *more, env=self._env)
        assert ran.returncode in (0, 75), ran.stderr
        return ran.returncode

    def status(self, out: Path) -> dict[str, Any]:
        ran = self._batchval("status", str(out), "--json", env=self._env)
        found: dict[str, Any] = json.loads(ran.stdout)
        assert found["exit_code"] == ran.returncode
        return found


@pytest.fixture
def cli(batchval: InProcess, served: RunningSandbox) -> _Cli:
    return _Cli(batchval, served)


def test_status_gives_the_last_invocation_s_figures_as_its_summary_did(
    cli: _Cli, tmp_path: Path
) -> None:
    """Two invocations (a spend ceiling stops the first): status's figures are the second's."""
    source, out = portfolio(tmp_path / "book.csv", 8), tmp_path / "out"
    assert cli.run(source, out, "--max-credits", "30") == 75
    stopped = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert stopped["calls"]["this_invocation"] == 3
    assert {k: cli.status(out)[k] for k in OWN} == {k: stopped[k] for k in OWN}

    assert cli.run(source, out) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    shown = cli.status(out)
    assert {k: shown[k] for k in OWN} == {k: summary[k] for k in OWN}
    assert shown["calls"] == {"this_invocation": 5, "total": 8}
    assert shown["credits_charged"] == {"this_invocation": 50, "total": 80}
    assert shown["started_at"] != stopped["started_at"]
    assert shown["invocations"] == 2


def test_status_without_the_summary_works_the_times_out_from_the_checkpoint(
    cli: _Cli, tmp_path: Path
) -> None:
    """summary.json lost: the calls, the start and the seconds still come from the record."""
    source, out = portfolio(tmp_path / "book.csv", 3), tmp_path / "out"
    assert cli.run(source, out) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    (out / "summary.json").unlink()
    shown = cli.status(out)
    assert shown["calls"] == summary["calls"]
    assert shown["started_at"] == summary["started_at"]
    assert shown["finished_at"] is not None
    assert shown["seconds"] == pytest.approx(summary["seconds"], abs=1.0)


def test_summary_and_status_describe_each_parquet_output_for_lineage(
    cli: _Cli, tmp_path: Path
) -> None:
    """summary.json's `files` (and status's): each Parquet file the run wrote, with the rows,
    bytes and columns its footer and the disk give, the writers' descriptions included."""
    source = portfolio(tmp_path / "book.csv", 6)
    with source.open("a", encoding="utf-8") as file:  # one row refused: a problems row
        file.write("LN-BAD,not a postcode,terraced,2,CASE-BAD\n")
    out = tmp_path / "out"
    assert cli.run(source, out) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    files = {file["name"]: file for file in summary["files"]}
    assert sorted(files) == ["charges.parquet", "problems.parquet", "results.parquet"]
    for name, file in files.items():
        table = pq.read_table(out / name)
        assert file["rows"] == table.num_rows
        assert file["bytes"] == (out / name).stat().st_size
        assert [(c["name"], c["type"]) for c in file["columns"]] == [
            (field.name, str(field.type)) for field in table.schema
        ]
    assert files["results.parquet"]["rows"] == 6
    assert files["problems.parquet"]["rows"] == 1
    described = {c["name"]: c["description"] for c in files["results.parquet"]["columns"]}
    assert described["row_number"] == "The row's 1-based position in the input."
    assert cli.status(out)["files"] == summary["files"]
