"""Running batchval's async code from synchronous code, wherever that code runs.

`anyio.run` starts an event loop in the calling thread, and fails in a thread that runs one
already: a Jupyter cell, or a caller's `async def` under `asyncio.run`. There the async code
runs on a loop of its own in a worker thread, and the caller's thread waits for it (a
notebook cell blocks while a run works, as it does for any long call). A KeyboardInterrupt
that reaches the waiting thread (Ctrl-C, a kernel's interrupt) is passed on by
`interrupted`, so that the run stops as the command line's SIGINT stops it, and the wait
goes on until it has: nothing is left running behind the caller's back.

The loop is uvloop's where it is installed (every platform but Windows): anyio runs on it as
on asyncio's own, and it sends and reads a socket, wakes tasks and keeps timers in C. Over
10,000 valuations against the sandbox it took the client's CPU from 1.46 to 1.71 ms a
valuation down to 1.25 to 1.36 ms (docs/performance.md, "Where the client's CPU goes").
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar, TypeVarTuple, Unpack

import anyio

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

# anyio's options for every loop batchval starts: uvloop's loop when it is there (anyio
# would look for winloop on Windows, which batchval does not install).
LOOP_OPTIONS = {
    "use_uvloop": sys.platform != "win32" and importlib.util.find_spec("uvloop") is not None
}


def in_running_loop() -> bool:
    """Whether this thread runs an event loop now (an asyncio one: anyio's only backend
    here)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_async(
    fn: Callable[[Unpack[Ts]], Awaitable[T]],
    *args: *Ts,
    interrupted: Callable[[], None] | None = None,
) -> T:
    """`fn(*args)` to completion: in this thread when it runs no event loop, else on a
    loop of its own in a worker thread while this one waits. `interrupted` is called when
    a KeyboardInterrupt reaches the waiting thread (then the wait goes on); without it,
    the interrupt is raised once the worker has ended."""
    if not in_running_loop():
        return anyio.run(fn, *args, backend_options=LOOP_OPTIONS)
    outcome: list[T] = []
    failure: list[BaseException] = []

    def work() -> None:
        try:
            outcome.append(anyio.run(fn, *args, backend_options=LOOP_OPTIONS))
        except BaseException as exc:  # handed to the waiting thread
            failure.append(exc)

    worker = threading.Thread(target=work, name="batchval-loop", daemon=True)
    worker.start()
    interrupt: KeyboardInterrupt | None = None
    while worker.is_alive():
        try:
            worker.join(0.1)
        except KeyboardInterrupt as exc:
            if interrupted is None:
                interrupt = exc
            else:
                interrupted()
    if failure:
        raise failure[0]
    if interrupt is not None:
        raise interrupt
    return outcome[0]
