"""Logging, configured once at the entry point (library code only calls get_logger()).

On a terminal: short, coloured lines on stderr. Elsewhere (cron, Airflow): one JSON
object per line on stderr, for machines. Either way a redaction processor runs last
but one, so that a token or a secret can never reach a log line, even by mistake.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterable, MutableMapping
from typing import Any

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
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
