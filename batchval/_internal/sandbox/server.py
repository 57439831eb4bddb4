"""Serving the sandbox on a real loopback socket: in a thread (tests, the embedded
default of `batchval run`) or in the foreground (`batchval sandbox`)."""

from __future__ import annotations

import ipaddress
import json
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from starlette.types import ASGIApp

from batchval._internal.sandbox.app import API_PREFIX, Sandbox
from batchval._internal.sandbox.config import SandboxConfig
from batchval._internal.sandbox.faults import DroppedError


class _QuietDrops(logging.Filter):
    """The drop-after-commit fault ends a response with an exception on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, DroppedError)


def _uvicorn_config(app: ASGIApp, host: str, port: int, log_level: str) -> uvicorn.Config:
    logging.getLogger("uvicorn.error").addFilter(_QuietDrops())
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        lifespan="off",
        # asyncio's own loop, as before uvloop came in for the client (uvicorn would take
        # it when installed): the fake API's timing and CPU figures stay comparable.
        loop="asyncio",
        # Enough for a wide worker pool; uvicorn's default backlog is already 2048.
        timeout_keep_alive=30,
        # The app dates its answers by the sandbox's clock, which tests move (`clock`).
        date_header=False,
    )


def ready_line(sandbox: Sandbox, host: str, port: int) -> dict[str, Any]:
    """The JSON line printed once the sandbox listens (docs/how-to/sandbox-in-tests.md):
    its URLs and its clients' ids and scopes, never their secrets (a log that keeps the
    line keeps no secret; the built-in ones are documented, a config's are its author's)."""
    root = f"http://{host}:{port}"
    return {
        "base_url": root + API_PREFIX,
        "auth_url": root,
        "clients": [{"client_id": a.client_id, "scope": a.scope} for a in sandbox.config.accounts],
    }


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback address (`127.0.0.1`, `::1`, `localhost`)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve anywhere


class RunningSandbox:
    """A sandbox served in a background thread; `base_url` and `auth_url` point at it."""

    def __init__(self, sandbox: Sandbox, host: str, port: int) -> None:
        self.sandbox, self.host, self.port = sandbox, host, port
        self.auth_url = f"http://{host}:{port}"
        self.base_url = self.auth_url + API_PREFIX


@contextmanager
def serve_app_in_thread(app: ASGIApp, host: str = "127.0.0.1", port: int = 0) -> Iterator[int]:
    """Serve any ASGI app on loopback until the block ends; yields the bound port."""
    server = uvicorn.Server(_uvicorn_config(app, host, port, "warning"))
    thread = threading.Thread(target=server.run, name="batchval-sandbox", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the sandbox did not start")
        time.sleep(0.01)
    try:
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def serve_in_thread(
    sandbox: Sandbox | None = None, host: str = "127.0.0.1", port: int = 0
) -> Iterator[RunningSandbox]:
    """Serve a sandbox on loopback until the block ends; port 0 picks a free port."""
    sandbox = sandbox or Sandbox()
    with serve_app_in_thread(sandbox.app, host, port) as bound:
        yield RunningSandbox(sandbox, host, bound)


def serve_forever(config: SandboxConfig, host: str, port: int) -> None:
    """Serve a sandbox of `config` in the foreground; print the ready line once listening."""
    sandbox = Sandbox(config)
    server = uvicorn.Server(_uvicorn_config(sandbox.app, host, port, "warning"))
    original_startup = server.startup

    async def startup(sockets: Any = None) -> None:
        await original_startup(sockets=sockets)
        if server.started:  # uvicorn sets it once every socket listens
            bound = server.servers[0].sockets[0].getsockname()[1]
            print(json.dumps(ready_line(sandbox, host, bound)), flush=True)

    server.startup = startup  # type: ignore[method-assign]
    server.run()
