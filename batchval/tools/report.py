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

import dataclasses
import datetime as dt
import html
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from batchval.engine.files import write_text_atomic
from batchval.engine.names import DRY_RUN_NAME, LOG_NAME, PROBLEMS_NAME, RESULTS_NAME
from batchval.engine.summary import SUMMARY_NAME
from batchval.store.checkpoint import Checkpoint
from batchval.store.records import Invocation
from batchval.tools import charts

REPORT_NAME = "report.html"
# A scatter of a million points is a 100 MB page: every n-th row up to this many.
SCATTER_POINTS = 4000
# Row numbers listed per group of problems; the rest are counted.
ROW_NUMBERS_SHOWN = 25
AGE_BANDS = ((30, "within 30 days"), (90, "31 to 90 days"), (180, "91 to 180 days"))
FLAGS = ("partial_data", "wide_range", "stale_index", "model_changed")
RESULT_COLUMNS = (
    "row_number",
    "estimate",
    "range_low",
    "range_high",
    "valued_at",
    "source",
    "ltv_band",
    "loan_balance",
    *FLAGS,
)
PROBLEM_COLUMNS = ("row_number", "stage", "type", "field", "code", "detail")


class ReportError(Exception):
    """DIR holds nothing to report on (exit 64)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Section:
    title: str
    body: str  # HTML, already escaped where it carries text


def write_report(out_dir: Path, *, now: dt.datetime | None = None) -> Path:
    """Write DIR/report.html from DIR's outputs and return its path."""
    summary_path = out_dir / SUMMARY_NAME
    if not summary_path.is_file() and (out_dir / DRY_RUN_NAME).is_file():
        summary_path = out_dir / DRY_RUN_NAME  # a dry run's DIR: its price and problems
    if not summary_path.is_file():
        raise ReportError(f"{out_dir} holds no finished batchval run (no {SUMMARY_NAME})")
    try:
        summary: dict[str, Any] = json.loads(summary_path.read_text(encoding="utf-8"))
        results = _read(out_dir / RESULTS_NAME, RESULT_COLUMNS)
        problems = _read(out_dir / PROBLEMS_NAME, PROBLEM_COLUMNS)
    except (OSError, ValueError, pl.exceptions.PolarsError) as exc:
        raise ReportError(f"{out_dir} holds outputs that cannot be read: {exc}") from None
    if not isinstance(summary, dict):
        raise ReportError(f"{summary_path} is not a batchval summary")
    now = now or dt.datetime.now(dt.UTC)
    sections = [
        _outcome(summary),
        _problems(problems),
        *_figures(results, now),
        _activity(out_dir, summary),
    ]
    page = _page(summary, [s for s in sections if s is not None], now)
    path = out_dir / REPORT_NAME
    write_text_atomic(path, page)
    return path


def _read(path: Path, wanted: Sequence[str]) -> pl.DataFrame | None:
    """Only the columns the page draws: a million rows with commentary would be
    gigabytes read whole."""
    if not path.is_file():
        return None
    frame = pl.scan_parquet(path)
    present = frame.collect_schema().names()
    return frame.select([c for c in wanted if c in present]).collect()


# --- sections --------------------------------------------------------------------------


def _outcome(summary: dict[str, Any]) -> Section:
    rows, requests = summary.get("rows", {}), summary.get("requests", {})
    credits = summary.get("credits_charged", {})
    charges = summary.get("charges") or {}
    calls, limited = summary.get("calls", {}), summary.get("rate_limited", {})
    figures = [
        ("rows", rows.get("total")),
        ("valued", rows.get("valued")),
        ("problems", rows.get("problems")),
        ("pending", rows.get("pending")),
        ("repeat an earlier row", rows.get("duplicates")),
        ("distinct requests", requests.get("unique")),
        ("calls (all invocations)", calls.get("total")),
        ("429 answers (all invocations)", limited.get("total")),
        ("credits charged (all invocations)", credits.get("total")),
        ("replays answered free", charges.get("replayed_calls")),
        ("charges uncertain (not counted)", charges.get("uncertain_calls")),
        ("last known balance", summary.get("last_known_balance")),
    ]
    body = _cards(figures)
    stop = summary.get("stop")
    if stop:
        not_before = f" Not before {_e(stop['not_before'])}." if stop.get("not_before") else ""
        body += (
            f'<p class="stop">Stopped: <b>{_e(stop.get("reason"))}</b>: '
            f"{_e(stop.get('detail'))}.{not_before}</p>"
        )
    body += f"<p>Next: {_e(summary.get('next_action', ''))}</p>"
    by_type = summary.get("problems_by_type") or {}
    if by_type:
        body += _table(["problem type", "rows"], sorted(by_type.items(), key=lambda kv: -kv[1]))
    return Section("Outcome", body)


def _problems(problems: pl.DataFrame | None) -> Section | None:
    """Problems grouped by what a person would do about them, with their row numbers."""
    if problems is None or problems.height == 0:
        return None
    keys = [c for c in ("stage", "type", "field", "code") if c in problems.columns]
    groups = (
        problems.group_by(keys, maintain_order=True)
        .agg(
            pl.len().alias("rows"),
            pl.col("detail").first().alias("detail"),
            pl.col("row_number").sort().head(ROW_NUMBERS_SHOWN).alias("row_numbers"),
        )
        .sort("rows", descending=True)
    )
    lines = []
    for group in groups.iter_rows(named=True):
        numbers = ", ".join(str(n) for n in group["row_numbers"])
        more = group["rows"] - len(group["row_numbers"])
        if more > 0:
            numbers += f" and {more:,} more"
        lines.append(
            [
                group.get("stage"),
                group.get("type"),
                group.get("field"),
                f"{group['rows']:,}",
                group["detail"],
                numbers,
            ]
        )
    body = "<p>Each line is one kind of problem; fix those rows in the input and run again.</p>"
    body += _table(
        ["stage", "type", "field", "rows", "what to do (first row's detail)", "rows"], lines
    )
    return Section("Problems to act on", body)


def _figures(results: pl.DataFrame | None, now: dt.datetime) -> list[Section]:
    if results is None or results.height == 0 or "estimate" not in results.columns:
        return []
    valued = results.filter(pl.col("estimate").is_not_null())
    if valued.height == 0:
        return []
    sections = [_estimates(valued)]
    if "ltv_band" in valued.columns:
        sections.append(_ltv_bands(valued))
    flags = [f for f in FLAGS if f in valued.columns]
    if flags:
        counts = [
            (f.replace("_", " "), int(valued.get_column(f).fill_null(False).sum())) for f in flags
        ]
        sections.append(Section("Flags", _table(["flag", "homes"], counts)))
    if "valued_at" in valued.columns:
        sections.append(_ages(valued, now))
    return sections


def _estimates(valued: pl.DataFrame) -> Section:
    estimates = valued.get_column("estimate").cast(pl.Float64)
    body = _cards(
        [
            ("homes valued", valued.height),
            ("sum of estimates", _money(estimates.sum())),
            ("median estimate", _money(estimates.median())),
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


def _ltv_bands(valued: pl.DataFrame) -> Section:
    balance = "loan_balance" if "loan_balance" in valued.columns else None
    aggregations = [pl.len().alias("homes")]
    if balance:
        aggregations.append(pl.col(balance).cast(pl.Float64).sum().alias("balance"))
    table = valued.filter(pl.col("ltv_band").is_not_null()).group_by("ltv_band").agg(aggregations)
    table = table.sort(pl.col("ltv_band").map_elements(_band_start, return_dtype=pl.Float64))
    labels = [str(b) for b in table.get_column("ltv_band").to_list()]
    homes = table.get_column("homes").to_list()
    balances = table.get_column("balance").to_list() if balance else None
    body = charts.bars(
        labels,
        homes,
        title="Loan-to-value bands",
        ylabel="homes",
        second=balances,
        second_label="balance" if balances is not None else "",
    )
    rows = [
        [label, f"{count:,}", _money(balances[i]) if balances is not None else ""]
        for i, (label, count) in enumerate(zip(labels, homes, strict=True))
    ]
    body += _table(["band", "homes", "balance"], rows)
    return Section("Loan-to-value", body)


def _band_start(label: str) -> float:
    """Bands in order of their lower edge: `0-60` < `60-75` < ... < `over 100`."""
    found = re.search(r"\d+(?:\.\d+)?", label)
    start = float(found.group()) if found else float("inf")
    return start + 0.5 if label.lower().startswith("over") else start


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
    return Section("Age of the valuations", _table(["valued", "homes"], rows))


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
    checkpoint = Checkpoint.open_existing(out_dir)
    history: list[Invocation] = []
    if checkpoint is not None:
        try:
            history = checkpoint.invocation_history()
        finally:
            checkpoint.close()
    if history:
        body += _table(
            ["started", "ended", "exit", "calls", "429s", "credits"],
            [
                [
                    i.started_at,
                    i.ended_at or "(killed)",
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


# --- HTML ------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:60rem;color:#1a202c;padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.2rem;border-bottom:1px solid #e2e8f0;padding-bottom:.3rem}
.cards{display:flex;flex-wrap:wrap;gap:.6rem}.card{border:1px solid #e2e8f0;border-radius:6px;
padding:.5rem .8rem;min-width:9rem}.card b{display:block;font-size:1.2rem}
table{border-collapse:collapse;margin:.8rem 0;font-size:.9rem}
td,th{border:1px solid #e2e8f0;padding:.3rem .6rem;text-align:left;vertical-align:top}
.stop{background:#fffaf0;border-left:4px solid #dd6b20;padding:.5rem}
.test{background:#ebf8ff;border-left:4px solid #2b6cb0;padding:.5rem}
.note{color:#4a5568;font-size:.85rem}svg{max-width:100%;height:auto}
"""


def _page(summary: dict[str, Any], sections: Sequence[Section], now: dt.datetime) -> str:
    status = f"{summary.get('status', '?')}, exit {summary.get('exit_code', '?')}"
    banner = ""
    if summary.get("mode") == "test":
        banner = (
            "<p class='test'>Test mode: these figures are fake (sandbox or test credentials).</p>"
        )
    body = "".join(f"<section><h2>{_e(s.title)}</h2>{s.body}</section>" for s in sections)
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>batchval report: {_e(summary.get('run_id'))}</title>"
        f"<style>{_CSS}</style></head><body>"
        f"<h1>Run {_e(summary.get('run_id'))}: {_e(status)}</h1>"
        f"<p class='note'>Input {_e(summary.get('input'))}; mode {_e(summary.get('mode'))}; "
        f"last invocation {_e(summary.get('started_at'))} to {_e(summary.get('finished_at'))}; "
        f"report written {_e(now.isoformat(timespec='seconds'))}.</p>"
        f"{banner}{body}</body></html>\n"
    )


def _cards(figures: Sequence[tuple[str, Any]]) -> str:
    cards = "".join(
        f"<div class='card'>{_e(label)}<b>{_e(_figure(value))}</b></div>"
        for label, value in figures
    )
    return f"<div class='cards'>{cards}</div>"


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{_e(_figure(cell))}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figure(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def _money(value: Any) -> str:
    return "–" if value is None else f"£{float(value):,.0f}"


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))
