"""The tests' own helper for waiting (tests/support.py): it returns what it waited for,
and when it gives up it says what it was waiting for."""

from __future__ import annotations

import subprocess
import sys
import time

import anyio
import pytest
from support import wait_until, wait_until_async


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
