"""The sandbox as a process of its own, for users' tests (`batchval.testing`, whose
docstring shows it at work): `Sandbox` starts `batchval sandbox --port 0` (this Python's
batchval) with the options given, reads its ready line, and stops it when the block ends;
`batchval_sandbox` is the same as a pytest fixture, where pytest is installed."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import httpx

from batchval._internal.api import Credentials

# The built-in clients' secrets, as documented (the ready line names ids, not secrets).
SECRETS: Mapping[str, str] = {
    "sandbox-test": "sandbox-test-secret",
    "sandbox-live": "sandbox-live-secret",
}


class Sandbox:
    """`batchval sandbox` as a process of its own on a free loopback port, for the length
    of a `with` block: its `base_url`, `auth_url` and `clients` (the ready line's), the
    environment that points batchval at it (`env`), and its controls (`control`).
    `options` are the command's (`"--daily-limit", "5"`, `"--fail-503", "0.2"`, ...)."""

    def __init__(self, *options: str, timeout: float = 30.0) -> None:
        self.options = options
        self.timeout = timeout
        self._process: subprocess.Popen[str] | None = None
        self.ready: dict[str, Any] = {}

    def __enter__(self) -> Sandbox:
        command = [sys.executable, "-m", "batchval", "sandbox", "--port", "0", *self.options]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        self._process = process
        assert process.stdout is not None
        line = process.stdout.readline()  # one JSON line, once it listens
        if not line:
            code = process.wait(timeout=self.timeout)
            process.stdout.close()
            self._process = None
            raise RuntimeError(f"batchval sandbox exited with {code} before it listened")
        self.ready = json.loads(line)
        return self

    def __exit__(self, *exc: object) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()

    @property
    def base_url(self) -> str:
        return str(self.ready["base_url"])

    @property
    def auth_url(self) -> str:
        return str(self.ready["auth_url"])

    @property
    def clients(self) -> list[dict[str, Any]]:
        return list(self.ready["clients"])

    def credentials(self, client_id: str = "sandbox-live") -> Credentials:
        """A built-in client's credentials, for `PartnerClient`."""
        return Credentials(client_id, SECRETS[client_id])

    def env(self, client_id: str = "sandbox-live") -> dict[str, str]:
        """The environment that points `batchval run` (or `batchval.run`) at this sandbox,
        as one of its built-in clients."""
        return {
            "BATCHVAL_BASE_URL": self.base_url,
            "BATCHVAL_AUTH_URL": self.auth_url,
            "BATCHVAL_CLIENT_ID": client_id,
            "BATCHVAL_CLIENT_SECRET": SECRETS[client_id],
        }

    def control(self, path: str, body: Mapping[str, Any] | None = None) -> Any:
        """A call to the sandbox's controls (`ledger`, `clock`, `accounts/<id>`, ...): GET
        without a body, POST with one; the answer's JSON."""
        url = f"{self.auth_url}/_sandbox/{path}"
        answer = httpx.get(url) if body is None else httpx.post(url, json=dict(body))
        answer.raise_for_status()
        return answer.json()


def _fixture() -> Any:
    """`batchval_sandbox`, the pytest fixture, where pytest is installed."""
    try:
        import pytest
    except ImportError:  # pragma: no cover - a program without pytest has no fixtures
        return None

    @pytest.fixture
    def batchval_sandbox() -> Iterator[Sandbox]:
        """A fresh `batchval sandbox` on a free port for the test (`Sandbox`)."""
        with Sandbox() as sandbox:
            yield sandbox

    return batchval_sandbox


batchval_sandbox: object = _fixture()  # a pytest fixture, where pytest is installed
