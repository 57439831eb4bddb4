"""Reading an input into a checkpoint, and what a run of it would cost.

`ingest` is the run's own reading: every row validated and keyed (`run/keys`), stored
with its distinct request, all in one transaction (`Checkpoint.bulk_ingest`).
`price_input` does the same into a throwaway checkpoint and counts, so that
`run --dry-run` and `check` price an input alike. `read_batches` is the
reading both `run` and `streets` do: a signal ends it between two batches, and a fault
of the input is the run's refusal. `refusal` is their verdict once the input is read
(`input/refused`): most rows refused by validation, and nothing is sent.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import structlog

from batchval.api.vocabulary import DAILY_PAID_CALLS, VALUATION_CREDITS
from batchval.input import InputBatch, InputError, InputSource
from batchval.input.reader import Checker
from batchval.input.refused import RefusedKind, mostly_refused
from batchval.input.validate import check_batch
from batchval.outcome import RunRefusedError, StopInfo, StopReason
from batchval.output.summary import DryRunSummary
from batchval.output.writer import write_problems
from batchval.run.keys import idempotency_keys
from batchval.store.checkpoint import Checkpoint, Counts
from batchval.store.rows import Row

log = structlog.get_logger()


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


def read_batches(
    source: InputSource,
    *,
    interrupted: Callable[[], str | None],
    check: Checker = check_batch,
    command: str = "run",
) -> Iterator[InputBatch]:
    """Every batch of `source`, checked by `check`. A signal noted by `interrupted` ends
    the reading between two batches (`signal`, 75), and a file that cannot be read on is
    the run's refusal (`input_unusable`, 65)."""
    try:
        for batch in source.batches(check):
            signalled = interrupted()
            if signalled:
                log.warning(f"{command}.signal", signal=signalled, while_="reading")
                raise RunRefusedError(
                    StopReason.SIGNAL,
                    f"interrupted by {signalled} while reading the input; "
                    "run the same command again",
                )
            yield batch
    except InputError as exc:
        raise RunRefusedError(StopReason.INPUT_UNUSABLE, str(exc)) from None


class _Read(Protocol):
    """A store an input was read into: the run's checkpoint, or streets' store."""

    def counts(self) -> Counts: ...

    def refused_kinds(self, limit: int = 3) -> list[tuple[str | None, str, int, str | None]]: ...


def refusal(
    store: _Read, source: InputSource, max_share: float, *, command: str = "run"
) -> StopInfo | None:
    """`input_mostly_refused` when validation refused more than `max_share` of the rows read
    into `store` (0: never): decided after reading, before any call."""
    counts = store.counts()
    kinds = [RefusedKind(*kind) for kind in store.refused_kinds()]
    stop = mostly_refused(
        counts.rows, counts.input_problems, kinds, max_share, source=str(source.path)
    )
    if stop is not None:
        log.info(f"{command}.input_mostly_refused", rows=counts.rows, refused=counts.input_problems)
    return stop


def ingest(
    checkpoint: Checkpoint,
    source: InputSource,
    run_id: str,
    *,
    interrupted: Callable[[], str | None] = lambda: None,
) -> None:
    """Read, validate and key every row of `source` into `checkpoint`, in one transaction;
    a signal noted by `interrupted` ends it between two batches, and stores none."""
    total = 0
    with checkpoint.bulk_ingest():
        for batch in read_batches(source, interrupted=interrupted):
            rows, requests = keyed_rows(batch, run_id)
            checkpoint.add_rows(rows, requests, batch.passthrough)
            total += len(rows)
            log.info("run.ingest.batch", rows=total)


def price_input(
    source: InputSource,
    *,
    run_id: str = "dry-run",
    problems_path: Path | None = None,
    interrupted: Callable[[], str | None] = lambda: None,
    plan: Callable[[Checkpoint], object] | None = None,
    max_refused_share: float,
) -> DryRunSummary:
    """What a run of `source` would cost, found without the network: the run's own ingest
    into a throwaway checkpoint, so that `run --dry-run` and `check` price alike. The
    problems are written to `problems_path` when one is given. `plan` (a book run's, which
    carries and defers) leaves pending only what tonight would send. An input the run
    would refuse (`refusal`) costs nothing: the summary carries the run's stop."""
    with tempfile.TemporaryDirectory(prefix="batchval-dry-") as scratch:
        checkpoint = Checkpoint.open(Path(scratch))
        try:
            ingest(checkpoint, source, run_id, interrupted=interrupted)
            checkpoint.finish_ingest()
            stop = refusal(checkpoint, source, max_refused_share)
            if plan is not None and stop is None:
                plan(checkpoint)
            if problems_path is not None:
                write_problems(checkpoint, problems_path)
            counts = checkpoint.counts()
            problems = checkpoint.problem_types()
            calls = counts.requests if plan is None else counts.requests_pending
            if stop is not None:  # the run would send nothing
                calls = 0
        finally:
            checkpoint.close()
    return DryRunSummary(
        rows=counts.rows,
        rows_with_problems=counts.input_problems,
        problems_by_type=problems,
        calls=calls,
        credits=calls * VALUATION_CREDITS,
        daily_limit=DAILY_PAID_CALLS,
        stop=stop,
    )
