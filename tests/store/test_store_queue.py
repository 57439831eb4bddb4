"""The one work queue (`store/queue`): the same item life on the requests and on the
postcodes, held in a group or written at once, and held back by a plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchval._internal.store.checkpoint import Checkpoint
from batchval._internal.store.database import Database
from batchval._internal.store.queue import Queue, WorkQueue
from batchval._internal.store.streets import StreetStore


def _queues(tmp_path: Path) -> tuple[Checkpoint, WorkQueue, WorkQueue]:
    """A database with two requests (rows 1-3, row 3 sharing row 1's) and two postcodes."""
    checkpoint = Checkpoint(Database.open(tmp_path))
    checkpoint.rows.add(
        [(1, "k1", None, None, None), (2, "k2", None, None, None), (3, "k1", None, None, None)],
        [("k1", '{"postcode":"A1 1AA"}'), ("k2", '{"postcode":"B2 2BB"}')],
    )
    streets = StreetStore(checkpoint.database)
    streets.add_rows([(1, "A1 1AA", None, None, None), (2, "B2 2BB", None, None, None)], None)
    return checkpoint, checkpoint.requests, streets.queue


def _life(queue: Queue, first: str, second: str) -> None:
    """One item valued after a retry, the other a problem."""
    queue.mark_sent(first, "2026-11-25T10:00:00+00:00")
    queue.record_retry(first, "a 503")
    queue.mark_sent(first, "2026-11-25T10:01:00+00:00")
    queue.record_answer(first, b'{"ok":true}')
    assert [k for k, _, _ in queue.answered()] == [first]
    queue.record_done(first, 10)
    queue.mark_sent(second)
    queue.record_problem(second, {"type": "postcode-not-found"})


@pytest.mark.parametrize("grouped", [False, True], ids=["at-once", "in-a-group"])
def test_both_products_run_one_item_life(tmp_path: Path, grouped: bool) -> None:
    checkpoint, requests, streets = _queues(tmp_path)
    assert [i.payload for i in requests.pending()] == [
        '{"postcode":"A1 1AA"}',
        '{"postcode":"B2 2BB"}',
    ]
    assert [i.payload for i in streets.pending()] == ["A1 1AA", "B2 2BB"]  # the key is sent
    for queue, (first, second) in ((requests, ("k1", "k2")), (streets, ("A1 1AA", "B2 2BB"))):
        if grouped:
            checkpoint.database.begin_group()
        _life(queue, first, second)
        if grouped:
            checkpoint.database.commit_group()
        assert queue.pending() == []
        assert not queue.any_pending()
        tally = queue.tally()
        assert (tally["done"].items, tally["done"].credits) == (1, 10)
        assert tally["problem"].items == 1
        assert queue.answered() == []
    assert requests.tally()["done"].rows == 2  # rows 1 and 3 share k1
    assert requests.row_numbers("k1") == [1, 3]
    tallies = requests.tally(), streets.tally()
    checkpoint.database.close()
    again = Checkpoint(Database.open(tmp_path))  # every write durable, whichever way it was made
    assert (again.requests.tally(), StreetStore(again.database).queue.tally()) == tallies
    again.database.close()


def test_a_group_never_held_is_lost_on_close(tmp_path: Path) -> None:
    """Writes held in a group that is never committed are dropped with it, as a kill
    drops them: the item is sent again with its key."""
    checkpoint, requests, _ = _queues(tmp_path)
    checkpoint.database.begin_group()
    requests.mark_sent("k1")
    requests.record_answer("k1", b"{}")
    checkpoint.database.close()
    reopened = Checkpoint(Database.open(tmp_path))
    assert [i.key for i in reopened.requests.pending()] == ["k1", "k2"]
    assert reopened.requests.pending()[0].attempts == 0


def test_a_plan_holds_back_only_what_was_never_sent(tmp_path: Path) -> None:
    _, requests, _ = _queues(tmp_path)
    requests.mark_sent("k2")  # may have been charged: stays pending, replayed with its key
    requests.record_retry("k2", "timeout")
    requests.hold_back({"carried": ["k1"], "deferred": ["k2"]})
    assert [i.key for i in requests.pending()] == ["k2"]
    assert set(requests.tally()) == {"carried", "pending"}
    requests.hold_back({"carried": [], "deferred": ["k1"]})  # a new plan undoes the old
    assert set(requests.tally()) == {"deferred", "pending"}
    assert requests.hold_unsent("deferred") == 0  # k2 was sent: never deferred
