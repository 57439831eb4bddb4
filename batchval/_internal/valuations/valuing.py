"""The valuation job: the checkpoint's pending requests, POST /valuations with the bytes
that were hashed for the key, each success kept raw before it is read (`valuations/answers`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol

from batchval._internal.api import VALUATION_CREDITS, Answer, PartnerError, RequestInProgressError
from batchval._internal.money import CONTESTED, SENT_UNKNOWN, Evidence, Received
from batchval._internal.sending import Gate, Settled, problem_record
from batchval._internal.store import Checkpoint, QueueItem
from batchval._internal.valuations import answers


class ValuationApi(Protocol):
    async def post_valuation(
        self, body: bytes, *, idempotency_key: str | None, gate: Gate | None = None
    ) -> Answer: ...


class ValuationJob:
    """Every request of the checkpoint without an answer, valued once, with its key; with
    `more`, also those of the input's rows stored while sending."""

    name = "valuation"
    call_credits = VALUATION_CREDITS

    def __init__(
        self,
        api: ValuationApi,
        checkpoint: Checkpoint,
        *,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        more: Callable[[], bool] = lambda: False,
        evidence: Evidence | None = None,
        warm: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        """`warm`: what the client does before its first call (fetch its token), done
        before a key is first sent while no answer has shown the API's clock yet, so that
        the token's `Date` bounds that send too."""
        self._api = api
        self._checkpoint = checkpoint
        self._now = now
        # Stores the next batch of an input still being read (`ingest.Ingest.more`, beside
        # this module); False once every row is stored.
        self._more = more
        self.evidence = evidence or Evidence()  # the invocation's, shared with its end
        # This invocation's first send of each request the checkpoint held no send of, on
        # the API's clock (`Evidence.sent_now`); for a key whose first send met another
        # caller's (a 409), its next send, the first that could be charged.
        self._first_sent: dict[str, str] = {}
        # Keys none of whose sends by this DIR can be running at the API (no send recorded
        # before this invocation, no killed invocation just before, and every send since
        # answered 409): a 409 to the attempt now in flight means another caller is valuing
        # the key (`CONTESTED`), and the next send is the first that could be charged.
        self._never_sent_before: set[str] = set()
        self._contested: set[str] = set()
        self._warm = warm
        # Keys whose first send waits for the API's clock (`warm`): marked sent in `send`.
        self._waiting: set[str] = set()

    def pending(self, after_rowid: int) -> Sequence[QueueItem]:
        """The next page of stored requests; when none is left, those of the rows read
        next, until the input is all stored."""
        page = self._checkpoint.requests.pending(after_rowid)
        while not page and self._more():
            page = self._checkpoint.requests.pending(after_rowid)
        return page

    def mark_sent(self, item: QueueItem) -> None:
        key = item.key
        new = item.first_sent is None and key not in self._first_sent
        if new and self._warm is not None and self.evidence.api_clock.earliest_now() is None:
            # Marked in `send` once the token's answer has shown the API's clock. Until
            # then nothing has gone out: a kill meanwhile leaves it pending, and the next
            # invocation, after a killed one, takes its first send as unknown.
            self._waiting.add(key)
            return
        self._mark(item)

    def _mark(self, item: QueueItem) -> None:
        key = item.key
        if key in self._contested:  # the first send that may be charged is this one
            self._contested.discard(key)
            self._first_sent[key] = self.evidence.sent_now()
        first = item.first_sent or self._first_sent.get(key)
        if first is None:
            # A killed invocation just before may have sent it and lost the record.
            lost = self._checkpoint.database.invocations.sent_floor is not None
            first = SENT_UNKNOWN if lost else self.evidence.sent_now()
            self._first_sent[key] = first
            if not lost:
                self._never_sent_before.add(key)
        self._checkpoint.requests.mark_sent(key, first)

    async def send(self, item: QueueItem, gate: Gate) -> Answer:
        if item.key in self._waiting and self._warm is not None:
            self._waiting.discard(item.key)
            await self._warm()
            self._mark(item)
        first = item.key in self._never_sent_before
        try:
            answer = await self._api.post_valuation(
                item.payload.encode(), idempotency_key=item.key, gate=gate
            )
        except RequestInProgressError:
            if first:  # nothing of this DIR's is running: another caller's call is
                self.evidence.note_other_holder(CONTESTED)
                self._contested.add(item.key)
            raise
        except BaseException:
            # A send that may be running at the API (a 504, a cut connection, a cancel):
            # a later 409 may be this DIR's own call.
            self._never_sent_before.discard(item.key)
            raise
        self._never_sent_before.discard(item.key)
        return answer

    def settle(self, item: QueueItem, answer: Answer) -> Settled:
        self._checkpoint.requests.record_answer(
            item.key, answer.body
        )  # paid: kept before it is read
        return answers.settle(
            self._checkpoint,
            item.key,
            answer.data,
            first_sent=self._first_sent.pop(item.key, None) or item.first_sent,
            evidence=self.evidence,
            received=Received(self._now()),
        )

    def record_problem(self, item: QueueItem, error: PartnerError) -> None:
        self._first_sent.pop(item.key, None)  # final: never sent again
        self._checkpoint.requests.record_problem(item.key, problem_record(error))

    def record_retry(self, item: QueueItem, error: PartnerError) -> None:
        self._checkpoint.requests.record_retry(item.key, str(error))

    def describe(self, item: QueueItem) -> Mapping[str, object]:
        """The first input row that asked for the request, and how many did."""
        numbers = self._checkpoint.requests.row_numbers(item.key, limit=1_000_000)
        return {"key": item.key, "row_number": numbers[0] if numbers else 0, "rows": len(numbers)}

    def begin_group(self) -> None:
        self._checkpoint.database.begin_group()

    def commit_group(self) -> None:
        self._checkpoint.database.commit_group()
