"""The files `export` and `report` wrote beside the run's outputs (results.csv,
results.xlsx, report.html, ...), listed in the run's memory so that the invocation that
changes the outputs they were made from removes exactly those, and nothing a person put
there (`place/derived` decides; this is its table). The database holds one `DerivedFiles`
(`Database.derived`).

The table (`derived_files`) came without a new schema version: a batchval that does not
know it leaves it alone and only leaves the files it lists in place, as it always did.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from batchval._internal.outcome import BatchvalError
from batchval._internal.store.connected import Connected


@dataclasses.dataclass(frozen=True, slots=True)
class DerivedFile:
    """One file a command wrote from the run's outputs, as it was written."""

    name: str  # in DIR (or at its URL): `results.csv`, `report.html`
    command: str  # export or report
    sha256: str  # of its bytes: a file of that name with other bytes is a person's now
    # The outputs it was made from (`place/derived.WATCHED`), each its data's digest
    # (None: DIR had none): it is stale once one of them is not what it was.
    made_from: Mapping[str, str | None]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "command": self.command,
            "sha256": self.sha256,
            "made_from": dict(self.made_from),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DerivedFile:
        return cls(str(data["name"]), str(data["command"]), str(data["sha256"]), data["made_from"])


class DerivedFiles:
    """The `derived_files` table, on the DIR's database."""

    def __init__(self, database: Connected) -> None:
        self._database = database

    def record(self, files: Iterable[DerivedFile]) -> None:
        """List `files` (one of the same name is replaced: the newer write is the file)."""
        self._database.sql.executemany(
            "INSERT INTO derived_files (name, command, sha256, made_from) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (name) DO UPDATE SET command = excluded.command,"
            " sha256 = excluded.sha256, made_from = excluded.made_from",
            [(f.name, f.command, f.sha256, json.dumps(dict(f.made_from))) for f in files],
        )

    def listed(self) -> list[DerivedFile]:
        """Every listed file, by name."""
        found = self._database.sql.execute(
            "SELECT name, command, sha256, made_from FROM derived_files ORDER BY name"
        ).fetchall()
        return [DerivedFile(n, c, s, json.loads(m)) for n, c, s, m in found]

    def forget(self, names: Iterable[str]) -> None:
        self._database.sql.executemany(
            "DELETE FROM derived_files WHERE name = ?", [(n,) for n in names]
        )


class ListNotKeptError(BatchvalError):
    """The list could not be written now (the memory locked past its wait, or damaged)."""


@contextlib.contextmanager
def listing() -> Iterator[None]:
    """Around opening the memory and listing files: SQLite's failure as `ListNotKeptError`,
    so that the command that wrote the files can say so and end well."""
    try:
        yield
    except sqlite3.Error as exc:
        raise ListNotKeptError(str(exc)) from exc
