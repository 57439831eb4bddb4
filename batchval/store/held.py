"""Writes held while a group is open (`Checkpoint.begin_group`), applied as one statement.

While sending, each request was written three times (sent, answered, done), each UPDATE
moving it in two indexes: the largest SQLite cost of a run. Inside a group nothing is
durable before the group's COMMIT anyway, so a request's writes can be held and applied
as their net effect, in one UPDATE, before anything else touches the database (every
read, every other write, the COMMIT). A paid answer is therefore still committed with
its reading, or before it is ever read back: never after, never without it.
"""

from __future__ import annotations

import dataclasses
import sqlite3

# A line once: an answer settled again (stored by a killed run, read by the next) is the
# same charge, not another (`charges_once`).
CHARGE_INSERT = (
    "INSERT OR IGNORE INTO charges (product, item, ref, at, credits, balance_after, kind, why,"
    " invocation, received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


@dataclasses.dataclass(slots=True)
class _Held:
    """One request's writes: the last state, the sends counted, the answer and credits."""

    state: str
    sends: int = 0
    first_sent: str | None = None  # when this DIR first sent it, if not known before
    answer: str | None = None
    credits: int | None = None
    valued: bool = False  # a valuation was recorded: last_error is cleared


class HeldWrites:
    """The requests' writes held in the open group, by key."""

    def __init__(self) -> None:
        self.grouping = False  # a group is open: writes are held
        self._held: dict[str, _Held] = {}
        # Lines of the charges ledger (`store/charges`), inserted after the requests' writes.
        self.charges: list[tuple[object, ...]] = []

    def __bool__(self) -> bool:
        return bool(self._held) or bool(self.charges)

    def hold(self, key: str, state: str) -> _Held | None:
        """The held writes of `key`, now in `state`; None outside a group (write now)."""
        if not self.grouping:
            return None
        held = self._held.get(key)
        if held is None:
            held = self._held[key] = _Held(state)
        held.state = state
        return held

    def apply(self, db: sqlite3.Connection) -> None:
        """Write what is held, one UPDATE a request, in the open transaction."""
        held, self._held = self._held, {}
        charges, self.charges = self.charges, []
        db.executemany(
            "UPDATE requests SET state = ?, attempts = attempts + ?,"
            " first_sent = COALESCE(first_sent, ?),"
            " answer = COALESCE(?, answer), credits = COALESCE(?, credits),"
            " last_error = CASE WHEN ? THEN NULL ELSE last_error END WHERE key = ?",
            [
                (h.state, h.sends, h.first_sent, h.answer, h.credits, h.valued, k)
                for k, h in held.items()
            ],
        )
        if charges:
            db.executemany(CHARGE_INSERT, charges)

    def drop(self) -> None:
        """Forget what is held (its transaction is rolled back or abandoned)."""
        self._held.clear()
        self.charges.clear()
