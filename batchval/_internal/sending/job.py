"""What the worker pool sends: a `Job` says where its work comes from, how one item is
sent, and where each answer goes; the pool owns everything else (pacing, retries by the
answer table, the breaker, the budget, stops).

Three jobs share the one pool: valuations (`valuations/valuing`, POST /valuations, charged),
street analyses (charged on a first read) and read-backs by id (free). Each item has an
identity (`key`) that is the same every time it is sent: an idempotency key, a postcode,
a valuation id. The pool never looks inside an item.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from batchval._internal.api import Answer, FloorAreaRequiredError, PartnerError, ProblemError
from batchval._internal.outcome import StopReason
from batchval._internal.store import whole_number

Gate = Callable[[], Awaitable[None]]


class Item(Protocol):
    """One unit of work: `rowid` orders the pages, `key` names it in every send."""

    @property
    def rowid(self) -> int: ...

    @property
    def key(self) -> str: ...


ItemT = TypeVar("ItemT", bound=Item)


@dataclasses.dataclass(frozen=True, slots=True)
class Settled:
    """What a successful answer came to once recorded."""

    credits: int = 0
    balance: int | None = None
    problem: str | None = None  # the answer was kept as the item's problem (unreadable)
    stop: tuple[StopReason, str] | None = None  # the answer stops the run (a mixed mode)
    uncertain: int = 0  # credits of a charge that may be this call's (`money/charges`)


class Job(Protocol[ItemT]):
    """The pool's one seam: every method is called from the pool's event loop."""

    @property
    def name(self) -> str:
        """What is sent, for log events (`valuation`, `street`, `read`)."""
        ...

    @property
    def call_credits(self) -> int:
        """The most one call may cost, for --max-credits (0: free)."""
        ...

    def pending(self, after_rowid: int) -> Sequence[ItemT]:
        """The next page of items still to send, after `after_rowid`, in rowid order."""
        ...

    def mark_sent(self, item: ItemT) -> None:
        """Noted durably (in the next group commit) just before each send."""
        ...

    async def send(self, item: ItemT, gate: Gate) -> Answer:
        """One call; `gate` is awaited right before any request leaves."""
        ...

    def settle(self, item: ItemT, answer: Answer) -> Settled:
        """Record a success (its raw bytes first, where they may have been paid for)."""
        ...

    def record_problem(self, item: ItemT, error: PartnerError) -> None:
        """The API blamed the item (`Action.ROW`): final."""
        ...

    def record_retry(self, item: ItemT, error: PartnerError) -> None:
        """Given up in this invocation: left to send again, with the same key."""
        ...

    def describe(self, item: ItemT) -> Mapping[str, object]:
        """Fields for a log line about the item (which input rows asked for it)."""
        ...

    def begin_group(self) -> None: ...

    def commit_group(self) -> None: ...


def charge_of(data: Mapping[str, Any]) -> tuple[int, int | None]:
    """An answer's `charge` (credits, balance after), read tolerantly: absent in test
    mode, on reads and on a free repeat (docs/api.md)."""
    charge = data.get("charge")
    if not isinstance(charge, Mapping):
        return 0, None
    return whole_number(charge.get("credits")) or 0, whole_number(charge.get("balanceAfter"))


def problem_record(error: PartnerError) -> dict[str, Any]:
    """The problem as a checkpoint keeps it and problems.parquet shows it."""
    if isinstance(error, ProblemError):
        return {
            "type": error.name,
            "status": error.status,
            "code": error.code,
            "title": error.title,
            "detail": error.detail,
            # The API's table: floor-area-required may succeed sent again with a floor area.
            "retryable": isinstance(error, FloorAreaRequiredError),
        }
    return {
        "type": type(error).__name__,
        "status": error.status,
        "detail": str(error),
    }
