"""The reference tables of the documentation, drawn from the code and written into the
Markdown files themselves, so that the repository shows what the site shows.

A page holds each table between two lines of its own, `<!-- generated: NAME -->` and
`<!-- end generated: NAME -->`; `written` puts the code's table between them, and an
unknown name, or a start with no end, is an error. `make docs-tables` (`python -m
batchval._internal.admin.reference FILE...`) rewrites the pages; tests/house/test_docs.py
and the site's build (docs/hooks.py) fail on a page whose tables are not the code's. The
tables come from the one definition of each thing in the code: the exit-code and stop-reason
enums, the settings' key tables, the validation rules, the output schemas, summary.json's
keys. The command line's page is drawn from the click commands by mkdocs-click (mkdocs.yml).
"""

from __future__ import annotations

import dataclasses
import functools
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from batchval._internal.contract import (
    INDEX_DESCRIPTIONS,
    PROBLEM_TAIL,
    RESULT_TAIL,
    ROW_NUMBER,
    SOURCE_ROW,
    markdown_table,
)
from batchval._internal.input import PROBLEM_RULES, IndexOptions, InputOptions, LenderOptions
from batchval._internal.money import CHARGE_COLUMNS
from batchval._internal.outcome import ExitCode, StopReason
from batchval._internal.runs import SUMMARY_KEYS
from batchval._internal.settings import (
    FIGURES_MONTH_VARIABLE,
    OUTPUT_MODES,
    SECTIONS,
    Key,
    RunOptions,
)
from batchval._internal.store import DEFAULT_REGION, MONEY_KEYS, azure
from batchval._internal.streets import STREET_TAIL
from batchval._internal.valuations import BOOK_KEYS
from batchval._internal.valuations import markdown_table as metrics_table
from batchval._internal.verify import VERIFY_COLUMNS

MARKER = re.compile(
    r"^<!-- generated: ([a-z-]+) -->\n(?:(.*?)^<!-- end generated: \1 -->$)?",
    re.MULTILINE | re.DOTALL,
)


def _table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    head = list(header)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _exit_codes() -> str:
    rows = [(f"`{int(c)}`", c.meaning, c.then) for c in sorted(ExitCode)]
    return _table(("code", "meaning", "what follows"), rows)


def _stop_reasons() -> str:
    rows = [(f"`{r.value}`", str(int(r.exit_code)), r.when) for r in StopReason]
    return _table(("reason", "exit", "when"), rows)


# Every other variable batchval reads, for the reference (a test holds it to the code).
OTHER_VARIABLES: Mapping[str, str] = {
    "BATCHVAL_LOG_JSON": "`1`: JSON log lines on stderr even on a terminal (`--log-json`)",
    "BATCHVAL_BIN": "the Airflow operator: the batchval to run (default: beside its Python)",
    "BATCHVAL_OUTLIVE_PARENT": (
        "`run`, `streets` and `verify`: `1`, the process goes on when its parent ends; `0`, "
        "it stops with it, as SIGTERM would, within two seconds, even started under `nohup` "
        "or `setsid` (as the Airflow operator's rounds are); unset, it stops with its parent "
        "unless started under `nohup` or `setsid`"
    ),
    "BATCHVAL_CACHE_DIR": (
        "where an index file at an `https://` URL is kept, by its sha256, under `index/` "
        "(default `$XDG_CACHE_HOME/batchval`, else `~/.cache/batchval`)"
    ),
    "BATCHVAL_CLOCK_OFFSET_SECONDS": (
        "a test seam, not a setting: seconds added to batchval's clock for the daily limit"
    ),
    "BATCHVAL_LEASE_SECONDS": (
        "a test seam, not a setting: the seconds a run's lease at a URL holds (30)"
    ),
    "BATCHVAL_STORE_OPTIONS": (
        "a test seam, not a setting: `timeout=3s,max_retries=1,...`, the object store's "
        "client timeouts and retries (`connect_timeout` 5s, `timeout` 30s, `max_retries` 4, "
        "`retry_timeout` 20 seconds)"
    ),
    FIGURES_MONTH_VARIABLE: (
        "`YYYY-MM`: the embedded and served sandboxes' fake figures as of that month, "
        "whatever the clock, for snapshot tests (`batchval sandbox --figures-month`)"
    ),
    "AWS_DEFAULT_REGION": "read when `AWS_REGION` is not set",
    "AWS_ENDPOINT_URL_S3": "wins over `AWS_ENDPOINT_URL` for S3",
    azure.ENDPOINT: "an Azure Blob endpoint: wins over `storage.endpoint` for an Azure URL",
    azure.CLI_ACCOUNT_NAME: f"the Azure CLI's name, read when `{azure.ACCOUNT_NAME}` is not set",
    azure.CLI_ACCOUNT_KEY: f"the Azure CLI's name, read when `{azure.ACCOUNT_KEY}` is not set",
    "HTTPS_PROXY": "a proxy for https URLs (also `HTTP_PROXY`, `ALL_PROXY`), as Python reads it",
    "NO_PROXY": "hosts reached without the proxy",
}


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    return str(value)


def _code_defaults(section: str) -> Mapping[str, Any]:
    """The defaults the code itself holds for a section's keys, so that the table shows
    them rather than a copy that could drift."""
    if section == "storage":
        return {"region": DEFAULT_REGION}
    if section == "output":
        return {"mode": OUTPUT_MODES[0]}
    made = {
        "run": RunOptions,
        "input": InputOptions,
        "lender": LenderOptions,
        "index": IndexOptions,
    }.get(section)
    if made is None:
        return {}
    defaults = made()
    return {f.name: getattr(defaults, f.name) for f in dataclasses.fields(defaults)}


def _keys(section: str) -> str:
    """A section's keys: a default in words where the key gives one (what is found or
    derived when none is set), else the code's own, else none."""
    code = _code_defaults(section)

    def default(key: Key) -> str:
        return key.default or _shown(code.get(key.name))

    rows = [
        (f"`{section}.{k.name}`", default(k), f"`{k.variable}`" if k.variable else "", k.described)
        for k in SECTIONS[section]
    ]
    return _table(("key", "default", "variable", "meaning"), rows)


def _environment() -> str:
    rows = [
        (f"`{k.variable}`", f"`{section}.{k.name}`", k.described)
        for section, keys in SECTIONS.items()
        for k in keys
        if k.variable
    ]
    rows += [(f"`{name}`", "", meaning) for name, meaning in OTHER_VARIABLES.items()]
    return _table(("variable", "config key", "meaning"), rows)


def _summary() -> str:
    return _table(("key", "what it holds"), [(f"`{k}`", m) for k, m in SUMMARY_KEYS.items()])


def _money() -> str:
    rows = [(f"`charges.{k}`", m) for k, m in MONEY_KEYS.items()]
    return _table(("key", "what it holds"), rows)


def _problem_rules() -> str:
    return _table(("rule", "meaning"), [(f"`{r}`", m) for r, m in PROBLEM_RULES.items()])


TABLES: Mapping[str, Callable[[], str]] = {
    "exit-codes": _exit_codes,
    "stop-reasons": _stop_reasons,
    **{
        f"config-{section}": functools.partial(_keys, section)
        for section in SECTIONS
        if SECTIONS[section]
    },
    "environment": _environment,
    "problem-rules": _problem_rules,
    "summary": _summary,
    "summary-charges": _money,
    "results": lambda: markdown_table([ROW_NUMBER, SOURCE_ROW, *RESULT_TAIL]),
    "results-index": lambda: _table(
        ("column", "type", "meaning"),
        [(f"`{name}`", str(kind), text) for name, (kind, text) in INDEX_DESCRIPTIONS.items()],
    ),
    "problems": lambda: markdown_table([ROW_NUMBER, SOURCE_ROW, *PROBLEM_TAIL]),
    "book": lambda: markdown_table(BOOK_KEYS),
    "charges": lambda: markdown_table(CHARGE_COLUMNS),
    "verify": lambda: markdown_table(VERIFY_COLUMNS),
    "metrics": metrics_table,
    "streets": lambda: markdown_table(STREET_TAIL, nested=True),
}


def written(markdown: str) -> str:
    """The page with the code's table between each pair of markers; an unknown name, or a
    start marker without its end, is an error."""

    def table(found: re.Match[str]) -> str:
        name = found.group(1)
        if name not in TABLES:
            raise ValueError(f"no generated table {name!r}; known: {', '.join(TABLES)}")
        if found.group(2) is None:
            raise ValueError(f"<!-- generated: {name} --> has no <!-- end generated: {name} -->")
        drawn = TABLES[name]().rstrip("\n")
        # Blank lines about the table: Markdown reads a comment's lines as a block of HTML.
        return f"<!-- generated: {name} -->\n\n{drawn}\n\n<!-- end generated: {name} -->"

    return MARKER.sub(table, markdown)


def main(argv: list[str]) -> int:
    """Rewrite each file's tables as the code draws them; say which changed."""
    for name in argv:
        path = Path(name)
        before = path.read_text(encoding="utf-8")
        after = written(before)
        if after != before:
            path.write_text(after, encoding="utf-8")
            print(f"docs-tables: {name} rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
