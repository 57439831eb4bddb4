"""A real Azure Blob Storage emulator on 127.0.0.1 for the tests: Microsoft's Azurite.

Azurite comes from npm, at the version tests/azurite/package.json pins and with every
package's integrity hash in its package-lock.json, installed into the venv by the
Makefile (`npm ci`). `running()` starts its Blob service alone (`azurite-blob`) on a free
port of 127.0.0.1 with a data folder of its own, telemetry off, under an account made up
per server (`AZURITE_ACCOUNTS`: not the emulator's published development key, so that a
test that looks for the key in what a run leaves finds a secret no other tool wrote), and
creates the container `CONTAINER`. Every request must be signed with the account's key
(SharedKey) or carry a SAS token. The server is stopped by its process id: SIGTERM, then
SIGKILL after a timeout.

Requests are addressed path-style, as Azure's own tools address the emulator:
`http://127.0.0.1:PORT/<account>/<container>/<blob>`.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime as dt
import hashlib
import hmac
import http.client
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlsplit

import objects_server
from objects_server import free_ports

ROOT = Path(__file__).resolve().parent.parent
CONTAINER = "batchval-test"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0
# The REST version the test's own requests state (Azurite 3.37 serves up to 2025-11-05).
VERSION = "2021-08-06"
# The headers of Blob Storage's SharedKey string to sign, in its order (Content-Length
# empty when 0, from version 2015-02-21).
_STANDARD = (
    "content-encoding",
    "content-language",
    "content-length",
    "content-md5",
    "content-type",
    "date",
    "if-modified-since",
    "if-match",
    "if-none-match",
    "if-unmodified-since",
    "range",
)


@dataclasses.dataclass(frozen=True)
class AzureServer:
    """A running emulator: where it answers, its account and key."""

    port: int
    account: str
    key: str  # base64, as Azure shows an account key
    container: str
    pid: int
    started_in: float  # seconds from launch to the container created

    @property
    def endpoint(self) -> str:
        """The account's Blob endpoint (path-style, as for the emulator)."""
        return f"http://127.0.0.1:{self.port}/{self.account}"

    def env(self, endpoint: str | None = None) -> dict[str, str]:
        """The variables batchval reads an Azure store from, with the account's key,
        pointing at this server (or at `endpoint`, the test proxy's URL in front of it)."""
        return {
            "AZURE_STORAGE_ACCOUNT_NAME": self.account,
            "AZURE_STORAGE_ACCOUNT_KEY": self.key,
            "AZURE_STORAGE_ENDPOINT": f"{endpoint}/{self.account}" if endpoint else self.endpoint,
        }

    @property
    def secrets(self) -> list[str]:
        """What must never be found in anything a run leaves."""
        return [self.key, self.connection_string()]

    def connection_string(self) -> str:
        """A connection string as the Azure portal shows one, pointing at this server."""
        return (
            f"DefaultEndpointsProtocol=http;AccountName={self.account};"
            f"AccountKey={self.key};BlobEndpoint={self.endpoint};"
        )

    def url(self, prefix: str) -> str:
        return f"az://{self.container}/{prefix}"

    def sign_again(self, method: str, path: str, headers: dict[str, str]) -> None:
        """Sign a request passed on by the test proxy whose headers it changed."""
        sign(self, method, path, headers)

    def sas_token(self, permissions: str = "racwdl", hours: float = 2) -> str:
        """An account SAS for the Blob service (every resource type): its query string."""
        expiry = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=hours)).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )
        fields = [self.account, permissions, "b", "sco", "", expiry, "", "https,http", VERSION, ""]
        to_sign = "\n".join(fields) + "\n"
        signature = base64.b64encode(
            hmac.new(base64.b64decode(self.key), to_sign.encode(), hashlib.sha256).digest()
        ).decode()
        query = {
            "sv": VERSION,
            "ss": "b",
            "srt": "sco",
            "sp": permissions,
            "se": expiry,
            "spr": "https,http",
            "sig": signature,
        }
        return "&".join(f"{name}={quote(value, safe='')}" for name, value in query.items())


def sign(server: AzureServer, method: str, path: str, headers: dict[str, str]) -> None:
    """Set `headers["authorization"]`: SharedKey over the request (`path` with its query,
    `headers` by lower-case name, holding `x-ms-date` and `x-ms-version`)."""
    parts = urlsplit(path)
    standard = [headers.get(name, "") for name in _STANDARD]
    if standard[2] == "0":
        standard[2] = ""
    ms = sorted(
        (name, value.strip()) for name, value in headers.items() if name.startswith("x-ms-")
    )
    resource = f"/{server.account}{parts.path}"
    query: dict[str, list[str]] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        query.setdefault(name.lower(), []).append(value)
    resource += "".join(f"\n{name}:{','.join(sorted(query[name]))}" for name in sorted(query))
    to_sign = "\n".join([method, *standard, *(f"{name}:{value}" for name, value in ms), resource])
    digest = hmac.new(base64.b64decode(server.key), to_sign.encode(), hashlib.sha256).digest()
    headers["authorization"] = f"SharedKey {server.account}:{base64.b64encode(digest).decode()}"


def container_request(server: AzureServer, method: str, container: str) -> int:
    """A signed request on a container itself: `PUT` creates it, `DELETE` deletes it (with
    what it holds, as an operator's cleanup would); the status."""
    path = f"/{server.account}/{container}?restype=container"
    headers = {
        "x-ms-date": dt.datetime.now(dt.UTC).strftime("%a, %d %b %Y %H:%M:%S GMT"),
        "x-ms-version": VERSION,
    }
    sign(server, method, path, headers)
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        connection.request(method, path, headers=headers)
        response = connection.getresponse()
        response.read()
    finally:
        connection.close()
    return response.status


def azurite_binary() -> Path | None:
    """The `azurite-blob` the Makefile installs into the venv."""
    found = ROOT / ".venv" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
    return found if found.is_file() else None


def stop(process: subprocess.Popen[bytes], timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM (what Node stops on) to the server's own pid, SIGKILL if it has not stopped
    within `timeout`."""
    objects_server.stop(process, timeout, how=signal.SIGTERM)


def _command(binary: Path, data: Path, port: int) -> list[str]:
    return [
        str(binary),
        "--blobHost",
        "127.0.0.1",
        "--blobPort",
        str(port),
        "--location",
        str(data),
        "--disableTelemetry",
        "--disableProductStyleUrl",
        # obstore states a newer REST version than some Azurite releases know.
        "--skipApiVersionCheck",
        "--silent",
    ]


@contextlib.contextmanager
def running(
    directory: Path, binary: Path, env: Mapping[str, str] | None = None
) -> Iterator[AzureServer]:
    """Start Azurite's Blob service with its data and log in `directory`, yield it once
    its container is created, stop it by its pid. A port taken between choosing and
    binding (another worker) shows as an early exit: started again once on a new port."""
    account = "batchval" + secrets.token_hex(4)
    key = base64.b64encode(secrets.token_bytes(64)).decode()
    environment = {**(os.environ if env is None else env), "AZURITE_ACCOUNTS": f"{account}:{key}"}
    for attempt in (1, 2):
        (port,) = free_ports(1)
        data = directory / f"data-{attempt}"
        data.mkdir()
        started = time.monotonic()
        with (directory / f"azurite-{attempt}.log").open("wb") as log:
            process = subprocess.Popen(
                _command(binary, data, port),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=environment,
                cwd=directory,
                start_new_session=True,  # a Ctrl-C at the terminal is for pytest alone
            )
        server = AzureServer(port, account, key, CONTAINER, process.pid, 0.0)
        try:
            while process.poll() is None and time.monotonic() - started < START_TIMEOUT:
                with contextlib.suppress(OSError):
                    if container_request(server, "PUT", CONTAINER) in (201, 409):
                        yield dataclasses.replace(server, started_in=time.monotonic() - started)
                        return
                time.sleep(0.1)
        finally:
            stop(process)
    log_tail = (directory / "azurite-2.log").read_text(errors="replace")[-2000:]
    raise RuntimeError(
        f"Azurite did not serve Blob Storage within {START_TIMEOUT:.0f} s:\n{log_tail}"
    )
