"""The `--book` plan of one DIR, in the DIR's database (`book_rows`).

A book run decides once, after the ingest, what each valid input row gets tonight
(`valuations/booking.plan`), and keeps the decision here so that a resumed or killed run
carries on with the same plan rather than re-deciding against a book that it has not yet
replaced. Two states hold a request back in the work queue (`WorkQueue.hold_back`):

- `carried`: every row asking for the request has a fresh book entry; it is not sent.
- `deferred`: the night's budget does not reach it; it is left for a later night. A
  deferred request was never sent (`attempts = 0`): one that may have been charged is
  never deferred, it stays pending and is replayed with its key.

Neither state is pending, so that a book run whose budget ran out is complete (exit 0).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from batchval._internal.store.checkpoint import Checkpoint
from batchval._internal.store.database import CHECKPOINT_NAME, Database

PLANNED = "book.planned_for"  # meta: the input and settings the plan was made for

# Plans of a row (`book_rows.plan`).
CARRY = "carry"  # a fresh book entry, same request: carried into results, not sent
SEND = "send"  # never valued, changed or stale: sent tonight if the budget reaches it

# The request states of the plan (`WorkQueue.hold_back`).
CARRIED, DEFERRED = "carried", "deferred"


class BookStore:
    """The plan's rows and the request states it sets."""

    def __init__(self, checkpoint: Checkpoint) -> None:
        self._checkpoint = checkpoint

    @property
    def _db(self) -> sqlite3.Connection:
        """The connection, asked for each time: the database applies the writes its open
        group holds before handing it out (`store/held`)."""
        return self._checkpoint.database.sql

    def planned_for(self) -> str | None:
        return self._checkpoint.get(PLANNED)

    def keyed_requests(self, batch: int = 20_000) -> Iterator[list[tuple[int, str, str]]]:
        """(row number, key, canonical request JSON) of every row with a request, in row
        order, in batches."""
        cursor = self._db.execute(
            "SELECT r.row_number, r.key, q.request FROM rows r JOIN requests q ON q.key = r.key"
            " ORDER BY r.row_number"
        )
        while chunk := cursor.fetchmany(batch):
            yield [(int(n), str(k), str(j)) for n, k, j in chunk]

    def save_plan(
        self,
        rows: Iterable[tuple[int, str, str, str]],
        carried: Iterable[str],
        deferred: Iterable[str],
        planned_for: str,
    ) -> None:
        """The plan in one transaction: each row's (row number, identity, fingerprint,
        plan), and the requests carried or deferred. A plan made before (for another
        input) is undone first; only requests never sent change state."""
        with self._checkpoint.database.transaction():
            self._db.execute("DELETE FROM book_rows")
            self._db.executemany(
                "INSERT INTO book_rows (row_number, identity, fingerprint, plan)"
                " VALUES (?, ?, ?, ?)",
                rows,
            )
            self._checkpoint.requests.hold_back({CARRIED: carried, DEFERRED: deferred})
            self._checkpoint.set(PLANNED, planned_for)

    def defer_unsent(self, refused: Mapping[str, int] | None = None) -> int:
        """After the budget stopped the sending: requests still pending that were never
        sent are deferred, and those of `refused` (key -> sends) whose every send was
        refused by the API in this invocation (their attempts are those sends: none of an
        earlier invocation's, whose outcome may be unknown); returns how many. Any other
        request that was sent stays pending, for its own key to settle."""
        with self._checkpoint.database.transaction():
            deferred = self._checkpoint.requests.hold_unsent(DEFERRED)
            for key, sends in (refused or {}).items():
                deferred += self._db.execute(
                    "UPDATE requests SET state = ? WHERE key = ? AND state = 'pending'"
                    " AND attempts = ?",
                    (DEFERRED, key, sends),
                ).rowcount
            return deferred

    def row_sources(self) -> dict[str, int]:
        """Rows by what they get tonight: `valued` (answered tonight), `carried` (a book
        entry, not sent), `deferred` (left for a later night), `problems`, `pending`."""
        found = self._db.execute(
            "SELECT q.state, COUNT(*) FROM book_rows b JOIN rows r ON r.row_number ="
            " b.row_number JOIN requests q ON q.key = r.key GROUP BY q.state"
        ).fetchall()
        by_state = {str(state): int(n) for state, n in found}
        return {
            "valued": by_state.get("done", 0),
            "carried": by_state.get("carried", 0),
            "deferred": by_state.get("deferred", 0),
            "problems": by_state.get("problem", 0),
            "pending": sum(by_state.get(s, 0) for s in ("pending", "sent", "answered")),
        }

    def deferred_requests(self) -> int:
        found = self._db.execute("SELECT COUNT(*) FROM requests WHERE state = 'deferred'")
        return int(found.fetchone()[0])

    def unsent_rows(self) -> Sequence[tuple[int, str]]:
        """(row number, identity) of the rows whose request was not valued tonight
        (carried or deferred): a book entry, if there is one, is their result."""
        found = self._db.execute(
            "SELECT b.row_number, b.identity FROM book_rows b JOIN rows r ON r.row_number ="
            " b.row_number JOIN requests q ON q.key = r.key"
            " WHERE q.state IN ('carried', 'deferred') ORDER BY b.row_number"
        ).fetchall()
        return [(int(n), str(i)) for n, i in found]

    def unsent_postcodes(self) -> Sequence[tuple[int, str | None]]:
        """(row number, the postcode its request asks for) of the rows whose request was
        not valued tonight, in row order: an index rolls them forward (`valuations/indexing`)."""
        found = self._db.execute(
            "SELECT b.row_number, json_extract(q.request, '$.postcode') FROM book_rows b"
            " JOIN rows r ON r.row_number = b.row_number JOIN requests q ON q.key = r.key"
            " WHERE q.state IN ('carried', 'deferred') ORDER BY b.row_number"
        ).fetchall()
        return [(int(n), None if p is None else str(p)) for n, p in found]

    def valued_rows(self) -> Sequence[tuple[int, str, str]]:
        """(row number, identity, fingerprint) of the rows valued tonight: their book
        entries are replaced."""
        found = self._db.execute(
            "SELECT b.row_number, b.identity, b.fingerprint FROM book_rows b JOIN rows r"
            " ON r.row_number = b.row_number JOIN requests q ON q.key = r.key"
            " WHERE q.state = 'done' ORDER BY b.row_number"
        ).fetchall()
        return [(int(n), str(i), str(f)) for n, i, f in found]


def unsent_postcodes_apart(directory: Path) -> Sequence[tuple[int, str | None]]:
    """`BookStore.unsent_postcodes` of DIR's database by a read-only connection of its
    own, which another thread may make while the run's connection works on (WAL lets a
    reader in beside it): it sees what that connection has committed (`Database.settled`)."""
    database = Database.open_read_only(directory)
    if database is None:  # the run's own database, open in this process: always there
        raise FileNotFoundError(directory / CHECKPOINT_NAME)
    try:
        return BookStore(Checkpoint(database)).unsent_postcodes()
    finally:
        database.close()
