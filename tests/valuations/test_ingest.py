"""Reading an input into the checkpoint (ingest): in full, or validated first and stored
while sending (`Ingest`), every row counted either way."""

from __future__ import annotations

import csv
import itertools
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from batchval._internal.input import InputError, InputOptions, InputSource, open_input
from batchval._internal.outcome import RunRefusedError, StopReason
from batchval._internal.store.checkpoint import Checkpoint
from batchval._internal.store.database import Database
from batchval._internal.store.rows import Row
from batchval._internal.valuations import ingest as ingest_module
from batchval._internal.valuations.ingest import (
    Ingest,
    Keyed,
    ReadAhead,
    Refusals,
    _split,
    ingest,
    read_batches,
    refusal,
)

GOOD = ("SW1A 2AA", "terraced", "3")
SCOTTISH = ("EH1 1AA", "terraced", "3")
NO_BEDROOMS = ("M1 1AE", "flat", "")
BAD_TYPE = ("LS6 2AB", "castle", "2")


def book(path: Path, kinds: list[tuple[str, str, str]], *, duplicates: int = 0) -> Path:
    """A CSV of one row per kind given, in order, each its own request but the last
    `duplicates`, which repeat the first rows' requests."""
    with path.open("w", newline="", encoding="utf-8") as stream:
        out = csv.writer(stream)
        out.writerow(["loan_id", "postcode", "property_type", "bedrooms", "reference"])
        for n, (postcode, kind, bedrooms) in enumerate(kinds):
            m = n if n < len(kinds) - duplicates else n - (len(kinds) - duplicates)
            out.writerow([f"LN-{n:05d}", postcode, kind, bedrooms, f"CASE-{m:05d}"])
    return path


def source(path: Path, batch_rows: int = 4) -> InputSource:
    return open_input(path, InputOptions(batch_rows=batch_rows))


MIXED = [GOOD] * 5 + [SCOTTISH, NO_BEDROOMS] + [GOOD] * 6 + [BAD_TYPE, SCOTTISH, GOOD]


def test_refusals_count_what_a_full_ingest_stores(tmp_path: Path) -> None:
    """Counted without storing, validation's refusals are those the checkpoint holds
    after a full ingest: rows, refused rows, and the kinds in the same order."""
    path = book(tmp_path / "book.csv", MIXED)
    checkpoint = Checkpoint(Database.open(tmp_path))
    ingest(checkpoint, source(path), "run-1")
    refusals = Refusals()
    for batch in read_batches(source(path), interrupted=lambda: None):
        refusals.add(batch.checked)
    stored = checkpoint.counts()
    assert (refusals.counts().rows, refusals.counts().input_problems) == (16, 4)
    assert (stored.rows, stored.input_problems) == (16, 4)
    assert refusals.refused_kinds() == checkpoint.refused_kinds()
    assert refusals.refused_kinds()[0][:3] == ("postcode", "outside-coverage", 2)


def test_a_fresh_run_stores_its_first_rows_then_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`begin` stores the first rows only; the counts still count every row (those not
    stored as what validation made of them); `more` stores the rest a batch at a time,
    and `finish` leaves the checkpoint as a full ingest does."""
    monkeypatch.setattr(ingest_module, "_FIRST_ROWS", 3)
    path = book(tmp_path / "book.csv", MIXED, duplicates=2)
    (tmp_path / "streamed").mkdir()
    (tmp_path / "whole").mkdir()
    checkpoint = Checkpoint(Database.open(tmp_path / "streamed"))
    reading = Ingest.begin(checkpoint, source(path), "run-1")
    try:
        assert checkpoint.counts().rows == 3
        assert [p.key for p in checkpoint.requests.pending()] != []
        counts = reading.counts()
        assert (counts.rows, counts.input_problems, counts.pending_rows) == (16, 4, 12)
        assert reading.more()  # the rest of the first batch
        assert checkpoint.counts().rows == 4
        reading.finish()
    finally:
        reading.close()
    assert checkpoint.rows.complete
    assert not reading.more()
    whole = Checkpoint(Database.open(tmp_path / "whole"))
    ingest(whole, source(path), "run-1")
    whole.rows.finish()
    assert checkpoint.counts() == whole.counts() == reading.counts()
    assert checkpoint.counts().duplicate_rows == 1
    assert [p.key for p in checkpoint.requests.pending()] == [
        p.key for p in whole.requests.pending()
    ]
    streamed = [r.row_number for batch in checkpoint.problem_rows() for r in batch]
    assert streamed == [r.row_number for batch in whole.problem_rows() for r in batch]
    assert [first for first, _ in checkpoint.passthrough_batches()] == [1, 4, 5, 9, 13]


def test_a_batch_cut_in_two_counts_the_rows_of_a_request_on_both_sides(tmp_path: Path) -> None:
    """A request asked by rows on both sides of the cut is stored once, with both rows."""
    rows: list[Row] = [(1, "k1", None, None, None), (2, "k2", None, None, None)]
    rows.append((3, "k1", None, None, None))
    requests = [("k1", '{"r":1}'), ("k2", '{"r":2}')]
    first, rest = _split((rows, requests, pa.record_batch({"loan": ["a", "b", "c"]})), 1)
    assert rest is not None
    assert (first[1], rest[1]) == ([("k1", '{"r":1}')], [("k2", '{"r":2}')])
    checkpoint = Checkpoint(Database.open(tmp_path))
    checkpoint.rows.add(*first)
    checkpoint.rows.add(*rest)
    counts = checkpoint.counts()
    assert (counts.rows, counts.requests, counts.duplicate_rows) == (3, 2, 1)
    assert [first for first, _ in checkpoint.passthrough_batches()] == [1, 2]


def test_a_mostly_refused_input_is_refused_before_its_rows_are_stored(tmp_path: Path) -> None:
    """The verdict is on the whole input, whatever its first rows: good rows first and
    refused rows after are still refused, before a call could be made."""
    path = book(tmp_path / "book.csv", [GOOD] * 4 + [BAD_TYPE] * 8)
    checkpoint = Checkpoint(Database.open(tmp_path))
    reading = Ingest.begin(checkpoint, source(path), "run-1")
    try:
        assert checkpoint.counts().rows < 12
        stop = refusal(reading, source(path), 0.5)
        assert stop is not None
        assert stop.reason is StopReason.INPUT_MOSTLY_REFUSED
        assert "refused 8 of 12 rows" in stop.detail
        reading.finish()
    finally:
        reading.close()
    assert checkpoint.counts().input_problems == 8


def test_a_checkpoint_holding_requests_is_read_in_full(tmp_path: Path) -> None:
    """After an accepted input change the stored requests may be orphans, never to be
    sent: such an input is read in full before any call."""
    path = book(tmp_path / "book.csv", [GOOD] * 10)
    checkpoint = Checkpoint(Database.open(tmp_path))
    checkpoint.rows.add([(1, "old", None, None, None)], [("old", '{"r":1}')])
    checkpoint.rows.restart()
    reading = Ingest.begin(checkpoint, source(path), "run-1")
    assert checkpoint.rows.complete
    assert checkpoint.counts().rows == 10
    assert "old" not in {p.key for p in checkpoint.requests.pending()}
    assert not reading.more()


def test_a_book_run_reads_in_full(tmp_path: Path) -> None:
    """Without `stream` (a book run, whose plan needs every row) the input is all stored."""
    path = book(tmp_path / "book.csv", [GOOD] * 10)
    checkpoint = Checkpoint(Database.open(tmp_path))
    Ingest.begin(checkpoint, source(path), "run-1", stream=False)
    assert checkpoint.rows.complete
    assert checkpoint.counts().rows == 10


def test_a_fault_of_the_input_is_found_before_any_row_is_stored(tmp_path: Path) -> None:
    """A file that cannot be read to its end is refused when it is opened (its whole
    table is read once); one damaged after it was opened, by the validation of the whole
    input: before a call could be made, with nothing stored and no thread left."""
    path = book(tmp_path / "book.csv", [GOOD] * 10)
    opened = source(path)
    broken = b'LN-9,"SW1A 2AA,terraced,3,CASE\n'
    path.write_bytes(path.read_bytes() + broken + b"LN-10,SW1A 2AA,terraced,3,CASE\n")
    with pytest.raises(InputError, match="quote mark"):
        source(path)
    checkpoint = Checkpoint(Database.open(tmp_path))
    with pytest.raises(RunRefusedError) as refused:
        Ingest.begin(checkpoint, opened, "run-1")
    assert refused.value.reason is StopReason.INPUT_UNUSABLE
    assert checkpoint.counts().rows == 0
    assert not [t for t in threading.enumerate() if t.name == "batchval-read-ahead"]


def test_a_reading_that_fails_while_sending_leaves_the_ingest_incomplete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fault met by the reading after the first rows (an input changed since it was
    validated) is raised where the rows are asked for, and again by `finish`: the ingest
    is never marked complete, so the next run reads the input again."""
    path = book(tmp_path / "book.csv", [GOOD] * 10)
    whole = ingest_module.keyed_batches

    def failing(*args: Any, **kwargs: Any) -> Iterator[Keyed]:
        batches = whole(*args, **kwargs)
        yield next(batches)
        raise RunRefusedError(StopReason.INPUT_UNUSABLE, "changed")

    monkeypatch.setattr(ingest_module, "keyed_batches", failing)
    checkpoint = Checkpoint(Database.open(tmp_path))
    reading = Ingest.begin(checkpoint, source(path), "run-1")
    assert checkpoint.counts().rows == 4
    with pytest.raises(RunRefusedError, match="changed"):
        reading.more()
    with pytest.raises(RunRefusedError, match="changed"):
        reading.finish()
    assert not checkpoint.rows.complete


def test_read_ahead_hands_over_the_items_and_what_went_wrong() -> None:
    """Items come in order; what the source raises is raised at the item it could not
    make; leaving early stops the thread."""

    def items() -> Iterator[int]:
        yield 1
        yield 2
        raise ValueError("the third")

    with ReadAhead(items()) as ahead:
        assert next(ahead) == 1
        assert next(ahead) == 2
        with pytest.raises(ValueError, match="the third"):
            next(ahead)
    closed: list[bool] = []

    def endless() -> Iterator[int]:
        try:
            yield from itertools.count()
        finally:
            closed.append(True)

    with ReadAhead(endless(), depth=1) as ahead:
        assert next(ahead) == 0
    assert closed == [True]  # the source closed, its thread gone
    assert not [t for t in threading.enumerate() if t.name.startswith("batchval-read-ahead")]
