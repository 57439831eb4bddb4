"""The checkpoint's record of every invocation of a run (`batchval run` on one DIR): when
it started and ended, its exit code, calls, 429s, credits and the last known balance; and
the hosts that have answered the DIR (`reached.<host>` in its meta). The database holds
one `InvocationLog` (`Database.invocations`); it lives here because it changes with the
summary and the report, not with the rows and requests.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

from batchval._internal.store import records
from batchval._internal.store.connected import Connected
from batchval._internal.store.schema import QUEUES

# The meta key of a host that answered: `reached.api.example.com`.
_REACHED = "reached."


class InvocationLog:
    """The `invocations` table and the hosts reached, on the DIR's database."""

    def __init__(self, database: Connected) -> None:
        self._database = database
        self.current: int | None = None  # this process's, once `record_start`
        self.sent_floor: str | None = None  # see `record_start`

    @property
    def _sql(self) -> sqlite3.Connection:
        return self._database.sql

    def record_start(self, started_at: str) -> int:
        """Record this invocation (it is `current` from now on). `sent_floor` is
        when the oldest of the invocations killed just before this one started, if any:
        one killed loses its last group of writes, so a request it sent may show no
        send; this invocation's first send of a request is then recorded as that time,
        the earliest it can have been (`money/charges` reads it)."""
        killed = self._sql.execute(
            "SELECT started_at FROM invocations WHERE ended_at IS NULL AND id > COALESCE("
            "(SELECT MAX(id) FROM invocations WHERE ended_at IS NOT NULL), 0) ORDER BY id LIMIT 1"
        ).fetchone()
        self.sent_floor = None if killed is None else str(killed[0])
        cursor = self._sql.execute("INSERT INTO invocations (started_at) VALUES (?)", (started_at,))
        self.current = int(cursor.lastrowid or 0)
        return self.current

    def note_api_started(self, started: str | None) -> None:
        """When this invocation started on the API's clock, at the earliest (what the
        charges ledger reads "made before it" against); None: not known."""
        if self.current is not None and started is not None:
            self._sql.execute(
                "UPDATE invocations SET api_started = ? WHERE id = ?", (started, self.current)
            )

    def record_end(
        self,
        invocation: int,
        *,
        ended_at: str,
        exit_code: int,
        calls: int,
        rate_limited: int,
        credits: int,
        balance: int | None,
    ) -> None:
        self._sql.execute(
            "UPDATE invocations SET ended_at = ?, exit_code = ?, calls = ?, rate_limited = ?,"
            " credits = ?, balance = ? WHERE id = ?",
            (ended_at, exit_code, calls, rate_limited, credits, balance, invocation),
        )

    def latest(self) -> int | None:
        """The id of the run's latest invocation (None before the first)."""
        found = self._sql.execute("SELECT MAX(id) FROM invocations").fetchone()
        return None if found[0] is None else int(found[0])

    def last_ended(self) -> bool:
        """Whether the latest invocation ended (wrote its outputs), rather than was killed."""
        row = self._sql.execute(
            "SELECT ended_at FROM invocations ORDER BY id DESC LIMIT 1"
        ).fetchone()
        return row is None or row[0] is not None

    def never_sent(self) -> bool:
        """Whether this DIR certainly never made a call: every invocation ended, having
        counted no call, and no request was ever marked sent. A killed invocation may
        have sent what its last group never recorded, so it counts as having sent."""
        sent = " OR ".join(
            f"EXISTS (SELECT 1 FROM {queue.name} WHERE attempts > 0 OR state != 'pending')"
            for queue in QUEUES
        )
        unsure = self._sql.execute(
            "SELECT EXISTS (SELECT 1 FROM invocations WHERE ended_at IS NULL OR calls IS NULL"
            f" OR calls > 0) OR {sent}"
        ).fetchone()[0]
        return not unsure

    def history(self) -> list[records.Invocation]:
        """Every invocation of the run, oldest first (a killed one has no `ended_at`)."""
        found = self._sql.execute(
            "SELECT started_at, ended_at, exit_code, calls, rate_limited, credits"
            " FROM invocations ORDER BY id"
        ).fetchall()
        return [records.Invocation(*row) for row in found]

    def totals(self) -> dict[str, Any]:
        """Calls and 429s over every invocation of the run (the money is the charges
        ledger's: `store/charges`)."""
        calls, limited = self._sql.execute(
            "SELECT COALESCE(SUM(calls), 0), COALESCE(SUM(rate_limited), 0) FROM invocations"
        ).fetchone()
        invocations = self._sql.execute("SELECT COUNT(*) FROM invocations").fetchone()[0]
        return {"calls": int(calls), "rate_limited": int(limited), "invocations": int(invocations)}

    # --- the hosts that have answered this DIR --------------------------------------------

    def reached_hosts(self, configured: Iterable[str]) -> frozenset[str]:
        """The host names that have answered a call of this DIR (`reached.<host>`), for
        which a name that does not resolve is an outage, not a wrong address. A DIR that
        holds answers but names no host was written before hosts were kept: the hosts it
        is `configured` with now count as reached."""
        rows = self._sql.execute("SELECT name FROM meta WHERE name GLOB 'reached.*'")
        hosts = frozenset(str(name).removeprefix(_REACHED) for (name,) in rows)
        answered = self._sql.execute(  # by the state indexes
            "SELECT "
            + " OR ".join(
                f"EXISTS (SELECT 1 FROM {queue.name}"
                " WHERE state IN ('answered', 'done', 'problem'))"
                for queue in QUEUES
            )
        ).fetchone()[0]
        if hosts or not answered:
            return hosts
        return frozenset(configured)

    def note_reached(self, host: str, at: str) -> None:
        """`host` answered (first at `at`): kept, never forgotten."""
        self._sql.execute(
            "INSERT OR IGNORE INTO meta (name, value) VALUES (?, ?)", (_REACHED + host, at)
        )
