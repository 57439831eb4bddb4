"""batchval/airflow/_tasklog.py: batchval's output as task-log lines, each event at its own
level with its message and fields, no second timestamp; plain lines as they are."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from support import portfolio, run_in_process

from batchval.airflow import _tasklog as tasklog

WARNING_EVENT = {
    "message": "No API configured: valuing against the embedded sandbox in TEST mode.",
    "event": "run.embedded_sandbox",
    "level": "warning",
    "timestamp": "2026-11-27T21:30:59.509404Z",
}


def test_an_event_is_one_line_at_its_own_level_without_its_timestamp() -> None:
    line = tasklog.read_line(json.dumps(WARNING_EVENT) + "\n")
    assert line.level == logging.WARNING
    assert line.event == "run.embedded_sandbox"
    assert line.text == (
        "run.embedded_sandbox: No API configured: valuing against the embedded sandbox in "
        "TEST mode."
    )
    assert "2026-11-27" not in line.text
    assert not line.is_stop


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        ("debug", logging.DEBUG),
        ("info", logging.INFO),
        ("warning", logging.WARNING),
        ("error", logging.ERROR),
        ("critical", logging.CRITICAL),
        ("nonsense", logging.INFO),
    ],
)
def test_each_level_is_airflow_s_own(level: str, expected: int) -> None:
    line = tasklog.read_line(json.dumps({"event": "x", "level": level}))
    assert line.level == expected


def test_an_event_s_fields_follow_its_name_and_long_values_are_cut() -> None:
    event = {
        "job": "valuation",
        "calls": 948,
        "left": {"a": 1},
        "key": "k" * 300,
        "event": "run.progress",
        "level": "info",
        "timestamp": "2026-11-27T21:31:10.150409Z",
    }
    text = tasklog.read_line(json.dumps(event)).text
    assert text.startswith('run.progress (job=valuation calls=948 left={"a": 1} key=kkk')
    assert text.endswith("...)")
    assert len(text) < 220


@pytest.mark.parametrize(
    "raw",
    [
        "run day-2026-11-27 (test mode): complete",
        "rows: 20 total, 20 valued, 0 problems, 0 pending",
        "{not json",
        '{"no_event": 1}',
        "[1, 2]",
    ],
)
def test_a_line_that_is_no_event_is_logged_as_it_is_at_info(raw: str) -> None:
    line = tasklog.read_line(raw + "\n")
    assert (line.level, line.text, line.event) == (logging.INFO, raw, None)


def test_batchval_s_stop_line_is_known_as_one() -> None:
    assert tasklog.read_line("batchval: daily_limit: the daily limit is reached\n").is_stop
    assert not tasklog.read_line("run day-1 (live mode): incomplete").is_stop


def test_every_line_of_a_run_off_a_terminal_reads_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """batchval off a terminal (as the operator runs it) against the embedded sandbox: every
    JSON line becomes an event line without a timestamp, its warning stays a warning, and
    the summary's lines stay as they are."""
    source = portfolio(tmp_path / "book.csv", 3)
    run = ("run", str(source), "--out", str(tmp_path / "out"))
    code, out, err = run_in_process(*run, env={}, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0, err
    lines = [tasklog.read_line(raw) for raw in (out + err).splitlines()]
    assert sum(raw.startswith("{") for raw in err.splitlines()) > 1  # JSON lines, read
    assert all(not line.text.startswith("{") and "timestamp" not in line.text for line in lines)
    warned = [line for line in lines if line.event == "run.embedded_sandbox"]
    assert [line.level for line in warned] == [logging.WARNING]
    assert any(line.text.startswith("run ") and line.text.endswith("complete") for line in lines)
