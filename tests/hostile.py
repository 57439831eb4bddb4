"""A hostile network between batchval and the sandbox: a programmable HTTP proxy.

`serve_proxy(upstream)` serves a `HostileProxy` on 127.0.0.1 (a port the OS picks) in a
uvicorn thread. It forwards every request (method, path, query, headers, body) to the
upstream server (a `RunningSandbox`'s root) and streams the answer back, except where
one of its `Rules` says otherwise:

- `html_share`: a share of the API calls (paths under /partners/) is answered by the
  proxy itself with an HTML page of status `html_status`, never forwarded: the sandbox
  never sees the call and never charges for it (a corporate gateway, a WAF, a captive
  portal). The first `html_spare_first` API calls are always forwarded.
- `mutate_share`: a share of the 201 answers of POST /valuations is rewritten on its
  way back the way a later minor version of the API might answer: integer figures
  written as floats (`250000` -> `250000.0`) and new fields, top-level and nested. The
  sandbox has charged for these: each one is a paid answer.
- `break_share`: a share of those 201s is rewritten so that it cannot be read even
  tolerantly: the estimate written in words (`"about 250k"`), the id and the charge
  kept. Paid answers too: batchval keeps each as an `unreadable-answer` problem.

- `token_echoes`, `api_echoes`: answers the proxy gives itself, each once, in turn, to the
  next token requests or POST /valuations calls, made from what it has seen (`Echo`: the
  client secret the last token request posted and the token the last API call carried):
  a gateway or an API that echoes the request back in any encoding.
- `paid_echo`: fields added to every paid answer of POST /valuations, made the same way
  (an API that puts the caller's token in a field of its answer).

A wrong address needs no rule of its own: `/partners/v2/...` is forwarded and the
sandbox answers its own 404. `closed_port_url()` gives an address where nothing listens,
`NO_SUCH_HOST` a host name that does not exist, and `serve_tls(dir)` a TLS server whose
self-signed certificate no client trusts (or, trusted, names another host).

Rules may be changed while the proxy runs (a test switches a rule off to play "the
proxy is gone"). Each rule draws from its own `random.Random`, seeded, so a replay
meets the same draws in the same order of arrival. `counts` and `exchanges` say what
struck, so that a test can check that its fault was met before it checks the outcome;
`posted` keeps every POST /valuations as it arrived (key and body bytes).
"""

from __future__ import annotations

import collections
import dataclasses
import http
import json
import random
import shutil
import socket
import ssl
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from starlette.types import Message, Receive, Scope, Send
from support import wait_until

from batchval._internal.sandbox.app import API_PREFIX
from batchval._internal.sandbox.lag import LoopLag

API_PATHS = "/partners/"
# Headers that belong to one connection, not to the message (RFC 9110 section 7.6.1);
# content-length is set again for whatever body is really sent.
_HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"host",
        b"content-length",
    }
)
HTML_TYPE = "text/html; charset=utf-8"


# (the client secret, the bearer token) -> (status, content type, body): an answer the
# proxy makes of what it has seen.
Echo = Callable[[str, str], tuple[int, str, bytes]]


@dataclasses.dataclass
class Rules:
    """What the proxy does instead of forwarding faithfully; change freely while it runs."""

    html_share: float = 0.0  # share of API calls answered with an HTML page, unforwarded
    html_status: int = 403
    html_spare_first: int = 0  # the first N API calls are never answered with HTML
    mutate_share: float = 0.0  # share of POST /valuations 201s rewritten (floats, new fields)
    break_share: float = 0.0  # share of those 201s made unreadable (the estimate in words)
    token_echoes: list[Echo] = dataclasses.field(default_factory=list)  # each used once
    api_echoes: list[Echo] = dataclasses.field(default_factory=list)  # each used once
    # (the client secret, the token) -> fields added to each paid answer
    paid_echo: Callable[[str, str], dict[str, Any]] | None = None

    def off(self) -> None:
        """Forward everything faithfully from now on."""
        self.html_share = self.mutate_share = self.break_share = 0.0
        self.token_echoes, self.api_echoes, self.paid_echo = [], [], None


@dataclasses.dataclass(frozen=True, slots=True)
class Exchange:
    """One request the proxy received and what it answered."""

    method: str
    path: str
    status: int
    rule: str  # "forwarded", "html", "mutated", "broken" or "upstream_error"
    arrived: float = 0.0  # time.monotonic() when the request reached the proxy
    answered: float = 0.0  # ... and when its answer had been handed on to the client
    retry_after: float | None = None  # a 429's Retry-After, as relayed
    # When the proxy began handing its answer on: the earliest the client can have heard
    # it. Its pause starts then at the earliest; `answered`, stamped once the proxy's own
    # thread runs again, can come after the client read the answer (2 ms, in one run).
    answering: float = 0.0
    # How late the proxy's own loop had lately been when the request reached it
    # (`LoopLag`): a request seen that late may have been sent before the 429 was heard.
    lag: float = 0.0


# Forgives a request that was on its way when the proxy handed on a 429: the client
# cannot stop what it sent before it heard the answer. Wider than the sandbox's 50 ms:
# the proxy runs in the test's own process, beside the sandbox, and on a loaded two-core
# machine a request written before the 429 was read can reach it that much later. A
# client that did not wait would still be caught: a Retry-After is whole seconds.
EARLY_GRACE_SECONDS = 0.25


def html_page(status: int) -> bytes:
    """A gateway's error page: what a corporate proxy answers instead of the API."""
    phrase = http.HTTPStatus(status).phrase
    return (
        f"<html><head><title>{status} {phrase}</title></head><body>"
        f"<h1>{status} {phrase}</h1><p>The request was blocked by the gateway. "
        "Contact your network administrator quoting incident 7f3a-19c2.</p>"
        "<hr><center>corp-gateway/2.4</center></body></html>\n"
    ).encode()


def break_valuation(body: dict[str, Any]) -> dict[str, Any]:
    """The same valuation with its estimate in words: no reader can take it as a number."""
    body["valuation"]["estimate"] = f"about {body['valuation']['estimate'] // 1000}k"
    return body


def mutate_valuation(body: dict[str, Any]) -> dict[str, Any]:
    """The same valuation as a later API might write it: figures as floats, new fields."""
    figures = body["valuation"]
    figures["estimate"] = float(figures["estimate"])
    figures["range"]["low"] = float(figures["range"]["low"])
    figures["range"]["high"] = float(figures["range"]["high"])
    figures["confidence"] = 0.8
    body["riskBand"] = "B"
    return body


class HostileProxy:
    """The ASGI app of the proxy; its state is read by the tests (see the module doc)."""

    def __init__(self, upstream: str, rules: Rules | None = None, seed: int = 0) -> None:
        self.upstream = upstream.rstrip("/")
        self.rules = rules or Rules()
        self.port = 0
        self.counts: collections.Counter[str] = collections.Counter()
        self.exchanges: list[Exchange] = []
        self._lag = LoopLag()
        self.mutated: dict[str, int] = {}  # valuation id -> the estimate as the API sent it
        # Every POST /valuations as it arrived: its Idempotency-Key and its body's bytes.
        self.posted: list[tuple[str | None, bytes]] = []
        self._html_draws = random.Random(seed)
        self._mutate_draws = random.Random(seed + 1)
        self._break_draws = random.Random(seed + 2)
        self.broken: list[str] = []  # ids of the valuations whose answers were made unreadable
        self._http: httpx.AsyncClient | None = None
        self.seen_secret = ""  # the client secret the last token request posted
        self.seen_token = ""  # the bearer token the last API call carried

    @property
    def url(self) -> str:
        """The proxy's root: an `auth_url` (the token is at {url}/oauth2/token)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.url + API_PREFIX

    # --- ASGI --------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http_call(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._http = httpx.AsyncClient(timeout=httpx.Timeout(60.0))
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._http is not None:
                    await self._http.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def early_requests(self) -> list[tuple[Exchange, float]]:
        """The API calls that reached the proxy inside a `Retry-After` the proxy had handed
        on to the client (less the grace), each with its seconds into that pause: the
        client's own timing, which the sandbox behind a proxy that holds messages cannot
        judge."""
        pauses = [
            (e.answering, e.answering + e.retry_after)
            for e in self.exchanges
            if e.status == 429 and e.retry_after is not None
        ]
        return [
            (e, round(e.arrived - start, 3))
            for e in self.exchanges
            if e.path.startswith(API_PATHS)
            for start, end in pauses
            if start + EARLY_GRACE_SECONDS + e.lag < e.arrived < end
        ]

    async def _http_call(self, scope: Scope, receive: Receive, send: Send) -> None:
        arrived = time.monotonic()
        self._lag.watch()
        lag = self._lag.recent()
        method, path = scope["method"], scope["path"]
        body = await _read_body(receive)
        if method == "POST" and path == API_PREFIX + "/valuations":
            key = dict(scope["headers"]).get(b"idempotency-key")
            self.posted.append((None if key is None else key.decode("latin-1"), body))
        echo = self._echo(scope, method, path, body)
        if echo is not None:
            status, content_type, echoed = echo
            await _answer(send, status, [(b"content-type", content_type.encode())], echoed)
            self._note(method, path, status, "echo", arrived, lag=lag)
            return
        if path.startswith(API_PATHS) and self._draw_html():
            status = self.rules.html_status
            await _answer(send, status, [(b"content-type", HTML_TYPE.encode())], html_page(status))
            self._note(method, path, status, "html", arrived, lag=lag)
            return
        assert self._http is not None, "the proxy serves only between startup and shutdown"
        target = self.upstream + scope["raw_path"].decode("latin-1")
        if scope["query_string"]:
            target += "?" + scope["query_string"].decode("latin-1")
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _HOP_BY_HOP]
        request = self._http.build_request(method, target, headers=headers, content=body)
        try:
            upstream = await self._http.send(request, stream=True)
        except httpx.TransportError:
            await _answer(send, 502, [(b"content-type", b"text/plain")], b"bad gateway\n")
            self._note(method, path, 502, "upstream_error", arrived, lag=lag)
            return
        try:
            await self._relay(method, path, upstream, send, arrived, lag)
        finally:
            await upstream.aclose()

    async def _relay(
        self,
        method: str,
        path: str,
        upstream: httpx.Response,
        send: Send,
        arrived: float,
        lag: float,
    ) -> None:
        headers = [(k, v) for k, v in upstream.headers.raw if k.lower() not in _HOP_BY_HOP]
        paid = (
            method == "POST"
            and path.startswith(API_PATHS)
            and path.endswith("/valuations")
            and upstream.status_code == 201
        )
        # Both drawn for every paid answer, so that each rule's draws line up on a replay.
        broken, mutated = paid and self._draw_break(), paid and self._draw_mutate()
        echoed = paid and self.rules.paid_echo is not None
        if broken or mutated or echoed:
            original = await upstream.aread()
            if broken:
                rewritten, rule = self._broken(original), "broken"
            elif mutated:
                rewritten, rule = self._mutated(original), "mutated"
            else:
                rewritten, rule = self._paid_echo(original), "echo"
            rule = "forwarded" if rewritten is None else rule
            await _answer(send, 201, headers, original if rewritten is None else rewritten)
            self._note(method, path, 201, rule, arrived, lag=lag)
            return
        length = upstream.headers.get("content-length")
        if length is not None:
            headers.append((b"content-length", length.encode()))
        answering = time.monotonic()
        await send(
            {"type": "http.response.start", "status": upstream.status_code, "headers": headers}
        )
        # A cut upstream connection raises here, and uvicorn cuts ours: the client sees
        # what it would have seen without the proxy.
        async for chunk in upstream.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        retry_after = upstream.headers.get("retry-after")
        self._note(
            method,
            path,
            upstream.status_code,
            "forwarded",
            arrived,
            retry_after=None if retry_after is None else float(retry_after),
            answering=answering,
            lag=lag,
        )

    # --- rules -------------------------------------------------------------------------

    def _echo(
        self, scope: Scope, method: str, path: str, body: bytes
    ) -> tuple[int, str, bytes] | None:
        """What the proxy answers itself from its echoes, or None to go on."""
        if method == "POST" and path.endswith("/oauth2/token"):
            form = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
            self.seen_secret = form.get("client_secret", [""])[0]
            if self.rules.token_echoes:
                return self.rules.token_echoes.pop(0)(self.seen_secret, self.seen_token)
        if path.startswith(API_PATHS):
            said = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
            if said.lower().startswith("bearer "):
                self.seen_token = said[len("bearer ") :]
            if method == "POST" and path.endswith("/valuations") and self.rules.api_echoes:
                return self.rules.api_echoes.pop(0)(self.seen_secret, self.seen_token)
        return None

    def _paid_echo(self, original: bytes) -> bytes | None:
        """The paid answer with the echo's fields added, or None when it is not JSON."""
        assert self.rules.paid_echo is not None
        try:
            body = json.loads(original)
        except ValueError:
            return None
        body.update(self.rules.paid_echo(self.seen_secret, self.seen_token))
        return json.dumps(body, separators=(",", ":")).encode()

    def _draw_html(self) -> bool:
        self.counts["api_calls_seen"] += 1
        draw = self._html_draws.random()  # drawn on every API call: replays line up
        spared = self.counts["api_calls_seen"] <= self.rules.html_spare_first
        return not spared and draw < self.rules.html_share

    def _draw_mutate(self) -> bool:
        return self._mutate_draws.random() < self.rules.mutate_share

    def _draw_break(self) -> bool:
        return self._break_draws.random() < self.rules.break_share

    def _broken(self, original: bytes) -> bytes | None:
        """The answer made unreadable, or None when it is not a whole valuation."""
        try:
            body = json.loads(original)
            rewritten = break_valuation(body)
        except (ValueError, KeyError, TypeError):
            return None
        self.broken.append(str(body["id"]))
        return json.dumps(rewritten, separators=(",", ":")).encode()

    def _mutated(self, original: bytes) -> bytes | None:
        """The rewritten body, or None when it is not a whole valuation (a truncated one)."""
        try:
            body = json.loads(original)
            estimate = body["valuation"]["estimate"]
            rewritten = mutate_valuation(body)
        except (ValueError, KeyError, TypeError):
            return None
        self.mutated[str(body["id"])] = int(estimate)
        return json.dumps(rewritten, separators=(",", ":")).encode()

    def _note(
        self,
        method: str,
        path: str,
        status: int,
        rule: str,
        arrived: float,
        *,
        retry_after: float | None = None,
        answering: float | None = None,
        lag: float = 0.0,
    ) -> None:
        self.counts[rule] += 1
        answered = time.monotonic()
        begun = answered if answering is None else answering
        self.exchanges.append(
            Exchange(method, path, status, rule, arrived, answered, retry_after, begun, lag)
        )


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _answer(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    headers = [*headers, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


@contextmanager
def serve_proxy(upstream: str, rules: Rules | None = None, seed: int = 0) -> Iterator[HostileProxy]:
    """Serve a `HostileProxy` in front of `upstream` on loopback until the block ends."""
    proxy = HostileProxy(upstream, rules, seed)
    config = uvicorn.Config(
        proxy,
        host="127.0.0.1",
        port=0,
        log_level="warning",
        access_log=False,
        lifespan="on",  # the proxy's own HTTP client lives from startup to shutdown
        loop="asyncio",  # as the sandbox behind it (uvicorn would take uvloop when installed)
        timeout_keep_alive=30,
        # The upstream's Date and Server headers are relayed; uvicorn would add its own.
        server_header=False,
        date_header=False,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="hostile-proxy", daemon=True)
    thread.start()
    wait_until(lambda: server.started or not thread.is_alive(), 10, "the hostile proxy to start")
    if not server.started:
        raise RuntimeError("the hostile proxy did not start (its thread ended)")
    proxy.port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield proxy
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def refuses(url: str) -> bool:
    """Whether a connection to the root URL `http://127.0.0.1:PORT` is refused."""
    port = int(url.rsplit(":", 1)[1])
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def closed_port_url() -> str:
    """The root URL of a loopback port where nothing listens: every connect is refused.

    The OS picks a free port for a socket that is then closed; another process could take
    the port in between, which on a test machine is rare enough to accept.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# A name that never resolves (RFC 6761 keeps `.invalid` out of DNS): the resolver says
# "no such name" (EAI_NONAME), not "try again".
NO_SUCH_HOST = "api.no-such-host.invalid"


def no_such_name() -> bool:
    """Whether this machine's resolver says EAI_NONAME for NO_SUCH_HOST (a resolver that
    answers every name, as a captive portal's does, cannot show the behaviour)."""
    try:
        socket.getaddrinfo(NO_SUCH_HOST, 443)
    except socket.gaierror as exc:
        return exc.errno == socket.EAI_NONAME
    return False


@dataclasses.dataclass(frozen=True)
class TlsServer:
    url: str  # https://127.0.0.1:PORT
    port: int
    certificate: Path  # self-signed, for `name`: a CA file that trusts it
    name: str


@contextmanager
def serve_tls(directory: Path, name: str = "reach.test") -> Iterator[TlsServer]:
    """A loopback server that offers TLS with a self-signed certificate for `name` (made by
    the `openssl` command) and closes each connection after the handshake: a client meets
    a certificate it cannot verify, or, trusting it (`SSL_CERT_FILE`), one for another
    host. Raises FileNotFoundError without `openssl`."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise FileNotFoundError("openssl")
    certificate, key = directory / "tls-cert.pem", directory / "tls-key.pem"
    subprocess.run(
        [
            openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-keyout", str(key), "-out", str(certificate),
            "-subj", f"/CN={name}", "-addext", f"subjectAltName=DNS:{name}",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    listener = socket.create_server(("127.0.0.1", 0))
    port: int = listener.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return  # closed: the test is over
            connection.settimeout(5)
            try:
                context.wrap_socket(connection, server_side=True).close()
            except OSError:
                pass  # the client refused the certificate: what the test is about
            finally:
                connection.close()

    thread = threading.Thread(target=serve, name="tls-server", daemon=True)
    thread.start()
    try:
        yield TlsServer(f"https://127.0.0.1:{port}", port, certificate, name)
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(timeout=10)
