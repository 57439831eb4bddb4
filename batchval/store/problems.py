"""A request's problem as the checkpoint keeps it (`requests.problem`), typed.

Two rooms write it, both through `Checkpoint.record_problem`: the pool, for a problem
the API blamed on the row (docs/api.md, section 5), and `run/answers`, for a paid answer
that cannot be read (`unreadable-answer`). The writer reads it back into problems.parquet.
The JSON is read tolerantly: it may come from an older batchval, and a problem row must
never stop a write. A member of the wrong type reads as absent (a text member that is
not text keeps its JSON text, as the old writer kept it).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any


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
            status=_whole(data.get("status")),
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


def _whole(value: Any) -> int | None:
    if isinstance(value, bool):  # a bool is an int to Python, never a number to JSON
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None
