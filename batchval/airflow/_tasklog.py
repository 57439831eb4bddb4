"""batchval's output as task-log lines a person reads, without Airflow.

Off a terminal batchval writes one JSON object a line on stderr for each log event
(docs/how-to/metrics-and-logs.md), beside its plain summary on stdout and its one-line
stop on stderr. Airflow's task log already stamps every line with a time and a level, so
an event relayed as it came was a raw JSON string, at `info` whatever its level, with a
second timestamp. `read_line` turns each line into what the operator logs: an event at
its own level, as `event: message (key=value ...)` with no timestamp; any other line
as it is, at `info`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

# Fields of an event the task log says otherwise (its own time and level) or at its head.
_NOT_REPEATED = ("timestamp", "level", "event", "message")
# The longest value shown of one field: a key or a path, not a whole answer.
_LONGEST_VALUE = 120
# Airflow's task log has no `critical` or `exception` of its own to show otherwise.
_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "exception": logging.ERROR,
    "critical": logging.CRITICAL,
}
# How batchval's one-line stop on stderr starts (`batchval: <reason>: <detail>`).
STOP_PREFIX = "batchval: "


@dataclasses.dataclass(frozen=True, slots=True)
class TaskLogLine:
    """One line of batchval's output as the task log shows it."""

    level: int  # logging's level: the event's own, INFO for a plain line
    text: str
    event: str | None = None  # the event's name (`run.progress`); None for a plain line

    @property
    def is_stop(self) -> bool:
        """batchval's one-line stop (`batchval: daily_limit: ...`), said on stderr."""
        return self.event is None and self.text.startswith(STOP_PREFIX)


def read_line(raw: str) -> TaskLogLine:
    """A line of batchval's output as the task log shows it."""
    line = raw.rstrip("\r\n")
    event = _event(line)
    if event is None:
        return TaskLogLine(logging.INFO, line)
    name = str(event.get("event", ""))
    level = _LEVELS.get(str(event.get("level", "info")).lower(), logging.INFO)
    said = event.get("message")
    fields = " ".join(
        f"{key}={_short(value)}" for key, value in event.items() if key not in _NOT_REPEATED
    )
    text = name + (f": {said}" if said else "") + (f" ({fields})" if fields else "")
    return TaskLogLine(level, text, name)


def _event(line: str) -> dict[str, Any] | None:
    """The line's JSON log event, or None when it is not one (a summary line, a stop)."""
    if not line.startswith("{"):
        return None
    try:
        found = json.loads(line)
    except ValueError:
        return None
    return found if isinstance(found, dict) and "event" in found else None


def _short(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= _LONGEST_VALUE else text[: _LONGEST_VALUE - 3] + "..."
