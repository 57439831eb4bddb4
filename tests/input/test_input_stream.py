"""A CSV file's records streamed by pyarrow in bounded memory, read as polars reads them
(batchval._internal.input.stream)."""

from __future__ import annotations

import gzip
import io
import itertools
import re
from pathlib import Path

import hypothesis.strategies as st
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import example, given, settings

from batchval._internal.input import stream
from batchval._internal.input.passthrough import LEADING_ZERO


def blocks_of(path: Path, *, width: int, compressed: bool = False) -> pl.DataFrame:
    """Every record text_blocks reads, as one frame."""
    frames = stream.text_blocks(path, compressed=compressed, delimiter=",", width=width)
    return pl.concat(list(frames))


def not_blank(frame: pl.DataFrame) -> pl.DataFrame:
    """The rows with a value (polars reads an empty line as a row of nulls; pyarrow skips
    it; the reader drops both)."""
    return frame.filter(~pl.all_horizontal(pl.all().is_null()))


@pytest.mark.parametrize("compressed", [False, True])
def test_records_are_the_text_polars_reads(tmp_path: Path, compressed: bool) -> None:
    """Empty fields null, quoted empty fields "", quoted delimiters and line breaks: the
    same text as polars reads, with the header left out."""
    data = (
        b'\xef\xbb\xbfid,note,n\r\n1,,"a,b"\r\n2,"",x\r\n\r\n3,"say hi","two\nlines"\r\n'
        b"4, spaced ,\r\n"
    )
    path = tmp_path / "homes.csv"
    path.write_bytes(gzip.compress(data) if compressed else data)
    expected = pl.read_csv(io.BytesIO(data), infer_schema=False)
    got = blocks_of(path, width=3, compressed=compressed)
    assert not_blank(got).rows() == not_blank(expected).rows()
    assert got.columns == ["0", "1", "2"]


def test_only_reads_the_columns_asked_for(tmp_path: Path) -> None:
    """With `only`, a block holds those columns, in the order asked."""
    path = tmp_path / "homes.csv"
    path.write_text("a,b,c\n1,2,3\n4,5,6\n")
    frames = stream.text_blocks(path, compressed=False, delimiter=",", width=3, only=[2, 0])
    assert pl.concat(list(frames)).rows() == [("3", "1"), ("6", "4")]


def test_memory_holds_a_few_blocks_not_the_file(tmp_path: Path) -> None:
    """Reading a file of 24 MiB, Arrow never holds more than a few blocks at once."""
    line = "L{0:08d},SW1A 1AA,flat,2,,{1}\n"
    path = tmp_path / "homes.csv"
    path.write_text(
        "id,postcode,type,beds,area,note\n"
        + "".join(line.format(i, "x" * 40) for i in range(400_000))
    )
    assert path.stat().st_size > 24 * stream.BLOCK_BYTES
    before = pa.total_allocated_bytes()
    held = rows = 0
    for frame in stream.text_blocks(path, compressed=False, delimiter=",", width=6):
        held = max(held, pa.total_allocated_bytes() - before)
        rows += frame.height
    assert rows == 400_000
    assert held < 8 * stream.BLOCK_BYTES


def test_a_short_record_stops_the_stream(tmp_path: Path) -> None:
    """pyarrow refuses a record with fewer fields than the header (the reader then hands
    the file to polars, which pads it)."""
    path = tmp_path / "homes.csv"
    path.write_text("a,b,c\n1,2,3\n4,5\n")
    with pytest.raises(pa.ArrowInvalid, match="Expected 3 columns, got 2"):
        blocks_of(path, width=3)


@pytest.mark.parametrize("row", ['1,"say ""hi""",x', '1,5" pipe,x'])
def test_a_quote_mark_in_a_value_stops_the_stream(tmp_path: Path, row: str) -> None:
    """A value holding a quote mark, doubled in a quoted field or stray (which polars
    refuses), stops the stream: polars reads that file."""
    path = tmp_path / "homes.csv"
    path.write_text(f"a,b,c\n1,2,3\n{row}\n")
    with pytest.raises(stream.QuoteMarkError):
        blocks_of(path, width=3)


@pytest.mark.parametrize(
    ("head", "bare"),
    [
        ("a,b\r\n1,2\r\n", False),
        ("a,b\n1,2\n", False),
        ("a,b\r\n1,2\r", False),  # the head may end between \r and \n
        ("a,b\r1,2\r", True),
        ('a,b\n"x\ry",2\n', True),  # read by polars, as before
    ],
)
def test_bare_carriage_return(head: str, bare: bool) -> None:
    """A carriage return that ends no \\r\\n is found in the head."""
    assert stream.bare_carriage_return(head) is bare


@pytest.mark.parametrize(
    ("sizes", "rows"),
    [
        ([3, 1, 7], 4),  # a run that ends mid-block
        ([4, 4, 4], 4),  # blocks of exactly `rows`
        ([17], 4),  # one block of several batches
        ([0, 2, 0, 3, 0], 2),  # empty blocks
        ([1, 1, 1], 10),  # all in one short batch
        ([], 3),  # nothing at all
    ],
)
def test_rebatched_gives_batches_of_exactly_rows(sizes: list[int], rows: int) -> None:
    """Blocks of any size come out `rows` at a time, in order, the last one short."""
    starts = [sum(sizes[:k]) for k in range(len(sizes))]
    blocks = [
        pl.DataFrame({"n": list(range(a, a + size))}, schema={"n": pl.Int64})
        for a, size in zip(starts, sizes, strict=True)
    ]
    batches = list(stream.rebatched(blocks, rows))
    total = sum(sizes)
    expected = [rows] * (total // rows) + ([total % rows] if total % rows else [])
    assert [b.height for b in batches] == expected
    assert [n for b in batches for n in b["n"].to_list()] == list(range(total))


CELLS = [
    "1",
    "-20",
    "007",
    "-0",
    "99999999999999999999",
    "1.5",
    "1e3",
    ".5",
    "inf",
    "true",
    "FALSE",
    "x",
    " 1",
    "+1",
    '""',
    "",
]


@settings(deadline=None, max_examples=200)
@example(cells=["1", "1.5", "99999999999999999999"], cuts=[2])  # Float64, then Int128: text
@given(
    cells=st.lists(st.sampled_from(CELLS), min_size=1, max_size=12),
    cuts=st.lists(st.integers(min_value=1, max_value=12), max_size=4),
)
@pytest.mark.slow
def test_types_over_blocks_are_polars_types_over_the_file(
    cells: list[str], cuts: list[int]
) -> None:
    """However a column is cut into blocks, its merged type is the type polars infers
    over the whole column, and its leading zero is found when it is an integer column."""
    text = "v\n" + "".join(f"{cell}\n" for cell in cells)
    whole = pl.read_csv(io.StringIO(text), infer_schema_length=None).schema["v"]
    column = pl.read_csv(io.StringIO(text), infer_schema=False)["v"]
    edges = sorted({0, len(cells), *(c for c in cuts if c < len(cells))})
    blocks = [column.slice(a, b - a).to_frame() for a, b in itertools.pairwise(edges)]
    kinds, leading = stream.passthrough_types(blocks, 1)
    zero = any(re.match(LEADING_ZERO, cell) for cell in cells)
    assert kinds == [whole]
    assert leading == ([0] if whole == pl.Int64 and zero else [])
