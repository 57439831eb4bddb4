"""The rows of results.parquet and problems.parquet as frozen records, before they are
columns. `contract/schemas` says, column by column, how each value is taken from them.

A valued row carries the answer as `valuations/answers` read it once, when it was settled:
its record in the checkpoint (`Valuation.to_record`), made into a `Valuation` again without
reading the answer (`Answer.of`). An answer stored as a valuation that the parser refused
(a paid answer of the other mode, kept whatever it holds, or one an older batchval
accepted) still gets its row, with its valuation id and its charge, and no figures: the
raw answer stays in the checkpoint, and a write is never stopped by what the API sent.
"""

from __future__ import annotations

import dataclasses
import json
import re

from batchval._internal.api import Valuation, record_of_text
from batchval._internal.contract.lender import LenderFigures
from batchval._internal.store import RowAnswer, RowProblem, StoredProblem

FLOOR_AREA_HINT = "Supply floorAreaSqm (a floor area column) for this row."
# The request field an API problem type is about (the problem JSON may also name one).
_PROBLEM_FIELDS = {"floor-area-required": "floorAreaSqm", "outside-coverage": "postcode"}
_TELLS_TO_SUPPLY = re.compile(r"\b(?:supply|send|provide|add|give|include)\b[^.]*floor ?area", re.I)


@dataclasses.dataclass(frozen=True, slots=True)
class ValuedRow:
    """One row of results.parquet."""

    row_number: int
    key: str  # the Idempotency-Key of the row's request
    credits: int  # the request's charge on its first row, 0 on the rows that share it
    valuation: Valuation | None  # None: the stored answer cannot be read
    valuation_id: str | None
    lender: LenderFigures | None = None  # None: the input has no lender columns
    source: str = "api"  # valued by this run; `book` rows are carried by `booking`


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    """A stored answer, read: the record, or why there is none."""

    valuation: Valuation | None
    valuation_id: str | None
    error: str | None = None

    @classmethod
    def of(cls, stored: RowAnswer) -> Answer:
        """The stored answer as it was read when settled (its record). An answer kept with
        no record (none is, since the checkpoint's version 9) is read now, into one."""
        record = record_of_text(stored.answer) if stored.record is None else stored.record
        try:
            if record.startswith("["):
                valuation = Valuation.of_record(record)
                return cls(valuation, valuation.id)
            why = json.loads(record)
            found = why.get("id")
            return cls(None, found if isinstance(found, str) else None, str(why["unreadable"]))
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            return cls(None, None, f"its record in the checkpoint cannot be read: {error!r}")


@dataclasses.dataclass(frozen=True, slots=True)
class ProblemRow:
    """One row of problems.parquet: a row refused before sending (stage `input`) or by
    the API, or an answer that could not be read (stage `api`)."""

    row_number: int
    stage: str
    field: str | None
    type: str | None
    code: str | None
    status: int | None
    detail: str | None
    retryable: bool
    attempts: int
    valuation_id: str | None
    answer: str | None

    @classmethod
    def of(cls, stored: RowProblem) -> ProblemRow:
        if stored.rule is not None:
            return cls(
                row_number=stored.row_number,
                stage="input",
                field=stored.field,
                type=stored.rule,
                code=None,
                status=None,
                detail=stored.detail,
                retryable=False,
                attempts=stored.attempts,
                valuation_id=None,
                answer=None,
            )
        problem = StoredProblem.from_json(stored.problem)
        detail = problem.detail
        if problem.type == "floor-area-required" and not _TELLS_TO_SUPPLY.search(detail or ""):
            detail = f"{detail.rstrip()} {FLOOR_AREA_HINT}" if detail else FLOOR_AREA_HINT
        return cls(
            row_number=stored.row_number,
            stage="api",
            field=problem.field or _PROBLEM_FIELDS.get(problem.type or ""),
            type=problem.type,
            code=problem.code,
            status=problem.status,
            detail=detail,
            retryable=problem.retryable,
            attempts=stored.attempts,
            valuation_id=problem.valuation_id,
            answer=stored.answer,
        )
