"""The log of each invocation of a run kept at a URL, kept there as an object of its own:
`logs/<start>-<epoch>.log` (the invocation's start in UTC, `20261206T014500Z`, and its
lease's epoch: unique, and in order by name). The invocation's local `batchval.log` is
uploaded whole every `EVERY_SECONDS` while the invocation goes on, and once more at its
end: a later invocation never writes over an earlier one's events, and an invocation
killed with `kill -9` loses at most its last few seconds. An upload that fails is tried
again at the next tick; it never stops the run (the run's memory is elsewhere).
"""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path
from typing import Protocol

from batchval._internal import logs
from batchval._internal.store.objects import ObjectStoreError

log = logs.get_logger()

PREFIX = "logs/"
EVERY_SECONDS = 5.0


class _Puts(Protocol):
    def put(self, key: str, data: bytes) -> object: ...


def log_key(started: dt.datetime, epoch: int) -> str:
    """The object an invocation's log is kept in."""
    return f"{PREFIX}{started.astimezone(dt.UTC):%Y%m%dT%H%M%SZ}-{epoch:06d}.log"


class ShippedLog:
    """One invocation's log file, uploaded to `key` every `every` seconds and once more
    as the `with` block ends."""

    def __init__(self, objects: _Puts, path: Path, key: str, every: float = EVERY_SECONDS):
        self._objects, self._path, self.key, self._every = objects, path, key, every
        self._shipped = -1  # the size last uploaded
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="batchval-log", daemon=True)

    def __enter__(self) -> ShippedLog:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._done.set()
        self._thread.join()
        self.ship()

    def _run(self) -> None:
        while not self._done.wait(self._every):
            self.ship()

    def ship(self) -> bool:
        """Upload the log when it has grown; whether it is at the URL as it is now."""
        try:
            data = self._path.read_bytes()
        except OSError:  # not made yet (the command opens it), or gone with its folder
            return False
        if len(data) == self._shipped:
            return True
        try:
            self._objects.put(self.key, data)
        except (ObjectStoreError, OSError) as exc:  # tried again at the next tick
            log.debug("store.log.not_shipped", key=self.key, why=type(exc).__name__)
            return False
        self._shipped = len(data)
        return True
