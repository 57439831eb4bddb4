"""The lender's part of `batchval report`: what a credit-risk analyst keeps.

The portfolio's totals (balance, weighted and aggregate LTV, what is over 100 %), the
LTV bands with their balances, the loans over 100 % and those whose range is wide, named
by the lender's own identity, the largest local authorities by balance, and for a
`--book` run what the night did to the book.

The balance is read from whichever pass-through column holds it, found as the run found
it (`input/lender.find_lender_columns` with the columns the run's config mapped, which
manifest.json keeps), and read as the run read it (`contract/lender.amounts`): a book
whose balance column is `Current Balance` gets the same figures as one with
`loan_balance`. The figures are added up from results.parquet, so that a book run's
carried rows count beside tonight's.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import polars as pl

from batchval._internal.contract import (
    INDEX_DESCRIPTIONS,
    NAMES_SOURCE,
    PROBLEM_COLUMNS,
    RESULT_COLUMNS,
    TRIGGERS,
    amounts,
    authority_name,
)
from batchval._internal.input import (
    LenderColumnError,
    RevaluationPolicy,
    find_lender_columns,
)
from batchval._internal.reports import charts
from batchval._internal.reports.report_page import Section, cards, e, money, percent, table, when

# Loans listed by name in each list; the rest are counted.
LOANS_LISTED = 25
MOVES_LISTED = 10  # the largest rises and falls since the last valuation, each
AUTHORITIES_LISTED = 10
# The column names the report gives the figures it reads (never a pass-through name:
# they start with a character no file's header is read into).
BALANCE, LTV, IDENTITY = "\x00balance", "\x00ltv", "\x00identity"


@dataclasses.dataclass(frozen=True, slots=True)
class LenderColumns:
    """Where results.parquet holds the lender's own figures."""

    balance: str | None  # the loan balance's pass-through column
    identity: str | None  # the loan id column, else a `reference` column
    note: str | None = None  # why no balance was read, when a person should know


def find_columns(names: Sequence[str], configured: Mapping[str, str]) -> LenderColumns:
    """The balance and identity columns among results.parquet's `names`, as the run
    found them with its config's `input.columns` (`configured`)."""
    fixed = {*RESULT_COLUMNS, *PROBLEM_COLUMNS, *INDEX_DESCRIPTIONS}
    passthrough = [n for n in names if n not in fixed]
    note = None
    try:
        found = find_lender_columns(passthrough, configured)
    except LenderColumnError as exc:
        found, note = {}, f"No balance read: {exc}."
    identity = found.get("loan_id")
    if identity is None:
        identity = next((n for n in passthrough if n.strip().lower() == "reference"), None)
    return LenderColumns(found.get("loan_balance"), identity, note)


def with_figures(valued: pl.DataFrame, columns: LenderColumns) -> pl.DataFrame:
    """`valued` with the report's own columns: the balance as a number, the LTV (the
    run's `indexed_ltv`, else balance / estimate) and the loan's identity as text."""
    frame = valued
    if columns.balance is not None:
        balances = amounts(frame.get_column(columns.balance).to_arrow())
        frame = frame.with_columns(pl.Series(BALANCE, balances, dtype=pl.Float64))
        estimate = pl.col("estimate").cast(pl.Float64)
        computed = pl.when(estimate > 0).then(pl.col(BALANCE) / estimate)
        ltv = pl.coalesce(pl.col("indexed_ltv"), computed) if "indexed_ltv" in frame else computed
        frame = frame.with_columns(ltv.alias(LTV))
    if columns.identity is not None:
        frame = frame.with_columns(pl.col(columns.identity).cast(pl.String).alias(IDENTITY))
    return frame


def ltv_bands(valued: pl.DataFrame, summary: Mapping[str, Any]) -> Section | None:
    """Loans and balance in each LTV band, when the results carry bands."""
    return _bands(valued, summary) if "ltv_band" in valued.columns else None


def movements(valued: pl.DataFrame, columns: LenderColumns) -> Section | None:
    """How the values moved: since each loan's last valuation (a `--book` night's
    revalued loans), then since origination."""
    body = _since_last(valued, columns)
    if "change_since_origination" in valued.columns:
        body += _since_origination(valued)
    return Section("Movements", body) if body else None


def authorities(valued: pl.DataFrame) -> Section | None:
    """The local authorities holding the most balance, by name."""
    if BALANCE not in valued.columns or "local_authority" not in valued.columns:
        return None
    return _authorities(valued)


def night(summary: Mapping[str, Any], valued: pl.DataFrame) -> Section | None:
    """What a `--book` night did to the book; None for a run without a book."""
    book = summary.get("book")
    return _book(book, summary, valued) if isinstance(book, Mapping) else None


def _bands(valued: pl.DataFrame, summary: Mapping[str, Any]) -> Section:
    """Homes and balance in each band, every band of the run's config in order (an
    empty one too)."""
    aggregations = [pl.len().alias("homes")]
    has_balance = BALANCE in valued.columns
    if has_balance:
        aggregations.append(pl.col(BALANCE).sum().alias("balance"))
    grouped = valued.filter(pl.col("ltv_band").is_not_null()).group_by("ltv_band").agg(aggregations)
    found = {row["ltv_band"]: row for row in grouped.iter_rows(named=True)}
    bands = (summary.get("portfolio") or {}).get("ltv_bands") or []
    labels = [str(b["band"]) for b in bands if isinstance(b, Mapping) and "band" in b]
    labels += sorted((str(b) for b in found if str(b) not in labels), key=band_start)
    homes = [int(found[b]["homes"]) if b in found else 0 for b in labels]
    balances = [float(found[b]["balance"] or 0) if b in found else 0.0 for b in labels]
    total = sum(balances)
    body = charts.bars(
        labels,
        homes,
        title="Loan-to-value bands",
        ylabel="loans",
        second=balances if has_balance else None,
        second_label="loan balance" if has_balance else "",
    )
    rows = [
        [
            label,
            f"{count:,}",
            money(balances[i]) if has_balance else "",
            percent(balances[i] / total) if has_balance and total else "",
        ]
        for i, (label, count) in enumerate(zip(labels, homes, strict=True))
    ]
    body += table(["band", "loans", "loan balance", "share of balance"], rows)
    return Section("Loan-to-value", body)


def _since_origination(valued: pl.DataFrame) -> str:
    """How the homes' values moved since the loans began: the homes now worth less than
    at origination are where the equity went."""
    change = pl.col("change_since_origination")
    known = valued.filter(change.is_not_null())
    fallen = known.filter(change < 0)
    median = known.get_column("change_since_origination").median()
    figures: list[tuple[str, Any]] = [
        ("homes with an origination value", known.height),
        ("median change since origination", percent(median)),
        ("homes worth less than at origination", fallen.height),
    ]
    if BALANCE in valued.columns:
        figures.append(("their loan balance", money(fallen.get_column(BALANCE).sum())))
    if "months_since_origination" in valued.columns:
        months = valued.get_column("months_since_origination").mean()
        if isinstance(months, int | float):
            figures.append(("mean age of the loans", f"{months / 12:.1f} years"))
    return "<h3>Since origination</h3>" + cards(figures)


def band_start(label: str) -> float:
    """Bands in order of their lower edge: `0-60` < `60-75` < ... < `over 100`."""
    found = re.search(r"\d+(?:\.\d+)?", label)
    start = float(found.group()) if found else float("inf")
    return start + 0.5 if label.lower().startswith("over") else start


def loans_to_look_at(valued: pl.DataFrame, columns: LenderColumns) -> Section | None:
    """The loans over 100 % LTV and those with a wide range, each named."""
    body = ""
    named = _named_headers(valued, columns)
    if LTV in valued.columns:
        over = valued.filter(pl.col(LTV) > 1).sort(LTV, descending=True)
        body += _loan_list(
            "Loans over 100 % LTV",
            over,
            "None: every loan's balance is within its home's estimate.",
            [*named, "local authority", "loan balance", "estimate", "LTV", "LTV on range low"],
            lambda r: [
                *_named(r, columns),
                authority_name(r.get("local_authority")),
                money(r[BALANCE]),
                money(r["estimate"]),
                percent(r[LTV]),
                percent(r.get("ltv_low_estimate")),
            ],
            ("loans over 100 %, highest LTV first", "indexed_ltv > 1"),
        )
    if "wide_range" in valued.columns and {"range_low", "range_high"} <= set(valued.columns):
        width = (pl.col("range_high") - pl.col("range_low")) / pl.col("estimate")
        wide = (
            valued.filter(pl.col("wide_range").fill_null(False))
            .with_columns(width.alias("\x00width"))
            .sort("\x00width", descending=True)
        )
        body += _loan_list(
            "Loans whose range is wide",
            wide,
            "None.",
            [*named, "estimate", "range", "width", "LTV"],
            lambda r: [
                *_named(r, columns),
                money(r["estimate"]),
                f"{money(r['range_low'])} to {money(r['range_high'])}",
                percent(r["\x00width"], 0),
                percent(r.get(LTV)),
            ],
            ("wide ranges, widest first", "wide_range"),
        )
    if not body:
        return None
    return Section("Loans to look at", body)


def _loan_list(
    title: str,
    loans: pl.DataFrame,
    none: str,
    headers: Sequence[str],
    cells: Callable[[Mapping[str, Any]], list[Any]],
    more: tuple[str, str],
) -> str:
    """A titled table of the first `LOANS_LISTED` loans (`none` when there are none), and
    the count of those left out (`more`: what the list shows, the column to find them by)."""
    body = f"<h3>{title}</h3>"
    if loans.height == 0:
        return body + f"<p>{none}</p>"
    shown = loans.head(LOANS_LISTED)
    body += table(headers, [cells(r) for r in shown.iter_rows(named=True)])
    return body + _more(loans.height - shown.height, *more)


def _named_headers(frame: pl.DataFrame, columns: LenderColumns) -> list[str]:
    """The headers naming a loan: its loan id (when the input has one), then its place
    in the input: its line in the file (`source_row`), or for results written before
    batchval kept it, its row among the data rows."""
    line = "line" if "source_row" in frame.columns else "row"
    return [line] if columns.identity is None else [columns.identity, line]


def _named(row: Mapping[str, Any], columns: LenderColumns) -> list[Any]:
    line = row.get("source_row")
    place = row["row_number"] if line is None else line
    return [place] if columns.identity is None else [row.get(IDENTITY) or "–", place]


def _more(count: int, listed: str, column: str) -> str:
    """The count of the loans a list leaves out, and where to find them all."""
    if count <= 0:
        return ""
    return (
        f"<p class='note'>{count:,} more not listed (the list shows the {e(listed)}): every "
        f"one is in results.parquet (<code>{e(column)}</code>).</p>"
    )


def _authorities(valued: pl.DataFrame) -> Section:
    """The local authorities holding the most balance."""
    grouped = (
        valued.filter(pl.col(BALANCE).is_not_null())
        .group_by("local_authority")
        .agg(pl.len().alias("homes"), pl.col(BALANCE).sum().alias("balance"))
        .sort(["balance", "local_authority"], descending=[True, False])
    )
    total = float(grouped.get_column("balance").sum())
    shown = grouped.head(AUTHORITIES_LISTED)
    body = table(
        ["local authority", "ONS code", "loans", "loan balance", "share of balance"],
        [
            [
                authority_name(r["local_authority"]),
                r["local_authority"],
                r["homes"],
                money(r["balance"]),
                percent(r["balance"] / total),
            ]
            for r in shown.iter_rows(named=True)
            if total
        ],
    )
    rest = grouped.height - shown.height
    if rest > 0:
        held = float(grouped.tail(rest).get_column("balance").sum())
        body += f"<p class='note'>{rest:,} more local authorities hold {money(held)}.</p>"
    body += f"<p class='note'>{e(NAMES_SOURCE)}</p>"
    return Section("Largest local authorities by balance", body)


def _book(book: Mapping[str, Any], summary: Mapping[str, Any], valued: pl.DataFrame) -> Section:
    """What the night did to the book: rows revalued, carried and deferred, and the
    book's LTVs before tonight's valuations are counted and after."""
    rows = book.get("rows") or {}
    body = cards(
        [
            ("revalued tonight", rows.get("valued")),
            ("carried from the book", rows.get("carried")),
            ("left for a later night", rows.get("deferred")),
            ("problems", rows.get("problems")),
            ("entries in the book", book.get("entries")),
            ("every row fresh by", book.get("fresh_by")),
        ]
    )
    if book.get("budget_keeps_up") is False:
        body += (
            f"<p class='stop'>The nightly budget ({e(book.get('budget_calls'))} calls) does "
            f"not keep the book fresh: {e(book.get('calls_a_night_to_stay_fresh'))} calls a "
            f"night are needed for --fresh-for {e(book.get('fresh_for_days'))} days.</p>"
        )
    tonight, whole = summary.get("portfolio") or {}, book.get("portfolio") or {}
    if tonight or whole:
        body += table(
            ["", "tonight's valuations", "the whole book (carried rows too)"],
            [
                ["loans", tonight.get("rows"), whole.get("rows")],
                [
                    "loan balance",
                    money(tonight.get("sum_balance")),
                    money(whole.get("sum_balance")),
                ],
                [
                    "weighted LTV",
                    percent(tonight.get("weighted_ltv")),
                    percent(whole.get("weighted_ltv")),
                ],
                [
                    "aggregate LTV",
                    percent(tonight.get("aggregate_ltv")),
                    percent(whole.get("aggregate_ltv")),
                ],
            ],
        )
    if "source" in valued.columns and BALANCE in valued.columns and LTV in valued.columns:
        by_source = (
            valued.filter(pl.col(BALANCE).is_not_null() & pl.col(LTV).is_not_null())
            .group_by("source")
            .agg(
                pl.len().alias("loans"),
                pl.col(BALANCE).sum().alias("balance"),
                ((pl.col(BALANCE) * pl.col(LTV)).sum() / pl.col(BALANCE).sum()).alias("w"),
            )
            .sort("source")
        )
        body += table(
            ["source", "loans", "loan balance", "weighted LTV"],
            [
                [
                    _SOURCES.get(r["source"], r["source"]),
                    r["loans"],
                    money(r["balance"]),
                    percent(r["w"]),
                ]
                for r in by_source.iter_rows(named=True)
            ],
        )
    profile = book.get("age_profile") or {}
    if profile:
        body += table(
            ["book entries valued", "entries"],
            [[k.replace("_", " "), v] for k, v in profile.items()],
        )
    return Section(f"The book {book.get('path', '')}", body)


_SOURCES = {"api": "valued tonight", "book": "carried from the book"}


def _since_last(valued: pl.DataFrame, columns: LenderColumns) -> str:
    """Each loan revalued tonight against the book entry its valuation replaced
    (results.parquet's `previous_estimate`): the median change, how many rose and fell,
    and the largest moves each way, named."""
    if "previous_estimate" not in valued.columns:
        return ""
    change = (pl.col("estimate") / pl.col("previous_estimate") - 1).alias("\x00change")
    moved = valued.filter(
        (pl.col("source") == "api") & (pl.col("previous_estimate") > 0)
    ).with_columns(change)
    if moved.height == 0:
        return "<h3>Since the last valuation</h3><p>No loan revalued tonight had a book entry.</p>"
    changes = moved.get_column("\x00change")
    body = "<h3>Since the last valuation</h3>" + cards(
        [
            ("loans revalued with an earlier valuation", f"{moved.height:,}"),
            ("median change", percent(changes.median())),
            ("rose", f"{int((changes > 0).sum()):,}"),
            ("fell", f"{int((changes < 0).sum()):,}"),
        ]
    )
    # A loan is listed under the way it moved; one whose estimate held is under neither.
    for title, ordered in (
        ("Largest falls", moved.filter(pl.col("\x00change") < 0).sort("\x00change")),
        (
            "Largest rises",
            moved.filter(pl.col("\x00change") > 0).sort("\x00change", descending=True),
        ),
    ):
        shown = ordered.head(MOVES_LISTED)
        if shown.height == 0:
            body += f"<h4>{title}</h4><p>None.</p>"
            continue
        body += f"<h4>{title}</h4>" + table(
            [
                *_named_headers(moved, columns),
                "previous estimate",
                "valued then",
                "estimate",
                "change",
            ],
            [
                [
                    *_named(r, columns),
                    money(r["previous_estimate"]),
                    when(r.get("previous_valued_at")),
                    money(r["estimate"]),
                    percent(r["\x00change"]),
                ]
                for r in shown.iter_rows(named=True)
            ],
        )
    return body


_TRIGGER_TITLES = {
    "trigger_fall": "Fallen more than {fall} since the last valuation",
    "trigger_age": "Last valued {age} years ago or more",
    "trigger_large_loan_age": "Loans over {large} last valued {large_age} years ago or more",
}


def revaluation_triggers(
    valued: pl.DataFrame, summary: Mapping[str, Any], columns: LenderColumns
) -> Section | None:
    """The loans the revaluation policy flags, each trigger's loans named, in words that
    claim no more than the figures hold."""
    if "revaluation_basis" not in valued.columns:
        return None
    portfolio = summary.get("portfolio") or {}
    found = portfolio.get("revaluation") if isinstance(portfolio, Mapping) else None
    policy = RevaluationPolicy(**(found or {}).get("policy", {}))
    words = {
        "fall": percent(policy.fall_share, 0),
        "age": f"{policy.max_age_years:g}",
        "large": money(policy.large_loan_balance),
        "large_age": f"{policy.large_loan_max_age_years:g}",
    }
    body = (
        "<p>For the lender's own revaluation process (the PRA's Basel 3.1 monitoring of "
        "exposures under the standardised approach, CRR Article 124D(5)): a loan is flagged "
        f"when its estimate is more than {e(words['fall'])} below its last valuation, when "
        f"that valuation is {e(words['age'])} years old or more, and when a loan over "
        f"{e(words['large'])} was last valued {e(words['large_age'])} years ago or more. The "
        "flags are one input to the lender's own estimate: an automated estimate is not a "
        "qualifying valuation, balance over estimate is not the regulatory LTV, and one "
        "home's estimate is evidence of a market-wide fall, not proof of it.</p>"
    )
    basis = valued.get_column("revaluation_basis")
    standing_in = int((basis == "origination").sum())
    flagged = {name: valued.filter(pl.col(name).fill_null(False)) for name in TRIGGERS}
    figures: list[tuple[str, Any]] = []
    for name, chosen in flagged.items():
        said = _TRIGGER_TITLES[name].format(**words).lower()
        count = f"{chosen.height:,}"
        if BALANCE in valued.columns:
            count += f" ({money(chosen.get_column(BALANCE).sum())})"
        figures.append((said, count))
    body += cards(figures)
    if standing_in:
        body += (
            f"<p class='note'>{standing_in:,} loans have no last valuation in the input: "
            "their origination value and date stand in (results.parquet's "
            "<code>revaluation_basis</code> is <code>origination</code>). Map the columns "
            "<code>last_valuation</code> and <code>last_valuation_date</code> under "
            "<code>input.columns</code> if the input holds them under other names.</p>"
        )
    named = _named_headers(valued, columns)
    for name, chosen in flagged.items():
        body += f"<h3>{e(_TRIGGER_TITLES[name].format(**words))}</h3>"
        if chosen.height == 0:
            body += "<p>None.</p>"
            continue
        order = "fall_since_last_valuation" if name == "trigger_fall" else "valuation_age_years"
        shown = chosen.sort(order, descending=True, nulls_last=True).head(LOANS_LISTED)
        body += table(
            [*named, "loan balance", "estimate", "change since", "years since", "measured from"],
            [
                [
                    *_named(r, columns),
                    money(r.get(BALANCE)),
                    money(r["estimate"]),
                    _change(r.get("fall_since_last_valuation")),
                    _years(r.get("valuation_age_years")),
                    _BASES.get(r.get("revaluation_basis") or "", "–"),
                ]
                for r in shown.iter_rows(named=True)
            ],
        )
        body += _more(chosen.height - shown.height, f"flagged loans, by {order}", name)
    return Section("Revaluation triggers", body)


_BASES = {"last_valuation": "last valuation", "origination": "origination"}


def _change(fall: Any) -> str:
    """The estimate against the last valuation, signed as a reader reads a change: a fall
    of 0.12 is `-12.0 %`, a rise (a fall of -0.05) `+5.0 %`, none `0.0 %`."""
    if fall is None:
        return "–"
    change = -float(fall)
    return ("+" if change > 0 else "") + percent(change + 0.0)


def _years(value: Any) -> str:
    return "–" if value is None else f"{float(value):.1f}"
