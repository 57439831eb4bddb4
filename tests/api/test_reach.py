"""A DIR's reach (the hosts that have answered it) and what a host name that does not
resolve means then: `run` in-process, the resolver replaced (`socket.getaddrinfo`, which
asyncio and anyio call), since this machine's own has no temporary failures to give and
no name that resolves once and then not. On asyncio's own loop: uvloop's (the loop batchval
runs on where it is installed, `sending/loops`) resolves in libuv, past any Python seam; its
resolver errors are the same `socket.gaierror` codes, and `tests/cli/test_hostile.py` meets
them with the real resolver.

`tests/cli/test_hostile.py` runs the same rules as a subprocess with the real resolver:
a `.invalid` name never reached (64), or recorded as reached (75).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import LIVE, portfolio

from batchval._internal.outcome import ExitCode, StopReason
from batchval._internal.place.place import Place
from batchval._internal.runs.summary import RunSummary
from batchval._internal.sandbox.app import API_PREFIX
from batchval._internal.sandbox.server import RunningSandbox
from batchval._internal.sending import loops
from batchval._internal.settings import load_settings
from batchval._internal.store.checkpoint import Checkpoint
from batchval._internal.store.database import Database
from batchval._internal.valuations.runner import Runner, RunRequest

# End to end: the CLI as a process against the sandbox (`make test-fast` leaves it out).
pytestmark = pytest.mark.slow

# The API's host name, as the replaced resolver knows it (or not).
HOST = "api.partner.test"


class Resolver:
    """`socket.getaddrinfo` for HOST as a test says: the loopback address, or an error of
    the resolver's; every other name as the real resolver says."""

    def __init__(self, real: Callable[..., Any]) -> None:
        self._real = real
        self.failure: int | None = None  # an EAI_* code, or None: HOST is 127.0.0.1
        self.asked = 0

    def __call__(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in (HOST, HOST.encode()):  # anyio asks in IDNA bytes
            return self._real(host, port, *args, **kwargs)
        self.asked += 1
        if self.failure is not None:
            raise socket.gaierror(self.failure, f"replaced resolver: {self.failure}")
        return self._real("127.0.0.1", port, *args, **kwargs)


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Resolver:
    replaced = Resolver(socket.getaddrinfo)
    monkeypatch.setattr(socket, "getaddrinfo", replaced)
    monkeypatch.setattr(loops, "LOOP_OPTIONS", {"use_uvloop": False})
    return replaced


def run(served: RunningSandbox, tmp_path: Path, rows: int) -> RunSummary:
    """`batchval run` in-process, the API and token at HOST on the sandbox's port, a short
    outage window; --accept-changes, so that a bigger input carries on the same DIR."""
    tmp_path.mkdir(exist_ok=True)
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"run": {"outage_seconds": 1}}), encoding="utf-8")
    root = f"http://{HOST}:{served.port}"
    env = {
        "BATCHVAL_BASE_URL": root + API_PREFIX,
        "BATCHVAL_AUTH_URL": root,
        "BATCHVAL_CLIENT_ID": LIVE.client_id,
        "BATCHVAL_CLIENT_SECRET": LIVE.client_secret,
    }
    request = RunRequest(
        input_path=portfolio(tmp_path / "book.csv", rows),
        place=Place(tmp_path / "out"),
        settings=load_settings(config, env),
        accept_changes=True,
    )
    summary = Runner(request).run()
    assert isinstance(summary, RunSummary)
    return summary


def test_a_temporary_lookup_failure_is_an_outage_even_for_a_new_host(
    served: RunningSandbox, tmp_path: Path, resolver: Resolver
) -> None:
    """EAI_AGAIN (the resolver cannot say now) for a host never reached: 75, not 64."""
    resolver.failure = socket.EAI_AGAIN
    summary = run(served, tmp_path, 3)
    assert resolver.asked > 1
    assert summary.exit_code is ExitCode.RESUMABLE
    assert summary.stop is not None
    assert summary.stop.reason is StopReason.API_UNAVAILABLE
    assert f"name lookup failed for {HOST}" in summary.stop.detail


def test_a_host_that_answered_this_dir_stays_an_outage_when_its_name_goes(
    served: RunningSandbox, tmp_path: Path, resolver: Resolver
) -> None:
    """A first run reaches HOST and keeps it; when HOST's name then does not exist at
    all, the next run of that DIR waits out the outage window (75), while a new DIR would
    call it a wrong address (64)."""
    first = run(served, tmp_path, 3)
    assert first.exit_code is ExitCode.COMPLETE
    checkpoint = Checkpoint(Database.open(tmp_path / "out"))
    assert checkpoint.database.invocations.reached_hosts(()) == {HOST}
    checkpoint.database.close()

    resolver.failure = socket.EAI_NONAME
    second = run(served, tmp_path, 6)  # three more rows to send
    assert second.stop is not None
    assert (second.exit_code, second.stop.reason) == (
        ExitCode.RESUMABLE,
        StopReason.API_UNAVAILABLE,
    )
    assert "taken for an outage of DNS" in second.stop.detail

    fresh = run(served, tmp_path / "new", 3)
    assert fresh.stop is not None
    assert (fresh.exit_code, fresh.stop.reason) == (ExitCode.USAGE, StopReason.WRONG_ADDRESS)
    assert f"the host name {HOST} does not resolve" in fresh.stop.detail
