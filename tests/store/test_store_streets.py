"""The street tables of the checkpoint: rows, distinct postcodes, states and the window."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest

from batchval._internal.store.database import Database
from batchval._internal.store.streets import REPEAT_WINDOW, StreetStore

# Touches the calendar: `make test-dates` runs it at each hard instant (tests/clocks.py).
pytestmark = pytest.mark.dates

T0 = dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)


def filled(tmp_path: Path) -> StreetStore:
    """Five rows: SW1A 2AA twice, M1 1AE, a refused postcode, and LS6 2AB."""
    store = StreetStore(Database.open(tmp_path))
    store.restart_ingest()
    store.add_rows(
        [
            (1, "SW1A 2AA", None, None, None),
            (2, "M1 1AE", None, None, None),
            (3, None, "postcode", "invalid_postcode", "postcode 'nope' is not one"),
            (4, "SW1A 2AA", None, None, None),
            (5, "LS6 2AB", None, None, None),
        ],
        pa.record_batch({"loan": list("abcde")}),
    )
    store.finish_ingest()
    return store


def test_each_postcode_is_stored_once_with_its_rows(tmp_path: Path) -> None:
    """Rows sharing a postcode share one entry; counts read rows and postcodes apart."""
    store = filled(tmp_path)
    assert [p.key for p in store.queue.pending()] == ["SW1A 2AA", "M1 1AE", "LS6 2AB"]
    counts = store.counts()
    assert (counts.rows, counts.input_problems, counts.pending_rows) == (5, 1, 4)
    assert (counts.requests, counts.requests_pending, counts.duplicate_rows) == (3, 3, 1)
    assert store.queue.row_numbers("SW1A 2AA") == [1, 4]
    assert store.database.get("command") == "streets"


def test_states_and_problems(tmp_path: Path) -> None:
    """A read is done with its credits; a 404 is a problem on every row that asked."""
    store = filled(tmp_path)
    store.queue.mark_sent("SW1A 2AA")
    store.queue.record_answer("SW1A 2AA", b'{"postcode":"SW1A 2AA"}')
    assert store.queue.answered() == [("SW1A 2AA", '{"postcode":"SW1A 2AA"}', None)]
    store.record_read("SW1A 2AA", credits=20, charged=True, read_at=T0, fresh_from=T0)
    store.record_problem("M1 1AE", {"type": "not-found", "status": 404}, T0)
    counts = store.counts()
    assert (counts.valued_rows, counts.api_problem_rows, counts.pending_rows) == (2, 1, 1)
    assert counts.credits == 20
    assert store.largest_charge == 20
    assert store.problem_types() == {"invalid_postcode": 1, "not-found": 1}
    numbers = [row.row_number for batch in store.problem_rows() for row in batch]
    assert numbers == [2, 3]
    joined = [(r.row_number, r.answer is not None) for b in store.row_streets() for r in b]
    assert joined == [(1, True), (2, False), (3, False), (4, True), (5, False)]


def test_window_expires_after_30_days_and_refresh_reads_again(tmp_path: Path) -> None:
    """A read stays fresh for 30 days from `fresh_from`; --refresh resets it at once."""
    store = filled(tmp_path)
    store.record_read("SW1A 2AA", credits=20, charged=True, read_at=T0, fresh_from=T0)
    assert store.expire(T0 + REPEAT_WINDOW - dt.timedelta(seconds=1)) == 0
    assert store.unread_postcodes(T0 + dt.timedelta(days=29), ["SW1A 2AA", "M1 1AE"]) == 1
    assert store.unread_postcodes(T0 + dt.timedelta(days=31), ["SW1A 2AA", "M1 1AE"]) == 2
    assert store.expire(T0 + REPEAT_WINDOW) == 1
    assert "SW1A 2AA" in [p.key for p in store.queue.pending()]
    store.record_read("SW1A 2AA", credits=0, charged=False, read_at=T0, fresh_from=T0)
    assert store.refresh(T0) == 0  # read at the same instant: not before
    assert store.refresh(T0 + dt.timedelta(seconds=1)) == 1


def test_a_new_input_keeps_reads_and_sends_only_what_rows_ask(tmp_path: Path) -> None:
    """Re-ingesting forgets rows, never reads; a postcode no row asks for is not sent."""
    store = filled(tmp_path)
    store.record_read("SW1A 2AA", credits=20, charged=True, read_at=T0, fresh_from=T0)
    store.restart_ingest()
    store.add_rows([(1, "SW1A 2AA", None, None, None)], None)
    store.finish_ingest()
    assert store.queue.pending() == []
    counts = store.counts()
    assert (counts.rows, counts.requests, counts.requests_done, counts.credits) == (1, 1, 1, 20)


def test_a_stored_read_is_written_until_a_new_read_replaces_it(tmp_path: Path) -> None:
    """An expired read that fails to be read again keeps its answer in the outputs;
    only bytes not read yet are dropped by a retry, and a problem replaces the read."""
    store = filled(tmp_path)
    store.queue.record_answer("SW1A 2AA", b'{"postcode":"SW1A 2AA"}')
    store.record_read("SW1A 2AA", credits=20, charged=True, read_at=T0, fresh_from=T0)
    assert store.expire(T0 + REPEAT_WINDOW) == 1
    store.queue.mark_sent("SW1A 2AA")
    store.queue.record_retry("SW1A 2AA", "503 data unavailable")
    assert [(r.postcode, r.answer) for r in store.reads()] == [
        ("SW1A 2AA", '{"postcode":"SW1A 2AA"}')
    ]
    joined = [r.answer is not None for b in store.row_streets() for r in b]
    assert joined == [True, False, False, True, False]
    store.queue.mark_sent("M1 1AE")
    store.queue.record_answer("M1 1AE", b'{"postcode":"M1 1AE","mode":"test"}')
    store.queue.record_retry("M1 1AE", "a test answer in a live DIR")
    assert store.database.sql.execute(
        "SELECT answer FROM streets WHERE postcode = 'M1 1AE'"
    ).fetchone() == (None,)
    store.record_problem("SW1A 2AA", {"type": "not-found", "status": 404}, T0)
    assert list(store.reads()) == []


def test_credits_are_a_running_total_that_a_re_read_adds_to(tmp_path: Path) -> None:
    """A postcode read again adds its new charge to the total; the old one stays counted."""
    store = filled(tmp_path)
    store.record_read("SW1A 2AA", credits=20, charged=True, read_at=T0, fresh_from=T0)
    later = T0 + REPEAT_WINDOW
    store.record_read("SW1A 2AA", credits=20, charged=True, read_at=later, fresh_from=later)
    store.add_charge(20)  # an unreadable answer, charged
    assert store.credits_total == store.counts().credits == 60


def test_who_asks_for_a_postcode_is_one_row_of_sqlite(tmp_path: Path) -> None:
    """The first row and the row count of a postcode come back in one row, not a list."""
    store = filled(tmp_path)
    fetched: list[str] = []
    store.database.sql.set_trace_callback(fetched.append)
    assert store.asking("SW1A 2AA") == (1, 2)
    store.database.sql.set_trace_callback(None)
    assert len(fetched) == 1
    assert "MIN(row_number)" in fetched[0]
    assert store.asking("EC1A 1BB") == (0, 0)


def test_postcodes_read_since_an_instant(tmp_path: Path) -> None:
    """Reads and problems recorded from the instant on count; earlier ones do not."""
    store = filled(tmp_path)
    store.record_read("SW1A 2AA", credits=20, charged=True, read_at=T0, fresh_from=T0)
    later = T0 + dt.timedelta(hours=1)
    store.record_problem("M1 1AE", {"type": "not-found", "status": 404}, later)
    assert store.read_since(later) == 1
    assert store.read_since(T0) == 2
