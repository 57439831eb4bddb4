"""The first look at an input file: its head read, decoded and judged before anything
else reads it (an empty file, UTF-16, binary data, gzip that will not open, the delimiter
a header uses), so that a file that cannot be used is refused with one clear line.
"""

from __future__ import annotations

import codecs
import csv
import dataclasses
import gzip
import re
import zlib
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pyarrow as pa

from batchval._internal.input.options import DETECTED_DELIMITERS, InputError

HEAD_BYTES = 64 * 1024  # enough for any sane header and a first look at the data
GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = codecs.BOM_UTF8
UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
DETECT_CHUNK = 1 << 20  # bytes read at a time while the encoding is found
# The five bytes Windows-1252 gives no character (Python's codec refuses them).
_CP1252_UNDEFINED = re.compile(rb"[\x81\x8d\x8f\x90\x9d]")
_PAST_ASCII = re.compile(rb"[\x80-\xff]+")
# A well-formed UTF-8 sequence of two or more bytes: in a cp1252 file, mojibake such as
# "Â£"; in a file that is not UTF-8, the sign of a second encoding.
_UTF8_MULTIBYTE = re.compile(
    rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}"
)
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


@dataclasses.dataclass(frozen=True, slots=True)
class Head:
    """The decoded start of a CSV file, and how it was decoded."""

    text: str
    complete: bool  # the head is the whole file
    codec: str  # the Python codec the whole file is read with
    detected: bool  # the codec was found from the bytes, not given


def head_text(path: Path, head: bytes, codec: str | None) -> Head:
    """The decoded start of a CSV file; with no `codec`, the encoding is first found from
    every byte of the file (`detect_encoding`)."""
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
        if codec not in (None, "utf-8"):
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
    detected = codec is None
    if codec is None:
        codec = detect_encoding(path, compressed=compressed)
    try:
        text = codecs.getincrementaldecoder(codec)().decode(data, final=complete)
    except UnicodeDecodeError as exc:
        # latin-1 decodes any byte, so only a given utf-8, cp1252 or the like gets here.
        advice = "--encoding cp1252 (Excel on Windows) or latin-1"
        if codec != "utf-8":
            advice = "--encoding utf-8 or latin-1"
        byte = exc.object[exc.start]
        raise InputError(
            path,
            f"is not {codec} text (byte 0x{byte:02x} at offset {exc.start}); name its "
            f"encoding with {advice} (input.encoding in the config)",
        ) from exc
    return Head(text, complete, codec, detected)


def detect_encoding(path: Path, *, compressed: bool) -> str:
    """The encoding of a CSV file whose encoding was not given, from all its bytes (so the
    same file is always read the same way): `utf-8` when every byte is UTF-8; else
    `cp1252`, what Excel on Windows writes (`£` is 0xA3), when every byte has a meaning
    there and the file holds no UTF-8 sequence of two or more bytes (a file that mixes
    UTF-8 with another encoding would be misread either way); else InputError.

    A UTF-8 file is read once, a MiB at a time (gzip decompressed on the way), by the
    UTF-8 decoder alone; one that is not is read again for the rest, looking only at its
    runs of bytes past ASCII.
    """
    not_utf8 = _first_fault(path, compressed)
    if not_utf8 is None:
        return "utf-8"
    where, byte = not_utf8
    said = "ends inside a UTF-8 sequence" if byte < 0 else f"byte 0x{byte:02x} at offset {where}"
    undefined, multibyte = _past_ascii(path, compressed)
    if undefined is not None:
        raise _refusal(
            path,
            f"is neither UTF-8 ({said}) nor cp1252 (byte 0x{undefined[1]:02x} at offset "
            f"{undefined[0]} means nothing there)",
        )
    if multibyte is not None:
        raise _refusal(
            path,
            f"mixes UTF-8 (a UTF-8 character at offset {multibyte}) with another encoding ({said})",
        )
    return "cp1252"


def _chunks(path: Path, compressed: bool) -> Iterator[bytes]:
    try:
        with gzip.open(path, "rb") if compressed else open(path, "rb") as raw:
            while chunk := raw.read(DETECT_CHUNK):
                yield chunk
    except (*READ_ERRORS, ValueError) as exc:
        raise InputError(path, f"cannot be read: {first_line(exc)}") from exc


def _first_fault(path: Path, compressed: bool) -> tuple[int, int] | None:
    """(offset, byte) of the file's first byte that is not UTF-8 (byte -1: the file ends
    inside a sequence), or None when every byte is UTF-8."""
    utf8 = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    for chunk in _chunks(path, compressed):
        held = len(utf8.getstate()[0])  # a sequence begun at the end of the last chunk
        try:
            utf8.decode(chunk)
        except UnicodeDecodeError as exc:
            return offset - held + exc.start, exc.object[exc.start]
        offset += len(chunk)
    try:
        utf8.decode(b"", final=True)
    except UnicodeDecodeError:
        return offset, -1
    return None


def _past_ascii(path: Path, compressed: bool) -> tuple[tuple[int, int] | None, int | None]:
    """The (offset, byte) of the first byte cp1252 leaves undefined, and the offset of the
    first well-formed UTF-8 sequence of two or more bytes; each None when there is none."""
    undefined: tuple[int, int] | None = None
    multibyte: int | None = None
    offset = 0
    carry = b""  # a run past ASCII that reaches the end of a chunk may go on in the next
    for chunk in _chunks(path, compressed):
        data, start = carry + chunk, offset - len(carry)
        carry = b""
        if not data.isascii():
            for run in _PAST_ASCII.finditer(data):
                if run.end() == len(data) and run.end() - run.start() < DETECT_CHUNK:
                    carry = run.group()  # looked at whole with the next chunk
                    break
                undefined, multibyte = _look(run, start, undefined, multibyte)
        offset += len(chunk)
        if undefined is not None and multibyte is not None:
            return undefined, multibyte
    if carry:
        found = _PAST_ASCII.search(carry)
        assert found is not None
        undefined, multibyte = _look(found, offset - len(carry), undefined, multibyte)
    return undefined, multibyte


def _look(
    run: re.Match[bytes], start: int, undefined: tuple[int, int] | None, multibyte: int | None
) -> tuple[tuple[int, int] | None, int | None]:
    text = run.group()
    if undefined is None and (bad := _CP1252_UNDEFINED.search(text)):
        undefined = (start + run.start() + bad.start(), text[bad.start()])
    if multibyte is None and (seq := _UTF8_MULTIBYTE.search(text)):
        multibyte = start + run.start() + seq.start()
    return undefined, multibyte


def _refusal(path: Path, fault: str) -> InputError:
    return InputError(
        path,
        f"{fault}; name its encoding with --encoding NAME (input.encoding in the config), "
        "e.g. latin-1, iso-8859-15, cp1250, or save it as CSV in UTF-8",
    )


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
