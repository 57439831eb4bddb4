"""The index from the API (`index.source: api`): each local authority's `priceIndex`, read
from a street analysis and held in the book, night after night.

A street analysis carries `priceIndex`, the national house price index for the postcode's
local authority, up to 24 months, newest first (docs/api.md, 2.5); a read of the same
postcode within 30 days is a free repeat, the first answer frozen (4.3). So a held index
is read again only when it can have moved, and then through a postcode of the authority
not read in the last 30 days:

- an authority with nothing held is read (its first read);
- an authority held is read afresh when the book's valuations show a later `indexedTo`
  for it than the newest month held (the API's estimates have moved on), once for that
  month; or when the newest month held is more than `STALE_MONTHS` before the run's
  month, once a calendar month (an index published late is then found by the first);
- the postcode read through is the lowest of the book's loans in the authority not read
  in the last `REPEAT_WINDOW` (a stable rule: the same book and day give the same reads);
  a 404 is recorded against that postcode, and the next one is tried on a later night; a
  null `priceIndex` says the authority's index is unpublished, so the next postcode is
  tried in a later month, not every night at a charge each.

Months accumulate: a read adds its months to those held (a month read again takes the
newer read's figure), so that the index reaches back further each night the book is run,
never further than the first read's 24 months. `house_price_index` makes of the months
held the same `HousePriceIndex` a UK HPI file gives, so that the roll-forward, the
`hpi_*` columns, the coverage and the report are the file's; a base month older than the
oldest month held is `base_before_index`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from batchval._internal.input import HousePriceIndex, month_number, month_text

# The API's free repeat window (docs/api.md, 4.3 and 8): a postcode read again within it
# gives the first answer again.
REPEAT_WINDOW = dt.timedelta(days=30)
# The newest month held may be this many months before the run's month before the index
# is read afresh (the index is published about two months behind: docs/api.md, 2.2).
STALE_MONTHS = 2
# The book's schema metadata key the held index is kept under (`HeldIndex.to_json`).
BOOK_META = "batchval.book_api_index"
HELD_VERSION = 1


@dataclasses.dataclass(slots=True)
class HeldAuthority:
    """What the book holds of one authority's index: its months (`month_number` ->
    index), when the last read that gave months was made and whether it was charged, the
    postcode it was read through, and every postcode tried and when (a read, a null
    `priceIndex` or a 404 alike)."""

    months: dict[int, float] = dataclasses.field(default_factory=dict)
    read_on: dt.date | None = None
    charged: bool | None = None
    postcode: str | None = None
    tried: dict[str, dt.date] = dataclasses.field(default_factory=dict)
    # The month the last read for a later `indexedTo` looked for; the day of the last
    # null `priceIndex`.
    sought: int | None = None
    unpublished_on: dt.date | None = None

    @property
    def newest(self) -> int | None:
        return max(self.months, default=None)

    def last_tried(self) -> dt.date | None:
        return max(self.tried.values(), default=None)

    def to_json(self) -> dict[str, Any]:
        return {
            "months": {month_text(m): level for m, level in sorted(self.months.items())},
            "read_on": None if self.read_on is None else self.read_on.isoformat(),
            "charged": self.charged,
            "postcode": self.postcode,
            "tried": {p: day.isoformat() for p, day in sorted(self.tried.items())},
            "sought": None if self.sought is None else month_text(self.sought),
            "unpublished_on": _day_text(self.unpublished_on),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HeldAuthority:
        months = {_month(text): float(level) for text, level in data["months"].items()}
        sought = data.get("sought")
        return cls(
            months=months,
            read_on=_day(data.get("read_on")),
            charged=data.get("charged"),
            postcode=data.get("postcode"),
            tried={p: dt.date.fromisoformat(day) for p, day in data.get("tried", {}).items()},
            sought=None if sought is None else _month(sought),
            unpublished_on=_day(data.get("unpublished_on")),
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Read:
    """One street analysis to read tonight for an authority's index, and why."""

    authority: str
    postcode: str
    why: str  # `first`, `later_month` or `stale`
    sought: int | None = None  # for `later_month`: the month looked for


@dataclasses.dataclass(slots=True)
class HeldIndex:
    """Every authority's index the book holds (`HeldAuthority`), by authority code."""

    authorities: dict[str, HeldAuthority] = dataclasses.field(default_factory=dict)

    def due(
        self,
        postcodes: Mapping[str, Sequence[str]],
        seen: Mapping[str, int],
        today: dt.date,
    ) -> list[Read]:
        """The reads tonight, by authority code: for each authority of the book's loans
        (`postcodes`: authority -> its loans' postcodes, normal form) whose index is
        missing, or behind a month the book's valuations show (`seen`: authority -> the
        latest `indexedTo`, as `month_number`), or stale against `today`'s month; each
        through the lowest postcode not tried in the last `REPEAT_WINDOW`. An authority
        with no such postcode waits for a later night."""
        run_month = _month_of(today)
        reads: list[Read] = []
        for authority in sorted(postcodes):
            held = self.authorities.get(authority) or HeldAuthority()
            why = _why(held, seen.get(authority), today, run_month)
            if why is None:
                continue
            fresh = [
                p
                for p in sorted(set(postcodes[authority]))
                if p not in held.tried or today - held.tried[p] >= REPEAT_WINDOW
            ]
            if fresh:
                sought = seen.get(authority) if why == "later_month" else None
                reads.append(Read(authority, fresh[0], why, sought))
        return reads

    def absorb(
        self,
        read: Read,
        price_index: Mapping[str, Any] | None,
        *,
        on: dt.date,
        charged: bool,
        found: bool = True,
    ) -> int:
        """Keep what a read gave (`price_index`: the answer's `priceIndex`, None for a
        null one; `found` False for a 404): its months added to those held, the newer
        read's figure for a month read twice. The postcode is marked tried either way. The
        months it gave."""
        held = self.authorities.setdefault(read.authority, HeldAuthority())
        held.tried[read.postcode] = on
        if read.sought is not None:
            held.sought = max(read.sought, held.sought or read.sought)
        months = {} if price_index is None else _months(price_index)
        if months:
            held.months.update(months)
            held.read_on, held.charged, held.postcode = on, charged, read.postcode
        elif price_index is None and found:
            held.unpublished_on = on
        return len(months)

    def house_price_index(self) -> HousePriceIndex:
        """The months held as a `HousePriceIndex` (areas by code, named by code), its
        sha256 and size those of its JSON form (`to_json`)."""
        text = self.text()
        levels = {a: dict(h.months) for a, h in self.authorities.items() if h.months}
        return HousePriceIndex(
            levels=levels,
            names={a: a for a in levels},
            sha256=hashlib.sha256(text.encode()).hexdigest(),
            size=len(text.encode()),
        )

    def text(self) -> str:
        """The JSON the book keeps (`BOOK_META`), its keys sorted: the same index, the
        same text."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    def to_json(self) -> dict[str, Any]:
        return {
            "version": HELD_VERSION,
            "authorities": {a: h.to_json() for a, h in sorted(self.authorities.items())},
        }

    @classmethod
    def from_text(cls, text: str | bytes | None) -> HeldIndex:
        """The index a book's metadata holds (an empty one for none). Raises ValueError
        for a text that is not one."""
        if not text:
            return cls()
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("version") != HELD_VERSION:
            raise ValueError("not a held index of this batchval's")
        return cls({a: HeldAuthority.from_json(h) for a, h in data["authorities"].items()})


def _why(held: HeldAuthority, seen: int | None, today: dt.date, run_month: int) -> str | None:
    """Why an authority's index is read tonight, or None (see the module's rules)."""
    newest = held.newest
    if held.unpublished_on is not None and _month_of(held.unpublished_on) == run_month:
        return None  # unpublished this month: a later month's night tries again
    if newest is None:
        return "first"
    if seen is not None and seen > newest and (held.sought is None or seen > held.sought):
        return "later_month"
    tried = held.last_tried()
    if newest < run_month - STALE_MONTHS and (tried is None or _month_of(tried) < run_month):
        return "stale"
    return None


def _month_of(day: dt.date) -> int:
    return month_number(day.year, day.month)


def _day(text: object) -> dt.date | None:
    return dt.date.fromisoformat(text) if isinstance(text, str) else None


def _day_text(day: dt.date | None) -> str | None:
    return None if day is None else day.isoformat()


def _months(price_index: Mapping[str, Any]) -> dict[int, float]:
    """`priceIndex.months` as `month_number` -> index, its months with no index or no
    readable month left out."""
    found: dict[int, float] = {}
    months = price_index.get("months")
    if not isinstance(months, list):
        return found
    for item in months:
        if not isinstance(item, Mapping):
            continue
        level, month = item.get("index"), item.get("month")
        if isinstance(level, bool) or not isinstance(level, int | float) or level <= 0:
            continue
        try:
            found[_month(month)] = float(level)
        except (TypeError, ValueError):
            continue
    return found


def _month(text: object) -> int:
    """`YYYY-MM` as a `month_number`; ValueError otherwise."""
    if not isinstance(text, str) or len(text) != 7 or text[4] != "-":
        raise ValueError(f"not a month: {text!r}")
    year, month = int(text[:4]), int(text[5:])
    if not 1 <= month <= 12:
        raise ValueError(f"not a month: {text!r}")
    return month_number(year, month)
