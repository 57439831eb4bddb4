"""The xlsx export as a person keeps it (issue 33): the MI sample run from `init` to
`export`, in-process against the embedded sandbox, read back with openpyxl: money in
pounds and pence, dates and times day first and still dates, instants headed UTC; the
CSV of the same run keeps ISO dates and plain numbers."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import openpyxl
import polars as pl
import pytest
from embedded_cli import invoke
from support import ROOT

SAMPLE = ROOT / "sample_inputs" / "mi_extract.xlsx"
# No API configured: the embedded sandbox, in test mode.
# The money of a valued MI extract's sheets: the lender's (found by its usual names) and
# the API's; `balance_after` (charges) is credits, not pounds.
MONEY = {
    "results": {"Current Balance", "Original Valuation", "estimate", "range_low", "range_high"},
    "problems": {"Current Balance", "Original Valuation"},
    "charges": set(),
}
DATES = {
    "results": {"Completion Date", "valued_at (UTC)", "model_version (UTC)"},
    "problems": {"Completion Date"},
    "charges": {"at (UTC)", "received_at (UTC)"},
}


@pytest.fixture(scope="module")
def valued(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The MI sample valued as docs/tutorials/mi-extract.md runs it: init, then run."""
    work = tmp_path_factory.mktemp("mi")
    config = work / "book.yaml"
    assert invoke("init", str(SAMPLE), "--out", str(config)).exit_code == 0
    out = work / "run"
    ran = invoke("run", str(SAMPLE), "--config", str(config), "--out", str(out))
    assert ran.exit_code == 0, ran.output
    return out


def test_the_workbooks_money_has_pounds_and_pence_and_its_dates_are_uk_dates(
    valued: Path,
) -> None:
    """Every money cell of every sheet is `£` with pence, and no other cell is; every date
    cell is a real date shown day first (to the minute for an instant, whose header says
    UTC); the lender's completion date too."""
    assert invoke("export", str(valued), "--format", "xlsx").exit_code == 0
    workbook = openpyxl.load_workbook(valued / "results.xlsx")
    assert workbook.sheetnames == list(MONEY)
    for name, sheet in zip(workbook.sheetnames, workbook.worksheets, strict=True):
        header = [cell.value for cell in sheet[1]]
        assert MONEY[name] | DATES[name] <= set(header), name
        money, dates = set(), set()
        for row in sheet.iter_rows(min_row=2):
            for title, cell in zip(header, row, strict=True):
                if cell.value is None:
                    continue
                if "£" in cell.number_format:
                    assert "0.00" in cell.number_format
                    assert isinstance(cell.value, int | float)
                    money.add(title)
                if cell.is_date:
                    assert isinstance(cell.value, dt.datetime | dt.date), (title, cell.value)
                    assert cell.number_format.startswith("dd/mm/yyyy"), cell.number_format
                    dates.add(title)
                    if title.endswith("(UTC)"):
                        assert cell.number_format == "dd/mm/yyyy hh:mm"
        if sheet.max_row > 1:  # charges has none in test mode: nothing was charged
            assert (money, dates) == (MONEY[name], DATES[name]), name
    results = workbook["results"]
    header = [cell.value for cell in results[1]]
    balance = results.cell(2, header.index("Current Balance") + 1)
    frame = pl.read_parquet(valued / "results.parquet")
    assert balance.value == frame["Current Balance"][0]  # pence kept, not rounded away


def test_the_csv_keeps_iso_dates_and_plain_numbers(valued: Path) -> None:
    """results.csv of the same run: ISO dates, UTC wall times, numbers without `£` or
    separators, headers as the Parquet file names them."""
    assert invoke("export", str(valued), "--format", "csv").exit_code == 0
    text = (valued / "results.csv").read_text(encoding="utf-8")
    assert "£" not in text
    csv = pl.read_csv(valued / "results.csv", infer_schema_length=0)
    frame = pl.read_parquet(valued / "results.parquet")
    assert csv.columns == frame.columns
    dates = frame["Completion Date"].drop_nulls()
    assert csv["Completion Date"].drop_nulls().to_list() == [d.isoformat() for d in dates]
    assert all(len(t) == 19 and t[4] == "-" for t in csv["valued_at"].to_list())
    assert csv["estimate"].to_list() == [str(v) for v in frame["estimate"].to_list()]
