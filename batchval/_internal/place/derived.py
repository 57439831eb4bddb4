"""Nothing stale beside newer results (issue 33): the files `export` and `report` write
in a run's place (results.csv, results.xlsx, report.html, ...) are listed in the run's
memory as they are written (`remember`), and the next invocation that changes the outputs
they were made from removes them (`remove_stale`), at a URL too.

- **What a file was made from**: the digest of the data of every Parquet output in DIR
  (`made_from`), but the charges ledger and verify's differences, which follow the
  results. Only the data pages are hashed, not the file's footer, whose metadata
  (the manifest: `written_at`, this invocation's charges) changes at every invocation:
  a resume with nothing to do writes the same data, and its exports stay.
- **Only what those commands wrote**: each file is listed with the sha256 of its bytes.
  A stale file whose bytes are not those (a person saved their own workbook under that
  name) is kept, and only forgotten; a file nobody listed is never touched.
- **Where the list is kept**: in the run's memory (`store/derived`, the checkpoint), at
  a URL as every commit of it is (`export` and `report` then take the run for the moment
  they write, as `verify` does). A DIR that holds only a dry run has no memory yet: the
  list is kept in its `dry_run.json`, and the run that follows takes it over.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from batchval._internal import logs
from batchval._internal.outcome import BatchvalError
from batchval._internal.place.files import write_json_atomic
from batchval._internal.place.names import CHARGES_NAME, DRY_RUN_NAME, VERIFY_NAME
from batchval._internal.place.place import Place
from batchval._internal.store import CHECKPOINT_NAME, Database, DerivedFile, listing

log = logs.get_logger()

# Outputs that follow the results rather than make them: charges grow only with new
# answers, and a run that replaces results.parquet removes verify's differences.
NOT_SOURCES = frozenset({CHARGES_NAME, VERIFY_NAME})
# dry_run.json's key for the list, in a DIR that holds no run's memory yet.
DRY_RUN_KEY = "derived_files"
_CHUNK = 1 << 20  # bytes read at a time for a digest


def data_digest(path: Path) -> str | None:
    """The sha256 of a Parquet file's schema and data pages (not its footer's metadata);
    None when there is no such file, or it is not Parquet."""
    try:
        size = path.stat().st_size
        with path.open("rb") as stream:
            stream.seek(size - 8)
            footer = struct.unpack("<I", stream.read(4))[0]
            stream.seek(4)
            digest = hashlib.sha256()
            _read_into(digest, stream, size - 8 - footer - 4)
        schema = pq.read_schema(path).remove_metadata()
    except (OSError, ValueError, struct.error, pa.ArrowException):
        return None
    digest.update(schema.to_string(show_field_metadata=False).encode())
    return digest.hexdigest()


def file_digest(path: Path) -> str:
    """The sha256 of a whole file, read a megabyte at a time (an export may be gigabytes)."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        _read_into(digest, stream, None)
    return digest.hexdigest()


def _read_into(digest: Any, stream: BinaryIO, length: int | None) -> None:
    """`length` bytes of `stream` from where it is (None: to its end) into `digest`."""
    left = length
    while left is None or left > 0:
        chunk = stream.read(_CHUNK if left is None else min(_CHUNK, left))
        if not chunk:
            break
        digest.update(chunk)
        if left is not None:
            left -= len(chunk)


def made_from(directory: Path) -> dict[str, str | None]:
    """What a file written now would be made from: each Parquet output's data digest."""
    return {
        path.name: data_digest(path)
        for path in sorted(directory.glob("*.parquet"))
        if path.name not in NOT_SOURCES and ".tmp-" not in path.name
    }


def remember(place: Place, paths: Iterable[Path], command: str) -> str | None:
    """List `paths` (written by `command` in the place's directory) in the run's memory;
    a DIR with no memory and no dry run (bare Parquet files) keeps no list. Returns why
    the list could not be kept (a newer memory, one locked past its wait), to be said:
    never the command's failure, whose files are written; only a later run will not know
    to remove them. (`export` and `report` configure no logging: nothing is logged.)"""
    directory = place.local
    sources = made_from(directory)
    files = [
        DerivedFile(p.name, command, file_digest(p), sources)
        for p in sorted(set(paths))
        if p.parent.resolve() == directory.resolve()
    ]
    if not files:
        return None
    if (directory / CHECKPOINT_NAME).is_file():
        try:
            with listing():
                database = Database.open(directory)
                try:
                    place.keep(database)
                    with database.transaction():
                        database.derived.record(files)
                finally:
                    database.close()
        except BatchvalError as exc:
            names = ", ".join(f.name for f in files)
            return f"not listed in the run's memory ({exc}): a later run leaves {names} in place"
    elif (directory / DRY_RUN_NAME).is_file():
        priced = _read_json(directory / DRY_RUN_NAME)
        listed = {f["name"]: f for f in priced.get(DRY_RUN_KEY) or []}
        listed.update({f.name: f.to_json() for f in files})
        write_json_atomic(directory / DRY_RUN_NAME, {**priced, DRY_RUN_KEY: list(listed.values())})
    return None


def remove_stale(database: Database, place: Place) -> list[str]:
    """After an invocation wrote its outputs: remove every listed file whose outputs have
    changed since it was written, from the directory and from the place's URL; returns
    the names removed. A dry run's list (`dry_run.json`) is taken into the memory first."""
    directory = place.local
    _adopt_dry_run_list(database, directory)
    now = made_from(directory)
    stale = [f for f in database.derived.listed() if dict(f.made_from) != now]
    if not stale:
        return []
    removed, kept = [], []
    for listed in stale:
        local = directory / listed.name
        held = file_digest(local) if local.is_file() else None
        if place.objects is not None:
            found = place.objects.get(listed.name)
            held = None if found is None else hashlib.sha256(found[0]).hexdigest()
        if held is None:
            continue  # gone already
        if held != listed.sha256:
            kept.append(listed.name)  # a person's file under that name now
            continue
        if place.objects is not None:
            place.objects.delete(listed.name)
        local.unlink(missing_ok=True)
        removed.append(listed.name)
    with database.transaction():
        database.derived.forget(f.name for f in stale)
    # A line of the log, as the terminal's (`removed_line`); a file saved over one is kept.
    log.info("engine.derived.removed", files=", ".join(removed), changed_by_hand=", ".join(kept))
    return removed


def removed_line(names: Iterable[str]) -> str | None:
    """The terminal's one line about the files `remove_stale` removed (None: none)."""
    names = list(names)
    if not names:
        return None
    files = "1 file" if len(names) == 1 else f"{len(names)} files"
    return f"removed {files} an earlier export or report wrote (now stale): {', '.join(names)}"


def _adopt_dry_run_list(database: Database, directory: Path) -> None:
    """A dry run's list into the run's memory, and out of its dry_run.json."""
    path = directory / DRY_RUN_NAME
    priced = _read_json(path) if path.is_file() else {}
    listed = priced.pop(DRY_RUN_KEY, None)
    if not listed:
        return
    known = {f.name for f in database.derived.listed()}
    with database.transaction():
        database.derived.record(
            DerivedFile.from_json(f) for f in listed if f.get("name") not in known
        )
    write_json_atomic(path, priced)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}
