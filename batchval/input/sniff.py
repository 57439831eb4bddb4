"""The first look at an input file: its head read, decoded and judged before anything
else reads it (an empty file, UTF-16, binary data, gzip that will not open, the delimiter
a header uses), so that a file that cannot be used is refused with one clear line.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pyarrow as pa

from batchval.input.options import DETECTED_DELIMITERS, InputError

HEAD_BYTES = 64 * 1024  # enough for any sane header and a first look at the data
GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = codecs.BOM_UTF8
UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
# What reading a broken file can raise, from polars, pyarrow, gzip and the codecs.
READ_ERRORS = (pl.exceptions.PolarsError, pa.ArrowException, OSError, EOFError, zlib.error)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def read_head(path: Path) -> bytes:
    try:
        with open(path, "rb") as file:
            head = file.read(HEAD_BYTES)
    except FileNotFoundError as exc:
        raise InputError(path, "no such file") from exc
    except IsADirectoryError as exc:
        raise InputError(path, "is a directory, not a file") from exc
    except OSError as exc:
        raise InputError(path, f"cannot be read: {exc.strerror or first_line(exc)}") from exc
    if not head:
        raise InputError(path, "is empty (0 bytes)")
    return head


def head_text(path: Path, head: bytes, codec: str) -> tuple[str, bool]:
    """The decoded start of a CSV file, and whether it is the whole file."""
    compressed = head.startswith(GZIP_MAGIC)
    data = head
    if compressed:
        try:
            with gzip.open(path, "rb") as file:
                data = file.read(HEAD_BYTES)
        except (*READ_ERRORS, ValueError) as exc:
            raise InputError(
                path, f"is gzip-compressed but cannot be decompressed: {first_line(exc)}"
            ) from exc
    complete = len(data) < HEAD_BYTES
    if data.startswith(UTF8_BOM):
        if codec != "utf-8":
            raise InputError(
                path, f"starts with a UTF-8 byte-order mark but the encoding is {codec}"
            )
        data = data[len(UTF8_BOM) :]
    if data.startswith(UTF16_BOMS):
        raise InputError(path, "is UTF-16 text; save it as CSV in UTF-8")
    if b"\x00" in data:
        named = path.suffix.lower() in {".parquet", ".pq"}
        guess = " (named as Parquet but without its PAR1 magic)" if named else ""
        raise InputError(path, f"holds binary data, not CSV text{guess}")
    try:
        text = codecs.getincrementaldecoder(codec)().decode(data, final=complete)
    except UnicodeDecodeError as exc:
        # latin-1 decodes any byte, so only utf-8 and cp1252 get here.
        advice = "set encoding cp1252 (Excel on Windows) or latin-1"
        if codec != "utf-8":
            advice = "set encoding utf-8 or latin-1"
        byte = exc.object[exc.start]
        raise InputError(
            path,
            f"is not {codec} text (byte 0x{byte:02x} at offset {exc.start}); {advice}",
        ) from exc
    return text, complete


def detect_delimiter(line: str) -> str:
    """The candidate delimiter that occurs most often outside quotes (comma on a tie)."""
    bare = "".join(line.split('"')[::2])
    counts = {d: bare.count(d) for d in DETECTED_DELIMITERS}
    best = max(DETECTED_DELIMITERS, key=lambda d: counts[d])
    return best if counts[best] else ","


def has_data(rows: Iterator[list[str]]) -> bool:
    """Whether any row after the header has a value (a malformed row counts: it is data)."""
    try:
        return any(any(field.strip() for field in row) for row in rows)
    except csv.Error:
        return True
