"""The run's result as one frozen record, rendered for summary.json, the terminal and
`batchval status` alike (pipx's idea: build the result once, render it anywhere).

`RunSummary.to_json()` is the contract of `summary.json` and of `status --json`: keys
are added, never renamed or removed. `render()` is for a person: a few lines, the next
action last.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any

from batchval._internal.input import SHORT_REASONS, left_out_line, quoted, skipped_words
from batchval._internal.outcome import ExitCode, StopInfo
from batchval._internal.place import removed_line
from batchval._internal.store import Counts, Database, Money

SUMMARY_NAME = "summary.json"

# summary.json's keys, in its order, with what each holds: the contract scripts read (keys
# are added, never renamed or removed), drawn into docs/reference/summary.md.
SUMMARY_KEYS: Mapping[str, str] = {
    "status": "`complete`, `incomplete`, or `running` (`status` of a DIR a run holds)",
    "exit_code": "the invocation's exit code",
    "next_action": "what a person or a scheduler does next, in words",
    "run_id": "the run's name: `--run-id`, or the UTC day it began (`day-YYYY-MM-DD`)",
    "mode": (
        "`test` or `live`, read from the API's answers; `rehearsal` for a `--live` run "
        "against batchval's sandbox started with --rehearsal (fake figures); `unknown` "
        "before the first"
    ),
    "input": "INPUT as the command named it",
    "input_read": (
        "how INPUT was read: `format` (csv, parquet or excel), a CSV's `encoding` and "
        "whether it was found (`encoding_detected`), a workbook's `sheet`, the line of a CSV "
        "or sheet that holds the header (`header_line`) and how many lines above it were "
        "not read (`lines_above_header`), the table's lines that are not loans, set aside "
        "(`not_loans`, each `{line, reason, label, text}`: `reason` one of `label`, "
        "`subtotal`, `total`, `only_amounts`, `one_value`, `set_aside`; `text` the label, "
        "as before `reason` came), the columns the default pass-through left "
        "out as a person's or the lender's internal data, each with why "
        "(`personal_left_out`: `{column: why}`), and a workbook's hidden columns "
        "(`hidden_columns`) and how many of its rows it hides or filters out (`hidden_rows`: "
        "read as loans), and the reporting date a line above the header gives "
        "(`reporting_date`, ISO, read day first from `Reporting date: 31/10/2026`, `As at "
        "...`, or a title's one date; and its line, `reporting_date_line`), else null"
    ),
    "rows": (
        "input rows: `total`, `valued`, `problems`, `pending`, and `duplicates` (rows whose "
        "request an earlier row already asked for)"
    ),
    "requests": "distinct requests: `unique`, `valued`, `problems`, `pending`",
    "problems_by_type": "problem rows by their `type`",
    "credits_charged": "fresh credits: `this_invocation` and `total` (every invocation)",
    "last_known_balance": (
        "the account's balance after the last fresh charge the API made (or, with no fresh "
        "charge, the latest replayed or uncertain one's); null in test mode"
    ),
    "charges": "the charges ledger's figures (below)",
    "calls": "calls sent: `this_invocation` and `total`",
    "rate_limited": "429 answers seen: `this_invocation` and `total`",
    "invocations": "how many invocations the run has had",
    "stop": (
        "null when complete; else `reason` (a stop reason), `detail`, `not_before` (no call "
        "before it) and `status` (the HTTP status that stopped the run, when one did)"
    ),
    "started_at": "when this invocation started (UTC)",
    "finished_at": "when it finished (UTC)",
    "seconds": "how long it took",
    "portfolio": "the loan-to-value totals when the input has loan balances; else null",
    "api_clock": (
        "how far the API's clock was from this machine's as this invocation's answers "
        "measured it (their `Date` headers): `seconds` (the API's minus this machine's), "
        "`at_least_seconds` and `at_most_seconds`; null when no answer gave one. Reported "
        "only: money is read on the API's clock, never on this machine's"
    ),
    "book": (
        "with `--book` only: rows valued, carried and deferred, the ages of the book's "
        "valuations, and when the whole book will be fresh"
    ),
    "files": (
        "each Parquet file the run has written into DIR (`results.parquet`, "
        "`problems.parquet`, `charges.parquet`, a book night's `picks.parquet`): its `name`, "
        "`rows`, `bytes` and `columns` (each `name`, Arrow `type` and the `description` the "
        "file holds), read from the files once written: a scheduler's lineage (the Airflow "
        "operator's OpenLineage datasets)"
    ),
}


@dataclasses.dataclass(frozen=True, slots=True)
class Tally:
    """A figure for this invocation and for the whole run."""

    this_invocation: int
    total: int

    def to_json(self) -> dict[str, int]:
        return {"this_invocation": self.this_invocation, "total": self.total}


def next_action(code: ExitCode, stop: StopInfo | None) -> str:
    """What a person or a scheduler does next, in words."""
    if code is ExitCode.COMPLETE:
        return "nothing: every row has a result or a problem"
    detail = stop.detail if stop else ""
    if code is ExitCode.ACCOUNT:
        return f"fix the account ({detail}), then run the same command again"
    if code is ExitCode.USAGE:
        return f"fix the configuration ({detail}), then run the same command again"
    if code is ExitCode.INPUT:
        return (
            "fix the input or its mapping in the config (see stop.detail and "
            "problems.parquet), then run the same command again"
        )
    if code is ExitCode.INTERNAL:
        return f"report this defect ({detail}); the same command again resumes the run"
    if stop is not None and stop.not_before:
        return f"run the same command again after {stop.not_before.isoformat()}"
    return "run the same command again later"


@dataclasses.dataclass(frozen=True, slots=True)
class InputRead:
    """summary.json's `input_read` (`input/reader.ReadAs.to_json`) read back, once for
    every reader of it: the terminal's lines (`read_line`) and the report's."""

    sheet: str | None
    header_line: int | None
    lines_above_header: int
    encoding: str | None
    encoding_detected: bool
    reporting_date: dt.date | None
    reporting_date_line: int | None
    not_loans: tuple[Mapping[str, Any], ...]  # each: line, label or text, reason
    hidden_rows: int
    personal_left_out: Mapping[str, str]

    @classmethod
    def of(cls, found: object) -> InputRead | None:
        """`found` as summary.json holds it; None where it holds none."""
        if not isinstance(found, Mapping) or not found:
            return None
        line, reporting = found.get("header_line"), found.get("reporting_date")
        return cls(
            sheet=None if found.get("sheet") is None else str(found["sheet"]),
            header_line=line if isinstance(line, int) else None,
            lines_above_header=found.get("lines_above_header") or 0,
            encoding=found.get("encoding"),
            encoding_detected=bool(found.get("encoding_detected")),
            reporting_date=dt.date.fromisoformat(reporting) if isinstance(reporting, str) else None,
            reporting_date_line=found.get("reporting_date_line"),
            not_loans=tuple(found.get("not_loans") or ()),
            hidden_rows=found.get("hidden_rows") or 0,
            personal_left_out=found.get("personal_left_out") or {},
        )


def read_line(input_read: Mapping[str, Any] | None) -> list[str]:
    """The terminal's lines about how the input was read, when there is something to say:
    the sheet of a workbook, or an encoding found that is not UTF-8; the lines above the
    header, those below the table that are not loans, and the columns left out as personal
    data."""
    read = InputRead.of(input_read)
    if read is None:
        return []
    said = []
    if read.sheet is not None:
        said.append(f"input: sheet {read.sheet!r} of the workbook")
    elif read.encoding_detected and read.encoding != "utf-8":
        said.append(
            f"input: read as {read.encoding}, found from its bytes (not UTF-8); "
            "--encoding NAME says otherwise"
        )
    if read.lines_above_header and read.header_line is not None:
        said.append(
            f"input: {skipped_words(read.header_line, read.header_line - read.lines_above_header)}"
        )
    if read.reporting_date is not None:
        said.append(
            f"input: the extract's reporting date is {read.reporting_date:%d/%m/%Y} (line "
            f"{read.reporting_date_line}): its balances are at that date"
        )
    if read.not_loans:
        listed = ", ".join(
            f"{quoted(n.get('label', n.get('text', '')))} (line {n['line']}: "
            f"{SHORT_REASONS.get(n.get('reason', 'label'), 'set aside')})"
            for n in read.not_loans[:5]
        )
        count = len(read.not_loans)
        more = f" and {count - 5} more" if count > 5 else ""
        lines = "line" if count == 1 else "lines"
        said.append(f"input: {count} {lines} set aside, not loans: {listed}{more}")
    if read.hidden_rows:
        rows = "row" if read.hidden_rows == 1 else "rows"
        said.append(
            f"input: the workbook hides (or filters out) {read.hidden_rows} {rows}: read as loans"
        )
    left_out = left_out_line(read.personal_left_out)
    if left_out:
        said.append(f"input: {left_out}")
    return said


@dataclasses.dataclass(frozen=True, slots=True)
class RunSummary:
    status: str  # complete, incomplete, or running (status of a DIR a run holds)
    exit_code: ExitCode
    run_id: str
    mode: str  # test or live, from the API's answers; unknown before the first
    counts: Counts
    problems_by_type: Mapping[str, int]
    money: Money  # the charges ledger's figures (`store/charges`)
    calls: Tally
    rate_limited: Tally
    invocations: int
    stop: StopInfo | None
    input: str | None = None
    # How the input was read (`input.ReadAs.to_json()`): format, encoding (and whether it
    # was found rather than given), sheet; None for `status`, which reads no input.
    input_read: Mapping[str, Any] | None = None
    started_at: str | None = None
    finished_at: str | None = None
    seconds: float | None = None
    next_action: str = ""
    # summary.json's `portfolio` and `book`, as the product made them (run: the loan
    # balances' totals when the input has them; with --book, the book's section); else None.
    portfolio: Mapping[str, Any] | None = None
    book: Mapping[str, Any] | None = None
    # The product's own lines for a person, after the money (run: the portfolio, its
    # revaluation triggers, the book).
    own_lines: tuple[str, ...] = ()
    # What an earlier export or report wrote from outputs this invocation changed, removed.
    removed: tuple[str, ...] = ()
    # The API's clock against this machine's (`api/apiclock.Offset.to_json`), when measured.
    api_clock: Mapping[str, float] | None = None
    # Whether this invocation began the run (its memory was not there: a new run) or went
    # on with it (resumed); None when no invocation of the run is reported (`status`).
    began: bool | None = None
    # summary.json's `files`: the run's Parquet outputs in DIR (`place/outputs.described`),
    # each its name, rows, bytes and columns, for a scheduler's lineage; None for `status`
    # of a run whose last summary had none.
    files: tuple[Mapping[str, Any], ...] | None = None

    def __post_init__(self) -> None:
        if not self.next_action:
            object.__setattr__(self, "next_action", next_action(self.exit_code, self.stop))

    @classmethod
    def of_run(
        cls,
        db: Database,
        *,
        invocation: int | None,
        calls: int = 0,
        rate_limited: int = 0,
        **fields: Any,
    ) -> RunSummary:
        """The summary of the run `db` holds, built once for `run`, `streets` and
        `status`: the money from its charges ledger as `invocation` sees it, the calls and
        429s of `invocation` (given) and of every invocation (from `db`), and `fields`."""
        totals = db.invocations.totals()
        return cls(
            money=db.charges.money(invocation),
            calls=Tally(calls, totals["calls"]),
            rate_limited=Tally(rate_limited, totals["rate_limited"]),
            invocations=totals["invocations"],
            **fields,
        )

    @property
    def credits(self) -> Tally:
        """Fresh credits: this invocation's, and every invocation's."""
        return Tally(self.money.this_time, self.money.in_all)

    @property
    def last_known_balance(self) -> int | None:
        return self.money.balance

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "exit_code": int(self.exit_code),
            "next_action": self.next_action,
            "run_id": self.run_id,
            "mode": self.mode,
            "input": self.input,
            "input_read": None if self.input_read is None else dict(self.input_read),
            **self.counts.as_json(),
            "problems_by_type": dict(self.problems_by_type),
            "credits_charged": self.credits.to_json(),
            "last_known_balance": self.last_known_balance,
            "charges": self.money.to_json(),
            "calls": self.calls.to_json(),
            "rate_limited": self.rate_limited.to_json(),
            "invocations": self.invocations,
            "stop": self.stop.to_json() if self.stop else None,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "seconds": self.seconds,
            "portfolio": None if self.portfolio is None else dict(self.portfolio),
            "api_clock": None if self.api_clock is None else dict(self.api_clock),
            **({} if self.book is None else {"book": dict(self.book)}),
            **({} if self.files is None else {"files": [dict(file) for file in self.files]}),
        }

    @property
    def heading(self) -> str:
        """The first line's parenthesis: the mode, and for an invocation whether it began
        the run or resumed it, so that a run begun anew (its memory lost, another DIR) is
        never mistaken for a resume."""
        began = {True: ", new run", False: ", resumed", None: ""}[self.began]
        return f"({self.mode} mode{began})"

    def render(self) -> str:
        c = self.counts
        lines = [
            f"run {self.run_id} {self.heading}: {self.status}",
            f"rows: {c.rows} total, {c.valued_rows} valued, "
            f"{c.input_problems + c.api_problem_rows} problems, {c.pending_rows} pending"
            + (
                f"; {c.duplicate_rows} "
                + ("row shares" if c.duplicate_rows == 1 else "rows share")
                + " a request with another row (same home): valued once"
                if c.duplicate_rows
                else ""
            ),
            f"requests: {c.requests} unique, {c.requests_done} valued, "
            f"{c.requests_problem} problems, {c.requests_pending} pending",
            *read_line(self.input_read),
        ]
        if self.problems_by_type:
            kinds = ", ".join(f"{k} {v}" for k, v in self.problems_by_type.items())
            lines.append(f"problems by type: {kinds}")
        lines.append(self.money.line())
        lines += self.own_lines
        lines += [line for line in [removed_line(self.removed)] if line]
        if self.stop is not None:
            lines.append(f"stopped: {self.stop.line()}")
        lines.append(f"exit {int(self.exit_code)}; next: {self.next_action}")
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True, slots=True)
class DryRunSummary:
    """What a run would cost, found without the network. `dry_run.json` is its `to_json`
    (read back by `status`, `export` and `report`): keys are added, never renamed."""

    rows: int
    rows_with_problems: int
    problems_by_type: Mapping[str, int]
    calls: int
    credits: int
    daily_limit: int
    stop: StopInfo | None = None  # the run would stop before sending (input_mostly_refused)
    input_read: Mapping[str, Any] | None = None  # as RunSummary's
    # Requests of this input that DIR's run holds an answer for (never sent again): None
    # in a DIR that holds no run.
    answered: int | None = None
    problems_file: str | None = None  # where its problems are, in DIR (None: not written)
    run_id: str = "dry-run"  # the run id its keys were made with (DIR's run's, if any)
    input: str | None = None
    priced_at: str | None = None  # when, on the run's clock
    # A `--book` night's plan: the picks within its budget by reason, and the file that
    # lists them in order (`valuations/booking`).
    book: Mapping[str, Any] | None = None

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.COMPLETE if self.stop is None else self.stop.reason.exit_code

    @property
    def days_at_daily_limit(self) -> int:
        return -(-self.calls // self.daily_limit) if self.calls else 0

    @property
    def next_action(self) -> str:
        if self.stop is not None:
            return next_action(self.exit_code, self.stop)
        if self.calls == 0:
            return "nothing to send: every request has an answer or a problem"
        return "run the same command without --dry-run to value the rows"

    def to_json(self) -> dict[str, Any]:
        """dry_run.json: the keys it shares with summary.json have their shape there
        (`rows`, `problems_by_type`, `stop`, ...), so that a reader of one reads the
        other; what only a dry run has is in `price`."""
        return {
            "status": "dry_run",
            "dry_run": True,
            "exit_code": int(self.exit_code),
            "next_action": self.next_action,
            "run_id": self.run_id,
            "input": self.input,
            "input_read": None if self.input_read is None else dict(self.input_read),
            "started_at": self.priced_at,
            "rows": {
                "total": self.rows,
                "problems": self.rows_with_problems,
                "valid": self.rows - self.rows_with_problems,
            },
            "problems_by_type": dict(self.problems_by_type),
            "problems_file": self.problems_file,
            "stop": self.stop.to_json() if self.stop else None,
            "price": {
                # Requests DIR's run holds an answer for (null: DIR holds no run).
                "answered": self.answered,
                "calls": self.calls,
                "credits": self.credits,
                "cost_gbp": round(self.credits / 100, 2),
                "days_at_daily_limit": self.days_at_daily_limit,
                "daily_limit": self.daily_limit,
            },
            **({} if self.book is None else {"book": dict(self.book)}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DryRunSummary:
        """A summary back from its `to_json` (dry_run.json); KeyError, TypeError or
        ValueError for one that is not."""
        stop, price = data.get("stop"), data["price"]
        return cls(
            rows=int(data["rows"]["total"]),
            rows_with_problems=int(data["rows"]["problems"]),
            problems_by_type={str(k): int(v) for k, v in data["problems_by_type"].items()},
            calls=int(price["calls"]),
            credits=int(price["credits"]),
            daily_limit=int(price["daily_limit"]),
            stop=StopInfo.from_json(stop) if isinstance(stop, dict) else None,
            input_read=data.get("input_read"),
            answered=price.get("answered"),
            problems_file=data.get("problems_file"),
            run_id=str(data.get("run_id") or "dry-run"),
            input=data.get("input"),
            priced_at=data.get("started_at"),
            book=data.get("book") if isinstance(data.get("book"), dict) else None,
        )

    def status_lines(self) -> str:
        """`batchval status` of a DIR that holds this dry run: what it is, its price, its
        problems, and the next action last."""
        when = f", priced {self.priced_at}" if self.priced_at else ""
        return "\n".join(
            [
                f"dry run of {self.input or 'its input'}{when}: nothing was sent",
                self.render(),
                f"exit {int(self.exit_code)}; next: {self.next_action}",
            ]
        )

    def render(self) -> str:
        kinds = ", ".join(f"{k} {v}" for k, v in self.problems_by_type.items())
        answered = (
            []
            if self.answered is None
            else [
                f"DIR's run {self.run_id} holds an answer for {self.answered} of these "
                "requests: only the rest are priced"
            ]
        )
        return "\n".join(
            [
                f"dry run: {self.rows} rows, {self.rows_with_problems} with problems"
                + (f" ({kinds})" if kinds else "")
                + (
                    f"; they are in {self.problems_file}"
                    if self.problems_file and self.rows_with_problems
                    else ""
                ),
                *answered,
                f"would make {self.calls} calls costing {self.credits} credits "
                f"(£{self.credits / 100:.2f} live), "
                f"{self.days_at_daily_limit} day(s) at {self.daily_limit} calls a day",
                *read_line(self.input_read),
                *(
                    []
                    if self.stop is None
                    else [f"the run would stop (exit {int(self.exit_code)}): {self.stop.line()}"]
                ),
            ]
        )
