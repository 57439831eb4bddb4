"""Telling a fresh charge from a replay: a replay only on proof, on the API's clock.

A retry with the same key returns the first result, `charge` included (docs/api.md, 4.1),
so an answer alone cannot say whether this call was charged: the same file valued into a
second DIR the same UTC day is answered from the API's idempotency store, each answer
carrying the first call's charge, and the account is charged nothing. The rule
(docs/explanation/keys-and-charges.md), for each answer that carried a charge:

- **replay** only on proof: the valuation's stamp (`valuedAt`), read at its latest (to the
  precision its digits show, `precision`), is earlier than the earliest instant this
  DIR's first send of the key can have reached the API. That instant is taken on the API's
  own clock, when the key is first sent (`Evidence.sent_now`): the latest `Date` header
  received plus the time elapsed since on the monotonic clock (`api/apiclock`). The
  machine's wall clock is never compared with the API's. A send the DIR may have lost with
  a killed invocation is `SENT_UNKNOWN`: no replay can be proven against it.
- **uncertain** when not proven a replay *and* the run has met another holder of its
  keys: a send of a key answered 409 `request-in-progress` while every earlier send of it
  by this DIR was answered 409 too, or a charge proven a replay (another caller paid for
  the key before this DIR ever sent it). That evidence is kept in the run's database and
  holds from then on (`Evidence.other_holder`). A stamp later than the send proves
  nothing then: a replay's stamp is earlier than the request's *arrival*, which may come
  any time after it left (a queue, a slow network, a loaded API), so the other caller's
  valuation may be stamped seconds after this DIR's send and still be answered to it.
- **fresh** otherwise: nobody else is known to hold the run's keys.

So every rounding counts against "replay": a figure may overstate what this DIR spent
(two DIRs started on the same rows within one stamp's precision, with no sign of each
other), never understate it. A street analysis needs none of this: its `charge` is absent
on a free repeat (docs/api.md, 4.3).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Callable
from typing import Protocol

from batchval._internal.api import WHOLE_SECOND, ApiClock, precision
from batchval._internal.store import FRESH, REPLAY, UNCERTAIN, Doubtful

# A first send that may have been lost with a killed invocation (its last writes are): its
# instant is unknown, so nothing can be proven made before it.
SENT_UNKNOWN = "unknown"
# The database's key for the evidence of another holder of the run's keys (its words).
OTHER_HOLDER = "other_holder"

CONTESTED = (
    "this DIR's first send of the key was answered 409 request-in-progress: another caller "
    "was valuing it"
)
ANOTHER = (
    "not proven made before this DIR's first send of the key can have reached the API, and "
    "this run has met another holder of its keys ({evidence}): a replay of that caller's "
    "charge or this call's, which nothing tells apart"
)


class Evidence:
    """What an invocation holds to class its charges: the API's clock as its answers show
    it, the finest precision its stamps have shown, and whether the run has met another
    holder of its keys (`note_other_holder`, kept by `keep` in the run's database)."""

    def __init__(
        self,
        api_clock: ApiClock | None = None,
        *,
        other_holder: str | None = None,
        keep: Callable[[str], None] = lambda _: None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api_clock = ApiClock() if api_clock is None else api_clock
        self.other_holder = other_holder
        self._keep = keep
        self._finest = WHOLE_SECOND  # the finest precision a stamp of the API's has shown
        self._started = monotonic()  # this invocation's start, on the monotonic clock

    def sent_now(self) -> str:
        """The earliest instant, on the API's clock, a request sent now can reach the API
        (`SENT_UNKNOWN` before any answer gave the API's `Date`)."""
        earliest = self.api_clock.earliest_now()
        return SENT_UNKNOWN if earliest is None else stamp(earliest)

    def started(self) -> str | None:
        """The earliest instant, on the API's clock, this invocation can have started."""
        earliest = self.api_clock.earliest_at(self._started)
        return None if earliest is None else stamp(earliest)

    def note_other_holder(self, why: str) -> None:
        """Another holder of the run's keys was met: kept, the first word of it."""
        if self.other_holder is None:
            self.other_holder = why
            self._keep(why)

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

    def classify(self, at: dt.datetime | None, first_sent: str | None) -> tuple[str, str]:
        """(kind, why) of a valuation's charge stamped `at`, whose key this DIR first sent
        at `first_sent` (`sent_now`'s; None or `SENT_UNKNOWN`: not known)."""
        sent = api_time(first_sent)
        unit = None if at is None else self.precision(at)
        if at is not None and unit is not None and sent is not None and at + unit <= sent:
            before = (sent - (at + unit)).total_seconds()
            self.note_other_holder("a charge made before this DIR first sent its key (a replay)")
            return REPLAY, (
                f"valued at least {before:.3f} s before this DIR's first send of the key can "
                "have reached the API, on the API's clock: another call paid for it"
            )
        if self.other_holder is not None:
            return UNCERTAIN, ANOTHER.format(evidence=self.other_holder)
        if at is None:
            return FRESH, "the answer's valuedAt cannot be read: no replay can be proven"
        if sent is None:
            return FRESH, (
                "this DIR's first send of the key is not known on the API's clock: no replay "
                "can be proven"
            )
        return FRESH, "not valued before this DIR first sent the key, on the API's clock"


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


@dataclasses.dataclass(frozen=True, slots=True)
class Received:
    """When batchval received an answer, by its own clock (the ledger's `received_at`: for
    reading, never for classing)."""

    at: dt.datetime


class Ledger(Protocol):
    """What `place_charges` reads and changes of the charges ledger (`store/charges`)."""

    def valuation_lines(self, invocation: int | None) -> list[Doubtful]: ...

    def place(self, line: Doubtful, kind: str, why: str) -> None: ...


def place_charges(ledger: Ledger, evidence: Evidence, invocation: int | None) -> int:
    """Look again, at the end of an invocation, at the fresh valuation charges it received:
    evidence of another holder met after a charge was classed (a 409 or a proven replay
    answered later) leaves each one uncertain. A replay stays one (its proof holds) and
    nothing is made fresh. How many changed."""
    changed = 0
    for line in ledger.valuation_lines(invocation):
        if line.invocation != invocation or line.kind != FRESH:
            continue
        kind, why = evidence.classify(api_time(line.at), line.first_sent)
        if kind == UNCERTAIN:
            ledger.place(line, kind, why)
            changed += 1
    return changed
