"""What the checkpoint keeps, as records: the rows the writer reads back (`RowAnswer`,
`RowProblem`), a request's problem (`StoredProblem`), and the encoding of the typed
pass-through values (Arrow IPC, zstd; their schema as text in `meta`).

A request's problem (`requests.problem`) is JSON, written by two rooms, both through
`Checkpoint.record_problem`: the pool, for a problem the API blamed on the row
(docs/api.md, section 5), and `valuations/answers`, for a paid answer that cannot be read
(`unreadable-answer`). The writer reads it back into problems.parquet. The JSON is read
tolerantly: it may come from an older batchval, and a problem row must never stop a
write. A member of the wrong type reads as absent (a text member that is not text keeps
its JSON text, as the old writer kept it).
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

_IPC = pa.ipc.IpcWriteOptions(compression="zstd")


@dataclasses.dataclass(frozen=True, slots=True)
class RowAnswer:
    """A valued row and its request's stored answer, as the writer reads them."""

    row_number: int
    key: str
    answer: str  # the raw answer, exactly as received
    credits: int  # the request's charge (every row that shares the request has it)
    record: str | None  # the answer as read when it was settled (`api.record_of`)

    @classmethod
    def of(cls, row: Sequence[Any]) -> RowAnswer:
        """From (row_number, key, answer, credits, record), as the checkpoint selects them."""
        number, key, answer, credits, record = row
        return cls(int(number), str(key), str(answer), int(credits), record)


@dataclasses.dataclass(frozen=True, slots=True)
class RowProblem:
    """A row that got no valuation: refused by validation (`rule` set) or by the API
    (`problem`, the JSON of `StoredProblem`), as the writer reads it."""

    row_number: int
    field: str | None
    rule: str | None
    detail: str | None
    problem: str | None
    attempts: int
    answer: str | None  # unreadable-answer: the raw answer

    @classmethod
    def of(cls, row: Sequence[Any]) -> RowProblem:
        """From (row_number, field, rule, detail, problem, attempts, answer), as selected."""
        number, field, rule, detail, problem, attempts, answer = row
        return cls(int(number), field, rule, detail, problem, int(attempts), answer)


def schema_text(schema: pa.Schema) -> str:
    """An Arrow schema as text, for `meta`."""
    return base64.b64encode(schema.serialize()).decode()


def schema_of(text: str) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


def batch_bytes(numbers: Sequence[int], batch: pa.RecordBatch) -> memoryview:
    """The pass-through values of rows `numbers` (consecutive, one value a row) as one
    Arrow IPC stream, compressed."""
    if batch.num_rows != len(numbers) or numbers[-1] - numbers[0] + 1 != len(numbers):
        raise ValueError("pass-through values must come one a row, for consecutive rows")
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema, options=_IPC) as stream:
        stream.write_batch(batch)
    return memoryview(sink.getvalue())


def batch_of(data: bytes) -> pa.RecordBatch:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_next_batch()


@dataclasses.dataclass(frozen=True, slots=True)
class StoredProblem:
    type: str | None  # the API's type name (the last part of its URI), or batchval's own
    status: int | None  # the HTTP status of the answer
    detail: str | None
    code: str | None = None  # the API's finer reason within the type
    title: str | None = None
    retryable: bool = False  # the same row may succeed sent again (floor-area-required)
    field: str | None = None  # the request field at fault, when the problem names one
    valuation_id: str | None = None  # unreadable-answer: the valuation the API made

    @classmethod
    def from_json(cls, text: str | None) -> StoredProblem:
        """The stored JSON read tolerantly; an unreadable or empty one is a problem of no
        known type."""
        try:
            data = json.loads(text) if text else {}
        except ValueError:
            data = {}
        if not isinstance(data, Mapping):
            data = {}
        type_name = _text(data.get("type"))
        if type_name is not None:
            type_name = type_name.rsplit("/", 1)[-1]  # the name, should a full type URI come
        return cls(
            type=type_name,
            status=whole_number(data.get("status")),
            detail=_text(data.get("detail")),
            code=_text(data.get("code")),
            title=_text(data.get("title")),
            retryable=data.get("retryable") is True,
            field=_text(data.get("field")),
            valuation_id=_text(data.get("valuation_id")),
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON object `Checkpoint.record_problem` stores; absent members left out."""
        found = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {name: value for name, value in found.items() if value is not None}


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def whole_number(value: Any) -> int | None:
    """A JSON number that is a whole number (250000, or 250000.0) as an int; else None."""
    if isinstance(value, bool):  # a bool is an int to Python, never a number to JSON
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class Invocation:
    """One `batchval run` on the DIR, as the checkpoint remembers it."""

    started_at: str
    ended_at: str | None
    exit_code: int | None
    calls: int | None
    rate_limited: int | None
    credits: int | None
