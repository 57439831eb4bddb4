"""What a `--book` night knows of a stale loan's risk when it orders its calls
(`book.order: risk`, `valuations/booking`): whether a revaluation trigger holds tonight and
the loan's LTV.

Both are made as of tonight from the loan's book entry (its last estimate, the month it
is indexed to, its local authority) and tonight's lender columns, by the rules of the
results' own columns: the triggers of `contract/lender.Revaluation` (a fall since the
last valuation, its age, a large loan's age) and, with an `index`, the market fall of
`contract/indexation.market_fall`; the LTV is `hpi_ltv` (the balance over the loan rolled
forward by the index) with an index, else the balance over its last estimate.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from batchval._internal.contract import (
    TRIGGERS,
    Revaluation,
    amounts,
    dates,
    market_fall,
    newest_base,
    roll_forward,
)
from batchval._internal.input import (
    HousePriceIndex,
    LenderColumnError,
    RevaluationPolicy,
    find_lender_columns,
    parse_month,
)
from batchval._internal.valuations.book import BookEntry

# Why a loan is where it is in a night's order (`picks.parquet`'s `reason`).
NEVER_VALUED, CHANGED, TRIGGER, LTV_WATCH, STALE = (
    "never_valued",
    "changed",
    "trigger",
    "ltv_watch",
    "stale",
)
REASONS: tuple[str, ...] = (NEVER_VALUED, CHANGED, TRIGGER, LTV_WATCH, STALE)


@dataclasses.dataclass(frozen=True, slots=True)
class Risk:
    """A stale loan's risk tonight: a trigger holds, and its LTV (None: unknown)."""

    trigger: bool
    ltv: float | None


@dataclasses.dataclass(frozen=True, slots=True)
class _Lent:
    balance: float | None
    last: tuple[float | None, dt.date | None]
    origination: tuple[float | None, dt.date | None]


class Risks:
    """Each loan's `Risk`, from tonight's lender columns (`passthrough`: the checkpoint's
    pass-through table, `row_number` first; `columns`, the config's column mapping) and,
    given one, the index."""

    def __init__(
        self,
        passthrough: pa.Table,
        columns: Mapping[str, str],
        policy: RevaluationPolicy,
        today: dt.date,
        index: HousePriceIndex | None = None,
    ) -> None:
        self._revaluation = Revaluation(policy, today)
        self._fall_share = policy.fall_share
        self._index = index
        self._passthrough, self._columns = passthrough, columns

    @functools.cached_property
    def _lent(self) -> dict[int, _Lent]:
        """Row number -> its lender figures, read at the first stale loan: a night with
        none (a new book, the `staleness` order) reads nothing."""
        passthrough = self._passthrough
        try:
            found = find_lender_columns(passthrough.column_names[1:], self._columns)
        except LenderColumnError:
            found = {}
        nothing: list[None] = [None] * passthrough.num_rows

        def read(field: str, how: Callable[[pa.Array], list[Any]]) -> list[Any]:
            name = found.get(field)
            if name is None:
                return list(nothing)
            return how(passthrough.column(name).combine_chunks())

        numbers = passthrough.column("row_number").to_pylist()
        balances = read("loan_balance", amounts)
        lasts, last_days = read("last_valuation", amounts), read("last_valuation_date", dates)
        origins, began = read("origination_value", amounts), read("origination_date", dates)
        return {
            n: _Lent(b, (lv, ld), (ov, od))
            for n, b, lv, ld, ov, od in zip(
                numbers, balances, lasts, last_days, origins, began, strict=True
            )
        }

    def of(self, number: int, entry: BookEntry) -> Risk:
        """Row `number`'s risk tonight, its book entry `entry`."""
        lent = self._lent.get(number) or _Lent(None, (None, None), (None, None))
        made = self._revaluation.figures(entry.estimate, lent.balance, lent.last, lent.origination)
        trigger = any(made.get(name) is True for name in TRIGGERS)
        ltv = None
        if lent.balance is not None and entry.estimate:
            ltv = lent.balance / entry.estimate
        elif lent.balance is None:
            ltv = entry.indexed_ltv
        if self._index is not None:
            since = lent.last[1] or lent.origination[1]
            month = None if since is None else since.year * 12 + since.month - 1
            trigger = trigger or self._market_fall(entry.local_authority, month) is True
            rolled = self._hpi_ltv(entry, lent)
            ltv = ltv if rolled is None else rolled  # an authority the index has not
        return Risk(trigger, ltv)

    @functools.lru_cache(maxsize=65_536)  # noqa: B019 (one night's object, a few thousand keys)
    def _market_fall(self, area: str | None, month: int | None) -> bool | None:
        assert self._index is not None
        return market_fall(self._index, area, month, self._fall_share)

    def _hpi_ltv(self, entry: BookEntry, lent: _Lent) -> float | None:
        """The balance over the loan's value rolled forward by the index (`hpi_ltv`)."""
        assert self._index is not None
        if lent.balance is None:
            return None

        def month(day: dt.date | None) -> int | None:
            return None if day is None else day.year * 12 + day.month - 1

        base = newest_base(
            (entry.estimate, parse_month(entry.indexed_to) if entry.indexed_to else None),
            (lent.last[0], month(lent.last[1])),
            (lent.origination[0], month(lent.origination[1])),
        )
        rolled = roll_forward(self._index, entry.local_authority, base)
        return None if not rolled.value else lent.balance / rolled.value
