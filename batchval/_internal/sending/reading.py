"""Reading valuations back by id (GET /valuations/{id}, free; docs/api.md, getValuation):
the job the pool sends for `batchval verify` and for the recovery path of `run`
(`valuations/recovery`).

A read is an item like any other to the pool: paced, retried by the answer table, under
the breaker, stopped by a daily limit, an account or a wrong address, as a valuation is.
What differs is that it is free (`call_credits` 0: `--max-credits` never holds it back)
and changes nothing on the API, so nothing is noted before a send: a read cut short is
simply read again. The item's `key` is the valuation id. What becomes of each answer is
the subclass's: `settle`, `record_problem` (the API said `not-found`) and
`record_retry` (given up for this invocation).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Generic, Protocol

from batchval._internal.api import Answer
from batchval._internal.sending.job import Gate, ItemT

PAGE = 1000  # items handed to the pool's feeder at a time


class ReadApi(Protocol):
    async def read_valuation(self, valuation_id: str, *, gate: Gate | None = None) -> Answer: ...


class ReadJob(Generic[ItemT]):
    """Reads of a fixed list of valuation ids (each item's `key`), in rowid order."""

    name = "read"
    call_credits = 0  # GET /valuations/{id} is free

    def __init__(self, api: ReadApi, items: Sequence[ItemT]) -> None:
        self._api = api
        self._items = sorted(items, key=lambda item: item.rowid)
        self._rowids = [item.rowid for item in self._items]

    def pending(self, after_rowid: int) -> Sequence[ItemT]:
        start = bisect.bisect_right(self._rowids, after_rowid)
        return self._items[start : start + PAGE]

    def mark_sent(self, item: ItemT) -> None:
        """Nothing to note: a read costs nothing and is simply made again if cut short."""

    async def send(self, item: ItemT, gate: Gate) -> Answer:
        return await self._api.read_valuation(item.key, gate=gate)

    def describe(self, item: ItemT) -> Mapping[str, object]:
        return {"valuation_id": item.key}

    def begin_group(self) -> None:
        """Reads write nothing of their own; a subclass that does commits in groups."""

    def commit_group(self) -> None:
        """See `begin_group`."""
