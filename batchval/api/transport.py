"""One HTTP/1.1 connection for httpx, on asyncio's own streams.

httpx's default async transport reaches the socket through anyio: every read and write
opens a cancel scope with a deadline, about a dozen scopes a request. Against a server
that answers at once that was a third of the client's CPU (docs/performance.md). The
HTTP itself stays httpcore's (h11, keep-alive, the pool of one connection); only the
network underneath changes: asyncio streams, with `asyncio.timeout` for the deadlines
httpx passes down. A timeout, a reset or a refused connection reaches the caller as the
same httpx exception as before (`httpx.ReadTimeout`, `httpx.ConnectError`, ...).

Proxies from the environment (`HTTPS_PROXY`, ...) keep httpx's own transports: httpx
mounts them by URL, before this transport is asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import ssl
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from typing import Any

import httpcore
import httpx

# httpcore's exceptions as httpx raises them, most specific first.
_EXCEPTIONS: tuple[tuple[type[Exception], type[httpx.RequestError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
    (httpcore.ProxyError, httpx.ProxyError),
)


@contextlib.contextmanager
def _as_httpx(request: httpx.Request) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for theirs, ours in _EXCEPTIONS:
            if isinstance(exc, theirs):
                raise ours(str(exc), request=request) from exc
        raise


class _Stream(httpcore.AsyncNetworkStream):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            async with asyncio.timeout(timeout):
                return await self._reader.read(max_bytes)
        except TimeoutError as exc:
            raise httpcore.ReadTimeout("no answer in time") from exc
        except OSError as exc:
            raise httpcore.ReadError(str(exc) or type(exc).__name__) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        try:
            self._writer.write(buffer)
            if self._writer.transport.get_write_buffer_size():  # the socket did not take all
                async with asyncio.timeout(timeout):
                    await self._writer.drain()
        except TimeoutError as exc:
            raise httpcore.WriteTimeout("could not send in time") from exc
        except OSError as exc:
            raise httpcore.WriteError(str(exc) or type(exc).__name__) from exc

    async def aclose(self) -> None:
        self._writer.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                await self._writer.start_tls(ssl_context, server_hostname=server_hostname)
        except TimeoutError as exc:
            self._writer.close()
            raise httpcore.ConnectTimeout("TLS handshake timed out") from exc
        except (OSError, ssl.SSLError) as exc:
            self._writer.close()
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        return self

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._writer.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._writer.get_extra_info("sockname")
        if info == "server_addr":
            return self._writer.get_extra_info("peername")
        if info == "socket":
            return self._writer.get_extra_info("socket")
        if info == "is_readable":
            # An idle keep-alive connection that is readable was closed by the server (or
            # holds bytes nobody asked for): httpcore then opens a new one.
            return _readable(self._writer.get_extra_info("socket"))
        return None


def _readable(sock: socket.socket | None) -> bool:
    if sock is None or sock.fileno() == -1:
        return True
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    return bool(poller.poll(0))


class _Network(httpcore.AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, local_addr=None if local_address is None else (local_address, 0)
                )
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"no connection to {host}:{port} in time") from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        sock = writer.get_extra_info("socket")
        for option in socket_options or ():
            sock.setsockopt(*option)
        return _Stream(reader, writer)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class _Body(httpx.AsyncByteStream):
    def __init__(self, stream: AsyncIterable[bytes], request: httpx.Request) -> None:
        self._stream = stream
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _as_httpx(self._request):
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        closing = getattr(self._stream, "aclose", None)
        if closing is not None:
            with _as_httpx(self._request):
                await closing()


class OneConnection(httpx.AsyncBaseTransport):
    """An httpx transport that keeps one HTTP/1.1 connection, on asyncio streams."""

    def __init__(self, tls: ssl.SSLContext) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=tls,
            max_connections=1,
            max_keepalive_connections=1,
            network_backend=_Network(),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        url = request.url
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx(request):
            answer = await self._pool.handle_async_request(core)
        assert isinstance(answer.stream, AsyncIterable)
        return httpx.Response(
            status_code=answer.status,
            headers=answer.headers,
            stream=_Body(answer.stream, request),
            extensions=answer.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()
