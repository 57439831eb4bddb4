"""The page of `batchval report`: its frame, its banner and the pieces every section is
made of (figure cards, tables), with figures written the way a person reads them
(`£26,657,835`, `46.3 %`, `25 Nov 2026 14:07 UTC`).

Every piece escapes the text it is given, so a value from a lender's file (a loan id, a
problem detail holding markup) is shown as text and never run as HTML.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# A live credit is a penny: a valuation of 10 credits costs 10p (the API's price list).
PENCE_PER_CREDIT = 1


@dataclasses.dataclass(frozen=True, slots=True)
class Section:
    title: str
    body: str  # HTML, already escaped where it carries text
    kind: str = ""  # its class: `operation` starts the operator's part (a page of its own)


_CSS = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:60rem;color:#1a202c;padding:0 1rem}
h1{font-size:1.5rem;margin-bottom:.4rem}h2{font-size:1.2rem;border-bottom:1px solid #e2e8f0;
padding-bottom:.3rem}h3{font-size:1rem}.asof{margin:.3rem 0}
.cards{display:flex;flex-wrap:wrap;gap:.6rem}.card{border:1px solid #e2e8f0;border-radius:6px;
padding:.5rem .8rem;min-width:9rem}.card b{display:block;font-size:1.2rem}
table{border-collapse:collapse;margin:.8rem 0;font-size:.9rem;max-width:100%}
td,th{border:1px solid #e2e8f0;padding:.3rem .6rem;text-align:left;vertical-align:top;
overflow-wrap:break-word}
.stop{background:#fffaf0;border-left:4px solid #dd6b20;padding:.5rem}
.banner{padding:.6rem .8rem;font-size:1rem;border-radius:4px}
.test{background:#ebf8ff;border-left:6px solid #2b6cb0}
.live{background:#f0fff4;border-left:6px solid #2f855a}
.note{color:#4a5568;font-size:.85rem}svg{max-width:100%;height:auto}
.operation{border-top:3px solid #a0aec0;margin-top:2.5rem}
@page{size:A4 portrait;margin:14mm}
@media print{body{margin:0;max-width:none;padding:0;font-size:9.5pt}
h1{font-size:15pt}h2{font-size:12pt;break-after:avoid}h3,h4{break-after:avoid}
table{width:100%;font-size:8pt}tr,.card,svg{break-inside:avoid}
.card{min-width:7rem;padding:.3rem .5rem}.card b{font-size:11pt}
.banner,.stop{-webkit-print-color-adjust:exact;print-color-adjust:exact}
.operation{break-before:page}}
"""


def page(title: str, heading: str, lead: str, sections: Sequence[Section]) -> str:
    """The whole page: `lead` (HTML) sits under the heading, above the sections."""
    body = "".join(
        f"<section{_class(s.kind)}><h2>{e(s.title)}</h2>{s.body}</section>" for s in sections
    )
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{e(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{e(heading)}</h1>{lead}{body}</body></html>\n"
    )


def _class(kind: str) -> str:
    return f" class='{e(kind)}'" if kind else ""


def provenance(summary: Mapping[str, Any], now: dt.datetime) -> str:
    """One line: the input, when the last invocation ran and when the page was written."""
    started, seconds = summary.get("started_at"), summary.get("seconds")
    ran = f"last invocation {when(started)}" if started else "no invocation recorded"
    if isinstance(seconds, int | float):
        ran += f", {duration(seconds)}"
    return (
        f"<p class='note'>Input {e(summary.get('input'))}; {e(ran)}; "
        f"report written {e(when(now))}.</p>"
    )


def banner(summary: Mapping[str, Any]) -> str:
    """The mode, and the money: what a live run spent, or that a test run's figures are
    fake and cost nothing."""
    mode = summary.get("mode")
    credits = summary.get("credits_charged") or {}
    if mode == "test":
        return (
            "<p class='banner test'><b>Test mode</b>: these figures are fake (sandbox or test "
            "credentials) and nothing was charged.</p>"
        )
    if mode != "live":
        return f"<p class='banner'>Mode: {e(mode or 'not recorded')}.</p>"
    now, total = credits.get("this_invocation"), credits.get("total")
    said = f"<b>Live</b>: {e(spent(now))} charged by the last invocation"
    if total is not None and total != now:
        said += f", {e(spent(total))} in all"
    balance = summary.get("last_known_balance")
    if balance is not None:
        said += f"; the account had {e(figure(balance))} credits left"
    replayed = (summary.get("charges") or {}).get("replayed_calls")
    if replayed:
        said += f"; {e(figure(replayed))} replays answered free"
    return f"<p class='banner live'>{said}.</p>"


def spent(credits: Any) -> str:
    """`1,990 credits (£19.90)`."""
    if not isinstance(credits, int | float):
        return "– credits"
    return f"{credits:,.0f} credits (£{credits * PENCE_PER_CREDIT / 100:,.2f})"


def cards(figures: Sequence[tuple[str, Any]]) -> str:
    shown = "".join(
        f"<div class='card'>{e(label)}<b>{e(figure(value))}</b></div>" for label, value in figures
    )
    return f"<div class='cards'>{shown}</div>"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{e(figure(cell))}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def figure(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, dt.datetime):
        return when(value)
    return str(value)


def money(value: Any) -> str:
    return "–" if value is None else f"£{float(value):,.0f}"


def short_money(value: Any) -> str:
    """Money for a headline: `£22.44 m`, `£670,276`."""
    if value is None:
        return "–"
    amount = float(value)
    if abs(amount) >= 1_000_000:
        return f"£{amount / 1_000_000:,.2f} m"
    return f"£{amount:,.0f}"


def percent(ratio: Any, places: int = 1) -> str:
    """A ratio as a percentage: 0.4631 is `46.3 %`."""
    return "–" if ratio is None else f"{float(ratio) * 100:,.{places}f} %"


def when(value: Any) -> str:
    """An instant as a person reads it, in UTC to the minute: `25 Nov 2026 14:07 UTC`.
    Text that is no ISO date-time is shown as it is."""
    if value is None:
        return "–"
    instant = value
    if not isinstance(instant, dt.datetime):
        try:
            instant = dt.datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
        except ValueError:
            return str(value)
    if instant.tzinfo is None:  # batchval writes UTC everywhere
        instant = instant.replace(tzinfo=dt.UTC)
    instant = instant.astimezone(dt.UTC)
    return f"{instant.day} {instant:%b %Y %H:%M} UTC"


def duration(seconds: float) -> str:
    """`2.9 s`, `4 min 12 s`, `26 h 5 min`."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def e(value: Any) -> str:
    return html.escape("" if value is None else str(value))
