"""`batchval.arun` and `avalue` (issue 58): a run from async code blocks no event loop, and
a cancel of its task keeps every answer, pays nothing twice and raises CancelledError."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

import polars as pl
import pytest
from support import env_for, portfolio, wait_until

import batchval
from batchval._internal.sandbox.config import Faults
from batchval._internal.sandbox.server import RunningSandbox

ONE_AT_A_TIME = batchval.Settings(concurrency=1)
TWO_AT_A_TIME = batchval.Settings(concurrency=2)


@pytest.fixture
def sandbox_env(served: RunningSandbox, monkeypatch: pytest.MonkeyPatch) -> RunningSandbox:
    for name, value in env_for(served).items():
        monkeypatch.setenv(name, value)
    return served


def test_a_run_awaited_leaves_the_loop_running(sandbox_env: RunningSandbox, tmp_path: Path) -> None:
    """While `arun` values 40 rows (each call 40 ms at the sandbox, one at a time),
    another task ticks every 50 ms all along: the loop is never held for the run."""
    sandbox_env.sandbox.set_faults(Faults(latency_ms=40))
    source = portfolio(tmp_path / "book.csv", 40)
    ticks: list[float] = []

    async def main() -> batchval.Run:
        async def tick() -> None:
            while True:
                ticks.append(time.monotonic())
                await asyncio.sleep(0.05)

        ticker = asyncio.create_task(tick())
        try:
            return await batchval.arun(source, out=tmp_path / "out", settings=ONE_AT_A_TIME)
        finally:
            ticker.cancel()

    started = time.monotonic()
    done = asyncio.run(main())
    took = time.monotonic() - started
    assert done.complete
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    print(f"arun took {took:.2f} s; {len(ticks)} ticks, the longest gap {max(gaps):.3f} s")
    assert took > 1.0  # the run took long enough for the loop to show it was free
    assert len(ticks) >= took / 0.05 / 4  # ticking all along, however loaded the machine
    assert max(gaps) < took / 2


def test_a_cancelled_run_keeps_its_answers_and_pays_nothing_twice(
    sandbox_env: RunningSandbox, tmp_path: Path
) -> None:
    """The awaiting task is cancelled once a few calls are charged: CancelledError, the
    answers kept, and the same call again completes with every request charged once."""
    sandbox_env.sandbox.set_faults(Faults(latency_ms=100))
    ledger = sandbox_env.sandbox.ledger
    frame = pl.read_csv(portfolio(tmp_path / "book.csv", 30))

    async def main() -> None:
        task = asyncio.create_task(
            batchval.avalue(frame, out=tmp_path / "out", settings=TWO_AT_A_TIME)
        )
        await asyncio.to_thread(
            wait_until, lambda: len(ledger.charges) >= 4 or None, 60, "four charges"
        )
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    charged = len(ledger.charges)
    assert 4 <= charged < 30
    stopped = batchval.open_run(tmp_path / "out")
    assert stopped.stop is not None
    assert stopped.stop.reason == "signal"
    assert stopped.summary["requests"]["valued"] >= 4
    done = batchval.value(frame, out=tmp_path / "out", progress=False)
    assert done.complete
    assert ledger.keys_charged_twice() == []
    assert len(ledger.charges) == 30


def test_a_run_cancelled_before_it_began_stops_at_once(
    sandbox_env: RunningSandbox, tmp_path: Path
) -> None:
    """A cancel that comes before the run's thread has begun its invocation is noted on
    it when it does: the call ends with CancelledError at the run's first safe point,
    and the same call again completes, every request charged once."""
    sandbox_env.sandbox.set_faults(Faults(latency_ms=100))
    ledger = sandbox_env.sandbox.ledger
    source = portfolio(tmp_path / "book.csv", 30)

    async def main() -> None:
        task = asyncio.create_task(
            batchval.arun(source, out=tmp_path / "out", settings=TWO_AT_A_TIME)
        )
        await asyncio.sleep(0)  # the task has started its thread, not yet its run
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert len(ledger.charges) < 30
    done = batchval.run(source, out=tmp_path / "out", progress=False)
    assert done.complete
    assert ledger.keys_charged_twice() == []
    assert len(ledger.charges) == 30
