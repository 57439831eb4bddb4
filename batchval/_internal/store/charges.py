"""The run's charges ledger: a line for every answer that carried a `charge`, and the money
figures every command reports, read from it.

Each line says whether the charge was fresh (this DIR's call charged the account), a
replay (the API answered from its idempotency store a charge made by an earlier call, in
another DIR, on a lost DIR or by another worker: free this time) or uncertain (the
evidence cannot tell; `money/charges` decides which). Only fresh charges are money this
DIR spent. The database holds one `ChargeLedger` (`Database.charges`); streets and
valuations write the same table.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from batchval._internal.api import precision
from batchval._internal.store.connected import Connected
from batchval._internal.store.held import CHARGE_INSERT

FRESH, REPLAY, UNCERTAIN = "fresh", "replay", "uncertain"
# How far apart a valuation's stamp and its charge can be: one call (the API stops a
# call at 30 s), with room to spare.
BALANCE_WINDOW = dt.timedelta(seconds=35)


@dataclasses.dataclass(frozen=True, slots=True)
class ChargeLine:
    """One answer that carried a charge, as charges.parquet shows it."""

    product: str  # valuation or street
    item: str  # the Idempotency-Key sent, or the postcode read
    ref: str | None  # the valuation id, or the postcode
    at: str | None  # the API's valuedAt / generatedAt, UTC ISO; None when unreadable
    credits: int
    balance_after: int | None
    kind: str  # fresh, replay or uncertain
    why: str  # the evidence for the kind, in words
    invocation: int | None  # the invocation that received the answer
    received_at: str | None  # batchval's clock when it was received

    def row(self) -> tuple[object, ...]:
        """The values in the table's order (`dataclasses.astuple` copies deeply: 30 µs)."""
        return (
            self.product,
            self.item,
            self.ref,
            self.at,
            self.credits,
            self.balance_after,
            self.kind,
            self.why,
            self.invocation,
            self.received_at,
        )


# What each of Money's figures is, as summary.json's `charges` shows it (drawn into
# docs/reference/summary.md; a test holds the two to Money's fields).
MONEY_KEYS: Mapping[str, str] = {
    "this_time": (
        "fresh credits this invocation received, of charges made while it ran (the terminal's "
        '"this time"; one an earlier invocation paid for and never heard of counts "in all", '
        "and this time too when made too near this invocation's start for the API's clock "
        "to put it before)"
    ),
    "in_all": 'fresh credits of every invocation ("in all")',
    "replayed_calls": (
        "answers the API had charged before this DIR first sent their key: another call "
        "paid, this one was free"
    ),
    "replayed_credits": "what those replays said the first call cost",
    "uncertain_calls": "answers whose evidence cannot tell fresh from replay: never guessed",
    "uncertain_credits": "their credits, kept out of both totals",
    "balance": "the last known balance (`last_known_balance`)",
    "balance_at": "when the API made the charge that balance follows",
}


@dataclasses.dataclass(frozen=True, slots=True)
class Money:
    """The money figures of a DIR, the same in summary.json, `status`, the report, the
    metrics and the manifest."""

    this_time: int  # fresh credits the invocation asked about received, made while it ran
    in_all: int  # fresh credits of every invocation
    replayed_calls: int  # answers that were replays: charged before, free this time
    replayed_credits: int  # what those replays said the first call cost
    uncertain_calls: int
    uncertain_credits: int  # kept out of this_time and in_all
    balance: int | None  # the lowest balanceAfter since the last top-up seen
    balance_at: str | None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def invocation_figures(self) -> dict[str, Any]:
        """What the invocations table keeps of them (`InvocationLog.end_invocation`)."""
        return {"credits": self.this_time, "balance": self.balance}

    def line(self) -> str:
        """The terminal's line."""
        text = f"credits: {self.this_time} this time, {self.in_all} in all"
        if self.replayed_calls:
            text += f"; {self.replayed_calls} replay(s) answered free"
        if self.uncertain_calls:
            text += (
                f"; {self.uncertain_calls} uncertain ({self.uncertain_credits} credits, "
                "not counted: see charges.parquet)"
            )
        if self.balance is not None:
            text += f"; API credits left {self.balance}"
        return text


@dataclasses.dataclass(frozen=True, slots=True)
class Doubtful:
    """A valuation charge line to look at again, with the evidence
    (`money/charges.place_charges`)."""

    line_id: int
    item: str  # the key
    at: str | None
    balance_after: int | None
    invocation: int | None
    kind: str
    why: str
    first_sent: str | None  # when this DIR first sent the key (the API's clock, earliest)


class ChargeLedger:
    """The `charges` table, on the DIR's database."""

    def __init__(self, database: Connected) -> None:
        self._database = database

    @property
    def _sql(self) -> sqlite3.Connection:
        return self._database.sql

    def record(self, line: ChargeLine) -> None:
        """A line of the ledger: held with the group's writes, so it is committed with the
        answer it came from (never one without the other)."""
        held = self._database.held
        if held.grouping:
            held.charges.append(line.row())
            return
        self._sql.execute(CHARGE_INSERT, line.row())

    def valuation_lines(self, invocation: int | None) -> list[Doubtful]:
        """The valuation charges `invocation` received and every uncertain one, with their
        key's first send, in the order recorded."""
        return [
            Doubtful(*row)
            for row in self._sql.execute(
                "SELECT c.id, c.item, c.at, c.balance_after, c.invocation, c.kind, c.why,"
                " r.first_sent FROM charges c LEFT JOIN requests r ON r.key = c.item"
                " WHERE c.product = 'valuation' AND (c.invocation IS ? OR c.kind = ?)"
                " ORDER BY c.id",
                (invocation, UNCERTAIN),
            )
        ]

    def place(self, line: Doubtful, kind: str, why: str) -> None:
        """A line's kind decided again after it was recorded
        (`money/charges.place_charges`), and what its request says it cost with it."""
        with self._database.transaction():
            self._sql.execute(
                "UPDATE charges SET kind = ?, why = ? WHERE id = ?", (kind, why, line.line_id)
            )
            self._sql.execute(
                "UPDATE requests SET credits = ? WHERE key = ?",
                (self.fresh_credits(line.item), line.item),
            )

    def fresh_credits(self, item: str) -> int:
        """The credits of `item`'s fresh charges (what results.parquet says it cost)."""
        found = self._sql.execute(
            "SELECT COALESCE(SUM(credits), 0) FROM charges WHERE item = ? AND kind = ?",
            (item, FRESH),
        ).fetchone()
        return int(found[0])

    def money(self, invocation: int | None) -> Money:
        """The figures, `this_time` those of `invocation` (0 for None), and the balance
        (`_balance`)."""
        this_time = in_all = replayed = replayed_credits = uncertain = uncertain_credits = 0
        for kind, received_by, calls, credits in self._sql.execute(
            "SELECT kind, invocation, COUNT(*), SUM(credits) FROM charges GROUP BY 1, 2"
        ):
            if kind == FRESH:
                in_all += int(credits)
                if invocation is not None and received_by == invocation:
                    this_time += int(credits)
            elif kind == REPLAY:
                replayed, replayed_credits = replayed + calls, replayed_credits + int(credits)
            else:
                uncertain, uncertain_credits = uncertain + calls, uncertain_credits + int(credits)
        if this_time and invocation is not None:
            this_time -= self._made_before(invocation)
        balance, balance_at = self._balance()
        return Money(
            this_time=this_time,
            in_all=in_all,
            replayed_calls=replayed,
            replayed_credits=replayed_credits,
            uncertain_calls=uncertain,
            uncertain_credits=uncertain_credits,
            balance=balance,
            balance_at=balance_at,
        )

    def _made_before(self, invocation: int) -> int:
        """The credits of the fresh charges `invocation` received that were made before it
        started: an earlier invocation's call paid for them and never heard the answer (a
        504, a cut connection, a kill), so they are this DIR's, but not this time's. Made
        before means even read at its latest (`precision`) the stamp is before the
        invocation's start on the API's clock (`api_started`, at its earliest), which a
        charge of this invocation's own call never is. Without that start, none."""
        found = self._sql.execute(
            "SELECT api_started FROM invocations WHERE id = ?", (invocation,)
        ).fetchone()
        if found is None or found[0] is None:
            return 0
        started = dt.datetime.fromisoformat(str(found[0])).astimezone(dt.UTC)
        credits = 0
        for at, paid in self._sql.execute(
            "SELECT at, credits FROM charges WHERE kind = ? AND invocation = ?"
            " AND at IS NOT NULL AND at < ?",
            (FRESH, invocation, started.isoformat(timespec="microseconds")),
        ):
            when = dt.datetime.fromisoformat(str(at))
            if when + precision(when) <= started:
                credits += int(paid)
        return credits

    def _balance(self) -> tuple[int | None, str | None]:
        """The last known balance: the lowest `balanceAfter` the answers gave since the last
        top-up seen, whatever their kind (a replay's is the balance after a real charge
        too), and when the API made that charge (`lowest_since_top_up`)."""
        return lowest_since_top_up(
            self._sql.execute(
                "SELECT at, balance_after FROM charges WHERE balance_after IS NOT NULL"
                " ORDER BY at IS NULL, at, id"
            )
        )

    def lines(self, batch: int = 20_000) -> Iterator[list[ChargeLine]]:
        """Every line, in the order received, in batches."""
        cursor = self._sql.execute(
            "SELECT product, item, ref, at, credits, balance_after, kind, why, invocation,"
            " received_at FROM charges ORDER BY id"
        )
        while chunk := cursor.fetchmany(batch):
            yield [ChargeLine(*row) for row in chunk]


def lowest_since_top_up(lines: Iterable[tuple[str | None, int]]) -> tuple[int | None, str | None]:
    """The lowest balance since the last top-up seen, and its `at`, of (at, balanceAfter)
    pairs in `at` order (those without an `at` last). Without a top-up the balance only
    falls, so a balance above one stamped more than `BALANCE_WINDOW` earlier (a call's
    length: an API may stamp a valuation before it charges it, so two calls served at once
    may carry their balances in the other order) shows a top-up between the two: what came
    before it says nothing of the balance after. A charge without an `at` cannot be placed
    against a top-up and counts only when none was seen."""
    # The stamped lines since the last top-up not yet a window older than the line read,
    # and the lowest balance of those that are.
    recent: collections.deque[tuple[dt.datetime, int]] = collections.deque()
    settled_low: int | None = None
    low: tuple[int, str] | None = None
    topped_up = False
    for at, balance in lines:
        if at is None:
            if not topped_up and (low is None or balance < low[0]):
                low = (balance, "")
            continue
        when = dt.datetime.fromisoformat(at)
        while recent and recent[0][0] <= when - BALANCE_WINDOW:
            older = recent.popleft()[1]
            settled_low = older if settled_low is None else min(settled_low, older)
        if settled_low is not None and balance > settled_low:
            recent.clear()
            settled_low, low, topped_up = None, None, True
        recent.append((when, balance))
        if low is None or balance < low[0]:
            low = (balance, at)
    if low is None:
        return None, None
    return low[0], low[1] or None
