"""Writes held while a group is open (`Database.begin_group`), applied as one statement.

While sending, each item of a queue (`store/queue`) was written three times (sent,
answered, done), each UPDATE moving it in two indexes: the largest SQLite cost of a run.
Inside a group nothing is durable before the group's COMMIT anyway, so an item's writes
can be held and applied as their net effect, in one UPDATE, before anything else touches
the database (every read, every other write, the COMMIT). A paid answer is therefore
still committed with its reading, or before it is ever read back: never after, never
without it.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from batchval._internal.store.schema import QueueTable

# A line once: an answer settled again (stored by a killed run, read by the next) is the
# same charge, not another (`charges_once`).
CHARGE_INSERT = (
    "INSERT OR IGNORE INTO charges (product, item, ref, at, credits, balance_after, kind, why,"
    " invocation, received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


@dataclasses.dataclass(slots=True)
class _Held:
    """One item's writes: the last state, the sends counted, the answer and credits."""

    state: str
    sends: int = 0
    first_sent: str | None = None  # when this DIR first sent it, if not known before
    answer: str | None = None
    credits: int | None = None
    done: bool = False  # a result was recorded: last_error is cleared
    record: str | None = None  # the result as read (`QueueTable.record`)


class HeldWrites:
    """The queues' writes held in the open group, by queue and key."""

    def __init__(self) -> None:
        self.grouping = False  # a group is open: writes are held
        self._held: dict[QueueTable, dict[str, _Held]] = {}
        # Lines of the charges ledger (`store/charges`), inserted after the requests' writes.
        self.charges: list[tuple[object, ...]] = []

    def __bool__(self) -> bool:
        return bool(self._held) or bool(self.charges)

    def hold(self, table: QueueTable, key: str, state: str) -> _Held | None:
        """The held writes of `key` in `table`, now in `state`; None outside a group
        (write now)."""
        if not self.grouping:
            return None
        items = self._held.setdefault(table, {})
        held = items.get(key)
        if held is None:
            held = items[key] = _Held(state)
        held.state = state
        return held

    def apply(self, db: sqlite3.Connection) -> None:
        """Write what is held, one UPDATE an item, in the open transaction."""
        held, self._held = self._held, {}
        charges, self.charges = self.charges, []
        for table, items in held.items():
            since = "first_sent = COALESCE(first_sent, :first)," if table.first_sent else ""
            # A result recorded sets its record (None: none kept); any other write keeps it.
            read = "record = CASE WHEN :done THEN :record ELSE record END," if table.record else ""
            db.executemany(
                f"UPDATE {table.name} SET state = :state, attempts = attempts + :sends, {since}"
                " answer = COALESCE(:answer, answer), credits = COALESCE(:credits, credits),"
                f" {read} last_error = CASE WHEN :done THEN NULL ELSE last_error END"
                f" WHERE {table.key} = :key",
                [
                    {
                        "state": h.state,
                        "sends": h.sends,
                        "first": h.first_sent,
                        "answer": h.answer,
                        "credits": h.credits,
                        "done": h.done,
                        "record": h.record,
                        "key": k,
                    }
                    for k, h in items.items()
                ],
            )
        if charges:
            db.executemany(CHARGE_INSERT, charges)

    def drop(self) -> None:
        """Forget what is held (its transaction is rolled back or abandoned)."""
        self._held.clear()
        self.charges.clear()
