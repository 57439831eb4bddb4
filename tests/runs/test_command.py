"""The command skeleton (runs/command.py `invoke`) driven by a toy product of a few
lines: no HTTP, no job, no store of its own. The product supplies only its steps; the
lock, the refusals, the invocation's record, the exit code and summary.json are the
skeleton's."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import sqlite3
from pathlib import Path

import pytest
from toy_product import OnDisk

from batchval._internal import logs
from batchval._internal.input import InputOptions, InputSource, open_input
from batchval._internal.outcome import ExitCode, RunRefusedError, StopInfo, StopReason
from batchval._internal.runs.command import Lines, invoke
from batchval._internal.runs.summary import DryRunSummary, RunSummary
from batchval._internal.sending.sending import SendOutcome
from batchval._internal.store.checkpoint import CHECKPOINT_NAME, Counts
from batchval._internal.store.database import Database

NOW = dt.datetime(2026, 3, 2, 9, 30, tzinfo=dt.UTC)
LIMIT = StopInfo(StopReason.DAILY_LIMIT, "the daily limit was reached", NOW)


def _counts(pending: int) -> Counts:
    """Two rows, one request each: `pending` of them still to send."""
    return Counts(
        rows=2,
        input_problems=0,
        valued_rows=2 - pending,
        api_problem_rows=0,
        pending_rows=pending,
        requests=2,
        requests_done=2 - pending,
        requests_problem=0,
        requests_pending=pending,
        credits=0,
    )


@dataclasses.dataclass
class Toy(OnDisk):
    """A product: reads a CSV, admits any DIR; its steps send what `sent` says."""

    sent: SendOutcome | Exception = dataclasses.field(default_factory=SendOutcome)
    refused: StopInfo | None = None
    pending_after: int = 0
    dry: bool = False
    steps: list[str] = dataclasses.field(default_factory=list)
    name: str = "toy"
    pending: str = "item"

    def now(self) -> dt.datetime:
        return NOW

    def read_input(self) -> InputSource:
        return open_input(self.input_path, InputOptions(), postcode_only=True)

    def dry_run(self, source: InputSource) -> DryRunSummary:
        self.steps.append("dry_run")
        return DryRunSummary(
            rows=2, rows_with_problems=0, problems_by_type={}, calls=2, credits=2, daily_limit=5
        )

    def admit(self, database: Database, started: dt.datetime) -> ToySteps:
        assert started == NOW
        return ToySteps(self)


@dataclasses.dataclass
class ToySteps:
    toy: Toy

    def prepare(self, source: InputSource) -> None:
        self.toy.steps.append("prepare")

    def plan(self, source: InputSource) -> StopInfo | None:
        self.toy.steps.append("plan")
        return self.toy.refused

    def send(self) -> SendOutcome:
        self.toy.steps.append("send")
        if isinstance(self.toy.sent, Exception):
            raise self.toy.sent
        return self.toy.sent

    def settle(self, sent: SendOutcome) -> SendOutcome:
        self.toy.steps.append("settle")
        return sent

    def counts(self) -> Counts:
        return _counts(self.toy.pending_after)

    def write_outputs(self) -> Lines:
        self.toy.steps.append("write_outputs")
        return Lines(run_id="toy-run", mode="test", problems_by_type={"not_found": 1})

    def summary(self, run: RunSummary) -> RunSummary:
        return run

    def close(self) -> None:
        self.toy.steps.append("close")


@pytest.fixture
def toy(tmp_path: Path) -> Toy:
    source = tmp_path / "in.csv"
    source.write_text("postcode,number\nSW1A 1AA,1\nSW1A 2AA,2\n", encoding="utf-8")
    return Toy(input_path=source, out_dir=tmp_path / "out")


def _ended(out: Path) -> list[tuple[int | None, int]]:
    with sqlite3.connect(out / CHECKPOINT_NAME) as db:
        return list(db.execute("SELECT exit_code, calls FROM invocations ORDER BY id"))


@pytest.mark.parametrize(
    ("sent", "pending_after", "code", "reason"),
    [
        (SendOutcome(calls=2), 0, ExitCode.COMPLETE, None),
        (SendOutcome(LIMIT, calls=1, rate_limited=1), 1, ExitCode.RESUMABLE, "daily_limit"),
        (SendOutcome(calls=1), 1, ExitCode.INTERNAL, "internal_error"),  # pending, no reason
    ],
)
def test_a_product_supplies_only_its_steps(
    toy: Toy, sent: SendOutcome, pending_after: int, code: ExitCode, reason: str | None
) -> None:
    """What send returns decides the exit code; the skeleton records the invocation and
    writes summary.json from the product's lines."""
    toy.sent, toy.pending_after = sent, pending_after
    summary = invoke(toy)
    assert isinstance(summary, RunSummary)
    assert summary.exit_code is code
    assert toy.steps == ["prepare", "plan", "send", "settle", "write_outputs", "close"]
    written = json.loads((toy.out_dir / "summary.json").read_text(encoding="utf-8"))
    assert written == json.loads(json.dumps(summary.to_json()))
    assert written["exit_code"] == int(code)
    assert written["status"] == ("complete" if code is ExitCode.COMPLETE else "incomplete")
    assert (written["stop"] or {}).get("reason") == reason
    assert written["run_id"] == "toy-run"
    assert written["problems_by_type"] == {"not_found": 1}
    assert written["input"] == str(toy.input_path)
    assert written["calls"] == {"this_invocation": sent.calls, "total": sent.calls}
    assert written["rate_limited"]["this_invocation"] == sent.rate_limited
    assert written["started_at"] == NOW.isoformat()
    assert _ended(toy.out_dir) == [(int(code), sent.calls)]


def test_a_defect_while_sending_is_internal_error_and_the_outputs_are_still_written(
    toy: Toy,
) -> None:
    """A send that raises: 70, logged as `<product>.internal_error`, outputs written."""
    toy.sent, toy.pending_after = RuntimeError("boom"), 1
    with logs.capture() as logged:
        summary = invoke(toy)
    assert summary.exit_code is ExitCode.INTERNAL
    assert summary.stop is not None
    assert summary.stop.detail.startswith("RuntimeError: boom")
    assert "toy.internal_error" in [event["event"] for event in logged]
    assert toy.steps[-3:] == ["settle", "write_outputs", "close"]
    assert (toy.out_dir / "summary.json").is_file()


def test_a_refusal_in_the_plan_sends_nothing(toy: Toy) -> None:
    """A plan's stop (most rows refused) is the outcome without a call to send."""
    toy.refused = StopInfo(StopReason.INPUT_MOSTLY_REFUSED, "most rows refused")
    toy.pending_after = 2
    summary = invoke(toy)
    assert "send" not in toy.steps
    assert summary.exit_code is ExitCode.INPUT
    assert _ended(toy.out_dir) == [(int(ExitCode.INPUT), 0)]


def test_a_dry_run_opens_no_checkpoint(toy: Toy) -> None:
    """A dry run is the product's pricing alone: no checkpoint, no step on it."""
    toy.dry = True
    summary = invoke(toy)
    assert isinstance(summary, DryRunSummary)
    assert toy.steps == ["dry_run"]
    assert not (toy.out_dir / CHECKPOINT_NAME).exists()


def test_an_unusable_input_is_refused_before_the_checkpoint(toy: Toy) -> None:
    """An input that cannot be opened: input_unusable (65), no checkpoint, no step."""
    toy.input_path = toy.input_path.with_name("missing.csv")
    with pytest.raises(RunRefusedError) as refused:
        invoke(toy)
    assert refused.value.reason is StopReason.INPUT_UNUSABLE
    assert toy.steps == []
    assert not (toy.out_dir / CHECKPOINT_NAME).exists()


def test_an_output_write_cut_short_is_cleared(toy: Toy) -> None:
    """A temporary file a killed write left in DIR is gone after the next invocation."""
    toy.out_dir.mkdir()
    leftover = toy.out_dir / ".results.parquet.tmp-123"
    leftover.write_bytes(b"half")
    invoke(toy)
    assert not leftover.exists()
