"""One invocation's hold on its DIR, shared by `run`, `streets` and `verify`, and what
any command says of a defect.

`locked_dir` creates DIR, takes its `RunLock`, sends the log to DIR's log file, and
turns what ends the invocation into one `RunRefusedError` line: another run holding DIR
(`dir_locked`, 75, nothing written) or a defect (`internal_error`, 70, the traceback in
the log only). A `RunRefusedError` raised inside passes through as it is.

`NotedSignals` is the three commands' handling of SIGTERM and SIGINT outside their
sending phase (which has its own watcher): only noted, and acted on at the next safe
point.

`defect_line` serves the commands with no log of their own (`check`, `split`, `export`,
`report`, `status`, ...) and any defect met before a DIR's log is open: the traceback
goes to a file of its owner's only in the user's state folder (`state_folder`), named in
the one line.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import os
import signal
import threading
import traceback
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from batchval._internal import logs, redaction
from batchval._internal.outcome import RunRefusedError, StopReason
from batchval._internal.place.files import file_mode, make_folder
from batchval._internal.place.names import DRY_RUN_NAME, LOG_NAME, WRITTEN_NAMES
from batchval._internal.store import (
    CHECKPOINT_NAME,
    LOCK_NAME,
    STATE,
    DirLockedError,
    LockFileError,
    RunLock,
    refuse_link,
)

log = logs.get_logger()


# The defect (exit 70) the invocation in this context met, as it was raised: the command
# line says it in one line, and the Python API raises it again once the run is kept
# (`batchval._internal.public`). Set where a defect is caught.
last_defect: contextvars.ContextVar[BaseException | None] = contextvars.ContextVar(
    "last_defect", default=None
)


@contextlib.contextmanager
def locked_dir(out: Path, log_name: str, command: str, *, lock: bool = True) -> Iterator[None]:
    """DIR created, locked and logging to `log_name`; `command` names the log events.
    Without `lock` (a dry run, which writes only files of its own, each atomically),
    DIR is not locked: a run in progress there is neither turned away nor disturbed. A
    DIR of someone else's files is refused first (`refuse_foreign_files`)."""
    refuse_foreign_files(out)
    try:
        make_folder(out)
    except OSError as exc:
        raise RunRefusedError(StopReason.REFUSED, f"cannot create {out}: {exc}") from None
    try:
        refuse_link(out / log_name)  # the log is appended to: never through a planted link
        with (
            RunLock(out, file_mode()) if lock else contextlib.nullcontext(),
            logs.to_file(out / log_name, file_mode()),
        ):
            try:
                yield
            except (RunRefusedError, LockFileError):
                raise
            except Exception as exc:  # a defect: say so in one line, the rest in the log
                last_defect.set(exc)
                log.error(f"{command}.internal_error", exc_info=True, file_only=True)
                raise RunRefusedError(
                    StopReason.INTERNAL_ERROR,
                    f"{type(exc).__name__}: {exc} (the traceback is in {out / log_name})",
                ) from None
    except DirLockedError as exc:
        # Nothing is written: the outputs belong to the run that holds DIR.
        raise RunRefusedError(StopReason.DIR_LOCKED, str(exc)) from None
    except LockFileError as exc:
        raise RunRefusedError(StopReason.REFUSED, str(exc)) from None


# What says a DIR is a batchval run's: its checkpoint, its lock, its log (a dry run that
# failed leaves only that), a dry run's price.
RUN_MARKS: tuple[str, ...] = (CHECKPOINT_NAME, LOCK_NAME, LOG_NAME, DRY_RUN_NAME)


def refuse_foreign_files(out: Path) -> None:
    """A `RunRefusedError` (64) when DIR holds no run of batchval's (none of
    `RUN_MARKS`) but a file at a name batchval writes (`names.WRITTEN_NAMES`):
    another program's `summary.json` is never overwritten. Other files (a `.gitkeep`, a
    README) are no matter."""
    if out.is_dir():
        _refuse_foreign(str(out), {path.name for path in out.iterdir()}, "a directory")


def refuse_foreign_objects(place: str, keys: Iterable[str]) -> None:
    """The same rule for a URL prefix, from its keys: a run's memory (`state/...`) or one
    of `RUN_MARKS` makes it a run's; objects at the names batchval writes, without, are
    another program's (64)."""
    found = set(keys)
    if not any(key.startswith(STATE) for key in found):
        _refuse_foreign(place, {key for key in found if "/" not in key}, "a prefix")


def _refuse_foreign(where: str, names: set[str], kind: str) -> None:
    if any(mark in names for mark in RUN_MARKS):
        return
    taken = [name for name in WRITTEN_NAMES if name in names]
    if taken:
        raise RunRefusedError(
            StopReason.REFUSED,
            f"{where} holds no batchval run but holds {', '.join(taken)}, which a run would "
            f"overwrite: give --out {kind} of its own (new or empty). Nothing was sent",
        )


def state_folder(env: Mapping[str, str] | None = None) -> Path:
    """The user's own folder for batchval's state: `$XDG_STATE_HOME/batchval`, else
    `~/.local/state/batchval` (never a temporary folder, which others may read and
    which may be removed before a person looks)."""
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "batchval"


def defect_line(exc: BaseException, folder: Path | None = None) -> str:
    """One line for a defect met outside any DIR's log; its traceback, with the secrets
    the log would hide hidden, goes to a file of its owner's only (mode 0600) in `folder`
    (the user's state folder, `state_folder`), which the line names, so that a person
    can report it."""
    line = f"internal_error: {type(exc).__name__}: {exc}"
    text = "".join(traceback.format_exception(exc))
    try:
        path = _private_file(text, "traceback", folder)
    except OSError as error:
        return redaction.scrub(f"{line} (the traceback could not be written: {error})")
    return redaction.scrub(f"{line} (the traceback is in {path})")


def keep_privately(source: Path, kind: str, folder: Path | None = None) -> Path | None:
    """A copy of `source` (a run's log whose URL cannot take it) in a file of its owner's
    only in the user's state folder (`state_folder`), secrets hidden; its path, or None
    when there is nothing to keep or it cannot be written (said in the log)."""
    try:
        text = source.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None
    try:
        return _private_file(text, kind, folder)
    except OSError as error:
        log.warning("engine.invocation.not_kept", kind=kind, why=str(error))
        return None


def _private_file(text: str, suffix: str, folder: Path | None) -> Path:
    """`text` scrubbed of secrets into `batchval-<UTC time>-<pid>.<suffix>` in `folder`
    (the user's state folder by default), readable by its owner alone (0600)."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = state_folder() if folder is None else folder
    path = folder / f"batchval-{stamp}-{os.getpid()}.{suffix}"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(redaction.scrub(text))
    return path


class StopRequests:
    """The invocations an async caller waits on (`batchval.arun`, `avalue`): a stop it asks
    for (a cancel of its task) is noted on each as a signal would be, on one begun after
    it too. Set in the context the invocations' thread runs (`STOP_REQUESTS`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._noted: list[NotedSignals] = []
        self._asked: str | None = None

    def add(self, signals: NotedSignals) -> None:
        with self._lock:
            self._noted.append(signals)
            if self._asked is not None:
                signals.note(self._asked)

    def stop(self, why: str) -> None:
        with self._lock:
            self._asked = self._asked or why
            for signals in self._noted:
                signals.note(why)


STOP_REQUESTS: contextvars.ContextVar[StopRequests | None] = contextvars.ContextVar(
    "stop_requests", default=None
)


class NotedSignals:
    """A SIGTERM or SIGINT is only noted (`received`), and the command acts on it at its
    next safe point: at once while the input is read (`sending/batches.watched`), before
    sending, and while sending within `sending/sending.NOTED_POLL_SECONDS`. Writing the
    outputs, which is short, always finishes. The previous handlers come back at the end.

    Only the main thread can take signals: in another (Airflow's, Dagster's and Prefect's
    task threads) no handler is set, and the host stops the run its own way. The Python
    API notes an interrupt its waiting thread got (`note`) as the handler would."""

    def __init__(self) -> None:
        self.received: str | None = None
        self._previous: dict[signal.Signals, Any] = {}
        waiting = STOP_REQUESTS.get()  # an async caller that may cancel (`public.arun`)
        if waiting is not None:
            waiting.add(self)

    def note(self, name: str) -> None:
        """A stop asked for by `name` (a signal's), from any thread; the first one counts."""
        if self.received is None:
            self.received = name

    def __enter__(self) -> NotedSignals:
        if threading.current_thread() is not threading.main_thread():
            return self

        def note(signum: int, _frame: object) -> None:
            # Only a note, logged where it is acted on: a handler that logged could wait
            # forever on the log's write lock, held by the very write it interrupted.
            self.note(signal.Signals(signum).name)

        for sig in (signal.SIGTERM, signal.SIGINT):
            self._previous[sig] = signal.getsignal(sig)
            signal.signal(sig, note)
        return self

    def __exit__(self, *_exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
