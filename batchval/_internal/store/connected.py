"""What a table's code needs of the DIR's database (`store/database.Database`): its
connection, a transaction, the writes held in a group, and its `meta` values. The tables
every command shares (`store/invocations`, `store/charges`, `store/derived`) are parts the
database is made of, and a product's tables (run's input rows, `store/rows`; every work
queue, `store/queue`) are made on it: each holds the database through this Protocol, the
module below both, so that neither imports the other."""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Protocol

from batchval._internal.store.held import HeldWrites


class Connected(Protocol):
    @property
    def sql(self) -> sqlite3.Connection:
        """The connection, the group's held writes applied first."""
        ...

    @property
    def held(self) -> HeldWrites: ...

    def transaction(self) -> contextlib.AbstractContextManager[None]: ...

    def get(self, name: str) -> str | None: ...

    def set(self, name: str, value: str) -> None: ...

    def unset(self, name: str) -> None: ...
