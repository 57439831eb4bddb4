"""A new product is a module of its own: `BookRead` below values an input from a book
kept in memory (a dry read: no HTTP, no charge) through the engine as it is: the command
skeleton (`command.invoke`), the store's work queue (`checkpoint.requests`), the sending
phase and its pool. Nothing of batchval changes for it: these few lines are the whole
product, and the tests hold what the engine promises every product (every row
accounted, the exit code, summary.json, nothing sent twice)."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
from collections.abc import Mapping
from pathlib import Path

from toy_product import OnDisk

from batchval._internal.api.client import Answer
from batchval._internal.api.errors import PartnerError
from batchval._internal.input import InputOptions, InputSource, open_input
from batchval._internal.outcome import ExitCode, StopInfo
from batchval._internal.place.invocation import NotedSignals
from batchval._internal.runs.command import Lines, invoke
from batchval._internal.runs.summary import DryRunSummary, RunSummary
from batchval._internal.sending.job import Gate, Settled
from batchval._internal.sending.sending import Sending, SendOutcome
from batchval._internal.settings import ApiSettings, RunOptions
from batchval._internal.store.checkpoint import Checkpoint, Counts
from batchval._internal.store.database import Database
from batchval._internal.store.queue import QueueItem
from batchval._internal.valuations.ingest import ingest

NOW = dt.datetime(2026, 11, 25, 9, tzinfo=dt.UTC)
NOWHERE = ApiSettings("http://127.0.0.1:9", "http://127.0.0.1:9/token", "dry", "dry")


# --- the product: about sixty lines ---------------------------------------------------


@dataclasses.dataclass
class BookRead(OnDisk):
    """`Product`: each row's value read from `book` (postcode -> value), never the API."""

    book: Mapping[str, int]
    name: str = "book_read"
    pending: str = "request"
    dry: bool = False
    sends: int = 0  # items the job was handed, in every invocation

    def now(self) -> dt.datetime:
        return NOW

    def read_input(self) -> InputSource:
        return open_input(self.input_path, InputOptions())

    def dry_run(self, source: InputSource) -> DryRunSummary:
        raise NotImplementedError  # not asked of this product

    def admit(self, database: Database, started: dt.datetime) -> BookReadSteps:
        return BookReadSteps(self, Checkpoint(database))  # its rows and requests, as run's


@dataclasses.dataclass
class BookReadSteps:
    """`Steps`: the input into the queue once, then the queue sent through the pool."""

    product: BookRead
    checkpoint: Checkpoint

    def prepare(self, source: InputSource) -> None:
        if not self.checkpoint.rows.complete:
            ingest(self.checkpoint, source, "book-read")
            self.checkpoint.rows.finish()

    def plan(self, source: InputSource) -> StopInfo | None:
        return None

    def send(self) -> SendOutcome:
        return Sending(
            database=self.checkpoint.database,
            api=lambda: contextlib.nullcontext(NOWHERE),
            run=RunOptions(),
            now=self.product.now,
            progress_bar=False,
            signals=NotedSignals(),
            job_for=lambda _client: BookReadJob(self.product, self.checkpoint),
            counts=self.checkpoint.counts,
        ).phase()

    def settle(self, sent: SendOutcome) -> SendOutcome:
        return sent

    def counts(self) -> Counts:
        return self.checkpoint.counts()

    def write_outputs(self) -> Lines:
        return Lines("book-read", "test", self.checkpoint.problem_types())

    def summary(self, run: RunSummary) -> RunSummary:
        return run

    def close(self) -> None:
        pass


@dataclasses.dataclass
class BookReadJob:
    """`Job`: a queue item's value from the book; a postcode it lacks is the row's problem."""

    product: BookRead
    checkpoint: Checkpoint
    name: str = "book_read"
    call_credits: int = 0

    def pending(self, after_rowid: int) -> list[QueueItem]:
        return self.checkpoint.requests.pending(after_rowid)

    def mark_sent(self, item: QueueItem) -> None:
        self.checkpoint.requests.mark_sent(item.key, NOW.isoformat())

    async def send(self, item: QueueItem, gate: Gate) -> Answer:
        await gate()
        self.product.sends += 1
        value = self.product.book.get(json.loads(item.payload)["postcode"])
        data = {"value": value}
        return Answer(200, json.dumps(data).encode(), data)

    def settle(self, item: QueueItem, answer: Answer) -> Settled:
        self.checkpoint.requests.record_answer(item.key, answer.body)
        if answer.data["value"] is None:
            self.checkpoint.requests.record_problem(item.key, {"type": "not-in-book"})
            return Settled(problem="not in the book")
        self.checkpoint.requests.record_done(item.key, 0)
        return Settled()

    def record_problem(self, item: QueueItem, error: PartnerError) -> None:
        self.checkpoint.requests.record_problem(item.key, {"type": type(error).__name__})

    def record_retry(self, item: QueueItem, error: PartnerError) -> None:
        self.checkpoint.requests.record_retry(item.key, str(error))

    def describe(self, item: QueueItem) -> Mapping[str, object]:
        return {"rows": self.checkpoint.requests.row_numbers(item.key)}

    def begin_group(self) -> None:
        self.checkpoint.database.begin_group()

    def commit_group(self) -> None:
        self.checkpoint.database.commit_group()


# --- what the engine promises it -------------------------------------------------------


def _product(tmp_path: Path, book: Mapping[str, int]) -> BookRead:
    source = tmp_path / "homes.csv"
    source.write_text(
        "postcode,property_type,bedrooms\n"
        "SW1A 1AA,flat,2\nM1 1AE,terraced,3\nSW1A 1AA,flat,2\nLS6 2AB,detached,4\n"
        "not a postcode,flat,1\n",
        encoding="utf-8",
    )
    return BookRead(source, tmp_path / "out", book)


def test_a_new_product_runs_on_the_engine_as_it_is(tmp_path: Path) -> None:
    product = _product(tmp_path, {"SW1A 1AA": 450_000, "M1 1AE": 210_000})
    summary = invoke(product)
    assert isinstance(summary, RunSummary)
    counts = summary.counts
    # Every row accounted: 3 valued (two share one request), 1 not in the book, 1 refused.
    assert (counts.rows, counts.valued_rows, counts.api_problem_rows) == (5, 3, 1)
    assert (counts.input_problems, counts.pending_rows, counts.duplicate_rows) == (1, 0, 1)
    assert summary.exit_code is ExitCode.COMPLETE
    assert product.sends == 3  # one a distinct request
    written = json.loads((product.out_dir / "summary.json").read_text(encoding="utf-8"))
    assert written["exit_code"] == 0
    assert written["problems_by_type"] == {"invalid_postcode": 1, "not-in-book": 1}
    assert written["calls"]["this_invocation"] == 0  # the calls are HTTP's: none made


def test_a_second_invocation_sends_nothing_again(tmp_path: Path) -> None:
    first = _product(tmp_path, {"SW1A 1AA": 450_000, "M1 1AE": 210_000, "LS6 2AB": 1})
    invoke(first)
    again = dataclasses.replace(first, sends=0)
    summary = invoke(again)
    assert isinstance(summary, RunSummary)
    assert again.sends == 0
    assert summary.counts.valued_rows == 4
    assert summary.invocations == 2
