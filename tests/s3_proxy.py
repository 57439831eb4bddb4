"""A small HTTP proxy on 127.0.0.1 in front of the test's S3 server (or its Azure Blob
emulator: any `Upstream`), for faults a real server will not make on demand: a store that
drops `If-None-Match` and `If-Match` (an old S3-compatible server), a 503 or a 409 instead
of an answer, a write that lands but whose answer is lost, a store that never answers, a
bucket in another region (301, 400), a bucket policy that refuses writes (403); from the
start, or from a moment (`Switch`).

`fault(method, path, headers)` picks what happens to each request (see `Fault`). Requests
are forwarded with their own Host header, so a client's SigV4 signature still holds; a
request whose conditional headers are stripped is signed again with the server's
credentials (they are signed headers, SigV4's and Azure's SharedKey alike, and the server
would refuse the request otherwise). The error answers it makes up are S3's.
"""

from __future__ import annotations

import contextlib
import enum
import http.client
import http.server
import threading
from collections.abc import Callable, Iterator
from email.message import Message
from typing import Protocol


class Fault(enum.Enum):
    FORWARD = "forward"  # as it came
    STRIP = "strip"  # without If-None-Match and If-Match
    STRIP_IF_MATCH = "strip_if_match"  # without If-Match only
    REPLY_503 = "reply_503"  # not forwarded: 503 SlowDown
    REPLY_409 = "reply_409"  # not forwarded: 409 ConditionalRequestConflict
    LAND_THEN_503 = "land_then_503"  # forwarded (it lands), then 503 to the client
    STALL = "stall"  # never answered (until the proxy stops)
    # Not forwarded, answered as AWS answers a client of the wrong region: a bare 301
    # PermanentRedirect (no Location), or a 400 AuthorizationHeaderMalformed naming the
    # region it expects (`REGION_EXPECTED`).
    REPLY_301 = "reply_301"
    REPLY_400_REGION = "reply_400_region"
    # Not forwarded: a 307 TemporaryRedirect whose Location is the server itself, on
    # another port (AWS's answer to a request for a new bucket at the global endpoint). A
    # client that follows it there sends no credentials, and is refused (403).
    REPLY_307 = "reply_307"
    REPLY_403 = "reply_403"  # not forwarded: 403 AccessDenied (a bucket policy's refusal)


Chooser = Callable[[str, str, Message], Fault]

_ERROR = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    "<Error><Code>{code}</Code><Message>injected by the test proxy</Message></Error>"
)
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade"}
REGION_EXPECTED = "eu-west-2"
_REDIRECT = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>PermanentRedirect</Code><Message>The '
    "bucket you are attempting to access must be addressed using the specified endpoint."
    f"</Message><Endpoint>s3.{REGION_EXPECTED}.amazonaws.com</Endpoint></Error>"
)
_WRONG_REGION = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AuthorizationHeaderMalformed</Code>'
    "<Message>The authorization header is malformed; the region 'us-east-1' is wrong; "
    f"expecting '{REGION_EXPECTED}'</Message><Region>{REGION_EXPECTED}</Region></Error>"
)


class Upstream(Protocol):
    """A server the proxy passes requests on to (objects_server.S3Server,
    azure_server.AzureServer): its port on 127.0.0.1, and how to sign a request again."""

    @property
    def port(self) -> int: ...
    def sign_again(self, method: str, path: str, headers: dict[str, str]) -> None: ...


class _Proxy(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, server: Upstream, fault: Chooser) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.upstream = server
        self.fault = fault
        self.stopping = threading.Event()
        self.seen: list[tuple[str, str, Fault]] = []


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Proxy

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _reply(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers:
            if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int, code: str) -> None:
        self._reply(
            status, [("Content-Type", "application/xml")], _ERROR.format(code=code).encode()
        )

    def _handle(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        fault = self.server.fault(self.command, self.path, self.headers)
        self.server.seen.append((self.command, self.path, fault))
        if fault is Fault.STALL:
            self.server.stopping.wait(60)
            self.close_connection = True
            return
        if fault is Fault.REPLY_503:
            self._error(503, "SlowDown")
            return
        if fault is Fault.REPLY_409:
            self._error(409, "ConditionalRequestConflict")
            return
        if fault is Fault.REPLY_403:
            self._error(403, "AccessDenied")
            return
        if fault is Fault.REPLY_301:
            said = [("Content-Type", "application/xml"), ("x-amz-bucket-region", REGION_EXPECTED)]
            self._reply(301, said, _REDIRECT.encode())
            return
        if fault is Fault.REPLY_307:
            there = f"http://127.0.0.1:{self.server.upstream.port}{self.path}"
            said = [("Content-Type", "application/xml"), ("Location", there)]
            self._reply(307, said, _ERROR.format(code="TemporaryRedirect").encode())
            return
        if fault is Fault.REPLY_400_REGION:
            self._reply(400, [("Content-Type", "application/xml")], _WRONG_REGION.encode())
            return
        headers = {name.lower(): value for name, value in self.headers.items()}
        stripped = {
            Fault.STRIP: ("if-none-match", "if-match"),
            Fault.STRIP_IF_MATCH: ("if-match",),
        }.get(fault, ())
        if any(name in headers for name in stripped):
            for name in stripped:
                headers.pop(name, None)
            self.server.upstream.sign_again(self.command, self.path, headers)
        port = self.server.upstream.port
        upstream = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in headers.items():
                if name not in _HOP_BY_HOP:
                    upstream.putheader(name, value)
            upstream.endheaders(body if body or "content-length" in headers else None)
            response = upstream.getresponse()
            answer = response.read()
        finally:
            upstream.close()
        if fault is Fault.LAND_THEN_503:
            self._error(503, "ServiceUnavailable")
            return
        self._reply(response.status, response.getheaders(), answer)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle  # noqa: N815


@contextlib.contextmanager
def proxy(server: Upstream, fault: Chooser) -> Iterator[tuple[str, list[tuple[str, str, Fault]]]]:
    """A proxy on 127.0.0.1 in front of `server`: yields its endpoint URL and the requests
    it saw, with the fault each got. Stopped (and every stalled request let go) on exit."""
    running = _Proxy(server, fault)
    thread = threading.Thread(target=running.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{running.server_address[1]}", running.seen
    finally:
        running.stopping.set()
        running.shutdown()
        running.server_close()
        thread.join(10)


def conditional(headers: Message) -> bool:
    """The request carries If-None-Match or If-Match (a conditional write)."""
    return "If-None-Match" in headers or "If-Match" in headers


def only_first(fault: Fault, when: Callable[[str, str, Message], bool]) -> Chooser:
    """`fault` for the first request `when` matches, FORWARD for every other."""
    done = threading.Event()

    def choose(method: str, path: str, headers: Message) -> Fault:
        if not done.is_set() and when(method, path, headers):
            done.set()
            return fault
        return Fault.FORWARD

    return choose


def always(fault: Fault) -> Chooser:
    return lambda method, path, headers: fault


class Switch:
    """`fault` for every request `when` matches once the test turns it on (`on`), FORWARD
    before: a store that turns bad mid-run."""

    def __init__(self, fault: Fault, when: Callable[[str, str, Message], bool]) -> None:
        self.on = threading.Event()
        self._fault, self._when = fault, when

    def __call__(self, method: str, path: str, headers: Message) -> Fault:
        if self.on.is_set() and self._when(method, path, headers):
            return self._fault
        return Fault.FORWARD
