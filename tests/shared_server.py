"""One test server for every pytest-xdist worker of a session, as pytest-xdist's docs have a
session fixture shared: the first worker that asks starts it, under a file lock in the
folder the workers' temporary folders share, and writes where it answers to a file there;
the others read it. The worker that started it (the server is its child) stops it by its
pid once no other worker still holds it, so that its CPU counts where the session's does.

A SeaweedFS or an Azurite costs seconds of CPU to start and a little all along: started by
each of six workers, that was six times over.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

# How often the worker that started the server looks again whether the others let it go.
POLL_SECONDS = 0.5


class _Server(Protocol):
    """A test server's record: a dataclass (written to the shared file and read back)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def pid(self) -> int: ...


Server = TypeVar("Server", bound=_Server)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, ended but not waited for, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@contextlib.contextmanager
def shared(
    name: str,
    folder: Path,
    kind: type[Server],
    start: Callable[[], AbstractContextManager[Server]],
) -> Iterator[Server]:
    """The server `name` every worker of the session shares, `kind` as `start` yields it:
    started by this worker (`start`) unless another's is running; `folder` is the one the
    workers share."""
    lock, state = folder / f"{name}.lock", folder / f"{name}.json"
    me = os.getpid()
    with contextlib.ExitStack() as owned:
        with _locked(lock):
            found: dict[str, Any] = json.loads(state.read_text()) if state.exists() else {}
            if found and _alive(found["server"]["pid"]):
                server = kind(**found["server"])
                found["users"].append(me)
            else:
                server = owned.enter_context(start())
                found = {"server": dataclasses.asdict(server), "owner": me, "users": [me]}
            state.write_text(json.dumps(found))
        try:
            yield server
        finally:
            _let_go(lock, state, me)
            if found["owner"] == me:
                # This worker's child: stopped (by `owned`) once no other worker holds it.
                while not _let_go(lock, state, me, wait=True):
                    time.sleep(POLL_SECONDS)


def _let_go(lock: Path, state: Path, me: int, wait: bool = False) -> bool:
    """Take this worker off the server's users; whether none is left (then, for the
    worker that started it, `wait`, the file is removed: the next to ask starts another)."""
    with _locked(lock):
        found = json.loads(state.read_text())
        users = [pid for pid in found["users"] if pid != me and _alive(pid)]
        found["users"] = users
        if wait and not users:
            state.unlink()
            return True
        state.write_text(json.dumps(found))
        return not users
