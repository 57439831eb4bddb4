"""`batchval split`: an input cut into N shards by a stable hash of each row's identity.

Each shard is a Parquet file, whatever the input's format: a CSV's request fields as the
text read (so that a shard makes exactly the requests the row made, and so the same
idempotency keys), every other column typed as `run` passes it through (input/
passthrough); a Parquet input's columns in its own types. The header (the schema)
is kept in every shard, an empty one included.

A row's identity, in order of preference:

1. the `--row-id` column's value (as written to the shard, as text);
2. else the canonical request JSON `run` would send (input/validate, the text that
   sending/keys hashes), so identical rows land together and are valued once;
3. else (a row validation refuses) its request fields' values, as text.

The shard is `sha256(identity) mod N`: not Python's `hash`, which is seeded per process,
so the same row lands in the same shard on any machine, in any order, whatever other
rows the file holds. The input is streamed in the reader's batches; each shard is
written as it goes and replaced atomically at the end.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from batchval._internal.input import InputBatch, InputOptions, InputSource, open_input
from batchval._internal.outcome import SettingsError
from batchval._internal.place import (
    exclusive,
    make_folder,
    temporary_beside,
    write_json_atomic,
)

MANIFEST_NAME = "shards.json"
_DOMAIN = b"batchval-split-1\n"  # changes only with the derivation: old shards stay true
_SHARD_FILE = re.compile(r"^shard-\d{5}-of-(\d{5})\.parquet$")


def shard_name(index: int, shards: int) -> str:
    return f"shard-{index:05d}-of-{shards:05d}.parquet"


def shard_of(identity: str, shards: int) -> int:
    """The shard of a row identity: stable across processes, machines and versions."""
    digest = hashlib.sha256(_DOMAIN + identity.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % shards


@dataclasses.dataclass(frozen=True, slots=True)
class SplitSummary:
    """What `split` wrote: the rows of each shard, in shard order."""

    input: str
    row_id: str | None
    rows: tuple[int, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "input": self.input,
            "shards": len(self.rows),
            "row_id": self.row_id,
            "rows": sum(self.rows),
            "files": [
                {"path": shard_name(i, len(self.rows)), "rows": n} for i, n in enumerate(self.rows)
            ],
        }

    def render(self) -> str:
        lines = [f"{shard_name(i, len(self.rows))}: {n} rows" for i, n in enumerate(self.rows)]
        lines.append(f"split {sum(self.rows)} rows into {len(self.rows)} shards")
        return "\n".join(lines)


def split_input(
    input_path: Path,
    out_dir: Path,
    shards: int,
    options: InputOptions,
    row_id: str | None,
    *,
    input_name: str | None = None,
    held: Iterable[str] = (),
) -> SplitSummary:
    """Write the N shards and `shards.json` into `out_dir`; `input_name` is the URL the
    input was read from, if it was (shards.json names it).

    Raises InputError (exit 65) for an unusable input, SettingsError (exit 64) for a
    `--row-id` the input has no column of, or a DIR that holds another split's shards.
    """
    source = open_input(input_path, options)
    if row_id is not None and row_id not in source.columns:
        raise SettingsError(
            f"--row-id {row_id!r}: {input_path} has no such column "
            f"(its columns: {', '.join(source.columns)})"
        )
    make_folder(out_dir)
    names = [*(p.name for p in out_dir.iterdir()), *held]  # held: at the --out URL
    others = sorted({int(m[1]) for name in names if (m := _SHARD_FILE.match(name))} - {shards})
    if others:
        raise SettingsError(
            f"{out_dir} holds the shards of a split into {others[0]}; "
            "give a split into another number of shards its own --out DIR"
        )
    counts = [0] * shards
    with _ShardWriters(out_dir, shards) as writers:
        for batch in source.batches(every_column=True):
            placed = pa.array(_shards_of(batch, source, row_id, shards), pa.int64())
            order = pc.sort_indices(placed)  # stable: input order within a shard
            rows = batch.passthrough.take(order)
            tally = collections.Counter(placed.to_pylist())
            start = 0
            for index in sorted(tally):
                writers.write(index, rows.slice(start, tally[index]))
                counts[index] += tally[index]
                start += tally[index]
    summary = SplitSummary(input_name or str(input_path), row_id, tuple(counts))
    write_json_atomic(out_dir / MANIFEST_NAME, summary.to_json())
    return summary


def _shards_of(
    batch: InputBatch, source: InputSource, row_id: str | None, shards: int
) -> list[int]:
    """Each row's shard, from its identity (the module's docstring)."""
    rows = batch.passthrough
    requests: list[str | None] = batch.checked.get_column("request_json").to_list()
    ids: list[str | None] = (
        _text(rows.column(row_id)) if row_id is not None else [None] * rows.num_rows
    )
    fields = [_text(rows.column(c)) for c in dict.fromkeys(source.field_columns.values())]
    placed: list[int] = []
    for n, (given, request) in enumerate(zip(ids, requests, strict=True)):
        if given is not None:
            identity = "id\n" + given
        elif request is not None:
            identity = "request\n" + request
        else:
            identity = "fields\n" + json.dumps([f[n] for f in fields], ensure_ascii=False)
        placed.append(shard_of(identity, shards))
    return placed


def _text(column: pa.Array) -> list[str | None]:
    values: list[str | None] = pc.cast(column, pa.string()).to_pylist()
    return values


class _ShardWriters:
    """One Parquet writer a shard, each on a temporary file that replaces the shard only
    once every row is written: a split cut short leaves the last whole split."""

    def __init__(self, out_dir: Path, shards: int) -> None:
        self._dir, self._shards = out_dir, shards
        self._schema: pa.Schema | None = None
        self._writers: dict[int, pq.ParquetWriter] = {}
        self._temporaries: dict[int, Path] = {}
        self._sinks: list[IO[bytes]] = []

    def __enter__(self) -> _ShardWriters:
        return self

    def _temporary(self, index: int) -> Path:
        if index not in self._temporaries:  # unguessable
            self._temporaries[index] = temporary_beside(self._dir / shard_name(index, self._shards))
        return self._temporaries[index]

    def _writer(self, index: int) -> pq.ParquetWriter:
        """The shard's writer, into a file made by this process alone (`exclusive`)."""
        assert self._schema is not None
        sink = os.fdopen(exclusive(self._temporary(index)), "wb")
        self._sinks.append(sink)
        return pq.ParquetWriter(sink, self._schema)

    def write(self, index: int, rows: pa.RecordBatch) -> None:
        if self._schema is None:
            self._schema = rows.schema
        if index not in self._writers:
            self._writers[index] = self._writer(index)
        self._writers[index].write_batch(rows)

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None and self._schema is not None:
            for index in range(self._shards):  # an empty shard still has the header
                if index not in self._writers:
                    self._writers[index] = self._writer(index)
        for writer in self._writers.values():
            writer.close()
        for sink in self._sinks:
            sink.close()
        if exc_type is not None:
            for index in self._writers:
                self._temporary(index).unlink(missing_ok=True)
            return
        for index in self._writers:
            with open(self._temporary(index), "rb") as written:
                os.fsync(written.fileno())
            os.replace(self._temporary(index), self._dir / shard_name(index, self._shards))
        with contextlib.suppress(OSError), _directory(self._dir) as fd:
            os.fsync(fd)


@contextlib.contextmanager
def _directory(path: Path) -> Iterator[int]:
    fd = os.open(path, os.O_RDONLY)
    try:
        yield fd
    finally:
        os.close(fd)
