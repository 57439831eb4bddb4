"""The lender's part of report.html (`reports/report_lender`): totals, bands with balances
from whichever column holds them, the loans to look at by name, the local authorities
and a book run's night."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from programs import Chromium, console_messages
from support import ROOT, InProcess, env_for

from batchval._internal.reports.report import write_report
from batchval._internal.reports.report_lender import LOANS_LISTED, find_columns
from batchval._internal.reports.report_page import short_money
from batchval._internal.sandbox.server import RunningSandbox


def _text(dom: str) -> str:
    """What a reader sees: the page's text, one cell or line at a time, entities read."""
    shown = re.sub(r"<svg.*?</svg>|<style>.*?</style>", "", dom, flags=re.S)
    shown = re.sub(r"<[^>]+>", "|", shown)
    return re.sub(r"\|+", "|", shown.replace("&amp;", "&").replace("&nbsp;", " "))


@pytest.mark.slow
def test_a_book_whose_balance_is_current_balance_gets_its_totals_bands_and_loans_over_100(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess, chromium: Chromium
) -> None:
    """issue 25's example: the mortgage book with its balance column renamed `Current
    Balance`, valued live: Chromium shows the total balance, a balance in every LTV band
    that has loans, the loans over 100 % by loan id, and the money spent."""
    book = tmp_path / "book.csv"
    text = (ROOT / "sample_inputs" / "mortgage_book.csv").read_text(encoding="utf-8")
    header, rest = text.split("\n", 1)
    book.write_text(header.replace("loan_balance", "Current Balance") + "\n" + rest)
    out = tmp_path / "out"
    done = batchval("run", str(book), "--out", str(out), env=env_for(served))
    assert done.returncode == 0, done.stderr
    assert batchval("report", str(out), env=env_for(served)).returncode == 0
    shown = chromium(out / "report.html", tmp_path / "profile", "--dump-dom")
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert console_messages(shown.stderr) == []
    page = _text(shown.stdout)

    summary = json.loads((out / "summary.json").read_text())
    portfolio = summary["portfolio"]
    valued, unvalued = portfolio["sum_balance"], portfolio["balance_not_valued"]
    problems = pl.read_parquet(out / "problems.parquet")
    assert unvalued == pytest.approx(float(problems.get_column("Current Balance").sum()))
    whole = valued + unvalued
    assert f"|balance valued|{short_money(valued)} ({valued / whole * 100:.1f} %)|" in page
    assert f"|balance not valued|{short_money(unvalued)} ({unvalued / whole * 100:.1f} %)|" in page
    assert f"|weighted LTV|{portfolio['weighted_ltv'] * 100:.1f} %|" in page
    assert f"|aggregate LTV|{portfolio['aggregate_ltv'] * 100:.1f} %|" in page
    assert "Current Balance" in page
    for band in portfolio["ltv_bands"]:  # the run's own figures, every band in order
        line = f"|{band['band']}|{band['rows']:,}|£{band['balance']:,.0f}|"
        assert line in page, line
    assert sum(b["balance"] for b in portfolio["ltv_bands"] if b["rows"]) > 0
    assert all(b["balance"] > 0 for b in portfolio["ltv_bands"] if b["rows"])

    results = pl.read_parquet(out / "results.parquet")
    over = results.filter(pl.col("indexed_ltv") > 1).sort("indexed_ltv", descending=True)
    assert over.height > 0
    over_balance = float(over.get_column("Current Balance").sum())
    assert f"|loans over 100 % LTV|{over.height}|" in page
    share = over_balance / portfolio["sum_balance"] * 100
    assert f"|balance over 100 % LTV|{short_money(over_balance)} ({share:.1f} %)|" in page
    listed = re.findall(r"\|(LN-\d{6})\|(\d+)\|[^|]+\|£[\d,]+\|£[\d,]+\|([\d.]+) %\|", page)
    assert [loan for loan, _, _ in listed] == over.get_column("loan_id").to_list()
    assert [int(line) for _, line, _ in listed] == over.get_column("source_row").to_list()

    credits = summary["credits_charged"]["this_invocation"]
    assert credits > 0
    assert f"{credits:,} credits (£{credits / 100:,.2f}) charged by the last invocation" in page
    assert "Test mode" not in page
    assert not re.search(r"\d{2}:\d{2}:\d{2}\.\d+", page)  # no raw ISO with microseconds


def _dir(tmp_path: Path, frame: dict[str, Any], **summary: Any) -> Path:
    (tmp_path / "summary.json").write_text(
        json.dumps({"run_id": "r1", "status": "complete", "exit_code": 0, **summary})
    )
    pl.DataFrame(frame).write_parquet(tmp_path / "results.parquet")
    return tmp_path


def _loans(count: int, balance: str = "Owed") -> dict[str, Any]:
    """`count` loans whose LTV rises with the row: the last ones are over 100 %."""
    return {
        "row_number": list(range(1, count + 1)),
        "estimate": [100_000] * count,
        "range_low": [90_000] * count,
        "range_high": [110_000] * count,
        balance: [f"£{60_000 + 2_000 * n:,}.00" for n in range(count)],  # text, as lenders write
        "local_authority": ["E09000001" if n % 2 else "W06000015" for n in range(count)],
    }


def test_a_balance_column_named_in_the_config_is_read(tmp_path: Path) -> None:
    """A column the config mapped to loan_balance (manifest.json keeps the settings),
    with money written as text, gives the totals and the bands their balances."""
    loans = _loans(4)
    loans["ltv_band"] = ["60-75", "60-75", "60-75", "60-75"]
    out = _dir(tmp_path, loans)
    manifest = {"settings": {"input": {"columns": {"loan_balance": "Owed"}}}}
    (out / "manifest.json").write_text(json.dumps(manifest))
    page = write_report(out).read_text(encoding="utf-8")
    assert "<td>60-75</td><td>4</td><td>£252,000</td>" in page
    assert "balance valued<b>£252,000 (100.0 %)</b>" in page
    assert "Largest local authorities by balance" in page
    assert "<td>Cardiff</td><td>W06000015</td><td>2</td><td>£124,000</td>" in page


def test_without_the_manifest_a_column_of_another_name_is_no_balance(tmp_path: Path) -> None:
    """The mapping is the run's: without it `Owed` is not a balance, and no totals are
    made up."""
    page = write_report(_dir(tmp_path, _loans(4))).read_text(encoding="utf-8")
    assert "balance valued" not in page


def test_the_loans_over_100_are_capped_and_the_rest_counted(tmp_path: Path) -> None:
    """The list names the highest LTVs first, at most LOANS_LISTED, and says how many
    more there are; with no loan id or reference a loan is named by its row."""
    count = LOANS_LISTED + 30  # LTVs 60 % to 168 %: 35 over 100 %
    page = write_report(_dir(tmp_path, _loans(count, "Current Balance"))).read_text("utf-8")
    over = sum(1 for n in range(count) if 60_000 + 2_000 * n > 100_000)
    assert f"loans over 100 % LTV<b>{over}</b>" in page
    section = page[page.index("Loans over 100 % LTV</h3>") :]
    rows = re.findall(r"<tr><td>(\d+)</td><td>[A-Z][^<]+</td><td>£", section)
    assert rows[0] == str(count)
    assert len(rows) == LOANS_LISTED
    assert f"{over - LOANS_LISTED:,} more not listed" in section


@pytest.mark.parametrize(
    ("names", "identity"),
    [
        (["loan_id", "reference", "estimate"], "loan_id"),
        (["Loan Ref", "reference"], "Loan Ref"),
        (["Reference", "postcode"], "Reference"),
        (["postcode"], None),
    ],
)
def test_a_loan_is_named_by_its_loan_id_else_its_reference(
    names: list[str], identity: str | None
) -> None:
    """The identity column: the lender's loan id (by its usual names too), else a
    reference column; None leaves the row number."""
    assert find_columns(names, {}).identity == identity


def test_two_balance_columns_are_said_not_guessed() -> None:
    """Two columns that both look like the balance: none is read, and the page says why."""
    found = find_columns(["Current Balance", "current_balance"], {})
    assert found.balance is None
    assert found.note is not None
    assert "input.columns" in found.note


def test_a_book_run_shows_its_night(tmp_path: Path) -> None:
    """A --book run's section: rows revalued, carried and deferred, and the LTVs of
    tonight's valuations beside the whole book's."""
    loans = _loans(4, "loan_balance")
    loans["source"] = ["api", "api", "book", "book"]
    book = {
        "path": "books/main.parquet",
        "rows": {"valued": 2, "carried": 2, "deferred": 5, "problems": 0, "pending": 0},
        "entries": 9,
        "fresh_by": "2026-11-28",
        "budget_keeps_up": False,
        "budget_calls": 2,
        "calls_a_night_to_stay_fresh": 3,
        "fresh_for_days": 3.0,
        "age_profile": {"within_30_days": 4},
        "portfolio": {"rows": 4, "sum_balance": 252_000.0, "weighted_ltv": 0.64},
    }
    out = _dir(tmp_path, loans, book=book, portfolio={"rows": 2, "sum_balance": 122_000.0})
    page = write_report(out).read_text(encoding="utf-8")
    assert "The book books/main.parquet" in page
    assert "carried from the book<b>2</b>" in page
    assert "left for a later night<b>5</b>" in page
    assert "<td>loan balance</td><td>£122,000</td><td>£252,000</td>" in page
    assert "does not keep the book fresh" in page
    assert "<td>valued tonight</td><td>2</td><td>£122,000</td>" in page
    assert "<td>carried from the book</td><td>2</td><td>£130,000</td>" in page
    assert "No loan revalued tonight had a book entry" not in page  # none says: no column


def _since(tmp_path: Path, sources: list[str], previous: list[int | None] | None) -> str:
    """The report's "Since the last valuation" of a book run's loans A, B, ... with these
    sources and previous estimates (None: each loan's estimate held), valued 1 Oct 2026."""
    loans = _loans(len(sources), "loan_balance")
    loans["loan_id"] = [chr(ord("A") + n) for n in range(len(sources))]
    loans["source"] = sources
    loans["previous_estimate"] = loans["estimate"] if previous is None else previous
    loans["previous_valued_at"] = [dt.datetime(2026, 10, 1, tzinfo=dt.UTC)] * len(sources)
    carried = sources.count("book")
    rows = {"valued": len(sources) - carried, "carried": carried}
    book = {"path": "books/main.parquet", "rows": rows}
    page = write_report(_dir(tmp_path, loans, book=book)).read_text(encoding="utf-8")
    return page[page.index("Since the last valuation") :]


def test_a_book_run_lists_the_loans_that_moved_since_their_last_valuation(
    tmp_path: Path,
) -> None:
    """results.parquet's previous_estimate: the median change, how many rose and fell,
    and the largest falls and rises, each named with its old and new estimates."""
    # D carried: not a move.
    since = _since(tmp_path, ["api", "api", "api", "book"], [80_000, 125_000, None, 90_000])
    assert "loans revalued with an earlier valuation<b>2</b>" in since
    assert "rose<b>1</b>" in since
    assert "fell<b>1</b>" in since
    falls = since[since.index("Largest falls") : since.index("Largest rises")]
    assert re.search(
        r"<td>B</td><td>2</td><td>£125,000</td><td>1 Oct 2026[^<]*</td>"
        r"<td>£100,000</td><td>-20(\.0)? ?%</td>",
        falls,
    ), falls
    assert "<td>A</td>" in since[since.index("Largest rises") :]
    assert "<td>A</td>" not in falls  # a rise is no fall


def test_a_loan_whose_estimate_held_is_neither_a_fall_nor_a_rise(tmp_path: Path) -> None:
    since = _since(tmp_path, ["api", "api"], None)
    assert "rose<b>0</b>" in since
    assert "<h4>Largest falls</h4><p>None.</p>" in since
    assert "<h4>Largest rises</h4><p>None.</p>" in since


def test_homes_worth_less_than_at_origination_are_counted_with_their_balance(
    tmp_path: Path,
) -> None:
    """The change since origination: its median, and the homes that fell, with the
    balance lent on them."""
    loans = _loans(4, "loan_balance")
    loans["change_since_origination"] = [0.25, -0.1, None, 0.05]
    loans["months_since_origination"] = [24, 36, None, 12]
    page = write_report(_dir(tmp_path, loans)).read_text(encoding="utf-8")
    assert "homes with an origination value<b>3</b>" in page
    assert "median change since origination<b>5.0 %</b>" in page
    assert "homes worth less than at origination<b>1</b>" in page
    assert "their loan balance<b>£62,000</b>" in page
    assert "mean age of the loans<b>2.0 years</b>" in page
