"""Settling an answer the API gave: kept raw first, then read, then recorded.

The pool stores every success's exact bytes (`Checkpoint.record_answer`) before calling
`settle`, and a run that starts after a crash settles what was stored and never settled.
While sending, writes are committed in groups (every 0.2 s): a kill loses at most the
last group, whose requests are sent again with their keys and answered from the API's
idempotency store, free. So a paid answer is never lost: not to a crash between receipt
and record, and not to a parser that cannot read it (which makes it a problem carrying
its valuation id, with the raw answer kept, rather than an endless retry).

The mode (test or live) of a DIR comes from the answers themselves: the first answer
sets it, and an answer of the other mode stops the run (`mode_mixed`), since one DIR
never mixes fake and real figures.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from batchval.api.errors import UnreadableAnswerError
from batchval.api.models import Valuation
from batchval.outcome import StopReason
from batchval.run.job import Settled, charge_of
from batchval.store.checkpoint import Checkpoint
from batchval.store.records import StoredProblem

UNREADABLE = "unreadable-answer"


def answer_mode(data: Mapping[str, Any]) -> str:
    """`test` when the answer says so (test mode only), else `live`."""
    return "test" if data.get("mode") == "test" else "live"


def settle(checkpoint: Checkpoint, key: str, data: Mapping[str, Any]) -> Settled:
    """Record the answer already stored raw under `key` as a valuation or a problem."""
    credits, balance = charge_of(data)
    mode = answer_mode(data)
    held = checkpoint.get("mode")
    if held is None:
        checkpoint.set("mode", mode)
    elif held != mode:
        detail = (
            f"this DIR holds {held}-mode answers and the API answered in {mode} mode; "
            "one DIR never mixes them: use a new --out DIR for these credentials"
        )
        if mode == "test":
            checkpoint.record_retry(key, detail)  # free and fake: not kept
            return Settled(stop=(StopReason.MODE_MIXED, detail))
        checkpoint.record_valuation(key, credits)  # paid: kept, whatever else happens
        return Settled(credits, balance, stop=(StopReason.MODE_MIXED, detail))
    try:
        Valuation.from_json(data)
    except UnreadableAnswerError as error:
        valuation_id = data.get("id") if isinstance(data.get("id"), str) else None
        detail = (
            f"the API answered (valuation {valuation_id or 'without an id'}) but the answer "
            f"cannot be read: {error}; the raw answer is kept in the `answer` column"
        )
        problem = StoredProblem(UNREADABLE, None, detail, valuation_id=valuation_id)
        checkpoint.record_problem(key, problem.to_json())
        return Settled(credits, balance, problem=detail)
    checkpoint.record_valuation(key, credits)
    return Settled(credits, balance)


def settle_stored(checkpoint: Checkpoint) -> int:
    """Settle the answers a crashed run stored and never settled; their credits summed."""
    credits = 0
    for key, body in checkpoint.answered():
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            checkpoint.record_retry(key, "a stored answer that is not JSON: sent again")
            continue
        credits += settle(checkpoint, key, data).credits
    return credits
