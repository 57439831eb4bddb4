"""The recovery path of `run`: a paid valuation whose answer could not be read is read
back by id (GET /valuations/{id}, free; docs/api.md, getValuation) before anything is
sent, instead of being left behind.

Where the checkpoint knows a valuation id but has no usable answer for it: a request
settled as an `unreadable-answer` problem (`valuations/answers`), which keeps the id the API
gave (`StoredProblem.valuation_id`) and the raw answer. The API keeps every valuation
and a read returns it exactly as created, so a later invocation reads it back through
the same pool as every call (pacing, retries, breaker, stops). If the read is a
readable valuation with that id and the DIR's mode, whose `input` echo and `reference`
agree with the request sent with the key (a valuation of another home never settles
it; a mismatch is logged, `valuations.recovery.unusable`), the request becomes `done` with the
answer read back and the credits of the first answer's fresh charge (already in the
charges ledger, `store/charges`, since the pool received it), in one transaction: its
rows move from problems.parquet to results.parquet, charged once, never counted again
in this invocation's credits. Anything else (a `not-found`, an answer still unreadable, a
read that fails for now) leaves the request the problem it was, to be tried again by the
next invocation. The problem JSON stays on the `done` request as its history; nothing
reads a problem off a request that is not in the `problem` state.

Other places where an id is known but the answer is not usable were looked for: a stored
answer that is not JSON carries no id (it is sent again with its key), and a truncated
answer is retried with its key (the API replays it whole), never kept. One is left: a
request an older batchval recorded `done` with an answer today's parser refuses (the
writer gives its row the id and no figures, and logs `valuations.writer.answer.unreadable`).
Finding those means parsing every stored answer on every run (about 20 µs a row), so it
is not done here; `batchval verify` reports such rows as differences.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from batchval._internal import logs
from batchval._internal.api import (
    REQUEST_FIELDS,
    Answer,
    PartnerError,
    UnreadableAnswerError,
    Valuation,
)
from batchval._internal.money import UNREADABLE, answer_mode, mixed_with
from batchval._internal.sending import ReadApi, ReadJob, Settled
from batchval._internal.store import Checkpoint, StoredProblem

log = logs.get_logger()


@dataclasses.dataclass(frozen=True, slots=True)
class Recovery:
    """A request whose paid answer was unreadable, and the valuation to read back."""

    rowid: int
    key: str  # the valuation id the API gave (what is read)
    request_key: str  # the request's Idempotency-Key (what is recorded)


def recoverable(checkpoint: Checkpoint) -> list[Recovery]:
    """The unreadable answers that carry a valuation id, in the checkpoint's order."""
    found = []
    for rowid, key, problem, _ in checkpoint.problems_of_type(UNREADABLE):
        valuation_id = StoredProblem.from_json(problem).valuation_id
        if valuation_id:
            found.append(Recovery(rowid, valuation_id, key))
    return found


def recovery_job(api: ReadApi, checkpoint: Checkpoint) -> RecoveryJob | None:
    """The read-back of the checkpoint's unreadable paid answers, or None when there are
    none: `run`'s job before its first round (`Sending.before`)."""
    found = recoverable(checkpoint)
    if not found:
        return None
    log.info("valuations.recovery.reading", valuations=len(found))
    return RecoveryJob(api, checkpoint, found)


class RecoveryJob(ReadJob[Recovery]):
    """Reads each unreadable answer's valuation back; a readable one settles its request."""

    name = "recovery"

    def __init__(self, api: ReadApi, checkpoint: Checkpoint, items: Sequence[Recovery]) -> None:
        super().__init__(api, items)
        self._checkpoint = checkpoint
        self.recovered = 0

    def settle(self, item: Recovery, answer: Answer) -> Settled:
        read = self._read(item, answer)
        if isinstance(read, str):
            why = read
            log.warning(
                "valuations.recovery.unusable",
                valuation_id=item.key,
                key=item.request_key,
                detail=why,
            )
            return Settled(problem=f"read back, still not usable: {why}")
        with self._checkpoint.database.transaction():
            self._checkpoint.requests.record_answer(item.request_key, answer.body)
            # The first answer's charge is in the ledger already, fresh or not.
            credits = self._checkpoint.database.charges.fresh_credits(item.request_key)
            self._checkpoint.requests.record_done(item.request_key, credits, read.to_record())
        self.recovered += 1
        log.info(
            "valuations.recovery.recovered",
            valuation_id=item.key,
            key=item.request_key,
            credits=credits,
        )
        return Settled()

    def _read(self, item: Recovery, answer: Answer) -> Valuation | str:
        """The read answer as a valuation, or why it cannot stand for the lost one."""
        try:
            valuation = Valuation.from_json(answer.data)
        except UnreadableAnswerError as error:
            return str(error)
        if valuation.id != item.key:
            return f"the API answered valuation {valuation.id} for {item.key}"
        held = self._checkpoint.get("mode")
        if held is not None and mixed_with(held, answer_mode(answer.data)):
            return f"a {answer_mode(answer.data)}-mode answer in a DIR of {held}-mode answers"
        mismatch = _echo_mismatch(self._checkpoint.request_of(item.request_key), answer.data)
        return valuation if mismatch is None else mismatch

    def record_problem(self, item: Recovery, error: PartnerError) -> None:
        """The read was refused (`not-found`): the request stays the problem it was."""
        log.warning("valuations.recovery.refused", valuation_id=item.key, detail=str(error))

    def record_retry(self, item: Recovery, error: PartnerError) -> None:
        """Not read in this invocation: the request stays a problem, tried again next time."""
        log.warning("valuations.recovery.postponed", valuation_id=item.key, detail=str(error))

    def begin_group(self) -> None:
        self._checkpoint.database.begin_group()

    def commit_group(self) -> None:
        self._checkpoint.database.commit_group()


# Request fields the answer echoes in `input` (docs/api.md, 4): `include` is not echoed,
# and `reference` is echoed at the top level.
ECHOED = tuple(field for field in REQUEST_FIELDS if field != "reference")


def _echo_mismatch(request_json: str | None, data: Mapping[str, Any]) -> str | None:
    """Where the read answer's echo of what was valued differs from the request sent with
    the key, or None when every field the request sent is echoed alike. The id alone is the
    API's word that it is the same valuation; the echo is checked so that a valuation of
    another home never settles this request."""
    if request_json is None:
        return "the request sent with this key is not in the checkpoint"
    sent = json.loads(request_json)
    if not isinstance(sent, Mapping):
        return "the request sent with this key is not a JSON object"
    echo = data.get("input")
    echoed = {**(echo if isinstance(echo, Mapping) else {}), "reference": data.get("reference")}
    for field in (*ECHOED, "reference"):
        if field not in sent:
            continue
        ours, theirs = sent[field], echoed.get(field)
        if not _same(field, ours, theirs):
            where = field if field == "reference" else f"input.{field}"
            return f"{where} is {theirs!r} in the read answer, {ours!r} in the request sent"
    return None


def _same(field: str, sent: object, echoed: object) -> bool:
    if field == "postcode" and isinstance(sent, str) and isinstance(echoed, str):
        # The space is optional (docs/api.md, 3); batchval sends it normalised.
        return sent.replace(" ", "").upper() == echoed.replace(" ", "").upper()
    numbers = (int, float)
    if isinstance(sent, numbers) and isinstance(echoed, numbers):
        return not isinstance(sent, bool) and not isinstance(echoed, bool) and sent == echoed
    return sent == echoed
