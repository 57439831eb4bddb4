"""The checkpoint's copy of the input (store/rows): an ingest in one transaction, its
indexes built once at its end."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from batchval._internal.store.checkpoint import Checkpoint
from batchval._internal.store.database import Database
from batchval._internal.store.schema import INGEST_INDEXES

ROWS = [
    (1, "k1", None, None, None),
    (2, None, "bedrooms", "out_of_range", "bedrooms 25 is above 20"),
    (3, "k1", None, None, None),
    (4, "k2", None, None, None),
]
REQUESTS = [("k1", '{"r":1}'), ("k2", '{"r":2}')]


def indexes(checkpoint: Checkpoint) -> set[str]:
    found = checkpoint.database.sql.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
    return {str(name) for (name,) in found} & set(INGEST_INDEXES)


def test_a_bulk_ingest_builds_its_indexes_once_at_its_end(tmp_path: Path) -> None:
    """Inside the ingest the indexes an ingest grows are gone; after it they are back,
    and the rows read as they would have batch by batch."""
    checkpoint = Checkpoint(Database.open(tmp_path))
    assert indexes(checkpoint) == set(INGEST_INDEXES)
    with checkpoint.rows.bulk():
        assert indexes(checkpoint) == set()
        checkpoint.rows.add(ROWS[:2], REQUESTS[:1], pa.record_batch({"loan": ["a", "b"]}))
        checkpoint.rows.add(ROWS[2:], REQUESTS, pa.record_batch({"loan": ["c", "d"]}))
    checkpoint.rows.finish()
    assert indexes(checkpoint) == set(INGEST_INDEXES)
    counts = checkpoint.counts()
    assert (counts.rows, counts.input_problems, counts.requests, counts.pending_rows) == (
        4,
        1,
        2,
        3,
    )
    assert counts.duplicate_rows == 1  # rows 1 and 3 share k1, across two batches
    assert [first for first, _ in checkpoint.passthrough_batches()] == [1, 3]


def test_a_bulk_ingest_cut_short_leaves_nothing(tmp_path: Path) -> None:
    """An ingest that fails (a signal, a fault of the input) rolls back whole: no row, no
    request, the indexes as they were, and the next run reads the input again."""
    checkpoint = Checkpoint(Database.open(tmp_path))
    checkpoint.rows.restart()

    def cut_short() -> None:
        with checkpoint.rows.bulk():
            checkpoint.rows.add(ROWS, REQUESTS)
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cut_short()
    assert checkpoint.counts().rows == 0
    assert not checkpoint.rows.holds_requests()
    assert indexes(checkpoint) == set(INGEST_INDEXES)
    assert not checkpoint.rows.complete
    checkpoint.database.close()
    assert indexes(Checkpoint(Database.open(tmp_path))) == set(INGEST_INDEXES)


def test_a_bulk_ingest_in_a_group_keeps_the_indexes(tmp_path: Path) -> None:
    """While sending (a group is open) the indexes are in use: rows are added beside them,
    in the group's transaction."""
    checkpoint = Checkpoint(Database.open(tmp_path))
    checkpoint.database.begin_group()
    with checkpoint.rows.bulk():
        assert indexes(checkpoint) == set(INGEST_INDEXES)
        checkpoint.rows.add(ROWS, REQUESTS)
    checkpoint.database.commit_group()
    assert checkpoint.rows.holds_requests()
    assert checkpoint.counts().rows == 4
