"""The run's result: one RunSummary, its JSON form (a contract) and its words; and the
runner driven in-process, with no subprocess."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from support import LIVE, portfolio

from batchval._internal.outcome import ExitCode, StopInfo, StopReason
from batchval._internal.place.place import Place
from batchval._internal.runs.summary import SUMMARY_KEYS as DOCUMENTED
from batchval._internal.runs.summary import DryRunSummary, RunSummary, Tally
from batchval._internal.sandbox.server import RunningSandbox
from batchval._internal.settings import load_settings
from batchval._internal.store.charges import MONEY_KEYS, Money
from batchval._internal.store.checkpoint import Counts
from batchval._internal.valuations.runner import Runner, RunRequest

# summary.json's keys: scripts read them; they are added to, never renamed or removed.
SUMMARY_KEYS = {
    "status",
    "exit_code",
    "next_action",
    "run_id",
    "mode",
    "input",
    "input_read",
    "rows",
    "requests",
    "problems_by_type",
    "credits_charged",
    "last_known_balance",
    "charges",
    "calls",
    "rate_limited",
    "invocations",
    "stop",
    "started_at",
    "finished_at",
    "seconds",
    "portfolio",
    "api_clock",
}

COUNTS = Counts(
    rows=10,
    input_problems=1,
    valued_rows=6,
    api_problem_rows=1,
    pending_rows=2,
    requests=8,
    requests_done=5,
    requests_problem=1,
    requests_pending=2,
    credits=50,
    duplicate_rows=1,
)
STOP = StopInfo(
    StopReason.DAILY_LIMIT,
    "the account's daily limit is used",
    dt.datetime(2026, 11, 24, tzinfo=dt.UTC),
    429,
)


def summary(stop: StopInfo | None = STOP) -> RunSummary:
    return RunSummary(
        status="incomplete" if stop else "complete",
        exit_code=stop.reason.exit_code if stop else ExitCode.COMPLETE,
        run_id="day-2026-11-23",
        mode="live",
        counts=COUNTS,
        problems_by_type={"outside-coverage": 1, "required": 1},
        money=Money(20, 50, 3, 30, 1, 10, 950, "2026-11-23T01:00:00.000000+00:00"),
        calls=Tally(3, 9),
        rate_limited=Tally(0, 1),
        invocations=2,
        stop=stop,
    )


def test_summary_json_keys_are_the_contract() -> None:
    """summary.json has exactly the documented keys, rows and requests included."""
    found = summary().to_json()
    assert set(found) == SUMMARY_KEYS
    # The reference's table (runs/summary.SUMMARY_KEYS) says what each key holds, in
    # summary.json's order, and `book` (a --book run's) and `files` (a run's that wrote
    # any), which a run adds at the end.
    assert list(DOCUMENTED) == [*found, "book", "files"]
    assert list(MONEY_KEYS) == [f.name for f in dataclasses.fields(Money)]
    assert found["rows"] == {
        "total": 10,
        "valued": 6,
        "problems": 2,
        "pending": 2,
        "duplicates": 1,
    }
    assert found["stop"] == {
        "reason": "daily_limit",
        "detail": "the account's daily limit is used",
        "not_before": "2026-11-24T00:00:00+00:00",
        "status": 429,
    }
    assert found["credits_charged"] == {"this_invocation": 20, "total": 50}
    assert found["last_known_balance"] == found["charges"]["balance"] == 950
    assert found["charges"]["uncertain_credits"] == 10
    assert json.loads(json.dumps(found)) == found


def test_next_action_follows_the_stop() -> None:
    """The next action names the time to come back, or says nothing is left to do."""
    assert "after 2026-11-24T00:00:00+00:00" in summary().next_action
    assert summary(None).next_action.startswith("nothing")


@pytest.mark.parametrize("reason", list(StopReason))
def test_stop_round_trips_through_json(reason: StopReason) -> None:
    """A stop read back from summary.json (as status does) is the stop written."""
    stop = StopInfo(reason, "why", None, None)
    assert StopInfo.from_json(stop.to_json()) == stop


@pytest.mark.parametrize(
    ("began", "first"),
    [
        (True, "run day-2026-11-23 (live mode, new run): incomplete"),
        (False, "run day-2026-11-23 (live mode, resumed): incomplete"),
        (None, "run day-2026-11-23 (live mode): incomplete"),
    ],
)
def test_the_first_line_says_whether_the_invocation_began_the_run(
    began: bool | None, first: str
) -> None:
    """An invocation that began the run says `new run`, one that found it `resumed`;
    `status`, which reports no invocation, says neither."""
    assert dataclasses.replace(summary(), began=began).render().splitlines()[0] == first


def test_render_says_why_and_what_next() -> None:
    """The words for a person end with the exit code and the next action."""
    lines = summary().render().splitlines()
    assert lines[0] == "run day-2026-11-23 (live mode): incomplete"
    assert "; 1 row shares a request with another row (same home): valued once" in lines[1]
    assert "stopped: daily_limit: the account's daily limit is used" in lines
    assert (
        "credits: 20 this time, 50 in all; 3 replay(s) answered free; 1 uncertain "
        "(10 credits, not counted: see charges.parquet); API credits left 950"
    ) in lines
    assert lines[-1].startswith("exit 75; next: run the same command again after")


def test_dry_run_prices_in_days() -> None:
    """A dry run's cost: credits, pounds and days at the daily limit."""
    dry = DryRunSummary(10_001, 1, {"required": 1}, 10_000, 100_000, 5_000)
    assert dry.to_json()["price"]["cost_gbp"] == 1000.0
    assert dry.days_at_daily_limit == 2
    assert "2 day(s) at 5000 calls a day" in dry.render()


def test_a_dry_run_of_a_refused_input_exits_with_the_stop() -> None:
    """A dry run that meets the run's own stop says it, carries it and exits with its code."""
    stop = StopInfo(StopReason.INPUT_MOSTLY_REFUSED, "validation refused 9 of 9 rows")
    dry = DryRunSummary(9, 9, {"not_in_list": 9}, 0, 0, 5_000, stop=stop)
    assert dry.exit_code is ExitCode.INPUT
    assert dry.to_json()["stop"]["reason"] == "input_mostly_refused"
    assert "input_mostly_refused: validation refused 9 of 9 rows" in dry.render()


def test_an_input_stop_asks_a_person_to_fix_the_input() -> None:
    """Exit 65's next action is fixing the input or its mapping, then the same command."""
    stop = StopInfo(StopReason.INPUT_MOSTLY_REFUSED, "why")
    action = summary(stop).next_action
    assert action.startswith("fix the input or its mapping")
    assert "the same command again" in action


def test_runner_runs_in_process(served: RunningSandbox, tmp_path: Path) -> None:
    """Runner(request).run() values a file against the served sandbox, no subprocess."""
    env = {
        "BATCHVAL_BASE_URL": served.base_url,
        "BATCHVAL_AUTH_URL": served.auth_url,
        "BATCHVAL_CLIENT_ID": LIVE.client_id,
        "BATCHVAL_CLIENT_SECRET": LIVE.client_secret,
    }
    request = RunRequest(
        input_path=portfolio(tmp_path / "book.csv", 5, duplicates=1),
        place=Place(tmp_path / "out"),
        settings=load_settings(None, env),
    )
    result = Runner(request).run()
    assert isinstance(result, RunSummary)
    assert result.exit_code is ExitCode.COMPLETE
    assert (result.counts.valued_rows, result.counts.duplicate_rows) == (5, 1)
    assert result.credits == Tally(40, 40)
    written = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    assert written == result.to_json()


@pytest.mark.parametrize(
    ("read", "line"),
    [
        (
            {"format": "csv", "encoding": "cp1252", "encoding_detected": True, "sheet": None},
            "input: read as cp1252, found from its bytes (not UTF-8); --encoding NAME says "
            "otherwise",
        ),
        ({"format": "csv", "encoding": "utf-8", "encoding_detected": True, "sheet": None}, None),
        ({"format": "csv", "encoding": "cp1252", "encoding_detected": False, "sheet": None}, None),
        (
            {"format": "excel", "encoding": None, "encoding_detected": False, "sheet": "Loans"},
            "input: sheet 'Loans' of the workbook",
        ),
        (
            {"format": "csv", "encoding": "utf-8", "personal_left_out": {}},
            None,
        ),
        (
            {
                "format": "csv",
                "encoding": "utf-8",
                "personal_left_out": {"Surname": "by name", "Contact": "holds e-mail addresses"},
            },
            "input: left out as personal data: Surname (by name); Contact (holds e-mail "
            "addresses); input.passthrough lists a column to keep it",
        ),
    ],
)
def test_how_the_input_was_read_is_said(read: dict[str, Any], line: str | None) -> None:
    """summary.json carries how the input was read; the terminal says so when an encoding
    other than UTF-8 was found, a workbook's sheet was read, or columns were left out as
    personal data (a dry run's too)."""
    run = dataclasses.replace(summary(None), input_read=read)
    dry = DryRunSummary(1, 0, {}, 1, 10, 1000, input_read=read)
    assert run.to_json()["input_read"] == dry.to_json()["input_read"] == read
    for rendered in (run.render(), dry.render()):
        said = [text for text in rendered.splitlines() if text.startswith("input: ")]
        assert said == ([] if line is None else [line])


def test_a_sheet_and_personal_columns_are_two_lines() -> None:
    """A workbook's sheet and the columns left out are each said, on lines of their own."""
    read = {"format": "excel", "sheet": "Loans", "personal_left_out": {"Email": "by name"}}
    said = [text for text in summary(None).render().splitlines() if text.startswith("input: ")]
    assert said == []
    rendered = dataclasses.replace(summary(None), input_read=read).render().splitlines()
    assert [text for text in rendered if text.startswith("input: ")] == [
        "input: sheet 'Loans' of the workbook",
        "input: left out as personal data: Email (by name); input.passthrough lists a "
        "column to keep it",
    ]
