"""input/slices: a CSV file cut into slices of whole records, each read as the file is."""

from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchval.input.slices import merge_types, parse, record_slices

HEADER = b"id,note\n"


def rows_of(slices: list[bytes]) -> list[tuple[str, str]]:
    """Every data row of the slices, parsed as polars parses the file."""
    found: list[tuple[str, str]] = []
    for data in slices:
        assert data.startswith(HEADER)  # each slice is read after the file's header
        frame = parse(data, ["id", "note"], ",")
        found += [(str(a), "" if b is None else str(b)) for a, b in frame.iter_rows()]
    return found


@pytest.mark.parametrize("size", [1, 7, 20, 1 << 20])
def test_a_quoted_line_break_is_never_a_cut(tmp_path: Path, size: int) -> None:
    """Values with line breaks, commas and doubled quotes inside quotes come out whole,
    whatever the slice size (a record longer than a slice makes a longer slice)."""
    path = tmp_path / "book.csv"
    path.write_bytes(HEADER + b'1,"two\nlines"\n2,"a ""quoted"", comma"\n3,plain\r\n4,"x\n\ny"')
    assert rows_of(list(record_slices(path, compressed=False, size=size))) == [
        ("1", "two\nlines"),
        ("2", 'a "quoted", comma'),
        ("3", "plain"),
        ("4", "x\n\ny"),
    ]


def test_a_gzip_file_is_sliced_as_its_text(tmp_path: Path) -> None:
    """A gzip-compressed CSV is read through, a slice at a time, without a copy."""
    path = tmp_path / "book.csv.gz"
    path.write_bytes(gzip.compress(HEADER + b"".join(b"%d,n%d\n" % (i, i) for i in range(100))))
    slices = list(record_slices(path, compressed=True, size=64))
    assert len(slices) > 1
    assert rows_of(slices) == [(str(i), f"n{i}") for i in range(100)]


def test_a_file_where_no_record_ends_is_read_as_it_is(tmp_path: Path) -> None:
    """A header alone, or lines ended by CR only, is handed to polars as the file is,
    which then says what is wrong with it; a header and its line break has no slice."""
    path = tmp_path / "book.csv"
    for text in (b"id,note", b"id,note\r1,a\r2,b\r"):
        path.write_bytes(text)
        assert list(record_slices(path, compressed=False)) == [text]
    path.write_bytes(b"id,note\n")
    assert list(record_slices(path, compressed=False)) == []


def test_a_large_file_is_cut_only_after_whole_records(tmp_path: Path) -> None:
    """Past one read, every slice ends with a record: none starts inside a quote."""
    path = tmp_path / "book.csv"
    path.write_bytes(HEADER + b"".join(b'%d,"a\nb"\n' % i for i in range(200)))
    slices = list(record_slices(path, compressed=False, size=100))
    assert len(slices) > 5
    assert all(data.endswith(b'"\n') for data in slices)
    assert rows_of(slices) == [(str(i), "a\nb") for i in range(200)]


@settings(max_examples=50, deadline=None)
@given(
    values=st.lists(st.text(alphabet='ab,"\n ', max_size=6), min_size=1, max_size=30),
    size=st.integers(min_value=1, max_value=40),
)
def test_slicing_never_changes_the_rows(
    tmp_path_factory: pytest.TempPathFactory, values: list[str], size: int
) -> None:
    """For any quoted values, the rows read slice by slice are the rows of the file."""
    path = tmp_path_factory.mktemp("slices") / "book.csv"
    body = b"".join(b'%d,"%s"\n' % (i, v.replace('"', '""').encode()) for i, v in enumerate(values))
    path.write_bytes(HEADER + body)
    whole = pl.read_csv(path, infer_schema=False)
    assert rows_of(list(record_slices(path, compressed=False, size=size))) == [
        (str(a), "" if b is None else str(b)) for a, b in whole.iter_rows()
    ]


@pytest.mark.parametrize(
    ("held", "found", "merged"),
    [
        (None, pl.Int64(), pl.Int64()),
        (pl.Int64(), pl.Int64(), pl.Int64()),
        (pl.Int64(), pl.Float64(), pl.Float64()),
        (pl.Float64(), pl.Int64(), pl.Float64()),
        (pl.Int64(), pl.Int128(), pl.Int128()),
        (pl.Int64(), pl.String(), pl.String()),
        (pl.Boolean(), pl.Int64(), pl.String()),
        (pl.Boolean(), pl.Boolean(), pl.Boolean()),
    ],
)
def test_types_of_two_slices_merge_as_polars_infers_them(
    held: pl.DataType | None, found: pl.DataType, merged: pl.DataType
) -> None:
    """Integers widen to Int128 or to floats; any other mix of types is text."""
    assert merge_types(held, found) == merged
