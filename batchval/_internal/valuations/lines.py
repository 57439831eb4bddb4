"""Run's own lines of the summary a person reads (`RunSummary.own_lines`): the portfolio's
loan balances, estimates and LTVs, its revaluation triggers, and with `--book` the book's
night, ages and portfolio; and the next action of a complete book night that left rows
for a later one. Made from summary.json's `portfolio` and `book` sections, so that `run`
and `status` (which reads the last summary.json) say the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def own_lines(
    portfolio: Mapping[str, Any] | None, book: Mapping[str, Any] | None
) -> tuple[str, ...]:
    """The lines after the money: the portfolio and its triggers, then the book."""
    lines: list[str] = []
    if portfolio is not None:
        lines.append(_portfolio_line(portfolio))
        lines += _revaluation_line(portfolio)
        lines += _index_line(portfolio)
    if book is not None:
        lines += _book_lines(book)
        lines += _index_line(book.get("portfolio") or {})
    return tuple(lines)


def _index_line(portfolio: Mapping[str, Any]) -> list[str]:
    """The loans by how their value was made (`valuations/indexing.coverage`)."""
    found = portfolio.get("index")
    if not isinstance(found, Mapping):
        return []
    covered = found.get("coverage") or {}
    parts = [
        f"{method} {sums.get('loans', 0)} ({pounds(sums.get('balance'))})"
        for method, sums in covered.items()
    ]
    ratio = found.get("hpi_weighted_ltv")
    weighted = f"{ratio:.1%}" if isinstance(ratio, int | float) else "n/a"
    name = "the API's index" if found.get("source") == "api" else "UK HPI"
    return [
        f"by {name} to {found.get('index_month')}: {', '.join(parts)}; weighted LTV "
        f"{weighted} on indexed values (monitoring, not valuations)"
    ]


def complete_action(book: Mapping[str, Any] | None) -> str:
    """The next action of a complete run whose book left rows for a later night ("" for
    any other run: the engine's words are then the action)."""
    deferred = ((book or {}).get("rows") or {}).get("deferred")
    if not deferred:
        return ""
    return (
        f"nothing tonight: {deferred} row(s) left for a later night by the book's "
        "budget; the next night's run (a new --out DIR, the same --book) values them"
    )


def _portfolio_line(portfolio: Mapping[str, Any]) -> str:
    """The loans' figures in the words of the report: a loan's balance is a "loan
    balance", never beside the API's credits."""

    def percent(name: str) -> str:
        ratio = portfolio.get(name)
        return f"{ratio:.1%}" if isinstance(ratio, int | float) else "n/a"

    line = (
        f"portfolio: {portfolio.get('rows')} loans valued, loan balance "
        f"{pounds(portfolio.get('sum_balance'))}"
    )
    if "loans_not_valued" in portfolio:
        line += (
            f"; not valued: {portfolio['loans_not_valued']}, loan balance "
            f"{pounds(portfolio.get('balance_not_valued'))}"
        )
    return (
        f"{line}; estimates {pounds(portfolio.get('sum_estimate'))}; "
        f"weighted LTV {percent('weighted_ltv')}, aggregate LTV {percent('aggregate_ltv')}"
    )


def _revaluation_line(portfolio: Mapping[str, Any]) -> list[str]:
    """The loans the revaluation policy flags, each trigger with their loan balance, and
    what the figures were measured from."""
    found = portfolio.get("revaluation")
    if not isinstance(found, Mapping):
        return []

    def flagged(name: str) -> str:
        sums = found.get(name) or {}
        return f"{sums.get('loans', 0)} ({pounds(sums.get('balance'))})"

    basis = found.get("basis") or {}
    return [
        f"revaluation triggers: fall {flagged('fall')}, age {flagged('age')}, large loan age "
        f"{flagged('large_loan_age')}; any {flagged('any')}; measured from the last "
        f"valuation for {basis.get('last_valuation', 0)}, from origination for "
        f"{basis.get('origination', 0)}"
    ]


def pounds(amount: Any) -> str:
    """`£31,908,995.15`, `£57,787,000`: money as a person reads it, pence when it has
    them (`n/a` when there is none)."""
    if isinstance(amount, bool) or not isinstance(amount, int | float):
        return "n/a"
    return f"£{amount:,}" if isinstance(amount, int) else f"£{amount:,.2f}"


def _book_lines(book: Mapping[str, Any]) -> list[str]:
    rows, ages = book.get("rows") or {}, book.get("age_profile") or {}
    return [
        f"book: {rows.get('valued', 0)} valued, {rows.get('carried', 0)} carried, "
        f"{rows.get('deferred', 0)} deferred, {rows.get('problems', 0)} problems; "
        f"fresh by {book.get('fresh_by')} at {book.get('budget_calls')} calls a night",
        f"book ages: {ages.get('within_30_days', 0)} within 30 days, "
        f"{ages.get('within_90_days', 0)} within 90, {ages.get('within_180_days', 0)} "
        f"within 180, {ages.get('older', 0)} older",
        *(
            [_portfolio_line(book["portfolio"]).replace("portfolio:", "book portfolio:", 1)]
            if book.get("portfolio")
            else []
        ),
        *_reads_line(book.get("index_reads"), book.get("budget_calls")),
    ]


def _reads_line(reads: Any, valuations: Any) -> list[str]:
    """How a night's budget was split between the API's index and valuations."""
    if not isinstance(reads, Mapping):
        return []
    said = reads.get("outcomes") or {}
    return [
        f"index reads first: {reads.get('read', 0)} of {reads.get('due', 0)} due "
        f"({reads.get('credits_counted', 0)} credits counted), then up to {valuations} "
        f"valuations; {said.get('read', 0)} read, {said.get('unpublished', 0)} unpublished, "
        f"{said.get('not_found', 0)} not found, {said.get('unanswered', 0)} left for a later "
        "night"
    ]
