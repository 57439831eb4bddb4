"""Reading an input into a checkpoint, and what a run of it would cost.

`ingest` is the run's own reading: every row validated and keyed (`sending/keys`), stored
with its distinct request, all in one transaction (`Checkpoint.bulk_ingest`). A run of a
fresh DIR reads it with `Ingest`: the whole input validated first, then its first rows
stored, and the rest stored while the first are sent. `price_input` does the same as
`ingest` into a throwaway checkpoint and counts, so that `run --dry-run` and `check`
price an input alike. `read_batches` is run's reading on the engine's
(`sending/batches`): every request rule, a lender's money and dates read beside the rows,
a signal ending it at once (`sending/batches.watched`), a fault of the input the run's refusal.
`refusal` is the verdict once the input is read (`input/refused`): most rows refused by
validation, and nothing is sent.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Generic, TypeVar

import polars as pl
import pyarrow as pa

from batchval._internal import logs, sending
from batchval._internal.api import DAILY_PAID_CALLS, VALUATION_CREDITS
from batchval._internal.contract import write_problems
from batchval._internal.input import Checker, InputBatch, InputSource, check_batch
from batchval._internal.outcome import StopInfo
from batchval._internal.runs import DryRunSummary
from batchval._internal.sending import idempotency_keys
from batchval._internal.store import Checkpoint, Counts, Database, QueueItem, Row

log = logs.get_logger()

COMMAND = "run"  # names the log events of run's reading

T = TypeVar("T")
# A batch as stored: its rows, their distinct requests and their pass-through values.
Keyed = tuple[list[Row], list[tuple[str, str]], pa.RecordBatch]


def read_batches(
    source: InputSource,
    *,
    interrupted: Callable[[], str | None],
    check: Checker = check_batch,
    riding: bool = True,
) -> Iterator[InputBatch]:
    """`source` as run reads it (`sending/batches.read_batches`): checked by `check`, every
    request rule unless told otherwise, and a lender's money and dates read beside it."""
    return sending.read_batches(
        source, interrupted=interrupted, check=check, command=COMMAND, lender=True, riding=riding
    )


def refusal(store: sending.Read, source: InputSource, max_share: float) -> StopInfo | None:
    """`sending/batches.refusal`, logged as run's."""
    return sending.refusal(store, source, max_share, command=COMMAND)


def keyed_rows(batch: InputBatch, run_id: str) -> tuple[list[Row], list[tuple[str, str]]]:
    """A batch's rows as the checkpoint stores them (row number, key, field, rule,
    detail) and its distinct requests (key, canonical JSON), keyed with `run_id`.

    Column by column, not row by row: a per-row loop costs more than the validation
    (a million rows: seconds)."""
    checked = batch.checked
    jsons: list[str | None] = checked.get_column("request_json").to_list()
    keys = idempotency_keys(run_id, jsons)
    rows = list(
        zip(
            checked.get_column("row_number").to_list(),
            keys,
            checked.get_column("field").to_list(),
            checked.get_column("rule").to_list(),
            checked.get_column("detail").to_list(),
            strict=True,
        )
    )
    requests = {k: j for k, j in zip(keys, jsons, strict=True) if k is not None and j is not None}
    return rows, list(requests.items())


def keyed_batches(
    source: InputSource, run_id: str, *, interrupted: Callable[[], str | None] = lambda: None
) -> Iterator[Keyed]:
    """Every batch of `source` (`read_batches`), keyed (`keyed_rows`)."""
    for batch in read_batches(source, interrupted=interrupted):
        rows, requests = keyed_rows(batch, run_id)
        yield rows, requests, batch.stored()


def ingest(
    checkpoint: Checkpoint,
    source: InputSource,
    run_id: str,
    *,
    interrupted: Callable[[], str | None] = lambda: None,
) -> None:
    """Read, validate and key every row of `source` into `checkpoint`, in one transaction;
    a signal noted by `interrupted` ends it at once, and stores none."""
    total = 0
    with checkpoint.rows.bulk():
        for batch in read_batches(source, interrupted=interrupted):
            rows, requests = keyed_rows(batch, run_id)
            checkpoint.rows.add(rows, requests, batch.stored())
            total += len(rows)
            log.info("valuations.ingest.batch", rows=total)


# The rows stored before the first call: few, so that it waits for little more than the
# validation of the whole input.
_FIRST_ROWS = 1_000

# Validation without the requests' JSON, which costs a third of it: `Refusals` counts.
_refused_only = functools.partial(check_batch, encode=False)


class Refusals:
    """What validation makes of a whole input, counted as it is read and never stored:
    its rows, those refused, and the refused by field and rule, each with its first row's
    detail. `refusal` reads it as it reads a store."""

    def __init__(self) -> None:
        self.rows = self.refused = 0
        self._kinds: dict[tuple[str | None, str], tuple[int, int, str | None]] = {}

    def add(self, checked: pl.DataFrame) -> None:
        """One batch checked (validate.OUTPUT_SCHEMA), batches in row order."""
        self.rows += checked.height
        bad = checked.filter(pl.col("rule").is_not_null())
        self.refused += bad.height
        kinds = bad.group_by("field", "rule").agg(
            pl.len(), pl.col("row_number").min(), pl.col("detail").sort_by("row_number").first()
        )
        for field, rule, n, first, detail in kinds.iter_rows():
            earlier, at, said = self._kinds.get((field, rule), (0, first, detail))
            self._kinds[(field, rule)] = (earlier + n, at, said)

    def counts(self) -> Counts:
        valid = self.rows - self.refused
        return Counts(
            rows=self.rows,
            input_problems=self.refused,
            valued_rows=0,
            api_problem_rows=0,
            pending_rows=valid,
            requests=valid,
            requests_done=0,
            requests_problem=0,
            requests_pending=valid,
            credits=0,
        )

    def refused_kinds(self, limit: int = 3) -> list[tuple[str | None, str, int, str | None]]:
        """As `Checkpoint.refused_kinds`: most rows first, then the earliest."""
        ranked = sorted(self._kinds.items(), key=lambda kind: (-kind[1][0], kind[1][1]))
        return [(field, rule, n, detail) for (field, rule), (n, _, detail) in ranked[:limit]]


class Ingest:
    """A run's reading of its input into its checkpoint, which may go on while the
    requests read first are sent.

    `begin` reads a fresh checkpoint's input twice. First it validates every row, storing
    nothing (`Refusals`): the verdict on the whole input (`refusal`) is known before any
    call. Then it stores its first rows (`_FIRST_ROWS`, or more until one asks for a
    request), and the run may send: the valuation job stores the next batch whenever the
    stored requests run out (`more`), and `finish`, after sending, stores whatever is
    left, so that every row is counted and written. The batches are read, validated and
    keyed in a thread of their own (`ReadAhead`), so that the sending waits only for
    their writes. A million rows took 25 s to store before the first call; now the first
    call waits for their validation and a thousand rows. A kill leaves the ingest
    incomplete, and the next run reads the input again from its start, as it always did:
    the requests already sent keep their keys. A checkpoint that holds requests (an
    input changed under --accept-changes, or an ingest killed while sending) and a book
    run, whose plan needs every row, are read in full first (`ingest`)."""

    def __init__(self, checkpoint: Checkpoint, read: Refusals | None = None) -> None:
        self._checkpoint = checkpoint
        self._read = read  # None: every row is stored already
        self._stored = 0
        self._batches: Iterator[Keyed] | None = None
        self._ahead: ReadAhead[Keyed] | None = None
        self._rest: Keyed | None = None  # what `more(rows)` left of a batch
        self._failed: BaseException | None = None  # what stopped the reading while sending

    @classmethod
    def begin(
        cls,
        checkpoint: Checkpoint,
        source: InputSource,
        run_id: str,
        *,
        interrupted: Callable[[], str | None] = lambda: None,
        stream: bool = True,
    ) -> Ingest:
        """Read `source` into `checkpoint` (see the class): in full, or, with `stream`
        into a checkpoint that holds no request yet, up to its first request."""
        if not stream or checkpoint.rows.holds_requests():
            ingest(checkpoint, source, run_id, interrupted=interrupted)
            checkpoint.rows.finish()
            return cls(checkpoint)
        refusals = Refusals()
        read = cls(checkpoint, refusals)
        read._ahead = ReadAhead(keyed_batches(source, run_id, interrupted=interrupted), depth=1)
        read._batches = read._ahead.start()  # the first batch keyed while validating
        try:
            for batch in read_batches(
                source, interrupted=interrupted, check=_refused_only, riding=False
            ):
                refusals.add(batch.checked)
            while not checkpoint.requests.any_pending() and read.more(_FIRST_ROWS):
                pass
        except BaseException:
            read.close()
            raise
        return read

    @classmethod
    def complete(cls, checkpoint: Checkpoint) -> Ingest:
        """The ingest of a checkpoint that holds every row already (a resumed run)."""
        return cls(checkpoint)

    def more(self, rows: int | None = None) -> bool:
        """Store the next batch, or only its first `rows` rows; False once every row is
        stored."""
        keyed, self._rest = self._rest, None
        if keyed is None and self._batches is not None:
            try:
                keyed = next(self._batches, None)
            except BaseException as exc:  # a signal; an input changed since it was checked
                self._failed = exc
                self.close()
                raise
        if keyed is None:
            self.close()
            return False
        if rows is not None:
            keyed, self._rest = _split(keyed, rows)
        self._checkpoint.rows.add(*keyed)
        self._stored += len(keyed[0])
        log.info("valuations.ingest.batch", rows=self._stored)
        return True

    def finish(self) -> None:
        """Store the rows not stored yet, in one transaction, and close the ingest (what
        stopped the reading while sending is raised again: the ingest stays incomplete)."""
        if self._failed is not None:
            raise self._failed
        if self._read is None:
            return
        left = self._read.rows - self._stored
        # Indexes built again over every row pay only when most rows are still to come.
        whole = left > self._stored
        with self._checkpoint.rows.bulk() if whole else self._checkpoint.database.transaction():
            while self.more():
                pass
        self._checkpoint.rows.finish()
        self._read = None

    def close(self) -> None:
        """Stop reading ahead (the rows not stored are read again by the next run)."""
        ahead, self._ahead, self._batches = self._ahead, None, None
        if ahead is not None:
            ahead.stop()

    def counts(self) -> Counts:
        """The checkpoint's counts, with the rows not stored yet as what validation made
        of them: refused, or pending requests (one a row: their sharing is not known)."""
        stored = self._checkpoint.counts()
        if self._read is None:
            return stored
        rows = self._read.rows - stored.rows
        refused = self._read.refused - stored.input_problems
        return dataclasses.replace(
            stored,
            rows=stored.rows + rows,
            input_problems=stored.input_problems + refused,
            pending_rows=stored.pending_rows + rows - refused,
            requests=stored.requests + rows - refused,
            requests_pending=stored.requests_pending + rows - refused,
        )

    def refused_kinds(self, limit: int = 3) -> list[tuple[str | None, str, int, str | None]]:
        if self._read is None:
            return self._checkpoint.refused_kinds(limit)
        return self._read.refused_kinds(limit)


def _split(keyed: Keyed, rows: int) -> tuple[Keyed, Keyed | None]:
    """The first `rows` rows of a batch, with their requests and values, and the rest."""
    stored, requests, passthrough = keyed
    if len(stored) <= rows:
        return keyed, None
    keys = {row[1] for row in stored[:rows]}
    first = [request for request in requests if request[0] in keys]
    rest = [request for request in requests if request[0] not in keys]
    return (
        (stored[:rows], first, passthrough.slice(0, rows)),
        (stored[rows:], rest, passthrough.slice(rows)),
    )


class ReadAhead(Generic[T]):
    """The items of `source`, made in a thread of their own up to `depth` ahead of the
    one taken: `with ReadAhead(items) as ahead: for item in ahead: ...`. What `source`
    raises is raised to the caller, at the item it could not make; leaving the block
    stops the thread after the item it is making, and closes `source`. The thread is a
    one-worker pool's: each `next` of `source` is a task, in order."""

    def __init__(self, source: Iterator[T], depth: int = 2) -> None:
        self._source, self._depth = source, depth
        self._pool = concurrent.futures.ThreadPoolExecutor(1, "batchval-read-ahead")
        self._ahead: collections.deque[concurrent.futures.Future[T | _End]] = collections.deque()

    def __enter__(self) -> Iterator[T]:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def start(self) -> Iterator[T]:
        """Start making the items; returns them, in order."""
        self._fill()
        return self._items()

    def stop(self) -> None:
        """Stop making them, once the one being made is made."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        close = getattr(self._source, "close", None)
        if close is not None:
            close()

    def _fill(self) -> None:
        while len(self._ahead) < self._depth:
            self._ahead.append(self._pool.submit(next, self._source, _END))

    def _items(self) -> Iterator[T]:
        while True:
            item = self._ahead.popleft().result()
            if isinstance(item, _End):
                return
            self._fill()
            yield item


class _End:
    """What `next` gives once the source is done."""


_END = _End()


def price_input(
    source: InputSource,
    *,
    run_id: str = "dry-run",
    problems_path: Path | None = None,
    interrupted: Callable[[], str | None] = lambda: None,
    plan: Callable[[Checkpoint], object] | None = None,
    max_refused_share: float,
    settled: Callable[[list[str]], set[str]] | None = None,
) -> DryRunSummary:
    """What a run of `source` would cost, found without the network: the run's own ingest
    into a throwaway checkpoint, so that `run --dry-run` and `check` price alike. The
    problems are written to `problems_path` when one is given. `plan` (a book run's, which
    carries and defers) leaves pending only what tonight would send. `settled` (a DIR's
    run, resumed) picks the keys that run holds an answer for: they cost nothing. An input
    the run would refuse (`refusal`) costs nothing: the summary carries the run's stop."""
    with Database.scratch() as scratch:
        checkpoint = Checkpoint(scratch)
        ingest(checkpoint, source, run_id, interrupted=interrupted)
        checkpoint.rows.finish()
        stop = refusal(checkpoint, source, max_refused_share)
        if plan is not None and stop is None:
            plan(checkpoint)
        if problems_path is not None:
            write_problems(checkpoint, problems_path)
        counts = checkpoint.counts()
        problems = checkpoint.problem_types()
        calls = counts.requests if plan is None else counts.requests_pending
        answered = None
        if settled is not None and stop is None:
            keys = [item.key for item in _all_pending(checkpoint)]
            answered = len(settled(keys))
            calls = len(keys) - answered
        if stop is not None:  # the run would send nothing
            calls = 0
    return DryRunSummary(
        rows=counts.rows,
        rows_with_problems=counts.input_problems,
        problems_by_type=problems,
        calls=calls,
        credits=calls * VALUATION_CREDITS,
        daily_limit=DAILY_PAID_CALLS,
        stop=stop,
        answered=answered,
        run_id=run_id,
    )


def _all_pending(checkpoint: Checkpoint) -> Iterator[QueueItem]:
    """Every request still to send, page by page."""
    after = 0
    while page := checkpoint.requests.pending(after):
        yield from page
        after = page[-1].rowid
