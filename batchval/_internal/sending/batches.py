"""The input as every product reads it: batch after batch, a noted signal ending the
reading at once (each read in a thread of its own, `watched`) and an input fault the
`input_unusable` refusal; and the
verdict on what was read (`refusal`: `input_mostly_refused` when validation refused most
rows), decided after reading, before any call. The product hands in what is its own: its
command (the log events' names), its validator, and whether a lender's figures are read."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

from batchval._internal import logs
from batchval._internal.input import (
    Checker,
    InputBatch,
    InputError,
    InputSource,
    RefusedKind,
    mostly_refused,
)
from batchval._internal.outcome import RunRefusedError, StopInfo, StopReason
from batchval._internal.store import Counts

log = logs.get_logger()


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
    noted by `interrupted` ends the reading at once, within a batch (`watched`: `signal`,
    75), and a file that cannot be read on is the run's refusal (`input_unusable`, 65)."""
    batches = source.batches(check, lender=lender, riding=riding)
    try:
        while (batch := watched(lambda: next(batches, None), interrupted, command)) is not None:
            stop_if_signalled(interrupted, command)
            yield batch
    except InputError as exc:
        raise RunRefusedError(StopReason.INPUT_UNUSABLE, str(exc)) from None


# How often a read in progress looks for a noted signal (`watched`).
WATCH_SECONDS = 0.1
_T = TypeVar("_T")


def watched(work: Callable[[], _T], interrupted: Callable[[], str | None], command: str) -> _T:
    """`work()` (a read: a batch, a workbook opened) in a thread of its own while this one
    looks for a noted signal every `WATCH_SECONDS`: a SIGTERM during a read that takes
    minutes is honoured at once (`signal`, 75), not when the read ends. Nothing has been
    stored of what the read was making; the read, left behind, ends with the process.
    What `work` raises is raised here."""
    outcome: list[_T] = []
    failed: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:  # raised again in the caller's thread
            failed.append(exc)
        finally:
            done.set()

    context = contextvars.copy_context()  # the log's bindings, the file modes
    reader = threading.Thread(target=context.run, args=(read,), name="batchval-read", daemon=True)
    reader.start()
    while not done.wait(WATCH_SECONDS):
        try:
            stop_if_signalled(interrupted, command)
        except RunRefusedError:
            _LEFT_BEHIND.append(reader)
            raise
    if failed:
        raise failed[0]
    return outcome[0]


# The reads a signal left behind, still running (`left_behind`).
_LEFT_BEHIND: list[threading.Thread] = []


def left_behind() -> bool:
    """Whether a read a signal left behind is still at work: the console script then ends
    the process at once (`cli.console`), since Python cannot finalize under a thread that is
    inside native code (a polars or calamine read)."""
    return any(thread.is_alive() for thread in _LEFT_BEHIND)


def stop_if_signalled(interrupted: Callable[[], str | None], command: str) -> None:
    """The `signal` refusal (75) when `interrupted` says a signal was noted."""
    signalled = interrupted()
    if signalled:
        log.warning(f"{command}.signal", signal=signalled, while_="reading")
        raise RunRefusedError(
            StopReason.SIGNAL,
            f"interrupted by {signalled} while reading the input; run the same command again",
        )


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
