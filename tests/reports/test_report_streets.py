"""The report of a `batchval streets` DIR (`reports/report_streets`): its own title and
words, and the street figures of street_analysis.parquet, checked in Chromium."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from programs import Chromium, console_messages
from support import TEST, InProcess, env_for, portfolio
from test_report_lender import _text

from batchval._internal.reports.report import write_report
from batchval._internal.sandbox.server import RunningSandbox


@pytest.mark.slow
def test_a_streets_report_shows_the_street_figures_under_its_own_title(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess, chromium: Chromium
) -> None:
    """Sold prices, crime, rents, energy and the price index, each from the file's own
    figures, under "Street analysis" and with the streets' own words; in Chromium."""
    source = portfolio(tmp_path / "in.csv", 12, duplicates=2)
    out = tmp_path / "out"
    done = batchval("streets", str(source), "--out", str(out), env=env_for(served, TEST))
    assert done.returncode == 0, done.stderr
    assert batchval("report", str(out), env=env_for(served, TEST)).returncode == 0
    shown = chromium(out / "report.html", tmp_path / "profile", "--dump-dom")
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert console_messages(shown.stderr) == []
    page = _text(shown.stdout)

    assert "|Street analysis: complete, exit 0|" in page
    assert "Run streets" not in page
    assert "|Test mode|" in page
    summary = json.loads((out / "summary.json").read_text())
    assert f"|distinct postcodes|{summary['requests']['unique']}|" in page
    assert f"|rows with their street|{summary['rows']['valued']}|" in page
    for title in ("Sold prices", "Crime", "Rents", "Energy use", "Price index", "Postcodes"):
        assert f"|{title}|" in page, title

    streets = pl.read_parquet(out / "street_analysis.parquet")
    sold = streets.select(pl.col("sold_prices").struct.field("recent_median").median()).item()
    assert f"|median of the recent medians|£{sold:,.0f}|" in page
    crimes = (
        streets.get_column("crime")
        .struct.field("by_type")
        .explode()
        .struct.field("crime_count")
        .sum()
    )
    assert f"|crimes near all the postcodes|{crimes:,}|" in page
    rent = streets.select(pl.col("rental").struct.field("average_rent").median()).item()
    assert f"|median rent a month|£{rent:,.0f}|" in page
    for postcode in streets.get_column("postcode"):
        assert f"|{postcode}|" in page
    authority = streets.get_column("price_index").struct.field("local_authority").drop_nulls()
    assert f"|{authority[0]}|" in page


def test_a_streets_dir_without_its_file_still_reports_its_outcome(tmp_path: Path) -> None:
    """A streets run stopped before any read: the outcome in the streets' words, and no
    figures made up."""
    summary = {
        "command": "streets",
        "status": "incomplete",
        "exit_code": 75,
        "mode": "live",
        "rows": {"total": 3, "valued": 0},
        "requests": {"unique": 3},
        "stop": {"reason": "daily_limit", "detail": "the daily limit", "not_before": None},
    }
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    page = write_report(tmp_path).read_text(encoding="utf-8")
    assert "<h1>Street analysis: incomplete, exit 75</h1>" in page
    assert "distinct postcodes<b>3</b>" in page
    assert "Sold prices" not in page
