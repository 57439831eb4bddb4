"""The input as every product reads it: batch after batch, a noted signal ending the
reading between two batches and an input fault the `input_unusable` refusal; and the
verdict on what was read (`refusal`: `input_mostly_refused` when validation refused most
rows), decided after reading, before any call."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

import structlog

from batchval.input import InputBatch, InputError, InputSource
from batchval.input.reader import Checker
from batchval.input.refused import RefusedKind, mostly_refused
from batchval.input.validate import check_batch
from batchval.outcome import RunRefusedError, StopInfo, StopReason
from batchval.store.counts import Counts

log = structlog.get_logger()


def read_batches(
    source: InputSource,
    *,
    interrupted: Callable[[], str | None],
    check: Checker = check_batch,
    command: str = "run",
    riding: bool = True,
) -> Iterator[InputBatch]:
    """Every batch of `source`, checked by `check` (without `riding`, no pass-through
    column). A signal noted by `interrupted` ends the reading between two batches
    (`signal`, 75), and a file that cannot be read on is the run's refusal
    (`input_unusable`, 65)."""
    try:
        for batch in source.batches(check, riding=riding):
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
