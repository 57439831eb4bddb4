"""batchval from plain Python, as a data scientist's script would use it: only the public
modules (`batchval`, `batchval.exceptions`, `batchval.testing`), against a sandbox of its
own (fake figures, never charged). tests/public/test_python_tour.py runs it, and the notebook
beside it (tour.ipynb), as a user would.

    python examples/python/tour.py
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import io
import itertools
import multiprocessing
import os
import tempfile
import threading
import time
from pathlib import Path

import polars as pl
import structlog

import batchval
from batchval.exceptions import FolderInUse, RunError
from batchval.testing import Sandbox

POSTCODES = ["SW1A 2AA", "M1 1AE", "LS6 2AB", "CF10 1AA", "BS1 4DJ", "NE1 7RU"]


def homes(rows: int, start: int = 0) -> pl.DataFrame:
    numbers = range(start, start + rows)
    return pl.DataFrame(
        {
            "loan_id": [f"L-{n:05d}" for n in numbers],
            "postcode": [POSTCODES[n % len(POSTCODES)] for n in numbers],
            "property_type": ["terraced"] * rows,
            "bedrooms": [1 + n % 5 for n in numbers],
            "reference": [f"CASE-{n:05d}" for n in numbers],  # each home its own request
        }
    )


def charged(sandbox: Sandbox) -> int:
    return int(sandbox.control("ledger")["credits_charged"])


def a_frame_in_and_out(work: Path) -> None:
    book = homes(12)
    run = batchval.value(book, out=work / "frame", progress=False)
    valued = book.join(run.results().select("loan_id", "estimate"), on="loan_id", how="left")
    assert run.complete
    assert valued["estimate"].null_count() == 0
    print(f"a frame in and out: {valued.height} homes valued")


def one_property_without_a_folder() -> None:
    with batchval.value(homes(1), progress=False) as run:  # a scratch folder of its own
        estimate = run.results()["estimate"][0]
        scratch = run.place
    assert not Path(scratch).exists()  # removed with the run
    print(f"one property, no folder: {estimate}")


def a_typed_error_from_a_process_pool(work: Path) -> None:
    unusable = pl.DataFrame({"bedrooms": [2, 3]})  # no postcode: the input is unusable
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as pool:
        future = pool.submit(
            functools.partial(batchval.value, unusable, out=str(work / "pool"), progress=False)
        )
        try:
            future.result()
        except RunError as error:
            if error.exit_code != 65:
                raise
            print(f"a process pool's typed error: {type(error).__name__} {error.exit_code}")
            return
    raise AssertionError("the pool's call did not raise a RunError")


def two_calls_on_one_folder(sandbox: Sandbox, work: Path) -> None:
    sandbox.control("faults", {"latency_ms": 40})
    folder = work / "shared"
    first = threading.Thread(
        target=batchval.value,
        args=(homes(40),),
        kwargs={"out": folder, "progress": False, "settings": batchval.Settings(concurrency=1)},
    )
    first.start()
    try:
        deadline = time.monotonic() + 20
        while not (folder / "checkpoint.sqlite").exists() and time.monotonic() < deadline:
            time.sleep(0.02)  # until the first call holds the folder
        try:
            batchval.value(homes(40), out=folder, progress=False)
        except FolderInUse as error:
            print(f"two calls on one folder: the second raised {type(error).__name__}")
        else:
            raise AssertionError("the second call on a held folder did not raise FolderInUse")
    finally:
        first.join()
        sandbox.control("faults", {"latency_ms": 0})


async def awaited_beside_a_ticker(sandbox: Sandbox, work: Path) -> None:
    sandbox.control("faults", {"latency_ms": 20})
    ticks: list[float] = []

    async def tick() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.05)

    ticker = asyncio.create_task(tick())
    try:
        run = await batchval.arun(
            _written(homes(40), work / "awaited.csv"),
            out=work / "awaited",
            settings=batchval.Settings(concurrency=1),
        )
    finally:
        ticker.cancel()
        sandbox.control("faults", {"latency_ms": 0})
    gap = max(b - a for a, b in itertools.pairwise(ticks))
    assert run.complete
    assert gap < 0.5, gap  # the loop was never held for the run
    print(f"awaited in a running loop: {len(ticks)} ticks, the longest gap {gap:.2f} s")


async def cancelled_then_resumed(sandbox: Sandbox, work: Path) -> None:
    sandbox.control("faults", {"latency_ms": 100})
    source, out = _written(homes(60, start=100), work / "cancelled.csv"), work / "cancelled"
    start = charged(sandbox)
    task = asyncio.create_task(
        batchval.arun(source, out=out, settings=batchval.Settings(concurrency=2))
    )
    # Until ten are valued (10 credits each): the ledger has no event to wait on.
    while charged(sandbox) < start + 10 * 10 and not task.done():  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        print("cancelled: every answer so far kept")
    else:
        raise AssertionError("the cancelled call did not raise CancelledError")
    before = charged(sandbox)
    sandbox.control("faults", {"latency_ms": 0})
    again = await batchval.arun(source, out=out)
    paid = charged(sandbox) - before
    spent = again.summary["credits_charged"]["this_invocation"]
    assert again.complete
    assert 0 < paid == spent, (paid, spent)
    assert before + paid == start + 10 * 60, (start, before, paid)  # each home paid once
    print(f"then resumed: {paid // 10} more calls paid, none twice")


def _written(frame: pl.DataFrame, path: Path) -> Path:
    frame.write_csv(path)
    return path


def my_own_logs_as_i_configured_them() -> None:
    mine = io.StringIO()
    structlog.configure(
        processors=[structlog.processors.KeyValueRenderer(key_order=["event"])],
        logger_factory=structlog.PrintLoggerFactory(mine),
    )
    batchval.value(homes(2), progress=False).close()
    structlog.get_logger().info("my_event", rows=2)
    assert mine.getvalue() == "event='my_event' rows=2\n", mine.getvalue()
    print("my own structlog events: still mine")


def main() -> None:
    with Sandbox() as sandbox, tempfile.TemporaryDirectory() as folder:
        os.environ.update(sandbox.env())
        work = Path(folder)
        a_frame_in_and_out(work)
        one_property_without_a_folder()
        a_typed_error_from_a_process_pool(work)
        two_calls_on_one_folder(sandbox, work)
        asyncio.run(awaited_beside_a_ticker(sandbox, work))
        asyncio.run(cancelled_then_resumed(sandbox, work))
        my_own_logs_as_i_configured_them()
        assert sandbox.control("ledger")["keys_charged_twice"] == []
        print("nothing paid twice")


if __name__ == "__main__":
    main()
