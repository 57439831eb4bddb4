"""The street analysis job: each distinct postcode of the input, read once, on the pool.

GET /street-analysis/{postcode} has no Idempotency-Key: the postcode itself is the
item's identity, and a second read of it within 30 days is free (docs/api.md, 4.3). So a
read that may have been charged (in flight at a kill, a 504) costs nothing sent again.
A success's exact bytes are kept before they are read, as a valuation's are
(`valuations/answers`): a first read is paid for.

When a postcode was read decides when it is read again: `fresh_from` is when its free
window began. A charged answer began it at the read; an answer without a charge (a
repeat, or test mode) is "the same answer" as a read made earlier, whose window began
no later than its `generatedAt`, so the earlier of the two is kept: a dry run or a
re-run never takes as free a read the API would charge.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from batchval._internal import logs
from batchval._internal.api import (
    STREET_CREDITS_ASSUMED,
    Answer,
    PartnerError,
    StreetAnalysis,
    UnreadableAnswerError,
    UnrecognisedAnswerError,
)
from batchval._internal.money import UNREADABLE, Received, answer_mode, api_time, mixed_mode, stamp
from batchval._internal.outcome import StopReason
from batchval._internal.postcodes import normalise
from batchval._internal.sending import Gate, Settled, charge_of, problem_record
from batchval._internal.store import (
    FRESH,
    ChargeLine,
    QueueItem,
    StoredProblem,
    StreetStore,
    whole_number,
)

log = logs.get_logger()


class StreetApi(Protocol):
    async def read_street_analysis(self, postcode: str, *, gate: Gate | None = None) -> Answer: ...


def street_charge(
    postcode: str, data: Mapping[str, Any], *, received: Received, invocation: int | None
) -> ChargeLine | None:
    """The ledger line of a street analysis that carried a charge (always fresh), or None."""
    charge = data.get("charge")
    if not isinstance(charge, Mapping):
        return None
    at = api_time(data.get("generatedAt"))
    return ChargeLine(
        product="street",
        item=postcode,
        ref=postcode,
        at=None if at is None else stamp(at),
        credits=whole_number(charge.get("credits")) or 0,
        balance_after=whole_number(charge.get("balanceAfter")),
        kind=FRESH,
        why="a street analysis carries a charge only when it was charged (docs/api.md, 4.3)",
        invocation=invocation,
        received_at=stamp(received.at),
    )


def call_credits(assumed: int, store: StreetStore) -> int:
    """The most one read may cost: the assumed price, raised to the largest charge this
    DIR has seen (the API may charge more than assumed; never less is assumed)."""
    return max(assumed, store.largest_charge)


class StreetJob:
    """Every postcode some input row asks for and without a fresh read."""

    name = "street"

    def __init__(
        self,
        api: StreetApi | None,
        store: StreetStore,
        *,
        now: Callable[[], dt.datetime],
        assumed_credits: int = STREET_CREDITS_ASSUMED,
    ) -> None:
        self._api = api
        self._store = store
        self._now = now
        self.call_credits = call_credits(assumed_credits, store)

    def pending(self, after_rowid: int) -> Sequence[QueueItem]:
        return self._store.queue.pending(after_rowid)

    def mark_sent(self, item: QueueItem) -> None:
        self._store.queue.mark_sent(item.key)

    async def send(self, item: QueueItem, gate: Gate) -> Answer:
        if self._api is None:
            raise RuntimeError("a street job made to settle stored answers cannot send")
        answer = await self._api.read_street_analysis(item.key, gate=gate)
        given = answer.data.get("postcode")
        if isinstance(given, str) and normalise(given) != item.key:
            # The figures of another postcode (a proxy's cache, a server's defect): never
            # recorded as this one's, never this row's fault. The pool retries it as an
            # unrecognised answer and stops the run after its limit; bytes that carry a
            # charge are kept, and the charge counted, before it does.
            credits, _ = charge_of(answer.data)
            if credits or isinstance(answer.data.get("charge"), Mapping):
                self._store.keep_stray(item.key, answer.body, credits)
                self._record_charge(item.key, answer.data)
            log.warning("streets.answer.other_postcode", asked=item.key, answered=given)
            raise UnrecognisedAnswerError(
                status=answer.status,
                content_type="application/json",
                body=answer.body,
                url="/street-analysis/" + item.key,
            )
        return answer

    def settle(self, item: QueueItem, answer: Answer) -> Settled:
        if answer_mode(answer.data) == "test" and self._store.get("mode") in ("live", "rehearsal"):
            # Free and fake, and never stored over the postcode's paid live read (a read
            # again past its window keeps that answer until a live one replaces it).
            return self.read(item.key, answer.data)
        self._store.queue.record_answer(item.key, answer.body)  # may be paid: kept before read
        return self.read(item.key, answer.data)

    def read(self, postcode: str, data: Mapping[str, Any]) -> Settled:
        """Record the answer already stored raw for `postcode` as its read or a problem,
        and its charge in the ledger."""
        credits, balance = charge_of(data)
        now = self._now()
        self._record_charge(postcode, data)
        detail = mixed_mode(self._store, data, "street analyses")
        if detail is not None:
            if answer_mode(data) == "test":
                self._store.queue.record_retry(postcode, detail)  # free and fake: not kept
                return Settled(stop=(StopReason.MODE_MIXED, detail))
            self._store.record_read(
                postcode, credits=credits, charged=True, read_at=now, fresh_from=now
            )
            return Settled(credits, balance, stop=(StopReason.MODE_MIXED, detail))
        try:
            analysis = StreetAnalysis.from_json(data)
        except UnreadableAnswerError as error:
            detail = (
                f"the API answered for {postcode} but the answer cannot be read: {error}; "
                "the raw answer is kept in the `answer` column"
            )
            problem = StoredProblem(UNREADABLE, None, detail, field="postcode")
            self._store.record_problem(postcode, problem.to_json(), now)
            self._store.add_charge(credits)  # a first read is charged, readable or not
            return Settled(credits, balance, problem=detail)
        charged = isinstance(data.get("charge"), Mapping)
        self._store.record_read(
            postcode,
            credits=credits,
            charged=charged,
            read_at=now,
            fresh_from=now if charged else min(now, _instant(analysis.generated_at) or now),
        )
        return Settled(credits, balance)

    def _record_charge(self, postcode: str, data: Mapping[str, Any]) -> None:
        database = self._store.database
        line = street_charge(
            postcode, data, received=Received(self._now()), invocation=database.invocations.current
        )
        if line is not None:
            database.charges.record(line)

    def record_problem(self, item: QueueItem, error: PartnerError) -> None:
        self._store.record_problem(
            item.key, {**problem_record(error), "field": "postcode"}, self._now()
        )

    def record_retry(self, item: QueueItem, error: PartnerError) -> None:
        self._store.queue.record_retry(item.key, str(error))

    def describe(self, item: QueueItem) -> Mapping[str, object]:
        """The postcode, the first input row that asked for it, and how many did."""
        first, rows = self._store.asking(item.key)
        return {"postcode": item.key, "row_number": first, "rows": rows}

    def begin_group(self) -> None:
        self._store.database.begin_group()

    def commit_group(self) -> None:
        self._store.database.commit_group()

    def settle_stored(self) -> int:
        """Read the answers a killed run stored and never read; their credits summed."""
        credits = 0
        for postcode, body, _ in self._store.queue.answered():
            try:
                data = json.loads(body)
            except ValueError:
                data = None
            if not isinstance(data, dict):
                self._store.queue.record_retry(
                    postcode, "a stored answer that is not JSON: read again"
                )
                continue
            credits += self.read(postcode, data).credits
        return credits


def _instant(text: str) -> dt.datetime | None:
    """An RFC 3339 date-time as an aware UTC instant, or None."""
    try:
        when = dt.datetime.fromisoformat(text.strip().upper().replace("Z", "+00:00"))
    except ValueError:
        return None
    return when.astimezone(dt.UTC) if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)
