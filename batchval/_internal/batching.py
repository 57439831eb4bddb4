"""A stream's items gathered into runs of at least a size: the one batching loop of the
input's batches (rows, `input/stream.rebatched`) and the Parquet files' row groups (bytes,
`place/files.write_parquet`). A foundation: it imports nothing of batchval."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def gathered(items: Iterable[T], size: Callable[[T], int], enough: int) -> Iterator[list[T]]:
    """The items in order, in runs whose sizes add up to `enough` or more; the last run
    may be short (and there is none for no items)."""
    run: list[T] = []
    total = 0
    for item in items:
        run.append(item)
        total += size(item)
        if total >= enough:
            yield run
            run, total = [], 0
    if run:
        yield run
