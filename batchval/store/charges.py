"""The run's charges ledger: a line for every answer that carried a `charge`, and the money
figures every command reports, read from it.

Each line says whether the charge was fresh (this DIR's call charged the account), a
replay (the API answered from its idempotency store a charge made by an earlier call, in
another DIR, on a lost DIR or by another worker: free this time) or uncertain (the
evidence cannot tell; `engine/charges` decides which). Only fresh charges are money this
DIR spent. `Database` has these methods; streets and valuations write the same table.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import sqlite3
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from batchval.store.held import CHARGE_INSERT, HeldWrites

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
    "this_time": 'fresh credits this invocation received (the terminal\'s "this time")',
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

    this_time: int  # fresh credits received by the invocation asked about
    in_all: int  # fresh credits of every invocation
    replayed_calls: int  # answers that were replays: charged before, free this time
    replayed_credits: int  # what those replays said the first call cost
    uncertain_calls: int
    uncertain_credits: int  # kept out of this_time and in_all
    balance: int | None  # balanceAfter of the latest charge (by the API's time)
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


class ChargeLedger:
    held: HeldWrites
    if TYPE_CHECKING:  # Database's own

        @property
        def sql(self) -> sqlite3.Connection: ...

    def record_charge(self, line: ChargeLine) -> None:
        """A line of the ledger: held with the group's writes, so it is committed with the
        answer it came from (never one without the other)."""
        if self.held.grouping:
            self.held.charges.append(line.row())
            return
        self.sql.execute(CHARGE_INSERT, line.row())

    def fresh_credits(self, item: str) -> int:
        """The credits of `item`'s fresh charges (what results.parquet says it cost)."""
        found = self.sql.execute(
            "SELECT COALESCE(SUM(credits), 0) FROM charges WHERE item = ? AND kind = ?",
            (item, FRESH),
        ).fetchone()
        return int(found[0])

    def money(self, invocation: int | None) -> Money:
        """The figures, `this_time` those of `invocation` (0 for None), and the balance
        (`_balance`)."""
        this_time = in_all = replayed = replayed_credits = uncertain = uncertain_credits = 0
        for kind, received_by, calls, credits in self.sql.execute(
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

    def _balance(self) -> tuple[int | None, str | None]:
        """The balance after the charges the API made last: the lowest `balanceAfter`
        among the fresh charges made within `BALANCE_WINDOW` of the latest `valuedAt`.
        The latest `valuedAt` alone is not enough: an API stamps a valuation before it
        charges it, so of two calls served at once the later stamp can carry the earlier
        (higher) balance (the sandbox does). Replays count only when the DIR holds no
        fresh charge: then the latest replay's is still the latest balance known."""
        for kinds in ((FRESH,), (FRESH, REPLAY, UNCERTAIN)):
            marks = ", ".join("?" for _ in kinds)
            where = f"kind IN ({marks}) AND balance_after IS NOT NULL AND at IS NOT NULL"
            top = self.sql.execute(f"SELECT MAX(at) FROM charges WHERE {where}", kinds).fetchone()
            if top[0] is None:
                continue
            since = dt.datetime.fromisoformat(str(top[0])) - BALANCE_WINDOW
            found = self.sql.execute(
                f"SELECT balance_after, at FROM charges WHERE {where} AND at >= ?"
                " ORDER BY balance_after, at DESC LIMIT 1",
                (*kinds, since.isoformat(timespec="microseconds")),
            ).fetchone()
            return int(found[0]), str(found[1])
        return None, None

    def charge_lines(self, batch: int = 20_000) -> Iterator[list[ChargeLine]]:
        """Every line, in the order received, in batches."""
        cursor = self.sql.execute(
            "SELECT product, item, ref, at, credits, balance_after, kind, why, invocation,"
            " received_at FROM charges ORDER BY id"
        )
        while chunk := cursor.fetchmany(batch):
            yield [ChargeLine(*row) for row in chunk]
