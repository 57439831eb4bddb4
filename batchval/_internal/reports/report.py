"""`batchval report DIR`: DIR/report.html, one self-contained page about a run.

For the person who asked for the numbers: what happened (counts, the stop reason and
what to do next), which rows need a person and why (with their row numbers), what the
figures look like (estimates, range widths, LTV bands and flags when the results carry
them, the age of the valuations) and how the calls went over time. Everything is read
from DIR's own outputs (summary.json, results.parquet, problems.parquet, batchval.log,
the checkpoint's invocations); nothing is sent anywhere.

The page has no script and loads nothing: its charts are inline SVG (`charts`), its
style is inline, so it opens from a mail attachment or a shared drive as it is.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from batchval._internal.contract import REVALUATION_FIELDS, amounts
from batchval._internal.input import REASONS, left_out_line
from batchval._internal.place import (
    DRY_RUN_NAME,
    LOG_NAME,
    PROBLEMS_NAME,
    RESULTS_NAME,
    write_text_atomic,
)
from batchval._internal.reports import charts, report_headline, report_lender, report_streets
from batchval._internal.reports.report_page import (
    Section,
    banner,
    cards,
    e,
    money,
    page,
    percent,
    provenance,
    spent,
    table,
    when,
)
from batchval._internal.runs import SUMMARY_NAME, InputRead, opened
from batchval._internal.store import Database, Invocation
from batchval._internal.streets import STREETS_NAME
from batchval._internal.valuations import MANIFEST_NAME, input_columns

REPORT_NAME = "report.html"
# A scatter of a million points is a 100 MB page: every n-th row up to this many.
SCATTER_POINTS = 4000
# Row numbers listed per group of problems; the rest are counted.
ROW_NUMBERS_SHOWN = 25
AGE_BANDS = ((30, "within 30 days"), (90, "31 to 90 days"), (180, "91 to 180 days"))
FLAGS = ("partial_data", "wide_range", "stale_index", "model_changed")
RESULT_COLUMNS = (
    "row_number",
    "source_row",
    "estimate",
    "range_low",
    "range_high",
    "valued_at",
    "indexed_to",
    "source",
    "local_authority",
    "indexed_ltv",
    "ltv_low_estimate",
    "ltv_band",
    "change_since_origination",
    "months_since_origination",
    "previous_estimate",  # a --book run's: what a revalued loan's book entry held
    "previous_valued_at",
    *FLAGS,
    *REVALUATION_FIELDS,
)
PROBLEM_COLUMNS = (
    "row_number",
    "source_row",
    "stage",
    "type",
    "field",
    "code",
    "detail",
    "retryable",
)


class ReportError(Exception):
    """DIR holds nothing to report on (exit 64)."""


def write_report(out_dir: Path, *, now: dt.datetime | None = None) -> Path:
    """Write DIR/report.html from DIR's outputs and return its path."""
    summary_path = out_dir / SUMMARY_NAME
    if not summary_path.is_file() and (out_dir / DRY_RUN_NAME).is_file():
        summary_path = out_dir / DRY_RUN_NAME  # a dry run's DIR: its price and problems
    if not summary_path.is_file():
        raise ReportError(f"{out_dir} holds no finished batchval run (no {SUMMARY_NAME})")
    try:
        summary: dict[str, Any] = json.loads(summary_path.read_text(encoding="utf-8"))
        if not isinstance(summary, dict):
            raise ReportError(f"{summary_path} is not a batchval summary")
        configured = _configured_columns(out_dir)
        problems = _read(out_dir / PROBLEMS_NAME, PROBLEM_COLUMNS, configured)
        listed = _problems(*problems)
        now = now or dt.datetime.now(dt.UTC)
        streets = (out_dir / STREETS_NAME).is_file()
        if summary.get("command") == "streets" or (
            streets and not (out_dir / RESULTS_NAME).is_file()
        ):
            text = _streets_page(out_dir, summary, listed, now)
        else:
            text = _run_page(out_dir, summary, problems[1], listed, configured, now)
    except (OSError, ValueError, pl.exceptions.PolarsError) as exc:
        raise ReportError(f"{out_dir} holds outputs that cannot be read: {exc}") from None
    path = out_dir / REPORT_NAME
    write_text_atomic(path, text)
    return path


def _run_page(
    out_dir: Path,
    summary: dict[str, Any],
    problems: pl.DataFrame | None,
    listed: Section | None,
    configured: Mapping[str, str],
    now: dt.datetime,
) -> str:
    """The committee's page: the book and as of when, the headline, the figures and the
    loans to look at, the problems; the operation last, under a heading of its own."""
    columns, results = _read(out_dir / RESULTS_NAME, RESULT_COLUMNS, configured)
    valued = _valued(results, columns)
    sections: list[Section | None] = [
        report_headline.headline(summary, valued, problems, columns),
        _indexed(out_dir, summary),
    ]
    if valued is not None:
        sections += [
            report_lender.ltv_bands(valued, summary),
            report_lender.movements(valued, columns),
            report_lender.loans_to_look_at(valued, columns),
            report_lender.revaluation_triggers(valued, summary, columns),
        ]
    sections.append(listed)
    if valued is not None:
        sections += [report_lender.authorities(valued), *_figures(valued, now)]
        sections.append(report_lender.night(summary, valued))
    sections.append(_what_was_read(summary))
    sections.append(_operation(out_dir, summary, now))
    heading = report_headline.heading(summary)
    return page(
        f"{heading}: batchval report",
        heading,
        report_headline.as_of(summary, valued),
        [s for s in sections if s is not None],
    )


def _streets_page(
    out_dir: Path, summary: dict[str, Any], listed: Section | None, now: dt.datetime
) -> str:
    """A `batchval streets` DIR: its outcome in its own words, then the street figures."""
    sections = [
        _outcome(summary, report_streets.OUTCOME_LABELS),
        listed,
        *report_streets.sections(report_streets.read_streets(out_dir)),
        _activity(out_dir, summary),
    ]
    status = f"{summary.get('status', '?')}, exit {summary.get('exit_code', '?')}"
    return page(
        "batchval street analysis",
        f"Street analysis: {status}",
        banner(summary) + provenance(summary, now),
        [s for s in sections if s is not None],
    )


def _configured_columns(out_dir: Path) -> Mapping[str, str]:
    """The input's column mapping the run was made with (manifest.json's settings): the
    balance may sit in a column the config named."""
    path = out_dir / MANIFEST_NAME
    if not path.is_file():
        return {}
    return input_columns(json.loads(path.read_text(encoding="utf-8")))


def _read(
    path: Path, wanted: Sequence[str], configured: Mapping[str, str]
) -> tuple[report_lender.LenderColumns, pl.DataFrame | None]:
    """Only the `wanted` columns the file has, with the loan's balance and identity found
    as the run found them (`configured`: its config's `input.columns`): a million rows
    with commentary would be gigabytes read whole."""
    if not path.is_file():
        return report_lender.LenderColumns(None, None), None
    frame = pl.scan_parquet(path)
    present = frame.collect_schema().names()
    columns = report_lender.find_columns(present, configured)
    chosen = [*wanted, columns.balance, columns.identity]
    kept = dict.fromkeys(c for c in chosen if c is not None and c in present)
    return columns, frame.select(list(kept)).collect()


# --- sections --------------------------------------------------------------------------


def _outcome(summary: dict[str, Any], labels: Mapping[str, str] | None = None) -> Section:
    said = {"valued": "valued", "requests": "distinct requests", **(labels or {})}
    rows, requests = summary.get("rows", {}), summary.get("requests", {})
    credits = summary.get("credits_charged", {})
    charges = summary.get("charges") or {}
    calls, limited = summary.get("calls", {}), summary.get("rate_limited", {})
    figures = [
        ("rows", rows.get("total")),
        (said["valued"], rows.get("valued")),
        ("problems", rows.get("problems")),
        ("pending", rows.get("pending")),
        ("rows sharing a request (valued once)", rows.get("duplicates")),
        (said["requests"], requests.get("unique")),
        ("calls (all invocations)", calls.get("total")),
        ("429 answers (all invocations)", limited.get("total")),
        ("charged (all invocations)", spent(credits.get("total"))),
        ("replays answered free", charges.get("replayed_calls")),
        ("charges uncertain (not counted)", charges.get("uncertain_calls")),
        ("API credits left", summary.get("last_known_balance")),
    ]
    body = cards(figures)
    stop = summary.get("stop")
    if stop:
        not_before = f" Not before {e(when(stop['not_before']))}." if stop.get("not_before") else ""
        body += (
            f'<p class="stop">Stopped: <b>{e(stop.get("reason"))}</b>: '
            f"{e(stop.get('detail'))}.{not_before}</p>"
        )
    body += f"<p>Next: {e(summary.get('next_action', ''))}</p>"
    by_type = summary.get("problems_by_type") or {}
    if by_type:
        body += table(["problem type", "rows"], sorted(by_type.items(), key=lambda kv: -kv[1]))
    return Section("Outcome", body)


# What a person does about each kind of problem, in the order the page lists them.
FIX_INPUT = "Correct the input and run again (only these loans are sent)"
OUTSIDE = "Not valued: outside England and Wales, which the API does not value"
TRY_LATER = "Run the same command again later: the API could not value these now"
ASK = "Look at the detail: the API refused these requests"
_ACTIONS = (FIX_INPUT, OUTSIDE, TRY_LATER, ASK)


def _action() -> pl.Expr:
    """Each problem's `_ACTIONS` entry, from its stage, type and whether it may pass."""
    kind = pl.col("type")
    return (
        pl.when(kind == "outside-coverage")
        .then(pl.lit(OUTSIDE))
        .when((pl.col("stage") == "input") | kind.is_in(["floor-area-required", "invalid-request"]))
        .then(pl.lit(FIX_INPUT))
        .when(pl.col("retryable").fill_null(False))
        .then(pl.lit(TRY_LATER))
        .otherwise(pl.lit(ASK))
    )


def _problems(
    columns: report_lender.LenderColumns, problems: pl.DataFrame | None
) -> Section | None:
    """Problems grouped by what to do about them, then by kind; each loan named by its
    loan id and its line in the input (`63281519 (line 74)`), the loan id and balance
    found as the run found them (`columns`, as `_read` found them)."""
    if problems is None or problems.height == 0:
        return None
    line = "source_row" if "source_row" in problems.columns else "row_number"
    named = pl.concat_str(pl.lit("line " if line == "source_row" else "row "), pl.col(line))
    loan = columns.identity if columns.identity in problems.columns else None
    if loan is not None:
        loan_text = pl.col(loan).cast(pl.String)
        named = (
            pl.when(loan_text.is_null() | (loan_text.str.strip_chars() == ""))
            .then(pl.concat_str(pl.lit("no loan id, "), named))
            .otherwise(pl.concat_str(loan_text, pl.lit(" ("), named, pl.lit(")")))
        )
    absent = [c for c in ("stage", "type", "field") if c not in problems.columns]
    frame = problems.with_columns(pl.lit(None, pl.String).alias(c) for c in absent)
    if "retryable" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, pl.Boolean).alias("retryable"))
    frame = frame.with_columns(_action().alias("\x00action"))
    balance = columns.balance if columns.balance in frame.columns else None
    aggregations = [
        pl.len().alias("loans"),
        pl.col("detail").first().alias("detail"),
        named.head(ROW_NUMBERS_SHOWN).alias("named"),
    ]
    if balance is not None:
        amounts_of = pl.col(balance).map_batches(
            lambda s: pl.Series(amounts(s.to_arrow()), dtype=pl.Float64), return_dtype=pl.Float64
        )
        aggregations.append(amounts_of.sum().alias("balance"))
    groups = (
        frame.sort("row_number")
        .group_by("\x00action", "type", "field", maintain_order=True)
        .agg(aggregations)
        .sort("loans", descending=True, maintain_order=True)
    )
    body = (
        "<p>Each loan below has no valuation. They are grouped by what to do, then by the "
        "kind of problem; every one is in problems.parquet.</p>"
    )
    headers = ["problem", "field", "loans", *(["loan balance"] if balance else [])]
    headers += ["what the first loan's problem says", "loans (loan id, line)"]
    for action in _ACTIONS:
        mine = groups.filter(pl.col("\x00action") == action)
        if mine.height == 0:
            continue
        lines = []
        for group in mine.iter_rows(named=True):
            listed = ", ".join(str(n) for n in group["named"])
            more = group["loans"] - len(group["named"])
            if more > 0:
                listed += f" and {more:,} more"
            cells = [group["type"], group["field"], f"{group['loans']:,}"]
            cells += [money(group["balance"])] if balance else []
            lines.append([*cells, group["detail"], listed])
        body += f"<h3>{e(action)}</h3>" + table(headers, lines)
    return Section("Loans not valued: problems to act on", body)


def _valued(
    results: pl.DataFrame | None, columns: report_lender.LenderColumns
) -> pl.DataFrame | None:
    """The rows with an estimate, with the report's own figures (balance, LTV, loan)."""
    if results is None or "estimate" not in results.columns:
        return None
    valued = results.filter(pl.col("estimate").is_not_null())
    return report_lender.with_figures(valued, columns) if valued.height else None


def _figures(valued: pl.DataFrame, now: dt.datetime) -> list[Section]:
    """The estimates, the flags and the valuations' ages."""
    sections = [_estimates(valued)]
    flags = [f for f in FLAGS if f in valued.columns]
    if flags:
        counts = [
            (f.replace("_", " "), int(valued.get_column(f).fill_null(False).sum())) for f in flags
        ]
        sections.append(Section("Flags", table(["flag", "homes"], counts)))
    if "valued_at" in valued.columns:
        sections.append(_ages(valued, now))
    return sections


def _estimates(valued: pl.DataFrame) -> Section:
    estimates = valued.get_column("estimate").cast(pl.Float64)
    body = cards(
        [
            ("homes valued", valued.height),
            ("sum of estimates", money(estimates.sum())),
            ("median estimate", money(estimates.median())),
        ]
    )
    body += charts.histogram(
        estimates.to_list(), title="Estimates", xlabel="estimate (middle figure)"
    )
    if {"range_low", "range_high"} <= set(valued.columns):
        step = max(1, valued.height // SCATTER_POINTS)
        sample = valued.gather_every(step).filter(pl.col("estimate") > 0)
        width = (pl.col("range_high") - pl.col("range_low")) / pl.col("estimate")
        sample = sample.select(pl.col("estimate").cast(pl.Float64), width.alias("width"))
        body += charts.scatter(
            sample.get_column("estimate").to_list(),
            sample.get_column("width").to_list(),
            title="Range width against estimate",
            xlabel="estimate",
            ylabel="(high - low) / estimate",
        )
        if step > 1:
            body += f"<p class='note'>One home in {step:,} is drawn.</p>"
    body += (
        "<p class='note'>The range's coverage is the API's back-test share of sales that "
        "fell inside such ranges: a property of the model, not a confidence level for one "
        "home.</p>"
    )
    return Section("Estimates", body)


def _ages(valued: pl.DataFrame, now: dt.datetime) -> Section:
    """How old the valuations are: the age profile a book's freshness policy is about."""
    instant = pl.Datetime("us", "UTC")
    age = pl.lit(now, dtype=instant) - pl.col("valued_at").cast(instant)
    ages = valued.select(age.dt.total_days()).to_series()
    lower, rows = -1, []
    for upper, label in AGE_BANDS:
        rows.append([label, f"{int(((ages > lower) & (ages <= upper)).sum()):,}"])
        lower = upper
    rows.append([f"older than {lower} days", f"{int((ages > lower).sum()):,}"])
    if "source" in valued.columns:
        for source, count in valued.group_by("source").len().sort("source").iter_rows():
            rows.append([f"source = {source}", f"{count:,}"])
    return Section("Age of the valuations", table(["valued", "homes"], rows))


# What an indexed value is and is not, said wherever one is shown.
INDEXED_WORDS = (
    "An indexed value is a loan's last figure moved by its local authority's house price "
    "index: monitoring between valuations, never a valuation, and no ground for a lending "
    "decision on its own."
)
# `index.source: api`, as the contract describes it (docs/api.md, 2.5): the estimate-
# against-index figure below shows how it and the model differ.
API_INDEX_NAME = (
    "The API's own index (the national house price index for each local authority, from "
    "its street analyses)"
)
METHOD_WORDS = {
    "avm": "valued tonight",
    "avm_indexed": "an earlier valuation, rolled forward",
    "indexed": "the lender's own figures, rolled forward",
    "none": "no value",
}


def _indexed(out_dir: Path, summary: Mapping[str, Any]) -> Section | None:
    """The loans by how their value was made, with the index month, the weighted LTV on
    indexed values and the index's attribution (summary.json's `index`, the manifest's
    `reference_data.index`); None without an index."""
    book = summary.get("book") or {}
    found = (book.get("portfolio") or {}).get("index") or (summary.get("portfolio") or {}).get(
        "index"
    )
    if not isinstance(found, Mapping):
        return None
    covered = found.get("coverage") or {}
    rows = [
        [METHOD_WORDS.get(method, method), sums.get("loans"), money(sums.get("balance"))]
        for method, sums in covered.items()
    ]
    name = API_INDEX_NAME if found.get("source") == "api" else "UK House Price Index"
    body = (
        f"<p>{e(name)} to {e(found.get('index_month'))}. {e(INDEXED_WORDS)}</p>"
        + table(["the loan's value", "loans", "loan balance"], rows)
        + f"<p>Weighted LTV on indexed values: {e(percent(found.get('hpi_weighted_ltv')))}.</p>"
        + _tracking(found.get("estimate_vs_index"))
    )
    try:
        manifest = json.loads((out_dir / MANIFEST_NAME).read_text(encoding="utf-8"))
        credits = manifest["reference_data"]["index"]["attribution"]
    except (OSError, ValueError, KeyError, TypeError):
        credits = []
    body += "".join(f"<p class='note'>{e(line)}</p>" for line in credits)
    return Section("Every loan by the index", body)


def _tracking(found: object) -> str:
    """How the index tracked tonight's estimates (summary.json's `estimate_vs_index`), in
    words for a model-risk reviewer; nothing where no loan had an older figure."""
    if not isinstance(found, Mapping) or not found.get("loans"):
        return ""
    return (
        f"<p>How the index tracked the model: over {found['loans']:,} loan(s) valued tonight "
        "with an earlier figure of the lender's, that figure rolled forward by the index to "
        "the estimate's month; the estimate over it, less one, has a median of "
        f"{e(percent(found.get('median')))} (interquartile range "
        f"{e(percent(found.get('lower_quartile')))} to "
        f"{e(percent(found.get('upper_quartile')))}). Above zero, the model values homes "
        "above the index's path.</p>"
    )


def _what_was_read(summary: Mapping[str, Any]) -> Section | None:
    """The input's lines set aside as not loans, each with why, and the columns left out
    of every output; None when there is neither."""
    read = InputRead.of(summary.get("input_read"))
    if read is None:
        return None
    set_aside, left_out = read.not_loans, read.personal_left_out
    if not set_aside and not left_out:
        return None
    body = ""
    if set_aside:
        body += (
            f"<p>{len(set_aside):,} line(s) of the table are not loans and were set aside: "
            "their balances are in no figure of this report (input.not_loans in the config "
            "corrects it, by line or by pattern).</p>"
        )
        body += table(
            ["line", "what it says", "why it is not a loan"],
            [
                [n.get("line"), n.get("label", n.get("text")), REASONS.get(n.get("reason", ""), "")]
                for n in set_aside
            ],
        )
    if left_out:
        body += f"<p>{e(left_out_line(left_out))}.</p>"
    return Section("What was read", body)


def _operation(out_dir: Path, summary: dict[str, Any], now: dt.datetime) -> Section:
    """The operator's part, after everything the committee reads: the run's rows and
    requests, calls, rate limits, charges and API credits, and how the calls went."""
    ran = f"{summary.get('status', '?')}, exit {summary.get('exit_code', '?')}"
    body = f"<p>Run {e(summary.get('run_id'))}: {e(ran)}.</p>"
    body += banner(summary) + provenance(summary, now) + _outcome(summary).body
    body += "<h3>Calls over time</h3>" + _activity(out_dir, summary).body
    return Section("The operation: calls, rate limits, charges, API credits", body, "operation")


def _activity(out_dir: Path, summary: dict[str, Any]) -> Section:
    """Calls, credits and the pace of the last invocation; every invocation in a table."""
    body = ""
    points = _pace(out_dir / LOG_NAME, summary)
    if len(points) >= 2:
        start = points[0][0]
        seconds = [(at - start).total_seconds() for at, _ in points]
        names = [n for n in ("calls", "credits", "rate_limited") if any(n in p for _, p in points)]
        series = {name: [float(p.get(name) or 0) for _, p in points] for name in names}
        body += charts.over_time(seconds, series, title="The last invocation, as it went")
    else:
        body += "<p class='note'>The last invocation was too short to log its pace.</p>"
    database = opened(Database.open_existing, out_dir)
    history: list[Invocation] = []
    if database is not None:
        try:
            history = database.invocations.history()
        finally:
            database.close()
    if history:
        body += table(
            ["started", "ended", "exit", "calls", "429s", "credits"],
            [
                [
                    when(i.started_at),
                    when(i.ended_at) if i.ended_at else "(killed)",
                    i.exit_code,
                    i.calls,
                    i.rate_limited,
                    i.credits,
                ]
                for i in history
            ],
        )
    return Section("Calls over time", body)


def _pace(log_path: Path, summary: dict[str, Any]) -> list[tuple[dt.datetime, dict[str, Any]]]:
    """The last invocation's running totals: zero at its start, each `run.progress` line
    of the log, and the summary's own totals at its end."""
    started, finished = summary.get("started_at"), summary.get("finished_at")
    if not started or not finished:
        return []
    points: list[tuple[dt.datetime, dict[str, Any]]] = [
        (dt.datetime.fromisoformat(started), {"calls": 0, "credits": 0})
    ]
    points += list(_progress_events(log_path, started, finished))
    points.append(
        (
            dt.datetime.fromisoformat(finished),
            {
                "calls": summary.get("calls", {}).get("this_invocation", 0),
                "credits": summary.get("credits_charged", {}).get("this_invocation", 0),
            },
        )
    )
    return points


def _progress_events(
    log_path: Path, since: str, until: str
) -> Iterable[tuple[dt.datetime, dict[str, Any]]]:
    """The `run.progress` lines of the last invocation only: the log also holds earlier
    invocations and later commands on the DIR (a verify)."""
    if not log_path.is_file():
        return
    start, end = dt.datetime.fromisoformat(since), dt.datetime.fromisoformat(until)
    with log_path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if '"run.progress"' not in line:
                continue
            try:
                event = json.loads(line)
                at = dt.datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00"))
            except (ValueError, KeyError, TypeError):
                continue  # a line cut by a kill: skipped, not fatal
            if start <= at <= end:
                yield at, event
