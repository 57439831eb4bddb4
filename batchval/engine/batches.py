"""The input as every product reads it: batch after batch, a noted signal ending the
reading between two batches and an input fault the `input_unusable` refusal; and the
verdict on what was read (`refusal`: `input_mostly_refused` when validation refused most
rows), decided after reading, before any call. The product hands in what is its own: its
command (the log events' names), its validator, and whether a lender's figures are read."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

import structlog

from batchval.input import InputBatch, InputError, InputSource
from batchval.input.refused import RefusedKind, mostly_refused
from batchval.input.validate import Checker
from batchval.outcome import RunRefusedError, StopInfo, StopReason
from batchval.store.counts import Counts

log = structlog.get_logger()


def read_batches(
    source: InputSource,
    *,
    interrupted: Callable[[], str | None],
    check: Checker,
    command: str,
    lender: bool,
    riding: bool = True,
) -> Iterator[InputBatch]:
    """Every batch of `source` as `command` reads it: checked by `check`, a lender's money
    and dates read with `lender`, and without `riding` no pass-through column. A signal
    noted by `interrupted` ends the reading between two batches (`signal`, 75), and a file
    that cannot be read on is the run's refusal (`input_unusable`, 65)."""
    try:
        for batch in source.batches(check, lender=lender, riding=riding):
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


class Read(Protocol):
    """A store an input was read into (a product's), or a count of one read (`Refusals`)."""

    def counts(self) -> Counts: ...

    def refused_kinds(self, limit: int = 3) -> list[tuple[str | None, str, int, str | None]]: ...


def refusal(store: Read, source: InputSource, max_share: float, *, command: str) -> StopInfo | None:
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
