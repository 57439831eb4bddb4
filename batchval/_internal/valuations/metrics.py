"""`--metrics-file`: the run in Prometheus' text exposition format, for node_exporter's
textfile collector.

The file is replaced atomically (temporary file, fsync, rename), so the collector
reads the old figures or the new, never half of them; its temporary name does not end
in `.prom`, which the collector skips. Every series carries `name`, the file's stem, so
that several jobs' files in one collector directory never clash.

Every figure is a gauge: it describes the current (or last) invocation, and a new
invocation starts again from nothing. `batchval_last_success_timestamp_seconds` alone
outlives an invocation: it is read back from the file being replaced, so it survives
runs that fail and a new DIR every night.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path

from batchval._internal.place import write_text_atomic

PREFIX = "batchval"
_LAST_SUCCESS = f"{PREFIX}_last_success_timestamp_seconds"
_NUMBER = r"[-+0-9.eE]+"


@dataclasses.dataclass(frozen=True, slots=True)
class RunMetrics:
    """What one invocation has done so far, or did."""

    rows: Mapping[str, int] | None  # outcome -> rows; None when the input was never read
    credits: int  # charged by this invocation
    calls_by_status: Mapping[str, int]  # HTTP status (or no_answer) -> calls
    rate_limited: int  # 429 answers met by this invocation
    seconds: float  # since the invocation started
    exit_code: int | None  # None while the invocation runs


_HELP = {
    "rows": "Input rows of the run by outcome (valued, problem, pending).",
    "credits_spent": "Credits charged by this invocation (fresh charges: a replay is free).",
    "calls": "API calls made by this invocation, by HTTP status (no_answer: none came back).",
    "rate_limited_calls": "429 answers met by this invocation.",
    "run_seconds": "Seconds this invocation has run.",
    "running": "1 while the invocation runs, 0 once it has ended.",
    "exit_code": "The invocation's exit code (absent while it runs).",
    "last_success_timestamp_seconds": "Unix time at which an invocation last exited 0.",
}


_LABELS = {"rows": "`outcome`", "calls": "`status`"}


def markdown_table() -> str:
    """The families as docs/outputs.md documents them (tests hold the page to this)."""
    lines = ["| metric (gauge) | labels besides `name` | meaning |", "|---|---|---|"]
    for family, meaning in _HELP.items():
        lines.append(f"| `{PREFIX}_{family}` | {_LABELS.get(family, '')} | {meaning} |")
    return "\n".join(lines) + "\n"


def render(metrics: RunMetrics, *, name: str, last_success: float | None) -> str:
    """The exposition text: HELP and TYPE for each family, then its samples."""
    samples: dict[str, list[tuple[dict[str, str], float]]] = {
        "rows": [({"outcome": k}, v) for k, v in (metrics.rows or {}).items()],
        "credits_spent": [({}, metrics.credits)],
        "calls": [({"status": k}, v) for k, v in sorted(metrics.calls_by_status.items())],
        "rate_limited_calls": [({}, metrics.rate_limited)],
        "run_seconds": [({}, round(metrics.seconds, 3))],
        "running": [({}, 1 if metrics.exit_code is None else 0)],
        "exit_code": [] if metrics.exit_code is None else [({}, metrics.exit_code)],
        "last_success_timestamp_seconds": [] if last_success is None else [({}, last_success)],
    }
    lines: list[str] = []
    for family, values in samples.items():
        if not values:
            continue
        metric = f"{PREFIX}_{family}"
        lines += [f"# HELP {metric} {_HELP[family]}", f"# TYPE {metric} gauge"]
        for labels, value in values:
            pairs = ",".join(f'{k}="{_escape(v)}"' for k, v in {"name": name, **labels}.items())
            lines.append(f"{metric}{{{pairs}}} {_number(value)}")
    return "\n".join(lines) + "\n"


def write_metrics(path: Path, metrics: RunMetrics, *, now: float) -> None:
    """Replace the metrics file; `now` (Unix time) is the last success if this exited 0."""
    last = now if metrics.exit_code == 0 else last_success(path)
    write_text_atomic(path, render(metrics, name=path.stem, last_success=last))


def last_success(path: Path) -> float | None:
    """The last success the file being replaced recorded, if it holds one."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    found = re.search(rf"^{_LAST_SUCCESS}\{{[^}}]*\}} ({_NUMBER})$", text, re.MULTILINE)
    return float(found[1]) if found else None


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
