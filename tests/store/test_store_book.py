"""store/book: the --book plan kept in the checkpoint, and the states it sets."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from batchval._internal.store.book import CARRY, SEND, BookStore, unsent_postcodes_apart
from batchval._internal.store.checkpoint import Checkpoint
from batchval._internal.store.database import Database

# Touches the calendar: `make test-dates` runs it at each hard instant (tests/clocks.py).
pytestmark = pytest.mark.dates


def _planned(tmp_path: Path) -> tuple[Checkpoint, BookStore]:
    """Four rows: k1 carried, k2 to send, k3 deferred, row 4 refused by validation."""
    checkpoint = Checkpoint(Database.open(tmp_path))
    checkpoint.rows.add(
        [
            (1, "k1", None, None, None),
            (2, "k2", None, None, None),
            (3, "k3", None, None, None),
            (4, None, "postcode", "format", "not a postcode"),
        ],
        [("k1", '{"r":1}'), ("k2", '{"r":2}'), ("k3", '{"r":3}')],
        pa.record_batch({"loan": ["a", "b", "c", "d"]}),
    )
    checkpoint.rows.finish()
    store = BookStore(checkpoint)
    store.save_plan(
        [(1, "a", "f1", CARRY), (2, "b", "f2", SEND), (3, "c", "f3", SEND)],
        carried=["k1"],
        deferred=["k3"],
        planned_for="night",
    )
    return checkpoint, store


def test_carried_and_deferred_requests_are_not_pending(tmp_path: Path) -> None:
    """Only the request to send is pending; the run is complete once it is answered."""
    checkpoint, store = _planned(tmp_path)
    assert [p.key for p in checkpoint.requests.pending()] == ["k2"]
    assert store.planned_for() == "night"
    checkpoint.requests.record_answer("k2", b"{}")
    checkpoint.requests.record_done("k2", 10)
    assert checkpoint.counts().complete
    assert store.row_sources() == {
        "valued": 1,
        "carried": 1,
        "deferred": 1,
        "problems": 0,
        "pending": 0,
    }
    assert store.unsent_rows() == [(1, "a"), (3, "c")]
    assert store.unsent_postcodes() == [(1, None), (3, None)]  # no postcode asked
    assert store.valued_rows() == [(2, "b", "f2")]


def test_the_postcodes_read_apart_are_what_the_run_has_committed(tmp_path: Path) -> None:
    """Another thread's read of the unsent rows (a read-only connection of its own) sees
    what the run's connection has committed: inside a group, the database is not
    `settled`, and the read apart does not see the group's writes until it commits."""
    checkpoint, store = _planned(tmp_path)
    database = checkpoint.database
    assert database.settled
    assert unsent_postcodes_apart(tmp_path) == store.unsent_postcodes() == [(1, None), (3, None)]
    database.begin_group()
    assert store.defer_unsent() == 1  # k2, never sent
    assert not database.settled
    assert unsent_postcodes_apart(tmp_path) == [(1, None), (3, None)]
    assert store.unsent_postcodes() == [(1, None), (2, None), (3, None)]
    database.commit_group()
    assert database.settled
    assert unsent_postcodes_apart(tmp_path) == [(1, None), (2, None), (3, None)]
    with pytest.raises(FileNotFoundError):
        unsent_postcodes_apart(tmp_path / "elsewhere")


def test_a_request_ever_sent_is_never_deferred(tmp_path: Path) -> None:
    """After the budget's stop, a request that was sent stays pending (it may have been
    charged: only its key may finish it); one never sent is deferred."""
    checkpoint, store = _planned(tmp_path)
    checkpoint.requests.mark_sent("k2")
    checkpoint.requests.record_retry("k2", "timeout")
    assert store.defer_unsent() == 0
    assert [p.key for p in checkpoint.requests.pending()] == ["k2"]
    assert not checkpoint.counts().complete


def test_a_new_plan_undoes_the_old_one(tmp_path: Path) -> None:
    """Planned again (another input), the carried and deferred requests never sent are
    pending again before the new plan sets its own."""
    checkpoint, store = _planned(tmp_path)
    store.save_plan([(1, "a", "f1", SEND)], carried=[], deferred=["k2"], planned_for="other")
    assert sorted(p.key for p in checkpoint.requests.pending()) == ["k1", "k3"]
    assert store.deferred_requests() == 1
    assert store.planned_for() == "other"


def test_a_request_the_api_refused_is_deferred_only_with_its_own_sends(tmp_path: Path) -> None:
    """After the budget's stop, a request whose every send of this invocation was refused
    (a 429: nothing valued) is deferred with those never sent; one also sent before, by an
    invocation whose outcome is unknown, stays pending for its own key to settle."""
    checkpoint, store = _planned(tmp_path)
    checkpoint.requests.mark_sent("k2")
    checkpoint.requests.record_retry("k2", "429 rate-limited daily_limit")
    assert store.defer_unsent({"k2": 2}) == 0  # two sends said, one kept: another's was first
    assert [p.key for p in checkpoint.requests.pending()] == ["k2"]
    assert store.defer_unsent({"k2": 1}) == 1
    assert checkpoint.requests.pending() == []
    assert checkpoint.counts().complete
