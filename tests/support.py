"""Helpers shared by the tests: credentials, the default test config, raw token calls."""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, TextIO, TypeVar

import anyio
import httpx
import polars as pl
import pytest
import structlog
from secrets_scan import Secret, assert_clean

from batchval._internal import logs, redaction
from batchval._internal.api import Credentials, PartnerClient
from batchval._internal.money.charges import Evidence, Received
from batchval._internal.sandbox.config import Account, SandboxConfig
from batchval._internal.sandbox.server import RunningSandbox
from batchval._internal.sending.job import Settled
from batchval._internal.store.checkpoint import Checkpoint
from batchval._internal.valuations import answers

T = TypeVar("T")

LIVE = Credentials("sandbox-live", "sandbox-live-secret")
TEST = Credentials("sandbox-test", "sandbox-test-secret")
# A live account with few credits, for the spending rules.
POOR = Credentials("poor-live", "poor-live-secret")


def apart_on_the_clock(seconds: float, other: float) -> float:
    """How far apart two waits are as times of day: a wait to midnight read just before it
    and one read just after are a second apart, not a day (a test that straddles
    midnight UTC compares them so)."""
    day = 86_400.0
    gap = abs(seconds - other) % day
    return min(gap, day - gap)


def input_read(**changes: Any) -> dict[str, Any]:
    """summary.json's `input_read` (and the manifest's `input`, beside its path and hash) of
    a file read from its first line with nothing set aside, but for `changes`."""
    plain: dict[str, Any] = {
        "format": "csv",
        "encoding": None,
        "encoding_detected": False,
        "sheet": None,
        "header_line": 1,
        "lines_above_header": 0,
        "not_loans": [],
        "personal_left_out": {},
        "hidden_rows": 0,
        "hidden_columns": [],
        "reporting_date": None,
        "reporting_date_line": None,
    }
    return {**plain, **changes}


def make_config() -> SandboxConfig:
    """The sandbox as tests want it by default: no short-term limit unless a test sets one."""
    config = SandboxConfig(rate_limit=None)
    config.accounts.append(Account(POOR.client_id, POOR.client_secret, balance=25))
    return config


def client_for(served: RunningSandbox, credentials: Credentials, **kwargs: object) -> PartnerClient:
    return PartnerClient(
        base_url=served.base_url,
        auth_url=served.auth_url,
        credentials=credentials,
        **kwargs,  # type: ignore[arg-type]
    )


async def token_for(http: httpx.AsyncClient, credentials: Credentials) -> str:
    response = await http.post(
        "/oauth2/token",
        data={
            "grant_type": "client_credentials",
            "client_id": credentials.client_id,
            "client_secret": credentials.client_secret,
        },
    )
    response.raise_for_status()
    token: str = response.json()["access_token"]
    return token


# --- the CLI as a subprocess ------------------------------------------------------------

BATCHVAL = str(Path(sys.executable).with_name("batchval"))
ROOT = Path(__file__).resolve().parents[1]


def env_for(served: RunningSandbox, credentials: Any = LIVE, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATCHVAL_")}
    env.update(
        BATCHVAL_BASE_URL=served.base_url,
        BATCHVAL_AUTH_URL=served.auth_url,
        BATCHVAL_CLIENT_ID=credentials.client_id,
        BATCHVAL_CLIENT_SECRET=credentials.client_secret,
    )
    env.update(extra)
    return env


def clear_of_midnight(served: RunningSandbox, margin: float = 600) -> int:
    """Move the sandbox's clock past its next midnight UTC when that is less than `margin`
    seconds away, so that a test of one day's limit never sees the count restart midway
    (`make test-dates` starts the suite seconds before a year's end). Returns the seconds
    moved, for the client's BATCHVAL_CLOCK_OFFSET_SECONDS; 0 when the day is long enough."""
    to_midnight = served.sandbox.clock.seconds_to_midnight()
    if to_midnight >= margin:
        return 0
    shift = to_midnight + 5
    served.sandbox.clock.advance(shift)
    return shift


def before_midnight(served: RunningSandbox, seconds: int) -> int:
    """Move the sandbox's clock on to `seconds` before a midnight UTC: its next one, or the
    one after when the next is nearer than that (the clock never goes back). Returns the
    seconds moved, for the client's BATCHVAL_CLOCK_OFFSET_SECONDS."""
    clock = served.sandbox.clock
    shift = (clock.seconds_to_midnight() - seconds) % 86_400
    clock.advance(shift)
    return shift


# A run's lease at a URL held 8 s, not 30 (place/place.LEASE_VARIABLE, a test seam): a test
# that kills or stalls a holder waits out 8 s. Long enough that a live holder on a loaded
# machine renews it (every third of it) well within its margin.
SHORT_LEASE = {"BATCHVAL_LEASE_SECONDS": "8"}


class StoreServer(Protocol):
    """A real object store the tests start on loopback: SeaweedFS's S3
    (objects_server.S3Server) or Azurite's Blob Storage (azure_server.AzureServer)."""

    def url(self, prefix: str) -> str: ...
    def env(self, endpoint: str | None = None) -> dict[str, str]: ...
    @property
    def secrets(self) -> list[str]: ...
    # What the test proxy in front of it needs (s3_proxy.Upstream).
    @property
    def port(self) -> int: ...
    def sign_again(self, method: str, path: str, headers: dict[str, str]) -> None: ...


def url_env(
    served: RunningSandbox, server: StoreServer, endpoint: str | None = None
) -> dict[str, str]:
    """`env_for(served)` with the store server's keys, and `endpoint` (a proxy in front of
    the server) as the store's address when given."""
    return {**env_for(served), **server.env(endpoint)}


def portfolio(path: Path, rows: int, *, duplicates: int = 0) -> Path:
    """A small valid portfolio with a loan id to pass through; some rows repeated."""
    postcodes = ["SW1A 2AA", "M1 1AE", "LS6 2AB", "CF10 1AA", "BS1 4DJ", "NE1 7RU"]
    with path.open("w", newline="", encoding="utf-8") as stream:
        out = csv.writer(stream)
        out.writerow(["loan_id", "postcode", "property_type", "bedrooms", "reference"])
        for n in range(rows):
            m = n if n < rows - duplicates else n - (rows - duplicates)
            out.writerow([f"LN-{n:05d}", postcodes[m % 6], "terraced", 1 + m % 5, f"CASE-{m:05d}"])
    return path


def run_cli(
    *args: str, env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BATCHVAL, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Ran:
    """What one in-process invocation left, in `subprocess.CompletedProcess`'s words, so
    that a test's assertions read the same whichever way the command ran."""

    returncode: int
    stdout: str
    stderr: str


# Threads an invocation started that outlived it (a pool's idle workers): the next
# invocation's, as a process's own threads are its, never the test's.
_LEFT: weakref.WeakSet[threading.Thread] = weakref.WeakSet()


class _Said(io.TextIOWrapper):
    """An invocation's stdout or stderr, as pytest's `CaptureIO` is one: what the
    invocation's threads write (this one, and those it starts), not what the threads that
    ran before it began write (the test's sandbox, a proxy, each in a process of its own
    beside a real `batchval`), which goes on to `before`."""

    def __init__(self, before: TextIO, foreign: frozenset[threading.Thread]) -> None:
        super().__init__(io.BytesIO(), encoding="UTF-8", newline="", write_through=True)
        self._before, self._foreign = before, foreign

    def write(self, text: str) -> int:
        if threading.current_thread() in self._foreign:
            return self._before.write(text)
        return super().write(text)

    def said(self) -> str:
        buffer = self.buffer
        assert isinstance(buffer, io.BytesIO)
        return buffer.getvalue().decode("UTF-8")


def invoke(*args: str, environ: Mapping[str, str], cwd: Path | None = None) -> Ran:
    """The command line in this process (`cli.main`), as `run_cli`'s process would see it:
    `os.environ` is exactly `environ` while it runs (pytest's own variables aside); its
    stdout and stderr are what its own threads print (`_Said`); and what the command
    changes in this process is undone when it returns: the environment, the logging it
    configures (structlog left unconfigured when it was), the redactor it makes active,
    the temporary folder `tempfile` cached (a `TMPDIR` of `environ` is read again, as a new
    process reads it), and the working directory (`cwd`, as `subprocess.run`'s)."""
    from batchval._internal import cli

    here = threading.current_thread()
    foreign = frozenset(t for t in threading.enumerate() if t is not here and t not in _LEFT)
    out, err = _Said(sys.stdout, foreign), _Said(sys.stderr, foreign)
    logging, configured = structlog.get_config(), structlog.is_configured()
    redactor, temporary = redaction.active(), tempfile.tempdir
    chain = logs.kept()
    chain.__enter__()
    try:
        with pytest.MonkeyPatch.context() as patch:
            for name in [n for n in os.environ if n not in environ and not n.startswith("PYTEST_")]:
                patch.delenv(name)
            for name, value in environ.items():
                if os.environ.get(name) != value:
                    patch.setenv(name, value)
            if cwd is not None:
                patch.chdir(cwd)
            patch.setattr(sys, "stdout", out)
            patch.setattr(sys, "stderr", err)
            tempfile.tempdir = None
            with pytest.raises(SystemExit) as ended:
                cli.main(list(args))
    finally:
        _LEFT.update(t for t in threading.enumerate() if t is not here and t not in foreign)
        structlog.configure(**logging)
        if not configured:
            structlog.reset_defaults()
        chain.__exit__(None, None, None)
        redaction.use(redactor)
        tempfile.tempdir = temporary
    code = ended.value.code
    return Ran(code if isinstance(code, int) else 0, out.said(), err.said())


class InProcess:
    """`run_cli` in this process (the `batchval` fixture): `batchval("run", ..., env=env)`
    gives the exit code, stdout and stderr the process would have, without the 0.6 s of
    imports a process costs. `env` is the whole environment, as `run_cli`'s is."""

    def __call__(self, *args: str, env: Mapping[str, str], cwd: Path | None = None) -> Ran:
        return invoke(*args, environ=env, cwd=cwd)


def run_in_process(
    *args: str,
    env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: Any,
    cleared: tuple[str, ...] = ("BATCHVAL_",),
    taken: tuple[str, ...] = ("BATCHVAL_",),
) -> tuple[int, str, str]:
    """`invoke` with the BATCHVAL_* environment `env` gives and no other, over this
    process's environment: its exit code, stdout and stderr. `cleared`: the prefixes of
    the variables of this process left out; `taken`: those of `env`'s variables set.
    (`monkeypatch` is the test's: what the test itself patched stays patched; `capsys` is
    not needed, `invoke` keeps what the command prints apart.)"""
    del monkeypatch, capsys  # the environment and the streams are invoke's to set and undo
    environ = {n: v for n, v in os.environ.items() if not n.startswith(cleared)}
    environ.update((n, v) for n, v in env.items() if n.startswith(taken))
    ran = invoke(*args, environ=environ)
    return ran.returncode, ran.stdout, ran.stderr


def outputs(out: Path) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, Any]]:
    return (
        pl.read_parquet(out / "results.parquet"),
        pl.read_parquet(out / "problems.parquet"),
        json.loads((out / "summary.json").read_text()),
    )


def assert_accounted(out: Path, rows: int) -> None:
    """Every input row is in the results or the problems, exactly once."""
    results, problems, _ = outputs(out)
    numbers = results["row_number"].to_list() + problems["row_number"].to_list()
    assert sorted(numbers) == list(range(1, rows + 1))


def assert_paid_once(served: RunningSandbox, out: Path) -> None:
    """No key charged twice; every charged valuation is in the results."""
    ledger = served.sandbox.ledger
    assert ledger.keys_charged_twice() == []
    results, _, _ = outputs(out)
    charged = {c.resource for c in ledger.valuations_created(LIVE.client_id)}
    assert charged <= set(results["valuation_id"].to_list())
    assert int(results["credits_charged"].sum()) == ledger.credits_charged(LIVE.client_id)


def sandbox_secrets(served: RunningSandbox) -> list[Secret]:
    """Every client secret (with its id, for the HTTP Basic form) and every token the
    sandbox issued."""
    found: list[Secret] = [(a.client_secret, a.client_id) for a in served.sandbox.config.accounts]
    return found + list(served.sandbox._tokens)


def assert_no_secrets(served: RunningSandbox, out: Path, *texts: str) -> None:
    """Neither a client secret nor any token the sandbox issued, in any form the
    redaction masks, is in the texts (logs, printed lines) or in any file under the
    output directory (`secrets_scan`)."""
    assert_clean(sandbox_secrets(served), paths=[out], texts=texts)


def settle_sent(checkpoint: Checkpoint, key: str, data: dict[str, Any]) -> Settled:
    """`answers.settle` of an answer to a key this DIR first sent long before it was valued
    (in 2000): a charge it carries is fresh."""
    return answers.settle(
        checkpoint,
        key,
        data,
        first_sent="2000-01-01T00:00:00+00:00",
        evidence=Evidence(),
        received=Received(dt.datetime.now(dt.UTC)),
    )


# --- waiting for a condition ----------------------------------------------------------


def _late(what: str, timeout: float, detail: Callable[[], object] | None) -> AssertionError:
    said = f": {detail()}" if detail is not None else ""
    return AssertionError(f"waited {timeout:g} s for {what}, in vain{said}")


def _ended(what: str, process: subprocess.Popen[Any] | None) -> AssertionError | None:
    if process is None or process.poll() is None:
        return None
    return AssertionError(f"the process ended (exit {process.returncode}) before {what}")


def wait_until(
    condition: Callable[[], T | None],
    timeout: float,
    what: str,
    *,
    process: subprocess.Popen[Any] | None = None,
    every: float = 0.01,
    detail: Callable[[], object] | None = None,
) -> T:
    """Ask `condition` every `every` seconds until it holds, and return what it gave (so
    `lost = wait_until(checkpoint.hold_lost, ...)` keeps the value waited for).

    Fails naming `what` (say "the first 429") when `timeout` seconds pass first, adding
    `detail()` if given, or at once when `process`, a run the condition waits on, ends
    first. The tests' one polling loop: a fixed sleep is either too short on a loaded
    machine or too long on an idle one."""
    deadline = time.monotonic() + timeout
    while not (held := condition()):
        if (ended := _ended(what, process)) is not None:
            raise ended
        if time.monotonic() > deadline:
            raise _late(what, timeout, detail)
        time.sleep(every)
    return held


async def wait_until_async(
    condition: Callable[[], T | None],
    timeout: float,  # noqa: ASYNC109 - wait_until's signature; the condition is not awaited
    what: str,
    *,
    every: float = 0.01,
    detail: Callable[[], object] | None = None,
) -> T:
    """`wait_until` for a test on an event loop: it sleeps on the loop, so that what it
    waits for (an in-process sandbox, another task) goes on meanwhile."""
    deadline = time.monotonic() + timeout
    while not (held := condition()):
        if time.monotonic() > deadline:
            raise _late(what, timeout, detail)
        await anyio.sleep(every)
    return held
