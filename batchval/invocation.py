"""One invocation's hold on its DIR, shared by `run`, `streets` and `verify`.

`locked_dir` creates DIR, takes its `RunLock`, sends the log to DIR's log file, and
turns what ends the invocation into one `RunRefusedError` line: another run holding DIR
(`dir_locked`, 75, nothing written) or a defect (`internal_error`, 70, the traceback in
the log only). A `RunRefusedError` raised inside passes through as it is.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import structlog

from batchval import logs
from batchval.outcome import RunRefusedError, StopReason
from batchval.store.lock import DirLockedError, RunLock

log = structlog.get_logger()


@contextlib.contextmanager
def locked_dir(out: Path, log_name: str, command: str) -> Iterator[None]:
    """DIR created, locked and logging to `log_name`; `command` names the log events."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunRefusedError(StopReason.REFUSED, f"cannot create {out}: {exc}") from None
    try:
        with RunLock(out), logs.to_file(out / log_name):
            try:
                yield
            except RunRefusedError:
                raise
            except Exception as exc:  # a defect: say so in one line, the rest in the log
                log.error(f"{command}.internal_error", exc_info=True, file_only=True)
                raise RunRefusedError(
                    StopReason.INTERNAL_ERROR,
                    f"{type(exc).__name__}: {exc} (the traceback is in {out / log_name})",
                ) from None
    except DirLockedError as exc:
        # Nothing is written: the outputs belong to the run that holds DIR.
        raise RunRefusedError(StopReason.DIR_LOCKED, str(exc)) from None
