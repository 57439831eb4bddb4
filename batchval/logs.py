"""Logging, configured once at the entry point (library code only calls get_logger()).

Off a terminal (cron, Airflow), or when asked (`--log-json`, `BATCHVAL_LOG_JSON=1`):
one JSON object per line on stderr, for machines. On a terminal: only warnings and
errors, as short human lines, printed through one rich `Console` (`console()`), the one
the progress bar draws on, so that a line goes above the bar and never through it.
Either way the process's redactor (`batchval.redaction`) runs before any output, so that
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

from batchval import redaction
from batchval.redaction import Redactor

__all__ = ["Redactor", "configure", "console", "json_wanted", "scrub", "to_file"]


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


def configure(
    *, json_lines: bool, redactor: Redactor | None = None, level: int = logging.INFO
) -> None:
    """Once, at the entry point. `json_lines`: JSON on stderr (see `json_wanted`); else
    the terminal's human lines (warnings and errors; the file still gets every event).
    `redactor`: the process's from now on (`batchval.redaction`), which also scrubs
    files, stops and printed lines; by default the one already active."""
    if redactor is None:
        redactor = redaction.active()
    redaction.use(redactor)
    common: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
        redactor,
        _SINK,
    ]
    if json_lines:
        processors = [*common, structlog.processors.JSONRenderer()]
        factory: Any = structlog.PrintLoggerFactory(file=sys.stderr)
    else:
        processors = [*common, _for_people, _human]
        factory = lambda *_args: _ConsoleLogger()  # noqa: E731 - structlog's factory shape
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=factory,
        cache_logger_on_first_use=False,
    )


class _StdlibLogger:
    """structlog's logger shape over the standard library's `batchval` logger: the host's
    logging decides where batchval's events go (with no handler, warnings reach stderr)."""

    def __init__(self) -> None:
        self._logger = logging.getLogger("batchval")

    def msg(self, message: str, *, level: int = logging.INFO) -> None:
        self._logger.log(level, message)

    debug = info = warning = error = critical = exception = msg


def _to_stdlib(_logger: Any, method: str, event: MutableMapping[str, Any]) -> dict[str, Any]:
    """The event as one line, at its own level, for `_StdlibLogger`."""
    level = logging.getLevelName(method.upper())
    return {
        "message": _human(_logger, method, event),
        "level": level if isinstance(level, int) else logging.INFO,
    }


def configure_library() -> bool:
    """For the Python API (`batchval.public`), which never configures a host's logging:
    when nothing has configured structlog yet, batchval's events go through the redactor
    to a DIR's log file and to the standard library's `batchval` logger. A host that
    configured structlog keeps its configuration, and gets batchval's events through it.
    Returns whether it configured structlog."""
    if structlog.is_configured():
        return False
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            redaction.active(),
            _SINK,
            _to_stdlib,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=lambda *_args: _StdlibLogger(),
        cache_logger_on_first_use=False,
    )
    return True


def scrub(text: str) -> str:
    """`text` with every secret the log would hide hidden (the configured redactor's)."""
    return redaction.scrub(text)
