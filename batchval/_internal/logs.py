"""Logging, configured once at the entry point (library code only calls get_logger()).

batchval's events go through batchval's own chain of structlog processors (`get_logger`,
`configure`), never through structlog's global configuration, which stays the host's:
a program that uses batchval keeps its own structlog and logging as it set them (or as
structlog's defaults have them), and batchval never configures either.

Off a terminal (cron, Airflow), or when asked (`--log-json`, `BATCHVAL_LOG_JSON=1`):
one JSON object per line on stderr, for machines. On a terminal: only warnings and
errors, as short human lines, printed through one rich `Console` (`console()`), the one
the progress bar draws on, so that a line goes above the bar and never through it.
Either way the process's redactor (`batchval._internal.redaction`) runs before any output, so that
a token or a secret can never reach a log line, even by mistake.

While a run holds its DIR, every event is also appended, as a JSON line, to
`DIR/batchval.log` (`to_file`). An event logged with `file_only=True` (the traceback of
an internal error) goes to that file and not to the terminal.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import IO, Any

import structlog
from rich.console import Console

from batchval._internal import redaction
from batchval._internal.redaction import Redactor

__all__ = [
    "Redactor",
    "capture",
    "configure",
    "console",
    "get_logger",
    "json_wanted",
    "kept",
    "scrub",
    "to_file",
]


class _Chain:
    """Where batchval's events go now: its processors (the last renders) and the logger
    that takes what they render. The command line's `configure` sets it; until then (the
    Python API's host), `_library`'s."""

    def __init__(self) -> None:
        self.processors: list[Any] = []
        self.out: Any = None
        self.entry_point = False  # set by `configure`: the command line's own


_CHAIN = _Chain()


def _run_chain(logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
    """The one processor every batchval logger has: the chain as it is now."""
    found: Any = event
    for processor in _CHAIN.processors:
        found = processor(logger, method, found)
    return found


class _Out:
    """The logger every batchval logger wraps: what the chain renders goes to its `out`."""

    def msg(self, *args: Any, **kwargs: Any) -> None:
        if _CHAIN.out is not None:
            _CHAIN.out.msg(*args, **kwargs)

    log = debug = info = warn = warning = err = error = critical = exception = fatal = msg


_BOUND = structlog.make_filtering_bound_logger(logging.DEBUG)  # levels: `_at_least`


def get_logger(**initial: Any) -> Any:
    """A logger of batchval's own, as `structlog.get_logger()` gives one: bound values,
    `info`, `warning`, ...; its events go through batchval's chain, never the host's."""
    return structlog.wrap_logger(
        _Out(),
        processors=[_run_chain],
        wrapper_class=_BOUND,
        context_class=dict,
        cache_logger_on_first_use=True,
        **initial,
    )


def _redact(logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
    """The process's redactor as it is now (`batchval._internal.redaction`)."""
    return redaction.active()(logger, method, event)


def _at_least(level: int) -> Any:
    """A processor that drops an event below `level`."""

    def drop_below(_logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
        found = logging.getLevelName(method.upper())
        if isinstance(found, int) and found < level:
            raise structlog.DropEvent
        return event

    return drop_below


@contextlib.contextmanager
def kept() -> Iterator[None]:
    """batchval's logging put back as it was after the block (tests: a command run in
    the process configures it for the rest of the process)."""
    before = (list(_CHAIN.processors), _CHAIN.out, _CHAIN.entry_point)
    try:
        yield
    finally:
        _CHAIN.processors, _CHAIN.out, _CHAIN.entry_point = before


@contextlib.contextmanager
def capture() -> Iterator[list[MutableMapping[str, Any]]]:
    """Every batchval event while the block runs, as a dict with its `log_level` (what
    `structlog.testing.capture_logs` gives for structlog's own configuration)."""
    found: list[MutableMapping[str, Any]] = []

    def keep(_logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
        event["log_level"] = method
        found.append(event)
        raise structlog.DropEvent

    with kept():
        _CHAIN.processors = [structlog.contextvars.merge_contextvars, keep]
        yield found


class _FileSink:
    """Appends every event as a JSON line to the open log file, if one is open."""

    def __init__(self) -> None:
        self.file: IO[str] | None = None

    def __call__(
        self, _logger: Any, _method: str, event: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        if self.file is not None:
            line = {k: v for k, v in event.items() if k != "file_only"}
            self.file.write(json.dumps(line, default=str, ensure_ascii=False) + "\n")
            self.file.flush()
        if event.pop("file_only", False):
            raise structlog.DropEvent
        return event


_SINK = _FileSink()


@contextlib.contextmanager
def to_file(path: Path, mode: int = 0o600) -> Iterator[None]:
    """Also write every event to `path` (appended, JSON lines) while the block runs. A
    new log is made with `mode` (its owner's only by default: a defect's traceback is
    written into it), never through a symlink planted at its name."""
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, mode)
    with os.fdopen(descriptor, "a", encoding="utf-8") as file:
        previous, _SINK.file = _SINK.file, file
        try:
            yield
        finally:
            _SINK.file = previous


_CONSOLE: Console | None = None
_TERMINAL_LEVEL = logging.WARNING  # what a person at a terminal is shown of the log


def console() -> Console:
    """The one console on stderr that log lines and the progress bar share."""
    global _CONSOLE
    if _CONSOLE is None:
        _CONSOLE = Console(stderr=True)
    return _CONSOLE


def json_wanted(env: Mapping[str, str], asked: bool) -> bool:
    """JSON lines on stderr: off a terminal, or when asked (flag or BATCHVAL_LOG_JSON)."""
    flag = env.get("BATCHVAL_LOG_JSON", "").strip().lower() in ("1", "true", "yes")
    return asked or flag or not sys.stderr.isatty()


class _ConsoleLogger:
    """structlog's logger for the terminal: each line printed through `console()`."""

    def msg(self, message: str) -> None:
        console().print(message, markup=False, highlight=False, soft_wrap=True)

    log = debug = info = warn = warning = err = error = critical = exception = msg


def _for_people(
    _logger: Any, method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """Below a warning, the file has it and the terminal does not."""
    if logging.getLevelName(method.upper()) < _TERMINAL_LEVEL:
        raise structlog.DropEvent
    return event


def _human(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> str:
    """`warning: run.embedded_sandbox: No API configured ... (key=value ...)`."""
    level = event.pop("level", "")
    name = event.pop("event", "")
    event.pop("timestamp", None)
    said = event.pop("message", None)
    trace = event.pop("exception", None)
    rest = " ".join(f"{k}={v}" for k, v in event.items())
    line = f"{level}: {name}" + (f": {said}" if said else "") + (f" ({rest})" if rest else "")
    return line + (f"\n{trace}" if trace else "")


def _common(level: int) -> list[Any]:
    """Every chain's first processors: events below `level` dropped, the context, level
    and time added, the process's redactor, then the run's log file (`to_file`)."""
    return [
        _at_least(level),
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
        _redact,
        _SINK,
    ]


def configure(
    *, json_lines: bool, redactor: Redactor | None = None, level: int = logging.INFO
) -> None:
    """Once, at the entry point. `json_lines`: JSON on stderr (see `json_wanted`); else
    the terminal's human lines (warnings and errors; the file still gets every event).
    `redactor`: the process's from now on (`batchval._internal.redaction`), which also scrubs
    files, stops and printed lines; by default the one already active."""
    if redactor is None:
        redactor = redaction.active()
    redaction.use(redactor)
    common = _common(level)
    if json_lines:
        _CHAIN.processors = [*common, structlog.processors.JSONRenderer()]
        _CHAIN.out = structlog.PrintLogger(file=sys.stderr)
    else:
        _CHAIN.processors = [*common, _for_people, _human]
        _CHAIN.out = _ConsoleLogger()
    _CHAIN.entry_point = True


class _StdlibLogger:
    """The standard library's `batchval` logger, in structlog's logger shape."""

    def msg(self, message: str, *, level: int = logging.INFO) -> None:
        logging.getLogger("batchval").log(level, message)

    debug = info = warning = error = critical = exception = msg


def _to_host(_logger: Any, method: str, event: MutableMapping[str, Any]) -> dict[str, Any]:
    """The event as one line, at its own level, for the standard library's `batchval`
    logger, where the host's logging has a handler for it; else no further than the run's
    log: a host that configured nothing is shown nothing."""
    level = logging.getLevelName(method.upper())
    level = level if isinstance(level, int) else logging.INFO
    found = logging.getLogger("batchval")
    if not found.hasHandlers() or not found.isEnabledFor(level):
        raise structlog.DropEvent
    return {"message": _human(_logger, method, event), "level": level}


def _library() -> None:
    """The chain of the Python API's host: the redactor, the run's log file, then the
    standard library's `batchval` logger where the host's logging handles it."""
    _CHAIN.processors = [*_common(logging.INFO), _to_host]
    _CHAIN.out = _StdlibLogger()


def configure_library() -> bool:
    """For the Python API (`batchval._internal.public`), which never configures a host's logging
    (structlog's nor the standard library's): unless the command line configured batchval's
    logging, its events go through the redactor to the run's log file, and to the standard
    library's `batchval` logger only where the host's logging has a handler for it.
    Returns whether it set that chain."""
    if _CHAIN.entry_point:
        return False
    _library()
    return True


_library()


def scrub(text: str) -> str:
    """`text` with every secret the log would hide hidden (the configured redactor's)."""
    return redaction.scrub(text)
