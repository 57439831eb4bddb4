"""Logging, configured once at the entry point (library code only calls get_logger()).

On a terminal: short, coloured lines on stderr. Elsewhere (cron, Airflow): one JSON
object per line on stderr, for machines. Either way a redaction processor runs before
any output, so that a token or a secret can never reach a log line, even by mistake.

While a run holds its DIR, every event is also appended, as a JSON line, to
`DIR/batchval.log` (`to_file`). An event logged with `file_only=True` (the traceback of
an internal error) goes to that file and not to the terminal.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
from collections.abc import Iterable, Iterator, MutableMapping
from pathlib import Path
from typing import IO, Any

import structlog

_SENSITIVE_KEYS = re.compile(r"secret|token|authorization|password", re.IGNORECASE)
_BEARER = re.compile(r"(?i)bearer\s+[A-Za-z0-9._~+/=-]+")


class Redactor:
    """Replaces known secrets anywhere in an event, and values of sensitive-looking keys."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets = [s for s in secrets if s]

    def add(self, secret: str) -> None:
        if secret:
            self._secrets.append(secret)

    def scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "[redacted]")
        return _BEARER.sub("Bearer [redacted]", text)

    def __call__(
        self, _logger: Any, _method: str, event: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        for key, value in list(event.items()):
            if _SENSITIVE_KEYS.search(key) and key != "event":
                event[key] = "[redacted]"
            elif isinstance(value, str):
                event[key] = self.scrub(value)
            elif not isinstance(value, int | float | bool | type(None)):
                event[key] = self.scrub(str(value))
        return event


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
def to_file(path: Path) -> Iterator[None]:
    """Also write every event to `path` (appended, JSON lines) while the block runs."""
    with path.open("a", encoding="utf-8") as file:
        previous, _SINK.file = _SINK.file, file
        try:
            yield
        finally:
            _SINK.file = previous


def configure(*, json_lines: bool, redactor: Redactor, level: int = logging.INFO) -> None:
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if json_lines
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            redactor,
            _SINK,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
