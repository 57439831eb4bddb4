"""`batchval report DIR`: one self-contained HTML page, checked as text and in Chromium."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import polars as pl
import pytest
from programs import Chromium, console_messages
from support import TEST, InProcess, env_for, portfolio

from batchval._internal.reports import report
from batchval._internal.reports.report import write_report
from batchval._internal.sandbox.server import RunningSandbox


def valued_dir(batchval: InProcess, served: RunningSandbox, tmp_path: Path) -> Path:
    """A finished test-mode run of 41 rows; the API refuses one (the floor-area trigger)."""
    source = portfolio(tmp_path / "in.csv", 40)
    with source.open("a", encoding="utf-8") as stream:
        stream.write("LN-99999,ZZ1 5AA,terraced,2,CASE-99999\n")
    out = tmp_path / "out"
    done = batchval("run", str(source), "--out", str(out), env=env_for(served, TEST))
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.slow
def test_report_shows_the_runs_figures_and_loads_nothing(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """The page names the run, its counts and the refused row's number, draws its charts
    as inline SVG, and has no script and no address to load anything from."""
    out = valued_dir(batchval, served, tmp_path)
    done = batchval("report", str(out), env=env_for(served))
    assert done.returncode == 0, done.stderr
    page = (out / "report.html").read_text(encoding="utf-8")
    summary = json.loads((out / "summary.json").read_text())
    assert f"Run {summary['run_id']}: complete, exit 0" in page
    assert "<b>41</b>" in page
    assert "<b>40</b>" in page
    assert "floor-area-required" in page
    assert "<td>41</td>" in page
    assert page.count("<svg") >= 3  # estimates, range width, calls over time
    assert "<script" not in page.lower()
    assert not re.search(r"""(?:src|href)\s*=\s*["']?https?:""", page, re.I)
    assert not re.search(r"url\(\s*['\"]?(?!#)", page)  # only the SVG's own #clip paths
    assert "@import" not in page


@pytest.mark.slow
def test_report_renders_in_chromium_without_console_messages(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess, chromium: Chromium
) -> None:
    """Headless Chromium lays the page out with its charts and logs no console message."""
    out = valued_dir(batchval, served, tmp_path)
    page = write_report(out)
    shown = chromium(page, tmp_path / "profile", "--dump-dom")
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert console_messages(shown.stderr) == []
    assert "Loans not valued: problems to act on" in shown.stdout
    assert shown.stdout.count("<svg") >= 3
    picture = tmp_path / "report.png"
    drawn = chromium(
        page, tmp_path / "profile2", "--window-size=1100,2400", f"--screenshot={picture}"
    )
    assert drawn.returncode == 0
    assert picture.stat().st_size > 20_000


def test_the_console_check_sees_a_script_error(tmp_path: Path, chromium: Chromium) -> None:
    """The check above can fail: a page with a script error is caught by it."""
    page = tmp_path / "broken.html"
    page.write_text("<html><body><script>notDefined();</script></body></html>")
    shown = chromium(page, tmp_path / "profile", "--dump-dom")
    assert any("notDefined" in line for line in console_messages(shown.stderr))


def test_ltv_bands_and_flags_are_drawn_when_the_results_carry_them(tmp_path: Path) -> None:
    """Results with lender columns get an LTV band table in band order, with balances,
    and a count per flag."""
    summary = {"run_id": "r1", "status": "complete", "exit_code": 0, "rows": {"total": 4}}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    pl.DataFrame(
        {
            "row_number": [1, 2, 3, 4],
            "estimate": [200_000, 300_000, 400_000, 100_000],
            "range_low": [180_000, 270_000, 360_000, 80_000],
            "range_high": [220_000, 330_000, 440_000, 130_000],
            "loan_balance": [100_000, 150_000, 390_000, 120_000],
            "ltv_band": ["0-60", "0-60", "95-100", "over 100"],
            "wide_range": [False, False, False, True],
            "partial_data": [True, False, None, False],
        }
    ).write_parquet(tmp_path / "results.parquet")
    page = write_report(tmp_path).read_text(encoding="utf-8")
    bands = re.findall(
        r"<tr><td>(0-60|95-100|over 100)</td><td>([\d,]+)</td><td>([^<]*)</td>", page
    )
    assert bands == [
        ("0-60", "2", "£250,000"),
        ("95-100", "1", "£390,000"),
        ("over 100", "1", "£120,000"),
    ]
    assert "<td>wide range</td><td>1</td>" in page
    assert "<td>partial data</td><td>1</td>" in page


def test_text_from_the_input_is_escaped(tmp_path: Path) -> None:
    """A problem detail holding markup is shown as text, never run as HTML."""
    (tmp_path / "summary.json").write_text(json.dumps({"run_id": "<b>x</b>", "status": "complete"}))
    pl.DataFrame(
        {
            "row_number": [7],
            "stage": ["input"],
            "type": ["bad"],
            "field": ["postcode"],
            "code": [None],
            "detail": ["<script>alert(1)</script>"],
        },
        schema_overrides={"code": pl.String},
    ).write_parquet(tmp_path / "problems.parquet")
    page = write_report(tmp_path).read_text(encoding="utf-8")
    assert "<script" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "Run &lt;b&gt;x&lt;/b&gt;" in page


@pytest.mark.slow
def test_a_dir_without_a_run_is_refused_with_64(tmp_path: Path, batchval: InProcess) -> None:
    """Nothing to report on: exit 64 and one line that says why."""
    done = batchval("report", str(tmp_path), env=dict(os.environ))
    assert done.returncode == 64
    assert "no finished batchval run" in done.stderr
    assert not (tmp_path / "report.html").exists()


@pytest.mark.slow
def test_an_unreadable_summary_is_refused_with_64(tmp_path: Path, batchval: InProcess) -> None:
    """A summary.json cut short (or not JSON) is one line and 64, not a traceback."""
    (tmp_path / "summary.json").write_text('{"run_id": "r1", "sta')
    done = batchval("report", str(tmp_path), env=dict(os.environ))
    assert done.returncode == 64, done.stderr
    assert "cannot be read" in done.stderr


def test_the_pace_chart_keeps_to_the_last_invocation(tmp_path: Path) -> None:
    """Progress lines of an earlier invocation, or of a later command on the DIR, are
    left out of the last invocation's chart."""
    summary = {
        "run_id": "r1",
        "status": "complete",
        "started_at": "2026-11-23T10:00:00+00:00",
        "finished_at": "2026-11-23T10:01:00+00:00",
        "calls": {"this_invocation": 40},
        "credits_charged": {"this_invocation": 400},
    }
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    lines = [
        {"event": "run.progress", "timestamp": f"2026-11-23T{at}Z", "calls": calls, "credits": 0}
        for at, calls in (("09:00:00", 999), ("10:00:30", 20), ("10:05:00", 777))
    ]
    (tmp_path / "batchval.log").write_text("".join(json.dumps(x) + "\n" for x in lines))
    points = report._pace(tmp_path / "batchval.log", summary)
    assert [p["calls"] for _, p in points] == [0, 20, 40]  # start, the one line, the end
    assert write_report(tmp_path).read_text(encoding="utf-8").count("<svg") == 1


@pytest.mark.parametrize("summary_name", ["summary.json", "dry_run.json"])
def test_problems_are_named_by_loan_id_without_results(tmp_path: Path, summary_name: str) -> None:
    """A DIR with problems and no results (a dry run, or every row refused): each loan is
    still named by its loan id, found by its usual name, and its line."""
    (tmp_path / summary_name).write_text(json.dumps({"run_id": "r1", "status": "complete"}))
    pl.DataFrame(
        {
            "row_number": [1, 2],
            "source_row": [5, 6],
            "Loan Ref": ["LN-1", None],
            "stage": ["input", "input"],
            "type": ["required", "required"],
            "field": ["postcode", "postcode"],
            "detail": ["postcode is missing", "postcode is missing"],
        }
    ).write_parquet(tmp_path / "problems.parquet")
    page = write_report(tmp_path).read_text(encoding="utf-8")
    assert "LN-1 (line 5), no loan id, line 6" in page
    assert "<h3>Correct the input and run again" in page
