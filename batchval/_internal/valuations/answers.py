"""Settling an answer the API gave: kept raw first, then read, then recorded.

The pool stores every success's exact bytes (`WorkQueue.record_answer`) before calling
`settle`, and a run that starts after a crash settles what was stored and never settled.
While sending, writes are committed in groups (every 0.2 s): a kill loses at most the
last group, whose requests are sent again with their keys and answered from the API's
idempotency store, free. So a paid answer is never lost: not to a crash between receipt
and record, and not to a parser that cannot read it (which makes it a problem carrying
its valuation id, with the raw answer kept, rather than an endless retry).

The mode (test or live) of a DIR comes from the answers themselves: the first answer
sets it, and an answer of the other mode stops the run (`mode_mixed`), since one DIR
never mixes fake and real figures.

An answer is read once, here: a valuation is recorded with its record (`Valuation.to_record`),
which results.parquet is written from, never from the raw answer read again.

Every answer that carries a `charge` is a line of the charges ledger, whatever else it
is (readable or not, of either mode), classified fresh, replay or uncertain by
`money/charges` (`valuation_charge`); the request keeps the credits of a fresh charge only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from batchval._internal.api import UnreadableAnswerError, Valuation, record_of
from batchval._internal.money import (
    UNREADABLE,
    Evidence,
    Received,
    answer_mode,
    api_time,
    mixed_mode,
    stamp,
)
from batchval._internal.outcome import StopReason
from batchval._internal.sending import Settled
from batchval._internal.store import (
    FRESH,
    UNCERTAIN,
    ChargeLine,
    Checkpoint,
    StoredProblem,
    whole_number,
)


def valuation_charge(
    key: str,
    data: Mapping[str, Any],
    *,
    first_sent: str | None,
    evidence: Evidence,
    received: Received,
    invocation: int | None,
) -> ChargeLine | None:
    """The ledger line of a valuation answer that carried a charge, or None, classed by
    `Evidence.classify` against this DIR's first send of the key (`first_sent`)."""
    charge = data.get("charge")
    if not isinstance(charge, Mapping):
        return None
    at = api_time(data.get("valuedAt"))
    if at is not None:
        evidence.observe_stamp(at)
    kind, why = evidence.classify(at, first_sent)
    ref = data.get("id")
    return ChargeLine(
        product="valuation",
        item=key,
        ref=ref if isinstance(ref, str) else None,
        at=None if at is None else stamp(at),
        credits=whole_number(charge.get("credits")) or 0,
        balance_after=whole_number(charge.get("balanceAfter")),
        kind=kind,
        why=why,
        invocation=invocation,
        received_at=stamp(received.at),
    )


def settle(
    checkpoint: Checkpoint,
    key: str,
    data: Mapping[str, Any],
    *,
    first_sent: str | None,
    evidence: Evidence,
    received: Received,
) -> Settled:
    """Record the answer already stored raw under `key` as a valuation or a problem, and
    its charge in the ledger. `Settled.credits` is what this invocation spent on it,
    `Settled.uncertain` what it may have spent (`valuation_charge`)."""
    line = valuation_charge(
        key,
        data,
        first_sent=first_sent,
        evidence=evidence,
        received=received,
        invocation=checkpoint.database.invocations.current,
    )
    credits, balance, uncertain = 0, None, 0
    if line is not None:
        checkpoint.database.charges.record(line)
        if line.kind == FRESH:
            credits, balance = line.credits, line.balance_after
        elif line.kind == UNCERTAIN:
            uncertain = line.credits
    detail = mixed_mode(checkpoint, data, "answers")
    if detail is not None:
        if answer_mode(data) == "test":
            checkpoint.requests.record_retry(key, detail)  # free and fake: not kept
            return Settled(stop=(StopReason.MODE_MIXED, detail))
        # Paid: kept, whatever else happens, and read as any valuation is.
        checkpoint.requests.record_done(key, credits, record_of(data))
        return Settled(credits, balance, stop=(StopReason.MODE_MIXED, detail), uncertain=uncertain)
    try:
        valuation = Valuation.from_json(data)
    except UnreadableAnswerError as error:
        valuation_id = data.get("id") if isinstance(data.get("id"), str) else None
        detail = (
            f"the API answered (valuation {valuation_id or 'without an id'}) but the answer "
            f"cannot be read: {error}; the raw answer is kept in the `answer` column"
        )
        problem = StoredProblem(UNREADABLE, None, detail, valuation_id=valuation_id)
        checkpoint.requests.record_problem(key, problem.to_json())
        return Settled(credits, balance, problem=detail, uncertain=uncertain)
    checkpoint.requests.record_done(key, credits, valuation.to_record())
    return Settled(credits, balance, uncertain=uncertain)


def settle_stored(checkpoint: Checkpoint, evidence: Evidence, received: Received) -> int:
    """Settle the answers a crashed run stored and never settled; their credits summed."""
    credits = 0
    for key, body, first_sent in checkpoint.requests.answered():
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            checkpoint.requests.record_retry(key, "a stored answer that is not JSON: sent again")
            continue
        settled = settle(
            checkpoint, key, data, first_sent=first_sent, evidence=evidence, received=received
        )
        credits += settled.credits
    return credits
