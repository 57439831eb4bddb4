"""Telling a fresh charge from a replay, from the evidence an answer and the DIR hold.

A retry with the same key returns the first result, `charge` included (docs/api.md, 4.1),
so an answer alone cannot say whether this call was charged: the same file valued into a
second DIR the same UTC day is answered from the API's idempotency store, each answer
carrying the first call's charge, and the account is charged nothing. The evidence:

- when this DIR first sent the key (`first_sent`, batchval's clock, kept with the
  request; after a killed invocation, the time that invocation started, since its last
  writes may be lost);
- when the API made the valuation (`valuedAt`, the API's clock), to the precision its
  digits show (`precision`: a stamp cut to whole seconds may read up to a second early);
- how far the API's clock may be behind batchval's: `ServerClock.lower`, a bound every
  answer gives (the API cannot have made or dated an answer later than batchval
  received it: `valuedAt` and the `Date` header are at most the API's time then), never
  below `SKEW`. A `Date` header has whole seconds, so it measures no closer than that;
- the balances (`place_uncertain`): a replay's `balanceAfter` is the first call's, and
  between top-ups the balance only falls.

`classify` decides from time alone: a valuation whose stamp, read at its latest, is before
the send by the API's clock at its furthest behind is a replay; one whose stamp may be
after the send by batchval's clock is fresh (this DIR's call charged it); between the two
(before the send by batchval's clock, not certainly by the API's) it is `uncertain`:
reported apart, never counted as spent, never guessed. At the end of an invocation
`place_uncertain` looks at the uncertain ones again, with the clock as measured by then
and the balances. The rule in words is in docs/explanation/keys-and-charges.md. A street
analysis needs none of this: its `charge` is absent on a free repeat (docs/api.md, 4.3),
so one that carries a charge is fresh.
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any, Protocol

from batchval.api.client import http_date
from batchval.store.charges import (
    FRESH,
    REPLAY,
    UNCERTAIN,
    ChargeLine,
    Doubtful,
    precision,
)
from batchval.store.records import whole_number

# How far apart batchval's and the API's clocks may be: a clock further off than five
# minutes is outside what batchval promises (NTP keeps servers within milliseconds).
SKEW = dt.timedelta(minutes=5)


class ServerClock:
    """What this process has seen of the API's clock against its own."""

    def __init__(self) -> None:
        self._lower: dt.timedelta | None = None
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
    """(kind, why) of a valuation's charge made at `at` by the API's clock, from time."""
    if at is None:
        return UNCERTAIN, "the answer's valuedAt cannot be read"
    sent = api_time(first_sent)
    if sent is None:
        return UNCERTAIN, "this DIR kept no time of its first send of the key"
    latest = at + precision(at)  # the latest instant the stamp can stand for
    if latest <= sent + clock.lower:
        before = (sent + clock.lower - at).total_seconds()
        return REPLAY, (
            f"valued {before:.0f} s before this DIR first sent the key, by the API's clock: "
            "the API answered from its idempotency store"
        )
    if latest <= sent:
        behind = -clock.lower.total_seconds()
        return UNCERTAIN, (
            f"valued {(sent - at).total_seconds():.3f} s before this DIR first sent the key "
            f"by batchval's clock, but the API's clock may be up to {behind:.3f} s behind it: "
            "a replay of a charge made just before, or this call's"
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
    contested: bool = False,
) -> ChargeLine | None:
    """The ledger line of a valuation answer that carried a charge, or None. `contested`:
    this DIR had never sent the key before, and its first send was answered 409
    `request-in-progress`, so another DIR's call was valuing it then: a charge made after
    the send is that call's (unless it failed uncharged and this DIR's retry was charged,
    which nothing in the answer tells), so it is uncertain, never fresh."""
    charge = data.get("charge")
    if not isinstance(charge, Mapping):
        return None
    at = api_time(data.get("valuedAt"))
    clock.observe_date(received.date, received.at)
    if at is not None:
        clock.observe(at, received.at)
    kind, why = classify(at, first_sent, clock)
    if kind == FRESH and contested:
        kind, why = (
            UNCERTAIN,
            (
                "this DIR's first send of the key was answered 409 request-in-progress: another "
                "call was valuing it, and the charge is most likely that call's"
            ),
        )
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


class Ledger(Protocol):
    """What `place_uncertain` reads and changes of the charges ledger (`store/charges`)."""

    def uncertain_valuations(self) -> list[Doubtful]: ...

    def received_balances(self) -> list[tuple[str, int]]: ...

    def place(self, line_id: int, kind: str, why: str) -> None: ...


def place_uncertain(ledger: Ledger, clock: ServerClock, invocation: int | None) -> int:
    """Look again at the ledger's uncertain valuation charges, at the end of an invocation;
    how many were placed. Those this invocation received are classed again with the clock
    as measured by now (a later answer may have narrowed it). Then the balances: without a
    top-up the balance only falls, so a charge whose `balanceAfter` is above that of a
    charge whose answer this DIR had received before it first sent the key was made before
    that send: a replay. It needs no clock, only batchval's own (`received_at` and
    `first_sent`), and never makes a charge fresh: what stays unplaced stays uncertain.
    It is used only for a charge stamped before the send by batchval's clock (uncertain
    by time, not for want of a stamp): a top-up between the two charges would break it,
    and such a charge was made after the send only if the API's clock is behind
    batchval's and the account was topped up within that difference."""
    doubtful = ledger.uncertain_valuations()
    if not doubtful:
        return 0
    seen = ledger.received_balances()  # in the order received
    times = [received for received, _ in seen]
    lowest: list[int] = []  # the lowest balance received up to each line
    for _, balance in seen:
        lowest.append(min(balance, lowest[-1]) if lowest else balance)
    placed = 0
    for line in doubtful:
        kind, why = UNCERTAIN, ""
        if line.invocation == invocation and line.at is not None:
            kind, why = classify(api_time(line.at), line.first_sent, clock)
            if kind == FRESH:  # never made fresh after the fact
                kind = UNCERTAIN
        held, sent = line.balance_after, line.first_sent
        if kind == UNCERTAIN and line.at is not None and held is not None and sent:
            before = bisect.bisect_right(times, sent)
            if before and lowest[before - 1] < held:
                kind, why = (
                    REPLAY,
                    (
                        f"charged before a charge with balanceAfter {lowest[before - 1]}, whose "
                        "answer this DIR had received before it first sent this key (the balance "
                        "only falls between top-ups): the API answered from its idempotency store"
                    ),
                )
        if kind != UNCERTAIN:
            ledger.place(line.line_id, kind, why)
            placed += 1
    return placed
