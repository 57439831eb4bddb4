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
- how far the API's clock is from batchval's (`ServerClock`): every answer bounds it from
  below (the API cannot have made or dated an answer later than batchval received it),
  and a `Date` header from above (the API answered after the send, less than a second
  past its `Date`). A second is too coarse to tell a replay of a charge made just before
  the send, so the clocks are taken to agree (`AGREEMENT`) until the answers show them
  apart, and then to be as far apart as the stamps measured (`ServerClock.offset`);
- the balances (`place_charges`): a replay's `balanceAfter` is the first call's, and
  between top-ups the balance only falls;
- another caller valuing the same homes meanwhile (a 409 to a first send, a replay of a
  charge made while the invocation ran): then a charge made while this DIR's request was
  on its way may be the other's, and nothing tells it from this DIR's own.

`classify` decides from time alone: a valuation whose stamp, read at its latest, is before
the send by the API's clock (as `offset` takes it) is a replay; one stamped at or after it
is fresh (this DIR's call charged it); one too near to tell is `uncertain`: reported
apart, never counted as spent, never guessed. At the end of an invocation `place_charges`
looks at its charges again, with the clock as measured by then, the balances and what it
met of other callers. The rule in words is in docs/explanation/keys-and-charges.md. Each
product reads its own answers' charges into ledger lines with these (`valuations/answers`,
`streets/job`: a street analysis needs none of this, its `charge` being absent on a free
repeat, docs/api.md, 4.3, so one that carries a charge is fresh).
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
from typing import Protocol

from batchval.api.client import http_date
from batchval.store.charges import (
    FRESH,
    REPLAY,
    UNCERTAIN,
    WHOLE_SECOND,
    Doubtful,
    precision,
)

# How far apart batchval's and the API's clocks may be: a clock further off than five
# minutes is outside what batchval promises (NTP keeps servers within milliseconds).
SKEW = dt.timedelta(minutes=5)
# How closely the two clocks are taken to agree while the answers show nothing against it
# (NTP keeps them within milliseconds). The answers alone bound the API's clock to about a
# second from above (a `Date` header has whole seconds); this is what tells a replay of a
# charge made half a second before this DIR's send from this DIR's own charge.
AGREEMENT = dt.timedelta(milliseconds=50)
# How much of a stamp's precision is read in a fresh charge's favour: a stamp cut to the
# millisecond (the sandbox's) of a call valued within that millisecond of the send may read
# a moment before it. A replay of a charge made that little before the send, which only
# another caller sending the same key in the same instant could make, is then counted as
# this DIR's; a stamp cut coarser (to seconds) gets no more than this.
FRESH_SLACK = dt.timedelta(milliseconds=10)
_ZERO = dt.timedelta(0)
_SECOND = dt.timedelta(seconds=1)


CONTESTED = (
    "this DIR's first send of the key was answered 409 request-in-progress: another call was "
    "valuing it, and the charge is most likely that call's"
)
CONCURRENT = (
    "another caller valued the homes of this DIR while this invocation ran (a 409 to a first "
    "send, or a replay of a charge made meanwhile): a charge made while this DIR's request was "
    "on its way may be that caller's, answered to this DIR from the idempotency store"
)


@dataclasses.dataclass(frozen=True, slots=True)
class Offset:
    """How far the API's clock is taken to be from batchval's (the API's - batchval's), as
    `classify` reads a stamp against a send: one stamped, at its latest, before the send
    plus `replay_before` is a replay; one stamped at or after the send plus `fresh_from`
    is fresh. `apart` when the answers show the clocks further apart than `AGREEMENT`."""

    replay_before: dt.timedelta
    fresh_from: dt.timedelta
    apart: bool


class ServerClock:
    """What this process has seen of the API's clock against its own: bounds of (the API's
    clock - batchval's) that every answer gives, and the offset `classify` uses."""

    def __init__(self) -> None:
        self._lower: dt.timedelta | None = None
        self._upper: dt.timedelta | None = None
        self._finest = WHOLE_SECOND  # the finest precision a stamp of the API's has shown
        self._date: tuple[str, dt.datetime | None] = ("", None)  # the last header read

    @property
    def lower(self) -> dt.timedelta:
        """A lower bound of (the API's clock - batchval's), never below -SKEW."""
        return max(self._lower, -SKEW) if self._lower is not None else -SKEW

    @property
    def upper(self) -> dt.timedelta:
        """An upper bound of (the API's clock - batchval's), never above SKEW."""
        return min(self._upper, SKEW) if self._upper is not None else SKEW

    def observe(self, server_time: dt.datetime, received_at: dt.datetime) -> None:
        """An instant of the API's clock no later than batchval's `received_at`."""
        bound = server_time - received_at
        if self._lower is None or bound > self._lower:
            self._lower = bound

    def observe_stamp(self, at: dt.datetime) -> None:
        """A stamp the API wrote: its digits show how precise the API's stamps are."""
        self._finest = min(self._finest, precision(at))

    def precision(self, at: dt.datetime) -> dt.timedelta:
        """How much later than the stamp `at` the API's instant may have been. Alone, a
        stamp shows its precision by its last digit that is not 0 (`precision`); once a
        stamp of the API's has shown finer digits, its stamps are read to those:
        `12:00:01.100` from an API seen writing `12:00:00.123` is to the millisecond, a
        tenth of its stamps end in 0."""
        return min(precision(at), self._finest)

    def observe_date(
        self, date: str | None, received_at: dt.datetime, sent_at: dt.datetime | None = None
    ) -> None:
        """An HTTP `Date` header (whole seconds, rounded down): the API's clock was at least
        that when batchval received the answer, and less than a second past it when the API
        answered, which was after batchval's `sent_at` (the request's, or earlier)."""
        if not date:
            return
        if self._date[0] != date:  # most answers of a second share one: parsed once
            self._date = (date, http_date(date))
        when = self._date[1]
        if when is None:
            return
        self.observe(when, received_at)
        if sent_at is not None:
            bound = when + _SECOND - sent_at
            if self._upper is None or bound < self._upper:
                self._upper = bound

    def offset(self) -> Offset:
        """The offset the classing uses. While the bounds allow clocks that agree (within
        `AGREEMENT`, the API's not ahead), they are taken to: a replay needs a stamp more
        than `AGREEMENT` before the send (or the lower bound, if tighter), a fresh charge
        one at or after it (or after the upper bound, if that is below it). When the
        answers show the clocks further apart, the API's is taken to be as far from
        batchval's as its stamps measured (`lower`: the least the answers allow)."""
        lower, upper = self.lower, self.upper
        if lower <= _ZERO and upper >= -AGREEMENT:
            return Offset(max(lower, -AGREEMENT), min(upper, _ZERO), apart=False)
        return Offset(lower, lower, apart=True)


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
    offset = clock.offset()
    if at + clock.precision(at) <= sent + offset.replay_before:
        before = (sent + offset.replay_before - at).total_seconds()
        return REPLAY, (
            f"valued at least {before:.3f} s before this DIR first sent the key, by the API's "
            "clock: the API answered from its idempotency store"
        )
    if at + min(clock.precision(at), FRESH_SLACK) > sent + offset.fresh_from:
        return FRESH, "valued after this DIR first sent the key, by the API's clock"
    return UNCERTAIN, (
        f"valued {(at - sent).total_seconds():+.3f} s from this DIR's first send of the key by "
        "batchval's clock, too near it for the clocks as measured to say before or after: a "
        "replay of a charge made just before, or this call's"
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Received:
    """An answer's timing: when batchval received it, the API's `Date` header, and when
    batchval sent the request it answers (or a moment before: the bound stays true)."""

    at: dt.datetime
    date: str | None = None
    sent: dt.datetime | None = None


class Ledger(Protocol):
    """What `place_charges` reads and changes of the charges ledger (`store/charges`)."""

    def valuation_lines(self, invocation: int | None) -> list[Doubtful]: ...

    def received_balances(self) -> list[tuple[str, int]]: ...

    def place(self, line: Doubtful, kind: str, why: str) -> None: ...


def place_charges(
    ledger: Ledger, clock: ServerClock, invocation: int | None, started: dt.datetime | None
) -> int:
    """Look again, at the end of an invocation (`started` by batchval's clock), at the
    valuation charges it received and at every uncertain one; how many changed kind.

    1. Each is classed again with the clock as measured by now: a later answer may have
       narrowed it, or shown the clocks apart (a contested one stays uncertain).
    2. The balances, for those still uncertain: without a top-up the balance only falls,
       so a charge whose `balanceAfter` is above that of a charge whose answer this DIR had
       received before it first sent the key was made before that send: a replay. It
       needs batchval's clock only (`received_at`, `first_sent`), and never makes a
       charge fresh.
    3. Another caller: when this invocation met one valuing the same homes while it ran (a
       contested first send, or a replay of a charge not certainly made before the
       invocation started), its fresh charges made while it ran become uncertain: a
       charge made while this DIR's request was on its way, by a call of the other's
       that ended before this DIR's arrived, is answered to this DIR as a replay, and
       looks, by time and balance, just like this DIR's own."""
    lines = ledger.valuation_lines(invocation)
    if not lines:
        return 0
    offset = clock.offset()
    stamps = {line.line_id: api_time(line.at) for line in lines}
    for at in stamps.values():  # the digits of every stamp the ledger holds
        if at is not None:
            clock.observe_stamp(at)
    kinds: dict[int, tuple[str, str]] = {}
    for line in lines:
        kind, why = line.kind, line.why
        if line.invocation == invocation and why != CONTESTED:
            kind, why = classify(stamps[line.line_id], line.first_sent, clock)
        kinds[line.line_id] = (kind, why)
    _by_balance(ledger, lines, kinds)
    since = None if started is None else started + offset.replay_before
    if since is not None and _another_caller(lines, stamps, kinds, invocation, since, clock):
        for line in lines:
            at = stamps[line.line_id]
            mine = line.invocation == invocation and at is not None and at >= since
            if mine and kinds[line.line_id][0] == FRESH:
                kinds[line.line_id] = (UNCERTAIN, CONCURRENT)
    changed = 0
    for line in lines:
        kind, why = kinds[line.line_id]
        if (kind, why) != (line.kind, line.why):
            ledger.place(line, kind, why)
            changed += 1
    return changed


def _by_balance(ledger: Ledger, lines: list[Doubtful], kinds: dict[int, tuple[str, str]]) -> None:
    """Step 2 of `place_charges`: uncertain charges placed as replays by the balances."""
    doubtful = [line for line in lines if kinds[line.line_id][0] == UNCERTAIN]
    if not doubtful:
        return
    seen = ledger.received_balances()  # in the order received
    times = [received for received, _ in seen]
    lowest: list[int] = []  # the lowest balance received up to each line
    for _, balance in seen:
        lowest.append(min(balance, lowest[-1]) if lowest else balance)
    for line in doubtful:
        held, sent = line.balance_after, line.first_sent
        if kinds[line.line_id][1] == CONTESTED or line.at is None or held is None or not sent:
            continue
        before = bisect.bisect_right(times, sent)
        if before and lowest[before - 1] < held:
            kinds[line.line_id] = (
                REPLAY,
                f"charged before a charge with balanceAfter {lowest[before - 1]}, whose answer "
                "this DIR had received before it first sent this key (the balance only falls "
                "between top-ups): the API answered from its idempotency store",
            )


def _another_caller(
    lines: list[Doubtful],
    stamps: dict[int, dt.datetime | None],
    kinds: dict[int, tuple[str, str]],
    invocation: int | None,
    since: dt.datetime,
    clock: ServerClock,
) -> bool:
    """Whether this invocation met another caller valuing its homes while it ran."""
    for line in lines:
        if line.invocation != invocation:
            continue
        kind, why = kinds[line.line_id]
        if why == CONTESTED:
            return True
        at = stamps[line.line_id]
        if kind == REPLAY and at is not None and at + clock.precision(at) > since:
            return True
    return False
