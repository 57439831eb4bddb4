"""The client's transport (httpx's own, one connection a lane) on real loopback sockets: the
sandbox served in this process, servers that misbehave, TLS, the resolver and the proxy
variables."""

from __future__ import annotations

import asyncio
import shutil
import ssl
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from hostile import NO_SUCH_HOST, TlsServer, closed_port_url, no_such_name, serve_tls
from support import LIVE, client_for

from batchval._internal.api import (
    NoAnswer,
    Reach,
    TransportError,
    WrongAddressError,
    read_no_answer,
)
from batchval._internal.api.client import _one_connection, environment_proxy
from batchval._internal.sandbox.server import RunningSandbox

BODY = b'{"bedrooms":3,"postcode":"SW1A 2AA","propertyType":"terraced"}'


def test_environment_proxy_follows_the_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"):
        for spelling in (name, name.lower()):
            monkeypatch.delenv(spelling, raising=False)
    assert environment_proxy("https://api.example/partners/v1") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    assert environment_proxy("https://api.example/partners/v1") == "http://proxy.corp:3128"
    assert environment_proxy("http://api.example/partners/v1") is None  # only https named
    monkeypatch.setenv("NO_PROXY", "api.example")
    assert environment_proxy("https://api.example/partners/v1") is None
    assert environment_proxy("https://other.example/") == "http://proxy.corp:3128"


@pytest.mark.anyio
async def test_a_named_proxy_is_used(
    served: RunningSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With HTTP_PROXY at a port where nothing listens, no call reaches the sandbox; with
    the sandbox's host in NO_PROXY, the same call is answered."""
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"):
        for spelling in (name, name.lower()):
            monkeypatch.delenv(spelling, raising=False)
    monkeypatch.setenv("HTTP_PROXY", closed_port_url())
    async with client_for(served, LIVE, max_connections=1) as api:
        with pytest.raises(TransportError):
            await api.post_valuation(BODY, idempotency_key="bv1-proxy-test-0001")
    assert served.sandbox.ledger.requests == []
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    async with client_for(served, LIVE, max_connections=1) as api:
        answer = await api.post_valuation(BODY, idempotency_key="bv1-proxy-test-0001")
    assert answer.status == 201


def lane(url: str, verify: ssl.SSLContext | None = None) -> httpx.AsyncClient:
    """A client around one of the client's lanes to `url` (as `PartnerClient` builds them)."""
    return httpx.AsyncClient(transport=_one_connection(url, verify or httpx.create_ssl_context()))


@asynccontextmanager
async def raw_server(
    answer: Callable[[asyncio.StreamReader, asyncio.StreamWriter], object],
) -> AsyncIterator[tuple[str, list[int]]]:
    """A loopback server that hands each connection to `answer`; yields its URL and a
    one-item list counting the connections it accepted."""
    accepted = [0]

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted[0] += 1
        await reader.readuntil(b"\r\n\r\n")
        outcome = answer(reader, writer)
        if asyncio.iscoroutine(outcome):
            await outcome
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", accepted
    finally:
        server.close()


@pytest.mark.anyio
async def test_a_connection_the_server_closes_is_not_used_again() -> None:
    """An answer with `Connection: close` is read whole; the next request opens a new
    connection rather than writing to a closed one."""

    def close_after(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")

    async with raw_server(close_after) as (url, accepted), lane(url) as http:
        first = await http.get(url + "/")
        second = await http.get(url + "/")
    assert (first.text, second.text) == ("ok", "ok")
    assert accepted == [2]


@pytest.mark.anyio
async def test_a_server_that_hangs_up_unanswered_is_a_protocol_error() -> None:
    """A connection closed with no answer is httpx's RemoteProtocolError (the client's
    TransportError: the same key again), not an empty answer."""
    async with raw_server(lambda _reader, _writer: None) as (url, _), lane(url) as http:
        with pytest.raises(httpx.RemoteProtocolError):
            await http.get(url + "/")


@pytest.mark.anyio
async def test_an_answer_cut_short_is_a_protocol_error() -> None:
    """A body shorter than its Content-Length, then a hang-up, is never read as whole."""

    def cut(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b'HTTP/1.1 201 Created\r\nContent-Length: 100\r\n\r\n{"id":')

    async with raw_server(cut) as (url, _), lane(url) as http:
        with pytest.raises(httpx.RemoteProtocolError):
            await http.get(url + "/")


@pytest.mark.anyio
async def test_a_url_that_is_not_http_is_unsupported() -> None:
    """Only http and https are sent; anything else is httpx's UnsupportedProtocol."""
    async with lane("ftp://127.0.0.1/") as http:
        with pytest.raises(httpx.UnsupportedProtocol):
            await http.get("ftp://127.0.0.1/")


# --- no answer: the cause kept, and named ------------------------------------------------


@pytest.fixture
def tls(tmp_path: Path) -> Iterator[TlsServer]:
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make a certificate with")
    with serve_tls(tmp_path) as server:
        yield server


async def _failure(url: str, transport: str, verify: ssl.SSLContext) -> httpx.TransportError:
    """The error a GET of `url` raises, through a lane or httpx's own client (the
    token's)."""
    http = lane(url, verify) if transport == "lane" else httpx.AsyncClient(verify=verify)
    async with http:
        with pytest.raises(httpx.TransportError) as caught:
            await http.get(url, timeout=10)
    return caught.value


def _read(error: BaseException, url: str) -> TransportError | WrongAddressError:
    read = read_no_answer(error, doing=f"GET {url}", url=url, address="base URL", reach=Reach())
    assert isinstance(read, TransportError | WrongAddressError), read
    return read


TRANSPORTS = ["lane", "httpx"]


@pytest.mark.anyio
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.slow
async def test_tls_failures_are_named_with_openssls_reason(
    tls: TlsServer, served: RunningSandbox, transport: str
) -> None:
    """A certificate nobody trusts, one for another host, TLS spoken to a plain HTTP port:
    each read as TLS failed, and why."""
    trusting = ssl.create_default_context(cafile=str(tls.certificate))
    cases = [
        (tls.url + "/", httpx.create_ssl_context(), "self-signed certificate"),
        (
            f"https://localhost:{tls.port}/",
            trusting,
            "Hostname mismatch, certificate is not valid for 'localhost'",
        ),
        (f"https://127.0.0.1:{served.port}/", httpx.create_ssl_context(), "wrong version number"),
    ]
    for url, verify, why in cases:
        error = await _failure(url, transport, verify)
        read = _read(error, url)
        assert isinstance(read, TransportError)
        assert read.no_answer is NoAnswer.TLS
        assert "TLS failed with " in str(read)
        assert why in str(read), str(read)


@pytest.mark.anyio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_refused_and_unknown_names_are_told_apart(transport: str) -> None:
    """Nothing listening is a refused connection; a name that does not exist is not."""
    closed = closed_port_url() + "/"
    refused = await _failure(closed, transport, httpx.create_ssl_context())
    read = _read(refused, closed)
    assert isinstance(read, TransportError)
    assert read.no_answer is NoAnswer.REFUSED
    assert "connection refused by 127.0.0.1:" in str(read)
    if not no_such_name():
        pytest.skip(f"this resolver does not say 'no such name' for {NO_SUCH_HOST}")
    unknown = f"https://{NO_SUCH_HOST}/"
    missing = await _failure(unknown, transport, httpx.create_ssl_context())
    read = _read(missing, unknown)
    assert isinstance(read, WrongAddressError)
    assert f"the host name {NO_SUCH_HOST} does not resolve" in str(read)
