"""`batchval sandbox` as a user runs it: a child process, its ready line, its options, its
exits; the refusals, which end before it serves, in this process (`support.invoke`)."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import invoke

from batchval._internal.sandbox.server import is_loopback

# The console script installed beside this interpreter: what `batchval` on PATH runs.
BATCHVAL = shutil.which("batchval", path=str(Path(sys.executable).parent))
READY_TIMEOUT = 15.0
EXIT_TIMEOUT = 5.0
EXIT_USAGE = 64
VALUATION = {"postcode": "SW1A 1AA", "propertyType": "terraced", "bedrooms": 3}

pytestmark = pytest.mark.skipif(BATCHVAL is None, reason="the batchval console script is missing")


@dataclass(frozen=True, slots=True)
class Served:
    """A running `batchval sandbox` and the JSON line it printed once listening."""

    process: subprocess.Popen[str]
    ready: dict[str, Any]

    @property
    def base_url(self) -> str:
        return str(self.ready["base_url"])

    @property
    def auth_url(self) -> str:
        return str(self.ready["auth_url"])


def _command(*args: str) -> list[str]:
    assert BATCHVAL is not None
    return [BATCHVAL, "sandbox", *args]


def _first_line_or_eof(process: subprocess.Popen[str], timeout: float) -> str:
    """The first line on the child's stdout ("" if it closed), or a failure after `timeout` s."""
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    stdout = process.stdout
    threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout)
    except queue.Empty:
        pytest.fail(f"no line and no exit within {timeout} s")


def _first_line(process: subprocess.Popen[str], timeout: float) -> str:
    """The ready line, or a failure saying why the sandbox did not get ready."""
    line = _first_line_or_eof(process, timeout)
    if not line:
        _, err = process.communicate(timeout=EXIT_TIMEOUT)
        pytest.fail(f"the sandbox exited with {process.returncode} before it was ready:\n{err}")
    return line


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.kill()
    process.communicate(timeout=EXIT_TIMEOUT)


@contextmanager
def sandbox(*args: str) -> Iterator[Served]:
    """`batchval sandbox --host 127.0.0.1 --port 0 ARGS` until the block ends (killed then)."""
    process = subprocess.Popen(
        _command("--host", "127.0.0.1", "--port", "0", *args),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield Served(process, json.loads(_first_line(process, READY_TIMEOUT)))
    finally:
        _stop(process)


def _token_response(served: Served, client_id: str, client_secret: str) -> httpx.Response:
    return httpx.post(
        served.auth_url + "/oauth2/token",
        data={
            "grant_type": "client_credentials",
            "client_id": client_id,
            "client_secret": client_secret,
        },
        timeout=10,
    )


def _value(served: Served, client_id: str, client_secret: str) -> httpx.Response:
    token = _token_response(served, client_id, client_secret).json()["access_token"]
    return httpx.post(
        served.base_url + "/valuations",
        json=VALUATION,
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )


@dataclass(frozen=True, slots=True)
class Refusal:
    """How a command that should not start ended: its exit code and what it printed."""

    returncode: int
    stdout: str
    stderr: str


def _refused(*args: str) -> Refusal:
    """A command expected to stop before serving, run in this process: one that serves
    instead never returns, and the test's timeout (pyproject.toml) fails it."""
    done = invoke("sandbox", "--host", "127.0.0.1", "--port", "0", *args, environ=os.environ)
    return Refusal(done.returncode, done.stdout, done.stderr)


def test_ready_line_names_urls_and_builtin_clients() -> None:
    """Once listening it prints one JSON line: base URL, auth URL, the built-in clients'
    ids and scopes (their secrets are documented, never printed)."""
    with sandbox() as served:
        ready = served.ready
        assert ready["base_url"].startswith("http://127.0.0.1:")
        assert ready["base_url"].endswith("/partners/v1")
        assert ready["base_url"] == ready["auth_url"] + "/partners/v1"
        port = int(ready["auth_url"].rsplit(":", 1)[1])
        assert port > 0  # --port 0 became a real port
        clients = {c["client_id"]: c for c in ready["clients"]}
        assert clients["sandbox-test"] == {"client_id": "sandbox-test", "scope": "partners:test"}
        assert clients["sandbox-live"] == {"client_id": "sandbox-live", "scope": "partners:read"}
        assert "secret" not in json.dumps(ready)  # ids, never secrets


@pytest.mark.slow
def test_serves_a_valuation_then_stops_on_sigterm() -> None:
    """A token and a valuation over HTTP work; SIGTERM ends the process promptly and cleanly."""
    with sandbox() as served:
        response = _value(served, "sandbox-test", "sandbox-test-secret")
        assert response.status_code == 201, response.text
        assert response.json()["mode"] == "test"
        assert response.json()["id"].startswith("val_")

        served.process.send_signal(signal.SIGTERM)
        _, err = served.process.communicate(timeout=EXIT_TIMEOUT)
        # uvicorn shuts down gracefully, then either returns (exit 0) or, in recent
        # versions, raises the captured signal again (-SIGTERM); both are a clean stop.
        assert served.process.returncode in {0, -signal.SIGTERM}, err
        assert "Traceback" not in err


def test_token_ttl_option_sets_expires_in() -> None:
    """`--token-ttl 5` gives tokens that say they last 5 seconds."""
    with sandbox("--token-ttl", "5") as served:
        response = _token_response(served, "sandbox-live", "sandbox-live-secret")
        assert response.status_code == 200, response.text
        assert response.json()["expires_in"] == 5


def test_fail_503_option_makes_valuations_data_unavailable() -> None:
    """`--fail-503 1` answers every valuation 503 data-unavailable."""
    with sandbox("--fail-503", "1") as served:
        response = _value(served, "sandbox-live", "sandbox-live-secret")
        assert response.status_code == 503, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert response.json()["type"].endswith("/errors/data-unavailable")


def test_config_file_adds_an_account(tmp_path: Path) -> None:
    """An account in `--config FILE` is listed in the ready line and gets a token."""
    config = tmp_path / "sandbox.yaml"
    config.write_text(
        "accounts:\n  - {client_id: lender-a, client_secret: s3cret-value, balance: 100}\n",
        encoding="utf-8",
    )
    with sandbox("--config", str(config)) as served:
        clients = {c["client_id"]: c for c in served.ready["clients"]}
        assert clients["lender-a"]["scope"] == "partners:read"
        assert {"sandbox-test", "sandbox-live"} <= clients.keys()
        response = _token_response(served, "lender-a", "s3cret-value")
        assert response.status_code == 200, response.text
        assert response.json()["scope"] == "partners:read"
        refused = _token_response(served, "lender-a", "wrong-secret")
        assert refused.status_code == 401


@pytest.mark.parametrize(
    ("args", "config_text", "says"),
    [
        (["--config", "{config}"], "token_ttl_seconds: 60\ncolour: blue\n", "colour"),
        (["--config", "{config}"], "accounts:\n  - {client_id: a, secret: b}\n", "secret"),
        (["--config", "{config}"], None, "No such file"),
        (["--fail-503", "2"], None, "--fail-503"),
        (["--no-such-option"], None, "--no-such-option"),
    ],
    ids=[
        "unknown-setting",
        "unknown-account-field",
        "missing-file",
        "share-above-1",
        "unknown-option",
    ],
)
def test_bad_command_line_or_config_exits_64(
    tmp_path: Path, args: list[str], config_text: str | None, says: str
) -> None:
    """A bad option or config file exits 64 with a message on stderr and no traceback."""
    config = tmp_path / "sandbox.yaml"
    if config_text is not None:
        config.write_text(config_text, encoding="utf-8")
    done = _refused(*(a.format(config=config) for a in args))
    assert done.returncode == EXIT_USAGE, done.stderr
    assert says in done.stderr
    assert "Error" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize(
    "config_text",
    ["faults: {error_503_share: 2}\n", "token_ttl_seconds: soon\n"],
    ids=["share-above-1", "ttl-not-a-number"],
)
def test_bad_values_in_the_config_file_exit_64(tmp_path: Path, config_text: str) -> None:
    """A config value the matching option would refuse is refused in the file too."""
    config = tmp_path / "sandbox.yaml"
    config.write_text(config_text, encoding="utf-8")
    done = _refused("--config", str(config))
    assert done.returncode == EXIT_USAGE, done.stdout
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "sandbox.example"])
def test_a_host_that_is_not_loopback_needs_allow_remote(host: str) -> None:
    """The /_sandbox controls take no credentials: listening beyond loopback is refused
    (64) unless --allow-remote says it is meant."""
    done = invoke("sandbox", "--host", host, "--port", "0", environ=os.environ)
    assert done.returncode == 64, done.stderr
    assert "not a loopback address" in done.stderr
    assert "--allow-remote" in done.stderr


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_loopback_hosts_are_loopback(host: str) -> None:
    assert is_loopback(host)
