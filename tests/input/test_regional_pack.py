"""A building society's collateral report (tests/regional_pack.py) goes from `batchval init`
to `run`, both exports and `report` with the proposal unchanged, as a workbook and as a
Windows CSV: exactly its loans counted, exactly its other lines set aside, the report's
balance the sum of its own loan rows, and the columns it holds back in no output."""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from types import ModuleType

import polars as pl
import pytest
from click.testing import CliRunner, Result
from regional_pack import (
    HEADER_LINE,
    HIDDEN_COLUMN,
    KEPT_OUT,
    REPORTING_DATE,
    make_pack,
    write_windows_csv,
)
from regional_pack import write_xlsx as write_pack_xlsx
from secrets_scan import assert_clean

from batchval._internal.cli import cli

CLEAN_ENV: dict[str, str | None] = {k: None for k in os.environ if k.startswith("BATCHVAL_")}


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=CLEAN_ENV, catch_exceptions=False)


@pytest.mark.slow  # init, run, two exports and a report, of each form
@pytest.mark.parametrize("kind", ["xlsx", "csv"])
def test_a_regional_pack_runs_from_init_to_report_with_the_proposal_unchanged(
    tmp_path: Path, samples: ModuleType, kind: str
) -> None:
    pack = make_pack(53, samples)
    given = tmp_path / "given"
    given.mkdir()
    if kind == "xlsx":
        path = write_pack_xlsx(pack, given / "collateral.xlsx")
    else:
        path = write_windows_csv(pack, given / "collateral.csv")
    config = given / "proposal.yaml"
    proposed = invoke("init", str(path), "--out", str(config))
    assert proposed.exit_code == 0, proposed.output
    proposal = config.read_text()
    assert f"header_row: {HEADER_LINE}" in proposal
    assert f"{len(pack.not_loans)} lines of the table set aside as not loans" in proposal
    for line, label in pack.not_loans.items():
        assert f"line {line} {label!r}" in proposal
    if kind == "xlsx":
        assert "sheet: 'Collateral'" in proposal
        assert f"hides (or filters out) 1 row (line {pack.hidden_line})" in proposal
    assert "no column found for loan_balance" not in proposal

    out = tmp_path / "run"
    ran = invoke("run", str(path), "--config", str(config), "--out", str(out))
    assert ran.exit_code == 0, ran.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rows"]["total"] == len(pack.loans)
    assert {n["line"] for n in summary["input_read"]["not_loans"]} == set(pack.not_loans)
    portfolio = summary["portfolio"]
    assert portfolio["rows"] + portfolio["loans_not_valued"] == len(pack.loans)
    book = round(portfolio["sum_balance"] + portfolio["balance_not_valued"], 2)
    assert book == pack.balance
    lines = pl.concat(
        [
            pl.read_parquet(out / name).select("source_row")
            for name in ("results.parquet", "problems.parquet")
        ]
    )
    assert sorted(lines.get_column("source_row").to_list()) == sorted(pack.loans)

    exported = []
    for form in ("csv", "xlsx"):
        target = tmp_path / f"export-{form}"
        done = invoke("export", str(out), "--format", form, "--out", str(target))
        assert done.exit_code == 0, done.output
        exported.append(done.output)
    reported = invoke("report", str(out))
    assert reported.exit_code == 0, reported.output
    page = (out / "report.html").read_text()
    assert f"the book's balance is £{pack.balance:,.0f}" in page
    read = summary["input_read"]
    assert read["header_line"] == HEADER_LINE
    assert read["reporting_date"] == REPORTING_DATE.isoformat()
    first_page = page.split("<h2", 1)[0]  # the page's top, before its first section
    assert f"header on line {HEADER_LINE}" in first_page
    assert f"balances at <b>{REPORTING_DATE.day} {REPORTING_DATE:%b %Y}</b>" in first_page
    assert f"{len(pack.not_loans)} lines of the table set aside as not loans" in first_page
    if kind == "xlsx":
        assert read["sheet"] == "Collateral"
        assert "sheet <b>Collateral</b>" in first_page
    for label in pack.not_loans.values():  # each listed, with why, under What was read
        assert f"<td>{html.escape(label)}</td>" in page

    # A CSV hides nothing: its Risk Grade is a column like any other.
    held_back = [c for c in KEPT_OUT if kind == "xlsx" or c != HIDDEN_COLUMN]
    secrets = [
        value for i, value in enumerate(pack.secrets) if KEPT_OUT[i % len(KEPT_OUT)] in held_back
    ]
    assert len(secrets) == len(held_back) * len(pack.loans)
    printed = [proposed.output, ran.output, reported.output, *exported]
    assert_clean(
        secrets, paths=[out, tmp_path / "export-csv", tmp_path / "export-xlsx"], texts=printed
    )
