"""`RunLock` keeps two processes out of one DIR: an advisory `flock` on
`DIR/.batchval.lock`, released by the kernel however the holder dies. The file holds the
holder's pid while it runs (`batchval status` reads it), and nothing once it is done."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from batchval._internal.outcome import BatchvalError

LOCK_NAME = ".batchval.lock"


class DirLockedError(BatchvalError):
    """Another batchval process holds the output directory."""


class LockFileError(BatchvalError):
    """A name batchval writes in DIR (the lock, the checkpoint and its WAL) holds a
    symlink, which is never followed: a person removes it."""


def refuse_link(path: Path) -> None:
    """LockFileError when `path` is a symlink: nothing is ever written through one planted
    at a name batchval writes (it would change the file it points to, outside DIR)."""
    if path.is_symlink():
        raise LockFileError(
            f"{path} is a symlink, not batchval's file: it is never followed; remove it"
        )


class RunLock:
    """An exclusive, non-blocking lock on an output directory."""

    def __init__(self, directory: Path, mode: int = 0o600) -> None:
        self._path = directory / LOCK_NAME
        self._mode = mode  # a new lock file's (it holds nothing)
        self._fd: int | None = None

    def __enter__(self) -> RunLock:
        try:  # never through a symlink planted at the name (it would empty its target)
            fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, self._mode)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            refuse_link(self._path)
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DirLockedError(f"another batchval run holds {self._path.parent}") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)  # no pid left behind for `status` to mistake
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
