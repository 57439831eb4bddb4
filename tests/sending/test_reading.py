"""`sending/reading`: the read job hands the pool its items a page at a time, in rowid order,
and sends each as a GET by its valuation id."""

from __future__ import annotations

import dataclasses

import pytest

from batchval._internal.api.client import Answer
from batchval._internal.api.errors import PartnerError
from batchval._internal.sending import reading
from batchval._internal.sending.job import Gate, Settled


@dataclasses.dataclass(frozen=True, slots=True)
class Item:
    rowid: int
    key: str


class Api:
    def __init__(self) -> None:
        self.read: list[str] = []

    async def read_valuation(self, valuation_id: str, *, gate: Gate | None = None) -> Answer:
        if gate is not None:
            await gate()
        self.read.append(valuation_id)
        return Answer(200, b"{}", {"id": valuation_id})


class Job(reading.ReadJob[Item]):
    def settle(self, item: Item, answer: Answer) -> Settled:
        return Settled()

    def record_problem(self, item: Item, error: PartnerError) -> None:
        raise AssertionError

    def record_retry(self, item: Item, error: PartnerError) -> None:
        raise AssertionError


def test_pages_come_in_rowid_order_after_the_last_one() -> None:
    """Items given in any order come back sorted, a page at a time after `after_rowid`."""
    items = [Item(n, f"val_{n}") for n in range(2 * reading.PAGE + 5, 0, -1)]
    job = Job(Api(), items)
    first = job.pending(0)
    assert [i.rowid for i in first] == list(range(1, reading.PAGE + 1))
    second = job.pending(first[-1].rowid)
    assert second[0].rowid == reading.PAGE + 1
    assert [i.rowid for i in job.pending(2 * reading.PAGE)] == [2001, 2002, 2003, 2004, 2005]
    assert job.pending(2 * reading.PAGE + 5) == []


@pytest.mark.anyio
async def test_a_read_is_free_and_sent_by_its_valuation_id() -> None:
    """A read costs nothing for --max-credits and is a GET of the item's key, gated."""
    api = Api()
    job = Job(api, [Item(1, "val_x")])
    gated: list[bool] = []

    async def gate() -> None:
        gated.append(True)

    answer = await job.send(Item(1, "val_x"), gate)
    assert job.call_credits == 0
    assert (api.read, answer.data, gated) == (["val_x"], {"id": "val_x"}, [True])
    assert job.describe(Item(1, "val_x")) == {"valuation_id": "val_x"}
