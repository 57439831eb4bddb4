"""The top of a revaluation's report, for the committee that acts on it.

First what the book is and as of when (the input, the date of the valuations, the
month their index had reached, test or live, and that the estimates are an automated
model's), then the headline: the book's loans and balance, how much of it was valued
and how much was not, the LTVs and what is over 100 %. A reader who stops at the first
screen has the answer to the first questions a committee asks.

Every figure is added up from the run's own files (results.parquet, problems.parquet)
and summary.json; loans over 100 % are counted from each loan's LTV, never from the LTV
bands, whose edges a config may move.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import polars as pl

from batchval._internal.contract import amounts
from batchval._internal.reports.report_lender import BALANCE, LTV, LenderColumns
from batchval._internal.reports.report_page import (
    Section,
    cards,
    e,
    money,
    percent,
    short_money,
    when,
)
from batchval._internal.runs import InputRead

AVM_LINE = (
    "The estimates are an automated valuation model's (AVM): a statistical estimate of "
    "each home's value, with a range, made without an inspection. They are not a "
    "surveyor's valuation, and balance over estimate is not a regulatory LTV."
)
_MODES = {
    "test": (
        "test",
        "<b>Test mode</b>: the figures come from a sandbox or test credentials; they are "
        "fake and nothing was charged.",
    ),
    "live": ("live", "<b>Live</b>: the estimates come from the valuation API."),
    "rehearsal": (
        "test",
        "<b>Rehearsal</b>: a live night rehearsed against batchval's sandbox (started with "
        "--rehearsal); the figures are fake and nothing real was charged.",
    ),
}


def heading(summary: Mapping[str, Any]) -> str:
    """The page's heading: the revaluation of what."""
    book = summary.get("book")
    if isinstance(book, Mapping) and book.get("path"):
        return f"Revaluation of the book {book['path']}"
    return f"Revaluation of {summary.get('input') or 'the input'}"


def as_of(summary: Mapping[str, Any], valued: pl.DataFrame | None) -> str:
    """What the book is and as of when, in a few lines of HTML."""
    facts = [f"Input <b>{e(summary.get('input') or 'not recorded')}</b>"]
    dates = _valuation_dates(valued)
    if dates is not None:
        first, last = dates
        facts.append(
            f"valued on <b>{e(_day(last))}</b>"
            if first == last
            else f"valued between <b>{e(_day(first))}</b> and <b>{e(_day(last))}</b>"
        )
    elif summary.get("finished_at"):
        facts.append(f"run {e(when(summary['finished_at']))}")
    month = _index_month(valued)
    if month is not None:
        facts.append(f"estimates indexed to <b>{e(month)}</b>")
    said = f"<p class='asof'>{'; '.join(facts)}.</p>"
    read = read_from(summary.get("input_read"))
    if read:
        said += f"<p class='asof'>{read}</p>"
    kind, mode = _MODES.get(
        str(summary.get("mode")), ("", f"Mode: {e(summary.get('mode') or 'not recorded')}.")
    )
    said += f"<p class='banner {kind}'>{mode} {e(AVM_LINE)}</p>"
    if summary.get("status") not in (None, "complete"):
        pending = (summary.get("rows") or {}).get("pending")
        waiting = f" {pending:,} loans are still to be valued." if pending else ""
        said += (
            "<p class='stop'><b>Not complete.</b>"
            f"{e(waiting)} The figures below cover the loans valued so far; the operation "
            "(at the end of the page) says why the run stopped and what to do.</p>"
        )
    return said


def read_from(input_read: Any) -> str:
    """What was read of the input, in a line of HTML: its sheet and header line, the
    extract's reporting date, and the lines set aside as not loans; "" for a plain file."""
    read = InputRead.of(input_read)
    if read is None:
        return ""
    where = [f"sheet <b>{e(read.sheet)}</b>"] if read.sheet else []
    if read.header_line is not None and (read.header_line > 1 or where):
        where.append(f"header on line {read.header_line}")
    facts = [f"Read from {', '.join(where)}"] if where else []
    if read.reporting_date is not None:
        facts.append(
            f"balances at <b>{e(_day(read.reporting_date))}</b>, the extract's reporting date "
            f"(line {e(read.reporting_date_line)})"
        )
    if count := len(read.not_loans):
        facts.append(
            f"{count:,} line{'s' if count > 1 else ''} of the table set aside as not loans "
            "(subtotals, headings, totals, notes: listed under <i>What was read</i>)"
        )
    return f"{'; '.join(facts)}." if facts else ""


def headline(
    summary: Mapping[str, Any],
    valued: pl.DataFrame | None,
    problems: pl.DataFrame | None,
    columns: LenderColumns,
) -> Section:
    """The book's loans and balance, valued and not, its LTVs and what is over 100 %."""
    rows = summary.get("rows") or {}
    portfolio = _portfolio(summary)
    loans = valued.height if valued is not None else 0
    in_book = rows.get("total") if isinstance(rows.get("total"), int) else None
    not_valued = portfolio.get("loans_not_valued")
    if not isinstance(not_valued, int) and in_book is not None:
        not_valued = in_book - loans
    figures: list[tuple[str, Any]] = [
        ("loans in the book", in_book),
        ("loans valued", _with_share(f"{loans:,}", loans, in_book)),
    ]
    note = ""
    if valued is not None and BALANCE in valued.columns:
        balance_valued = float(valued.get_column(BALANCE).fill_null(0).sum())
        balance_not = _balance_not_valued(portfolio, problems, columns)
        whole = balance_valued + (balance_not or 0.0)
        with_ltv = valued.filter(pl.col(BALANCE).is_not_null() & pl.col(LTV).is_not_null())
        balance = float(with_ltv.get_column(BALANCE).sum())
        estimates = float(with_ltv.get_column("estimate").cast(pl.Float64).sum())
        weighted = float((with_ltv.get_column(BALANCE) * with_ltv.get_column(LTV)).sum())
        over = with_ltv.filter(pl.col(LTV) > 1)
        over_balance = float(over.get_column(BALANCE).sum())
        figures += [
            ("balance valued", _with_share(short_money(balance_valued), balance_valued, whole)),
            (
                "balance not valued",
                "–"
                if balance_not is None
                else _with_share(short_money(balance_not), balance_not, whole),
            ),
            ("loans not valued", not_valued),
            ("weighted LTV", percent(weighted / balance if balance else None)),
            ("aggregate LTV", percent(balance / estimates if estimates else None)),
            ("loans over 100 % LTV", over.height),
            (
                "balance over 100 % LTV",
                _with_share(short_money(over_balance), over_balance, balance),
            ),
        ]
        note = (
            f"Loan balances are read from the column <b>{e(columns.balance)}</b>; the book's "
            f"balance is {e(money(whole))}, of which {e(money(balance_valued))} is on "
            f"valued loans. Weighted LTV: each loan's balance over its estimate, weighted by "
            "its balance; aggregate LTV: the balance over the sum of the estimates; both over "
            f"the {with_ltv.height:,} valued loans with a balance and an estimate above zero."
        )
        if balance_not is None:
            note += " The balance of the loans not valued is not recorded by this run."
    else:
        figures.append(("loans not valued", not_valued))
        if columns.note is not None:
            note = e(columns.note)
        else:
            note = "The input has no loan balance: no LTV or balance figures."
    return Section("The book at a glance", cards(figures) + f"<p class='note'>{note}</p>")


def _portfolio(summary: Mapping[str, Any]) -> Mapping[str, Any]:
    """The whole book's totals: a `--book` night's picture, else the run's."""
    book = summary.get("book")
    if isinstance(book, Mapping) and isinstance(book.get("portfolio"), Mapping):
        found: Mapping[str, Any] = book["portfolio"]
        return found
    portfolio = summary.get("portfolio")
    return portfolio if isinstance(portfolio, Mapping) else {}


def _balance_not_valued(
    portfolio: Mapping[str, Any], problems: pl.DataFrame | None, columns: LenderColumns
) -> float | None:
    """summary.json's `balance_not_valued`; for a run before it was kept, the balance of
    problems.parquet's loans (pending loans then have no balance to read)."""
    kept = portfolio.get("balance_not_valued")
    if isinstance(kept, int | float) and not isinstance(kept, bool):
        return float(kept)
    if problems is None or columns.balance is None or columns.balance not in problems.columns:
        return None
    return float(sum(a or 0.0 for a in amounts(problems.get_column(columns.balance).to_arrow())))


def _with_share(shown: str, part: float, whole: float | int | None) -> str:
    if not whole:
        return shown
    return f"{shown} ({percent(part / whole)})"


def _valuation_dates(valued: pl.DataFrame | None) -> tuple[dt.date, dt.date] | None:
    if valued is None or valued.height == 0 or "valued_at" not in valued.columns:
        return None
    days = valued.select(
        pl.col("valued_at").cast(pl.Datetime("us", "UTC")).dt.date().alias("day")
    ).get_column("day")
    first, last = days.min(), days.max()
    if not isinstance(first, dt.date) or not isinstance(last, dt.date):
        return None
    return first, last


def _index_month(valued: pl.DataFrame | None) -> str | None:
    """`September 2026`, or `July to September 2026 (most: September 2026)` when the
    estimates were indexed to several months."""
    if valued is None or "indexed_to" not in valued.columns:
        return None
    months = (
        valued.get_column("indexed_to").drop_nulls().value_counts(sort=True, name="n").to_dicts()
    )
    if not months:
        return None
    named = sorted(str(m["indexed_to"]) for m in months)
    most = _month(str(months[0]["indexed_to"]))
    if len(named) == 1:
        return most
    return f"{_month(named[0])} to {_month(named[-1])} (most: {most})"


def _month(text: str) -> str:
    try:
        return dt.datetime.strptime(text, "%Y-%m").strftime("%B %Y")
    except ValueError:
        return text


def _day(day: dt.date) -> str:
    return f"{day.day} {day:%b %Y}"
