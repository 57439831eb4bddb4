"""The one work queue of a DIR: items with a key that is the same in every send, a state,
the attempts, the last error, the API's raw answer, its problem and the credits it was
charged. Valuations (`requests`, keyed by Idempotency-Key) and street reads (`streets`,
keyed by postcode) are two tables of one shape (`store/schema.QueueTable`), each
served by a `WorkQueue`; the book's plan sets its held-back states through it.

An item's state moves pending -> sent -> answered -> done | problem, and back to pending
after a transient failure. `sent` means "may have reached the API": it is sent again
with its key, which the API answers without a second charge. `answered` means the
answer's exact bytes are stored but not yet read: a run that starts after a crash reads
them, it never asks again. States outside this cycle (the book's `carried`, `deferred`)
hold an item back: it is neither sent nor pending.

`Queue` is the seam: what the sending engine's jobs need of a queue, whatever keeps it.
Inside a group (`Database.begin_group`) the lifecycle's writes are held and applied as
one statement an item (`store/held`) before anything else touches the database.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from batchval._internal import redaction

if TYPE_CHECKING:
    from batchval._internal.store.connected import Connected
    from batchval._internal.store.schema import QueueTable

PENDING_STATES = ("pending", "sent", "answered")


@dataclasses.dataclass(frozen=True, slots=True)
class QueueItem:
    """An item still to send: `rowid` orders the pages, `key` names it in every send."""

    rowid: int
    key: str
    attempts: int
    payload: str  # what is sent: the canonical request JSON, or the key itself
    first_sent: str | None = None  # when this DIR first sent it (the API's clock, earliest)


@dataclasses.dataclass(frozen=True, slots=True)
class StateTally:
    """A state's items, the rows asking for them, the items some row asks for, credits."""

    items: int
    rows: int
    asked: int
    credits: int


class Queue(Protocol):
    """What a job of the sending engine needs of its queue."""

    def pending(self, after_rowid: int = 0, limit: int = 1000) -> list[QueueItem]: ...
    def any_pending(self) -> bool: ...
    def mark_sent(self, key: str, first_sent: str | None = None) -> None: ...
    def record_answer(self, key: str, body: bytes) -> None: ...
    def answered(self) -> list[tuple[str, str, str | None]]: ...
    def record_done(self, key: str, credits: int, record: str | None = None) -> None: ...
    def record_problem(self, key: str, problem: Mapping[str, Any]) -> None: ...
    def record_retry(self, key: str, error: str) -> None: ...
    def row_numbers(self, key: str, limit: int = 5) -> list[int]: ...


class WorkQueue:
    """A `Queue` in one table of the DIR's SQLite database."""

    def __init__(self, database: Connected, table: QueueTable) -> None:
        self._database = database
        self.table = table

    def pending(self, after_rowid: int = 0, limit: int = 1000) -> list[QueueItem]:
        """Items without an answer, in order, a page at a time. Each state is read in
        rowid order from its index and the two merged, so that a page costs its own size
        (`state IN (...)` sorted every pending item for each page)."""
        t = self.table
        first = "first_sent" if t.first_sent else "NULL"
        columns = f"rowid, {t.key}, attempts, {t.payload or t.key}, {first}"
        pages = [
            f"SELECT {columns} FROM {t.name}{t.where(f'state = {state!r}', 'rowid > ?1')}"
            for state in ("pending", "sent")
        ]
        found = self._database.sql.execute(
            " UNION ALL ".join(pages) + " ORDER BY 1 LIMIT ?2", (after_rowid, limit)
        ).fetchall()
        return [QueueItem(int(r[0]), str(r[1]), int(r[2]), str(r[3]), r[4]) for r in found]

    def settled(self, keys: Iterable[str], chunk: int = 500) -> set[str]:
        """Those of `keys` this queue holds an answer for (answered, done or problem):
        a run never sends them again."""
        t, wanted = self.table, list(keys)
        found: set[str] = set()
        for start in range(0, len(wanted), chunk):
            part = wanted[start : start + chunk]
            marks = ", ".join("?" for _ in part)
            query = f"SELECT {t.key} FROM {t.name} WHERE {t.key} IN ({marks})"
            query += " AND state IN ('answered', 'done', 'problem')"
            found.update(str(key) for (key,) in self._database.sql.execute(query, part))
        return found

    def any_pending(self) -> bool:
        """Whether some item is still without its answer (one probe of an index)."""
        t = self.table
        found = self._database.sql.execute(
            f"SELECT EXISTS (SELECT 1 FROM {t.name}{t.where(f'state IN {PENDING_STATES}')})"
        ).fetchone()
        return bool(found[0])

    def mark_sent(self, key: str, first_sent: str | None = None) -> None:
        """About to be sent; `first_sent` is kept unless the DIR sent it before."""
        held = self._database.held.hold(self.table, key, "sent")
        if held is not None:
            held.sends += 1
            held.first_sent = held.first_sent or first_sent
            return
        t = self.table
        since = ", first_sent = COALESCE(first_sent, :first)" if t.first_sent else ""
        self._database.sql.execute(
            f"UPDATE {t.name} SET state = 'sent', attempts = attempts + 1{since}"
            f" WHERE {t.key} = :key",
            {"first": first_sent, "key": key},
        )

    def record_answer(self, key: str, body: bytes) -> None:
        """A success's exact bytes, kept before anything reads them: at once outside a
        group; in a group, applied with the reading that follows and always committed
        with it, or before it is ever read from the database."""
        answer = body.decode("utf-8", "replace")
        held = self._database.held.hold(self.table, key, "answered")
        if held is not None:
            held.answer = answer
            return
        self._update(key, "state = 'answered', answer = ?", answer)

    def answered(self) -> list[tuple[str, str, str | None]]:
        """(key, raw answer, first sent) of answers stored and never read (a crash came
        between)."""
        t = self.table
        first = "first_sent" if t.first_sent else "NULL"
        found = self._database.sql.execute(
            f"SELECT {t.key}, answer, {first} FROM {t.name} WHERE state = 'answered' ORDER BY rowid"
        ).fetchall()
        return [(str(k), str(a), f) for k, a, f in found]

    def record_done(self, key: str, credits: int, record: str | None = None) -> None:
        """The stored answer is the item's result; `credits` what it was charged; `record`
        the answer as read, where the table keeps it (`QueueTable.record`)."""
        held = self._database.held.hold(self.table, key, "done")
        if held is not None:
            held.credits, held.done, held.record = credits, True, record
            return
        if self.table.record:
            done = "state = 'done', credits = ?, last_error = NULL, record = ?"
            self._update(key, done, credits, record)
        else:
            self._update(key, "state = 'done', credits = ?, last_error = NULL", credits)

    def record_problem(self, key: str, problem: Mapping[str, Any]) -> None:
        """Final: the API blamed the item, or its answer cannot be read."""
        kept = json.dumps(redaction.scrub_data(problem), sort_keys=True)
        self._update(key, "state = 'problem', problem = ?", kept)

    def record_retry(self, key: str, error: str) -> None:
        """The item stays to be sent again with the same key. A stored result stays with
        it: only bytes received and not read yet (`answered`: a test answer in a live DIR,
        an answer that is not JSON) are dropped, so a failed retry never loses a paid
        answer."""
        self._update(
            key,
            "state = 'pending', last_error = ?,"
            " answer = CASE WHEN state = 'answered' THEN NULL ELSE answer END",
            redaction.scrub(error),  # what an answer echoed of the request is masked
        )

    def row_numbers(self, key: str, limit: int = 5) -> list[int]:
        """The first row numbers that ask for an item (for log lines)."""
        t = self.table
        found = self._database.sql.execute(
            f"SELECT row_number FROM {t.rows} WHERE {t.key} = ? ORDER BY row_number LIMIT ?",
            (key, limit),
        ).fetchall()
        return [int(r[0]) for r in found]

    def tally(self) -> dict[str, StateTally]:
        """Each state's items, read from the state index (never a join with the rows)."""
        t = self.table
        found = self._database.sql.execute(
            "SELECT state, COUNT(*), COALESCE(SUM(row_count), 0), COALESCE(SUM(row_count > 0), 0),"
            f" COALESCE(SUM(credits), 0) FROM {t.name}{t.where()} GROUP BY state"
        )
        return {str(s): StateTally(int(n), int(r), int(a), int(c)) for s, n, r, a, c in found}

    # --- held back: states outside the cycle (the book's plan) -------------------------

    def hold_back(self, states: Mapping[str, Iterable[str]]) -> None:
        """Items held back by a plan: those of an earlier plan (in any of `states`) are
        pending again, then each key listed under a state is set to it, if it was never
        sent (one that may have been charged stays pending, to be replayed with its key).
        Through a temporary table and one UPDATE: a statement a key took 45 µs each (2 s
        for a 50,000-loan book)."""
        t, db = self.table, self._database.sql
        marks = ", ".join("?" for _ in states)
        db.execute(f"UPDATE {t.name} SET state = 'pending' WHERE state IN ({marks})", [*states])
        db.execute("CREATE TEMP TABLE IF NOT EXISTS planned (key TEXT PRIMARY KEY, state TEXT)")
        db.execute("DELETE FROM planned")
        for state, keys in states.items():
            db.executemany(
                "INSERT INTO planned (key, state) VALUES (?, ?)", [(k, state) for k in keys]
            )
        db.execute(
            f"UPDATE {t.name} SET state = planned.state FROM planned"
            f" WHERE {t.name}.{t.key} = planned.key AND {t.name}.state = 'pending'"
            f" AND {t.name}.attempts = 0"
        )
        db.execute("DELETE FROM planned")

    def hold_unsent(self, state: str) -> int:
        """Every pending item never sent is held back in `state`; returns how many."""
        cursor = self._database.sql.execute(
            f"UPDATE {self.table.name} SET state = ? WHERE state = 'pending' AND attempts = 0",
            (state,),
        )
        return cursor.rowcount

    def _update(self, key: str, assignments: str, *values: object) -> None:
        t = self.table
        self._database.sql.execute(
            f"UPDATE {t.name} SET {assignments} WHERE {t.key} = ?", (*values, key)
        )
