"""The tests' own helpers (tests/support.py): waiting, which returns what it waited for
and, when it gives up, says what it was waiting for; and the command line in this process,
which exits and prints as its process does and leaves this process as it found it."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import anyio
import pytest
import structlog
from support import InProcess, _Said, run_cli, wait_until, wait_until_async

from batchval._internal import redaction


def test_wait_until_returns_what_the_condition_gave() -> None:
    """Asked until it holds; the value that held is handed back."""
    answers = iter([None, [], ["a 429"]])
    assert wait_until(lambda: next(answers), 5, "the first 429", every=0) == ["a 429"]


def test_wait_until_names_what_never_came() -> None:
    """At the timeout: a failure that names what was waited for, and the detail given."""
    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"waited 0\.05 s for the first 429, in vain: 3"):
        wait_until(lambda: False, 0.05, "the first 429", detail=lambda: 3)
    assert time.monotonic() - started < 2


def test_wait_until_stops_when_the_process_waited_on_ends() -> None:
    """A run that ends before the condition holds fails the wait at once, with its exit
    code, rather than at the timeout."""
    with subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"]) as ended:
        ended.wait(timeout=30)
        started = time.monotonic()
        with pytest.raises(AssertionError, match=r"ended \(exit 3\) before five charges"):
            wait_until(lambda: False, 60, "five charges", process=ended)
    assert time.monotonic() - started < 2


@pytest.mark.anyio
async def test_wait_until_async_waits_on_the_loop() -> None:
    """The async twin lets the loop run meanwhile, and fails as the other does."""
    done: list[bool] = []

    async def later() -> None:
        await anyio.sleep(0.02)
        done.append(True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(later)
        assert await wait_until_async(lambda: done, 5, "the other task") == [True]
    with pytest.raises(AssertionError, match=r"waited 0\.01 s for nothing, in vain"):
        await wait_until_async(lambda: None, 0.01, "nothing")


# --- the command line in this process ---------------------------------------------------


def test_in_process_the_command_exits_and_prints_as_its_process_does(tmp_path: Path) -> None:
    """The same refusal from `batchval status` as a process and in this process: the same
    exit code, stdout and stderr, to the character."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATCHVAL_")}
    args = ("status", str(tmp_path / "no-run-here"))
    process = run_cli(*args, env=env)
    here = InProcess()(*args, env=env)
    assert process.returncode == 64, process.stderr
    assert (here.returncode, here.stdout, here.stderr) == (
        process.returncode,
        process.stdout,
        process.stderr,
    )


def test_what_the_test_s_own_threads_print_is_not_the_invocation_s() -> None:
    """A thread that ran before the invocation (the test's sandbox, a proxy) prints to
    the test's stream, not into the invocation's stderr; the invocation's own threads,
    the one that runs it and those it starts, print into it."""
    before, go = io.StringIO(), threading.Event()
    streams: list[_Said] = []

    def serve() -> None:
        go.wait()
        streams[0].write("Traceback (the proxy's)\n")

    server = threading.Thread(target=serve)
    server.start()
    said = _Said(before, frozenset({server}))
    streams.append(said)
    worker = threading.Thread(target=lambda: said.write("from a worker it started\n"))
    worker.start()
    worker.join()
    said.write("batchval: refused\n")
    go.set()
    server.join()
    assert said.said() == "from a worker it started\nbatchval: refused\n"
    assert before.getvalue() == "Traceback (the proxy's)\n"


def test_what_the_command_changes_in_this_process_is_undone() -> None:
    """After an invocation the environment, structlog's configuration (unconfigured, if it
    was), the active redactor and tempfile's folder are the test's again."""
    environ = dict(os.environ)
    configured, redactor = structlog.is_configured(), redaction.active()
    temporary = tempfile.gettempdir()
    env = {**environ, "BATCHVAL_LOG_JSON": "1", "BATCHVAL_CLIENT_SECRET": "s3cret-value"}
    ran = InProcess()("--version", env=env)
    assert ran.returncode == 0, ran.stderr
    assert "batchval" in ran.stdout
    assert dict(os.environ) == environ
    assert structlog.is_configured() is configured
    assert redaction.active() is redactor
    assert tempfile.gettempdir() == temporary
