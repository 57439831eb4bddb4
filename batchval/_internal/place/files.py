"""Files that are replaced whole: every file batchval writes into a DIR (or beside it).

Atomic: each file is written to a hidden temporary beside it
(`.results.parquet.tmp-PID-RANDOM`, hidden so that dataset readers of DIR skip it, made
by `O_EXCL` and `O_NOFOLLOW` under a name no one can guess, so that a symlink planted in
a DIR others can write never catches the write), flushed and fsynced, then moved onto its
name with `os.replace` and the directory fsynced. A reader sees the old file or the new
one, never half of one; a crash or `kill -9` mid-write leaves the old file as it was (and
at worst a stale temporary, which a later write of the same file never reads).

Parquet is written the same way, from tables handed over one at a time (`write_parquet`):
they are gathered into row groups of about `ROW_GROUP_BYTES`, so memory stays flat
however many tables come. JSON and text are scrubbed by the process's redactor on the
way (`batchval._internal.redaction`): no file written here can hold a secret the process knows.
This module knows no file by name and imports nothing of batchval but that redaction:
any floor may use it.

Who may read them (`output.mode`, `modes`): a file is made 0600 and a folder 0700 by
default, or 0640 and 0750 for a reader in the account's group, exactly, whatever the
umask: results, checkpoint and exports hold borrowers' data.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import os
import secrets
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from batchval._internal import redaction
from batchval._internal.batching import gathered

COMPRESSION = "zstd"
# Memory, not speed, sets this: tables are gathered, as Arrow, into row groups of about
# this size (some 90,000 results rows without commentary, 15,000 with): big enough for
# readers, small enough to keep the process under 300 MB.
ROW_GROUP_BYTES = 32 << 20


def write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    """Write `data` as indented UTF-8 JSON to `path`, atomically, every secret the
    process knows masked (in its strings, then in the text, for its JSON-escaped forms)."""
    # Serialised first: a value JSON cannot hold fails before any file is touched.
    text = json.dumps(redaction.scrub_data(data), indent=2, ensure_ascii=False) + "\n"
    text = redaction.scrub(text)
    with _replacing(path) as file:
        file.write(text.encode())


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` as UTF-8 to `path`, atomically (a reader sees the old file or the new),
    every secret the process knows masked."""
    with _replacing(path) as file:
        file.write(redaction.scrub(text).encode())


def atomic_file(path: Path) -> contextlib.AbstractContextManager[IO[bytes]]:
    """A binary file that takes the place of `path` only if the block ends without error:
    the same atomic replace, for the other writers of DIR's files (`exports/export`)."""
    return _replacing(path)


def write_table_atomic(path: Path, table: pa.Table) -> int:
    """Write one table as Parquet to `path` (verify.parquet), atomically; the rows written."""
    return write_parquet(path, table.schema, [table])


def write_parquet(
    path: Path,
    schema: pa.Schema,
    tables: Iterable[pa.Table],
    *,
    dictionary: bool | Sequence[str] = True,
    ahead: bool = False,
) -> int:
    """Write the tables (each of `schema`) as one Parquet file to `path`, atomically, in
    row groups of about `ROW_GROUP_BYTES`; the rows written. `dictionary`: the columns
    dictionary-encoded (all by default; an encoding only, the table read back is the
    same). `ahead`: each row group is encoded in a thread of its own (Arrow lets go of the
    interpreter's lock meanwhile) while the tables of the next are made: one group more
    is held."""
    encoded = dictionary if isinstance(dictionary, bool) else list(dictionary)
    with (
        _replacing(path) as file,
        pq.ParquetWriter(file, schema, compression=COMPRESSION, use_dictionary=encoded) as out,
    ):
        if ahead:
            return _written_ahead(out, _row_groups(tables))
        rows = 0
        for group in _row_groups(tables):
            out.write_table(group)
            rows += group.num_rows
    return rows


def _written_ahead(out: pq.ParquetWriter, groups: Iterator[pa.Table]) -> int:
    """Each group written by a thread of its own while the next is made; the rows."""
    rows = 0
    written: Future[None] | None = None
    with ThreadPoolExecutor(1) as writer:
        for group in groups:
            if written is not None:
                written.result()
            written = writer.submit(out.write_table, group)
            rows += group.num_rows
        if written is not None:
            written.result()
    return rows


@dataclasses.dataclass(frozen=True, slots=True)
class Modes:
    """The permissions of the files and folders batchval makes."""

    file: int
    folder: int


# `output.mode` (settings.OUTPUT_MODES): the account alone, or its group too.
MODES: Mapping[str, Modes] = {"private": Modes(0o600, 0o700), "group": Modes(0o640, 0o750)}
_MODES: contextvars.ContextVar[Modes] = contextvars.ContextVar("modes", default=MODES["private"])


@contextlib.contextmanager
def modes(name: str) -> Iterator[None]:
    """While the block runs (in this context: a thread, a task), files and folders are
    made with the modes of `name` (`private` or `group`)."""
    token = _MODES.set(MODES[name])
    try:
        yield
    finally:
        _MODES.reset(token)


def file_mode() -> int:
    """The mode a new file is made with, in this context."""
    return _MODES.get().file


def exclusive(path: Path) -> int:
    """A descriptor of a new file at `path`, made by this call alone: never one that was
    there, nor through a symlink planted at its name (O_EXCL, O_NOFOLLOW); its mode the
    context's (`modes`), exactly, whatever the umask."""
    mode = file_mode()
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    os.fchmod(descriptor, mode)
    return descriptor


def make_folder(path: Path) -> None:
    """`path` as a folder, with any parent it lacks: each folder made here gets the
    context's mode (`modes`), exactly; a folder that was there is left as it is."""
    missing: list[Path] = []
    at = path
    while not os.path.lexists(at) and at != at.parent:
        missing.append(at)
        at = at.parent
    mode = _MODES.get().folder
    for folder in reversed(missing):
        try:
            folder.mkdir(mode)
        except FileExistsError:
            continue  # made meanwhile by another: theirs
        os.chmod(folder, mode)
    if not path.is_dir():
        path.mkdir()  # raises as mkdir does: a file there, a symlink to nothing


def temporary_beside(path: Path) -> Path:
    """A hidden name beside `path` that no one can guess ahead (`.NAME.tmp-PID-RANDOM`):
    a symlink planted at a predictable name cannot catch the write."""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(8)}")


@contextlib.contextmanager
def _replacing(path: Path) -> Iterator[IO[bytes]]:
    """A new file that takes the place of `path` only if the block ends without error."""
    temporary = temporary_beside(path)
    try:
        with os.fdopen(exclusive(temporary), "wb") as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        # Some file systems (and platforms) refuse fsync on a directory; the rename has
        # still happened, it is only less certain to survive a power cut.
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def _row_groups(tables: Iterable[pa.Table]) -> Iterator[pa.Table]:
    """The tables gathered into row groups of about `ROW_GROUP_BYTES` of Arrow data."""
    for run in gathered(tables, lambda table: table.nbytes, ROW_GROUP_BYTES):
        yield pa.concat_tables(run)
