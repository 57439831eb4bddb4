"""valuations/book: the book file, its refusals, the carry into results.parquet, the ages."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from batchval._internal.contract.schemas import results_schema
from batchval._internal.place.versioned import LocalFile, StoredFile, VersionedFile
from batchval._internal.store.objects import ObjectStore
from batchval._internal.valuations.book import (
    BookError,
    BookMismatchError,
    age_profile,
    book_index,
    carry_into_results,
    read_book,
    write_book,
)

# Touches the calendar: `make test-dates` runs it at each hard instant (tests/clocks.py).
pytestmark = pytest.mark.dates

NOW = dt.datetime(2026, 11, 23, 2, 0, tzinfo=dt.UTC)
PASSTHROUGH = pa.schema([("loan_id", pa.string())])


def _results(path: Path, rows: list[dict[str, Any]]) -> Path:
    """A results.parquet of these rows (columns not given are null)."""
    pq.write_table(pa.Table.from_pylist(rows, schema=results_schema(PASSTHROUGH)), path)
    return path


def _row(number: int, loan: str, estimate: int, days_ago: float = 0) -> dict[str, Any]:
    return {
        "row_number": number,
        "loan_id": loan,
        "source": "api",
        "valuation_id": f"val_{loan}_{estimate}",
        "valued_at": NOW - dt.timedelta(days=days_ago),
        "estimate": estimate,
        "credits_charged": 10,
        "idempotency_key": f"key-{loan}",
    }


def test_a_book_is_written_and_read_back(tmp_path: Path) -> None:
    """Tonight's valuations become entries keyed by identity, with their fingerprint and
    run id; the plan's index reads them back."""
    results = _results(tmp_path / "r.parquet", [_row(1, "A", 100), _row(2, "B", 200)])
    book = tmp_path / "book.parquet"
    written = write_book(
        LocalFile(book),
        None,
        None,
        results,
        [(1, "A", "fa"), (2, "B", "fb")],
        run_id="day-1",
        identity="loan_id",
        api="x",
    )
    assert written == 2
    table, _ = read_book(LocalFile(book), "loan_id", "x")
    assert table is not None
    assert "loan_id" not in table.column_names  # pass-through columns are tonight's input's
    assert "credits_charged" not in table.column_names
    assert table.column("run_id").to_pylist() == ["day-1", "day-1"]
    index = book_index(table)
    assert index["B"].fingerprint == "fb"
    assert index["B"].valued_at == NOW


def test_tonight_replaces_an_entry_and_keeps_the_others(tmp_path: Path) -> None:
    """An identity valued tonight gets tonight's entry; every other entry stays."""
    book = tmp_path / "book.parquet"
    first = _results(tmp_path / "1.parquet", [_row(1, "A", 100, 3), _row(2, "B", 200, 3)])
    write_book(
        LocalFile(book),
        None,
        None,
        first,
        [(1, "A", "fa"), (2, "B", "fb")],
        run_id="d1",
        identity="loan_id",
        api="x",
    )
    second = _results(tmp_path / "2.parquet", [_row(5, "B", 250)])
    old, version = read_book(LocalFile(book), "loan_id", "x")
    write_book(
        LocalFile(book),
        old,
        version,
        second,
        [(5, "B", "fb2")],
        run_id="d2",
        identity="loan_id",
        api="x",
    )
    table, _ = read_book(LocalFile(book), "loan_id", "x")
    assert table is not None
    rows = {r["identity"]: r for r in table.to_pylist()}
    assert (rows["A"]["estimate"], rows["A"]["run_id"]) == (100, "d1")
    assert (rows["B"]["estimate"], rows["B"]["run_id"], rows["B"]["request_fingerprint"]) == (
        250,
        "d2",
        "fb2",
    )


@pytest.mark.parametrize(
    ("identity", "api", "error"),
    [("reference", "x", BookMismatchError), ("loan_id", "another", BookMismatchError)],
)
def test_a_book_kept_otherwise_is_refused(
    tmp_path: Path, identity: str, api: str, error: type[Exception]
) -> None:
    """A book kept by another --row-id, or with another API or account, is not used."""
    results = _results(tmp_path / "r.parquet", [_row(1, "A", 100)])
    book = tmp_path / "book.parquet"
    write_book(
        LocalFile(book),
        None,
        None,
        results,
        [(1, "A", "fa")],
        run_id="d",
        identity="loan_id",
        api="x",
    )
    with pytest.raises(error):
        read_book(LocalFile(book), identity, api)


def test_an_unreadable_book_is_an_input_error(tmp_path: Path) -> None:
    """A file that is not Parquet raises BookError (not a mismatch); no file is None."""
    book = tmp_path / "book.parquet"
    assert read_book(LocalFile(book), "loan_id", "x") == (None, None)
    book.write_text("not parquet")
    with pytest.raises(BookError) as raised:
        read_book(LocalFile(book), "loan_id", "x")
    assert not isinstance(raised.value, BookMismatchError)


def test_unsent_rows_with_an_entry_are_carried(tmp_path: Path) -> None:
    """Rows not valued tonight take their entry (source book, no charge, the entry's
    valued_at and key) and tonight's pass-through values; a row with no entry is not
    added; the file stays in row order."""
    book = tmp_path / "book.parquet"
    old = _results(tmp_path / "old.parquet", [_row(9, "A", 100, 10)])
    write_book(
        LocalFile(book), None, None, old, [(9, "A", "fa")], run_id="d0", identity="loan_id", api="x"
    )
    results = _results(tmp_path / "results.parquet", [_row(2, "B", 200)])
    passthrough = pa.table(
        {"row_number": pa.array([1, 2, 3], pa.int64()), "loan_id": ["A", "B", "C"]}
    )
    entries, _ = read_book(LocalFile(book), "loan_id", "x")
    assert carry_into_results(results, entries, [(1, "A"), (3, "C")], passthrough) == 1
    rows = pq.read_table(results).to_pylist()
    assert [(r["row_number"], r["loan_id"], r["source"]) for r in rows] == [
        (1, "A", "book"),
        (2, "B", "api"),
    ]
    assert rows[0]["credits_charged"] == 0
    assert rows[0]["valued_at"] == NOW - dt.timedelta(days=10)
    assert rows[0]["idempotency_key"] == "key-A"


@pytest.mark.parametrize(
    ("days", "bucket"),
    [
        (0, "within_30_days"),
        (30, "within_30_days"),
        (30.5, "within_90_days"),
        (90, "within_90_days"),
        (91, "within_180_days"),
        (181, "older"),
        (None, "older"),
    ],
)
def test_age_profile_buckets(days: float | None, bucket: str) -> None:
    """A valuation falls in the first bucket whose days it is within; none is older."""
    when = None if days is None else NOW - dt.timedelta(days=days)
    profile = age_profile([when], NOW)
    assert profile[bucket] == 1
    assert sum(profile.values()) == 1


def _stored(objects: ObjectStore) -> VersionedFile:
    return StoredFile(objects, "book.parquet", "memory://book.parquet")


def test_a_book_at_a_url_is_replaced_by_compare_and_swap(tmp_path: Path) -> None:
    """Two nights read one version of a book kept in an object store and both write: the
    first replaces it, the second is told (None) and writes nothing; read again, its
    valuations merge with the first's, so neither night's update is lost."""
    objects = ObjectStore.from_url("memory://", {})
    first = _results(tmp_path / "1.parquet", [_row(1, "A", 100)])
    assert write_book(_stored(objects), None, None, first, [(1, "A", "fa")], **_KEPT) == 1

    old, version = read_book(_stored(objects), "loan_id", "x")
    assert version is not None  # the object's ETag
    night_a = _results(tmp_path / "a.parquet", [_row(1, "B", 200)])
    night_b = _results(tmp_path / "b.parquet", [_row(1, "C", 300)])
    assert write_book(_stored(objects), old, version, night_a, [(1, "B", "fb")], **_KEPT) == 2
    assert write_book(_stored(objects), old, version, night_b, [(1, "C", "fc")], **_KEPT) is None
    table, _ = read_book(_stored(objects), "loan_id", "x")
    assert table is not None
    assert sorted(table.column("identity").to_pylist()) == ["A", "B"]

    again, latest = read_book(_stored(objects), "loan_id", "x")
    assert write_book(_stored(objects), again, latest, night_b, [(1, "C", "fc")], **_KEPT) == 3
    table, _ = read_book(_stored(objects), "loan_id", "x")
    assert table is not None
    assert sorted(table.column("identity").to_pylist()) == ["A", "B", "C"]


def test_a_new_book_at_a_url_is_created_once(tmp_path: Path) -> None:
    """Two first nights both find no book: the second's create-only write is refused."""
    objects = ObjectStore.from_url("memory://", {})
    a = _results(tmp_path / "a.parquet", [_row(1, "A", 100)])
    b = _results(tmp_path / "b.parquet", [_row(1, "B", 200)])
    assert write_book(_stored(objects), None, None, a, [(1, "A", "fa")], **_KEPT) == 1
    assert write_book(_stored(objects), None, None, b, [(1, "B", "fb")], **_KEPT) is None
    table, _ = read_book(_stored(objects), "loan_id", "x")
    assert table is not None
    assert table.column("identity").to_pylist() == ["A"]


_KEPT: dict[str, Any] = {"run_id": "d", "identity": "loan_id", "api": "x"}
