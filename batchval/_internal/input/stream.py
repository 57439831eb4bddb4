"""A CSV file's records as text, streamed in memory that does not grow with the file.

polars' CSV scan, streaming engine or not, reads the whole file into memory before it
parses it (with POLARS_VERBOSE=1 it says it "acquired read bytes" of the file's size),
and its schema inference over the whole file maps all of it: measured, a
5,000,000-row book (265 MB) took the reader to 767 MiB against 461 MiB at 1,000,000
rows. pyarrow's streaming CSV reader (`pyarrow.csv.open_csv`) over an open file parses
it `BLOCK_BYTES` at a time, as it is asked for the next batch, so memory holds a few
blocks whatever the file's length. pyarrow does the parsing; this module only asks it
to read the way polars did (`input/reader` keeps polars for the files pyarrow reads
otherwise):

- every field is text; an empty field is null and a quoted empty field (`""`) is the
  empty text, as polars reads them; an empty line is no record;
- a quoted field may hold the delimiter, a doubled quote mark and line breaks.

Where the two may disagree, the stream stops, and the reader reads on with polars from
the row it stopped at, so such a file reads, or is refused, as it always was:

- pyarrow refuses a record with fewer or more fields than the header (polars pads a
  short one with nulls) and text that is not UTF-8;
- pyarrow reads a quote mark inside an unquoted field as text, where polars refuses the
  file (a stray or unclosed quote mark). A value holding a quote mark cannot tell a
  stray one from a doubled one in a quoted field, so a block with any value holding a
  quote mark stops the stream (`QuoteMarkError`);
- pyarrow takes a bare carriage return as a line break, polars as text: a file whose head
  shows one is read by polars throughout (`bare_carriage_return`).

One difference stays: text after a closing quote (`"ab"cd`), which polars refuses, is
read by pyarrow as `abcd`.

The pass-through columns' types are polars' inference (`input/passthrough`), run on
each block in turn rather than on the whole file at once, and merged the way polars
merges the types it sees down a column (`merged_type`).
"""

from __future__ import annotations

import gzip
import io
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.csv as pa_csv

from batchval._internal.batching import gathered
from batchval._internal.input import passthrough as given

# Big enough that pyarrow's per-block cost vanishes (about 20,000 rows of a plain book),
# small enough that the blocks in flight are a few MiB.
BLOCK_BYTES = 1 << 20

_BARE_CR = re.compile(r"\r(?!\n)")

# The types polars settles on when it sees two kinds of value down one column; any other
# mix is text (read from polars' inference, and checked in the tests against it: a
# column of 1, 99999999999999999999 and 1.5 is text, not Float64).
_MERGED: dict[frozenset[pl.DataType], pl.DataType] = {
    frozenset({pl.Int64(), pl.Float64()}): pl.Float64(),
    frozenset({pl.Int128(), pl.Float64()}): pl.Float64(),
    frozenset({pl.Int64(), pl.Int128()}): pl.Int128(),
}


class QuoteMarkError(Exception):
    """A block holds a value with a quote mark in it: polars reads on (see above)."""


def bare_carriage_return(head: str) -> bool:
    """Whether the head of a CSV file holds a carriage return that ends no `\\r\\n`."""
    return _BARE_CR.search(head.removesuffix("\r")) is not None


def text_blocks(
    path: Path,
    *,
    compressed: bool,
    delimiter: str,
    width: int,
    only: Sequence[int] | None = None,
    skip_lines: int = 0,
) -> Iterator[pl.DataFrame]:
    """Every record after the header, in file order, a block at a time: `width` text
    columns named by position ("0", "1", ...), or only those at the positions `only`.
    The header is the first record after `skip_lines` lines (a banner above the table:
    skipped as lines, whatever their fields, as pyarrow's `skip_rows` and polars'
    `skip_lines` both count them).
    Raises what pyarrow, gzip or the file raise (sniff.READ_ERRORS) where the file
    cannot be read on, and QuoteMarkError where polars may read it otherwise."""
    names = [str(i) for i in range(width)]
    wanted = names if only is None else [names[i] for i in only]
    read = pa_csv.ReadOptions(column_names=names, block_size=BLOCK_BYTES, skip_rows=skip_lines)
    parse = pa_csv.ParseOptions(
        delimiter=delimiter, quote_char='"', double_quote=True, newlines_in_values=True
    )
    convert = pa_csv.ConvertOptions(
        column_types={name: pa.string() for name in wanted},
        include_columns=wanted,
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,
        null_values=[""],
    )
    with gzip.open(path, "rb") if compressed else open(path, "rb") as raw:
        reader = pa_csv.open_csv(
            raw, read_options=read, parse_options=parse, convert_options=convert
        )
        header = True  # the header is read as the first record, then dropped
        for batch in reader:
            frame = pl.from_arrow(batch)
            assert isinstance(frame, pl.DataFrame)
            if header:
                frame, header = frame.slice(1), False
            quoted = frame.select(pl.any_horizontal(pl.all().str.contains('"', literal=True)))
            if quoted.to_series().any():
                raise QuoteMarkError
            if frame.height:
                yield frame


def rebatched(frames: Iterable[pl.DataFrame], rows: int) -> Iterator[pl.DataFrame]:
    """The rows of `frames`, in order, `rows` at a time (the last batch may be short)."""
    held: list[pl.DataFrame] = []  # fewer than `rows` rows, left from the run before
    for run in gathered(frames, lambda frame: frame.height, rows):
        whole = pl.concat([*held, *run], rechunk=False)
        whole_batches = whole.height - whole.height % rows
        for start in range(0, whole_batches, rows):
            yield whole.slice(start, rows).rechunk()
        held = [whole.slice(whole_batches)] if whole.height > whole_batches else []
    if held:
        yield pl.concat(held).rechunk()


def passthrough_types(
    blocks: Iterable[pl.DataFrame], width: int
) -> tuple[list[pl.DataType], list[int]]:
    """polars' inference over every block of `width` text columns: each column's type,
    and which of them (by position) are integer columns holding a value written with a
    leading zero (input/passthrough)."""
    seen: list[set[pl.DataType]] = [set() for _ in range(width)]
    zero = [False] * width
    for block in blocks:
        # Text down a column stays text whatever follows: only the others are looked at,
        # and the file no further once every column is text.
        open_ = [i for i in range(width) if not (seen[i] and merged_type(seen[i]) == pl.String)]
        if not open_:
            break
        for i in open_:
            column = block.to_series(i)
            seen[i] |= _inferred(column)
            zero[i] = zero[i] or bool(column.str.contains(given.LEADING_ZERO).any())
    found = [merged_type(kinds) for kinds in seen]
    return found, [i for i, kind in enumerate(found) if kind == pl.Int64 and zero[i]]


def _inferred(column: pl.Series) -> set[pl.DataType]:
    """The kinds of value polars infers in a column of text (none when it holds no
    value). Its distinct values are written back as CSV (quoting what needs it) for
    polars to infer from, so that the rules are polars' own."""
    values = column.drop_nulls().unique().rename("value")
    if values.is_empty():
        return set()
    text = io.BytesIO(values.to_frame().write_csv().encode())
    kind = pl.scan_csv(text, infer_schema_length=None).collect_schema()["value"]
    if kind not in (pl.Float64, pl.Int128):
        return {kind}
    # polars may have merged numbers of two kinds into this one, and the merge over the
    # blocks must know which: 1 and 1.5 in one block and 99999999999999999999 in the
    # next are text over the whole file, not Float64. Every value here is a number to
    # polars; the integers are those written as digits alone.
    integers = values.filter(values.str.contains(r"^-?\d+$"))
    fits = integers.str.to_integer(strict=False).is_not_null()
    kinds = {kind}
    if fits.any():
        kinds.add(pl.Int64())
    if (~fits).any():
        kinds.add(pl.Int128())
    return kinds


def merged_type(kinds: Iterable[pl.DataType]) -> pl.DataType:
    """The type polars gives a column down which it saw values of `kinds` (text when it
    saw none)."""
    distinct = frozenset(kinds)
    if not distinct:
        return pl.String()
    if len(distinct) == 1:
        return next(iter(distinct))
    return _MERGED.get(distinct, pl.String())
