"""Telling a fresh charge from a replay, from the evidence an answer and the DIR hold.

A retry with the same key returns the first result, `charge` included (docs/api.md, 4.1),
so an answer alone cannot say whether this call was charged: the same file valued into a
second DIR the same UTC day is answered from the API's idempotency store, each answer
carrying the first call's charge, and the account is charged nothing. The evidence:

- when this DIR first sent the key (`first_sent`, batchval's clock, kept with the
  request; after a killed invocation, the time that invocation started, since its last
  writes may be lost);
- when the API made the valuation (`valuedAt`, the API's clock);
- how far the API's clock may be behind batchval's: `ServerClock.lower`, a bound every
  answer gives (the API cannot have made or dated an answer later than batchval
  received it: `valuedAt` and the `Date` header are at most the API's time then), never
  below `SKEW`.

A charge made before this DIR first sent the key, by the API's own clock, was another
call's: a replay. Otherwise the charge is this DIR's: fresh. Where batchval's clock says
the valuation came before the send but the API gave no `Date` header with which to
measure the clocks' difference, the answer is `uncertain`: reported apart, never counted
as spent, never guessed. A street analysis needs none of this: its `charge` is absent on
a free repeat (docs/api.md, 4.3), so one that carries a charge is fresh.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any

from batchval.api.client import http_date
from batchval.store.charges import FRESH, REPLAY, UNCERTAIN, ChargeLine
from batchval.store.records import whole_number

# How far apart batchval's and the API's clocks may be: a clock further off than five
# minutes is outside what batchval promises (NTP keeps servers within milliseconds).
SKEW = dt.timedelta(minutes=5)
# `valuedAt` may be cut to whole seconds, so a fresh one may read up to a second early.
TRUNCATION = dt.timedelta(seconds=1)


class ServerClock:
    """What this process has seen of the API's clock against its own."""

    def __init__(self) -> None:
        self._lower: dt.timedelta | None = None
        self.dated = False  # a `Date` header was seen: the clocks' difference is measured
        self._date: tuple[str, dt.datetime | None] = ("", None)  # the last header read

    @property
    def lower(self) -> dt.timedelta:
        """A lower bound of (the API's clock - batchval's), never below -SKEW."""
        return max(self._lower, -SKEW) if self._lower is not None else -SKEW

    def observe(self, server_time: dt.datetime, received_at: dt.datetime) -> None:
        """An instant of the API's clock no later than batchval's `received_at`."""
        bound = server_time - received_at
        if self._lower is None or bound > self._lower:
            self._lower = bound

    def observe_date(self, date: str | None, received_at: dt.datetime) -> None:
        """An HTTP `Date` header (whole seconds, rounded down: still a lower bound)."""
        if not date:
            return
        if self._date[0] != date:  # most answers of a second share one: parsed once
            self._date = (date, http_date(date))
        when = self._date[1]
        if when is not None:
            self.dated = True
            self.observe(when, received_at)


def api_time(value: object) -> dt.datetime | None:
    """An RFC 3339 date-time of the API's, as an aware UTC datetime, or None."""
    if not isinstance(value, str):
        return None
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return when.astimezone(dt.UTC) if when.tzinfo is not None else None


def stamp(when: dt.datetime) -> str:
    """One text form for every time in the ledger, so that text order is time order."""
    return when.astimezone(dt.UTC).isoformat(timespec="microseconds")


def first_send(floor: str | None, now: dt.datetime) -> str:
    """What to record as this DIR's first send of a request now (see `sent_floor`)."""
    return floor if floor is not None else stamp(now)


def classify(at: dt.datetime | None, first_sent: str | None, clock: ServerClock) -> tuple[str, str]:
    """(kind, why) of a valuation's charge made at `at` by the API's clock."""
    if at is None:
        return UNCERTAIN, "the answer's valuedAt cannot be read"
    sent = api_time(first_sent)
    if sent is None:
        return UNCERTAIN, "this DIR kept no time of its first send of the key"
    earliest = sent + clock.lower - TRUNCATION
    if at < earliest:
        before = (sent + clock.lower - at).total_seconds()
        return REPLAY, (
            f"valued {before:.0f} s before this DIR first sent the key, by the API's clock: "
            "the API answered from its idempotency store"
        )
    if at < sent - TRUNCATION and not clock.dated:
        return UNCERTAIN, (
            "valued before this DIR first sent the key by batchval's clock, and the API "
            "sent no Date header to measure the clocks' difference by"
        )
    return FRESH, "valued after this DIR first sent the key"


@dataclasses.dataclass(frozen=True, slots=True)
class Received:
    """An answer's timing: when batchval received it, and the API's `Date` header."""

    at: dt.datetime
    date: str | None = None


def valuation_charge(
    key: str,
    data: Mapping[str, Any],
    *,
    first_sent: str | None,
    clock: ServerClock,
    received: Received,
    invocation: int | None,
) -> ChargeLine | None:
    """The ledger line of a valuation answer that carried a charge, or None."""
    charge = data.get("charge")
    if not isinstance(charge, Mapping):
        return None
    at = api_time(data.get("valuedAt"))
    clock.observe_date(received.date, received.at)
    if at is not None:
        clock.observe(at, received.at)
    kind, why = classify(at, first_sent, clock)
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
