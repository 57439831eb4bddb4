"""A CSV file read a slice at a time: whole records, the header left out.

polars' streaming scan reads ahead of its consumer without bound: while validation and
keying work through one batch it parses the rest of the file into memory, so a reader's
peak memory grew with the file (253 MiB at 100 k rows, 416 MiB at 1 M, 678 MiB at 5 M;
docs/performance.md), and its whole-file type inference mapped the whole file as well.
Here the file is read `SLICE_BYTES` at a time and each slice, cut after the last record
that ends in it, is parsed by polars on its own, so at most a slice or two is held.

A record ends at a line break outside quotes. With `"` as the quote (doubled inside a
quoted value, RFC 4180) a line break is outside quotes when the quote marks before it
are even in number: a quoted value may hold line breaks and still not be cut.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path

import polars as pl

SLICE_BYTES = 4 * 1024 * 1024


def _record_end(data: bytes, start: int = 0) -> int:
    """The index just after the first record that ends at or after `start` (data[:start]
    holding whole records), or -1 if none ends in `data`."""
    quotes = 0
    at = start
    while (newline := data.find(b"\n", at)) != -1:
        quotes += data.count(b'"', at, newline)
        if quotes % 2 == 0:
            return newline + 1
        at = newline + 1
    return -1


def _last_record_end(data: bytes) -> int:
    """The index just after the last record that ends in `data` (which starts at a
    record's start), or -1 if none ends in it."""
    total = data.count(b'"')
    newline = len(data)
    after = 0  # quote marks after the line break looked at
    while (newline := data.rfind(b"\n", 0, newline)) != -1:
        after = data.count(b'"', newline)
        if (total - after) % 2 == 0:
            return newline + 1
    return -1


def record_slices(path: Path, *, compressed: bool, size: int = SLICE_BYTES) -> Iterator[bytes]:
    """The file's data records in slices of whole records of about `size` bytes (a
    record longer than that makes a longer slice), each after the file's header record,
    so that polars reads every slice as it reads the file: the header says how many
    columns a row has."""
    with gzip.open(path, "rb") if compressed else open(path, "rb") as file:
        carry = b""
        header: bytes | None = None
        while True:
            block = file.read(size)
            data = carry + block
            last = len(block) < size  # a file that fits in one read is one slice, as before
            cut = len(data) if last else _last_record_end(data)
            if cut == -1:
                carry = data
                continue
            whole, carry = data[:cut], data[cut:]
            if header is None:
                end = _record_end(whole)
                if end == -1:  # not one record ends: polars reads it as it is, and says why
                    yield whole
                    return
                header, whole = whole[:end], whole[end:]
            if whole:
                yield header + whole
            if last:
                return


def parse(
    data: bytes, columns: list[str], delimiter: str, only: list[int] | None = None
) -> pl.DataFrame:
    """One slice as polars reads it, every column text (or only those at `only`)."""
    return pl.read_csv(
        data,
        has_header=True,
        new_columns=columns,
        columns=only,  # in the order given
        separator=delimiter,
        quote_char='"',
        raise_if_empty=False,
        infer_schema=False,
    )


def types(data: bytes, columns: list[str], delimiter: str) -> pl.Schema:
    """The types polars infers over a slice (every value read, none kept)."""
    return pl.scan_csv(
        data,
        has_header=True,
        new_columns=columns,
        separator=delimiter,
        quote_char='"',
        raise_if_empty=False,
        infer_schema_length=None,
    ).collect_schema()


_NUMBERS: dict[pl.DataType, int] = {pl.Int64(): 0, pl.Int128(): 1, pl.Float64(): 2}


def merge_types(held: pl.DataType | None, found: pl.DataType) -> pl.DataType:
    """The type of a column over two slices, as polars' inference over both would give
    it: the same type; integers that grew to Int128, or met a float, widen; any other
    mix is text."""
    if held is None or held == found:
        return found
    if held in _NUMBERS and found in _NUMBERS:
        return held if _NUMBERS[held] >= _NUMBERS[found] else found
    return pl.String()
