"""api/transport (one connection on asyncio streams) and the client's choice of it: real
loopback sockets, the sandbox served in this process, and the proxy variables."""

from __future__ import annotations

import socket

import httpx
import pytest
from hostile import closed_port_url
from support import LIVE, client_for

from batchval.api import TransportError
from batchval.api.client import environment_proxy
from batchval.api.transport import OneConnection, _readable
from batchval.sandbox.server import RunningSandbox

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


@pytest.mark.anyio
async def test_one_connection_is_kept_alive(served: RunningSandbox) -> None:
    """Calls on one transport share one connection; a refused connect is httpx's error."""
    transport = OneConnection(httpx.create_ssl_context())
    async with httpx.AsyncClient(transport=transport) as http:
        first = await http.get(served.auth_url + "/_sandbox/ledger")
        second = await http.get(served.auth_url + "/_sandbox/ledger")
    assert first.status_code == second.status_code == 200
    assert first.extensions["network_stream"] is second.extensions["network_stream"]
    async with httpx.AsyncClient(transport=OneConnection(httpx.create_ssl_context())) as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(closed_port_url() + "/")


def test_a_connection_the_server_closed_reads_as_readable() -> None:
    """httpcore drops an idle keep-alive connection that is readable: the server closed it."""
    ours, theirs = socket.socketpair()
    try:
        assert not _readable(ours)
        theirs.close()
        assert _readable(ours)
    finally:
        ours.close()
    assert _readable(None)
