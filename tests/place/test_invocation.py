"""What a command says of a defect met outside any DIR's log, and its signals outside
the sending phase (place/invocation.py); `locked_dir` itself is exercised by every
run, streets and verify test."""

from __future__ import annotations

import os
import re
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from batchval._internal import cli, logs
from batchval._internal.logs import Redactor
from batchval._internal.place.invocation import NotedSignals, defect_line, state_folder

SECRET = "s3cr3t-value-never-shown"


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    """These tests configure logging as a command does (on the test's captured stderr,
    closed after it): other tests' logging is theirs."""
    with logs.kept():
        yield


def _fail() -> None:
    raise RuntimeError(f"boom with {SECRET} and Authorization: Bearer abc.def")


def test_defect_line_names_a_file_holding_the_scrubbed_traceback(tmp_path: Path) -> None:
    """The line names the defect and a file; the file has the traceback, with the secret
    the log would hide and any bearer token hidden."""
    logs.configure(json_lines=True, redactor=Redactor([SECRET]))
    try:
        _fail()
    except RuntimeError as exc:
        line = defect_line(exc, tmp_path)
    assert line.startswith("internal_error: RuntimeError: boom with [redacted]")
    found = re.search(r"\(the traceback is in (.+)\)$", line)
    assert found is not None, line
    text = Path(found.group(1)).read_text(encoding="utf-8")
    assert "Traceback (most recent call last)" in text
    assert "_fail" in text
    assert SECRET not in text + line
    assert "abc.def" not in text + line


def test_defect_line_still_says_one_line_when_the_file_cannot_be_written(
    tmp_path: Path,
) -> None:
    """A folder that cannot take the file: the line says so rather than failing."""
    logs.configure(json_lines=True, redactor=Redactor())
    (tmp_path / "a-file").write_text("not a folder", encoding="utf-8")
    line = defect_line(ValueError("odd"), tmp_path / "a-file" / "folder")
    assert line.startswith("internal_error: ValueError: odd (the traceback could not be written")


def test_a_defect_in_split_exits_70_with_one_line_and_the_traceback_in_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`split` meeting an unexpected error: exit 70, one `internal_error` line on stderr
    naming the file with the traceback, no traceback on the terminal."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr("batchval._internal.admin.split_input", lambda *_a, **_k: _fail())
    source = tmp_path / "book.csv"
    source.write_text("postcode,property_type\nSW1A 1AA,flat\n", encoding="utf-8")
    with pytest.raises(SystemExit) as ended:
        cli.main(["split", str(source), "--shards", "2", "--out", str(tmp_path / "shards")])
    assert ended.value.code == 70
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.startswith("batchval: ")]
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("batchval: internal_error: RuntimeError: boom")
    assert "Traceback" not in captured.err + captured.out
    written = list((tmp_path / "state" / "batchval").glob("batchval-*.traceback"))
    assert len(written) == 1
    assert str(written[0]) in lines[0]
    assert "in _fail" in written[0].read_text(encoding="utf-8")
    assert stat.S_IMODE(written[0].stat().st_mode) == 0o600


def test_a_defect_of_status_at_a_url_leaves_its_traceback_in_the_state_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A defect of `status` (whose place at a URL is a temporary copy, removed at the
    end): the traceback outlives it, in the user's state folder, its owner's only."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr("batchval._internal.admin.read_status", lambda *_a, **_k: _fail())
    (tmp_path / "run").mkdir()
    with pytest.raises(SystemExit) as ended:
        cli.main(["status", str(tmp_path / "run")])
    assert ended.value.code == 70
    err = capsys.readouterr().err
    written = list((tmp_path / "state" / "batchval").glob("batchval-*.traceback"))
    assert len(written) == 1
    assert f"(the traceback is in {written[0]})" in err
    assert stat.S_IMODE(written[0].stat().st_mode) == 0o600
    assert stat.S_IMODE(written[0].parent.stat().st_mode) == 0o700


def test_the_state_folder_follows_xdg() -> None:
    """$XDG_STATE_HOME/batchval when set, else ~/.local/state/batchval."""
    assert state_folder({"XDG_STATE_HOME": "/s"}) == Path("/s/batchval")
    assert state_folder({}) == Path.home() / ".local" / "state" / "batchval"


def test_a_signal_outside_sending_is_only_noted_then_the_handler_comes_back() -> None:
    """The handler notes the signal and logs nothing (a handler that logged could
    deadlock on the log's write lock when the signal lands in the middle of a log line:
    a SIGTERM during ingest once hung a run that way); the previous handler is back at
    the end."""

    def before(_signum: int, _frame: object) -> None:
        raise AssertionError("the previous handler ran inside")

    previous = signal.signal(signal.SIGTERM, before)
    try:
        with logs.capture() as logged, NotedSignals() as noted:
            os.kill(os.getpid(), signal.SIGTERM)
            assert noted.received == "SIGTERM"
        assert logged == []
        assert signal.getsignal(signal.SIGTERM) is before
    finally:
        signal.signal(signal.SIGTERM, previous)
