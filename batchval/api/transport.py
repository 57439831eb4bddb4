"""One HTTP/1.1 connection for httpx: h11 on asyncio's own streams, one request at a time.

httpx's default async transport goes through httpcore's connection pool, whose locks and
shielded cancel scopes (anyio's, about seven a request) and layered streams cost more CPU
than the HTTP itself against a server that answers at once (docs/performance.md). The
client lends each connection to one call at a time, so none of that is needed here: the
protocol is h11's (the parser under httpcore), the network asyncio's streams, the request
leaves in one write and the answer is read whole before it is handed back.

A timeout, a reset or a refused connection reaches the caller as the same httpx exception
as it would from httpx's transport (`httpx.ReadTimeout`, `httpx.ConnectError`,
`httpx.RemoteProtocolError`, ...), and the body is decoded by httpx (`Content-Encoding`)
when it is read. Proxies from the environment (`HTTPS_PROXY`, ...) keep httpx's own
transports (`api/client`).
"""

from __future__ import annotations

import asyncio
import select
import socket
import ssl
from typing import Any

import h11
import httpx

# Reads of up to this many bytes; the API's answers are a few kilobytes.
READ_BYTES = 64 * 1024
# The longest response head accepted (httpcore's figure): a larger one is not the API.
MAX_HEAD_BYTES = 100 * 1024


def _readable(sock: socket.socket | None) -> bool:
    if sock is None or sock.fileno() == -1:
        return True
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    return bool(poller.poll(0))


class _Connection:
    """One open connection and its h11 state."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)

    @property
    def idle_and_open(self) -> bool:
        """Ready for a request. An idle keep-alive connection that is readable was closed
        by the server (or holds bytes nobody asked for): a new one is opened instead."""
        return self.h11.our_state is h11.IDLE and not _readable(
            self.writer.get_extra_info("socket")
        )

    def close(self) -> None:
        self.writer.close()

    async def exchange(self, request: httpx.Request, timeouts: dict[str, Any]) -> httpx.Response:
        """Send `request`, read its whole answer."""
        try:
            head = h11.Request(
                method=request.method, target=request.url.raw_path, headers=request.headers.raw
            )
            parts = [self.h11.send(head)]
            assert isinstance(request.stream, httpx.AsyncByteStream)
            async for chunk in request.stream:
                parts.append(self.h11.send(h11.Data(data=chunk)))
            parts.append(self.h11.send(h11.EndOfMessage()))
        except h11.LocalProtocolError as exc:
            raise httpx.LocalProtocolError(str(exc), request=request) from exc
        await self._write(b"".join(p for p in parts if p), timeouts.get("write"), request)
        read_timeout = timeouts.get("read")
        event = await self._next(read_timeout, request)
        while not isinstance(event, h11.Response):  # 1xx answers come before the answer
            event = await self._next(read_timeout, request)
        body = []
        while True:
            part = await self._next(read_timeout, request)
            if isinstance(part, h11.Data):
                body.append(bytes(part.data))
            elif isinstance(part, h11.EndOfMessage):
                break
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()  # kept alive for the next request
        return httpx.Response(
            status_code=event.status_code,
            headers=event.headers.raw_items(),
            stream=httpx.ByteStream(b"".join(body)),
            extensions={
                "http_version": b"HTTP/" + event.http_version,
                "reason_phrase": event.reason,
                "network_stream": self,
            },
        )

    async def _write(self, data: bytes, timeout: float | None, request: httpx.Request) -> None:
        try:
            self.writer.write(data)
            if self.writer.transport.get_write_buffer_size():  # the socket did not take all
                async with asyncio.timeout(timeout):
                    await self.writer.drain()
        except TimeoutError as exc:
            raise httpx.WriteTimeout("could not send in time", request=request) from exc
        except OSError:
            # As httpcore does: a server may close the request early and still answer (a
            # 413, say); reading tells, and a connection that is gone reads as a disconnect.
            pass

    async def _next(self, timeout: float | None, request: httpx.Request) -> h11.Event:
        """The next event of the answer, reading as it needs."""
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc), request=request) from exc
            if event is not h11.NEED_DATA:
                return event  # type: ignore[return-value]
            try:
                async with asyncio.timeout(timeout):
                    data = await self.reader.read(READ_BYTES)
            except TimeoutError as exc:
                raise httpx.ReadTimeout("no answer in time", request=request) from exc
            except OSError as exc:
                raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from exc
            if not data and self.h11.their_state is h11.SEND_RESPONSE:
                raise httpx.RemoteProtocolError(
                    "Server disconnected without sending a response.", request=request
                )
            self.h11.receive_data(data)


async def _connect(
    request: httpx.Request, tls: ssl.SSLContext, timeout: float | None
) -> _Connection:
    url = request.url
    secure = url.scheme == "https"
    port = url.port or (443 if secure else 80)
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(
                url.host,
                port,
                ssl=tls if secure else None,
                server_hostname=url.host if secure else None,
            )
    except TimeoutError as exc:
        raise httpx.ConnectTimeout(
            f"no connection to {url.host}:{port} in time", request=request
        ) from exc
    except (OSError, ssl.SSLError) as exc:
        raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from exc
    return _Connection(reader, writer)


class OneConnection(httpx.AsyncBaseTransport):
    """An httpx transport that keeps one HTTP/1.1 connection and sends one request at a
    time on it (the client lends it to one call at a time)."""

    def __init__(self, tls: ssl.SSLContext) -> None:
        self._tls = tls
        self._held: _Connection | None = None
        self._origin: tuple[str, str, int | None] | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme not in ("http", "https") or not url.host:
            raise httpx.UnsupportedProtocol(
                f"not an http or https URL: {url.scheme}://", request=request
            )
        timeouts: dict[str, Any] = request.extensions.get("timeout", {})
        origin = (url.scheme, url.host, url.port)
        held = self._held
        if held is None or origin != self._origin or not held.idle_and_open:
            self._drop()
            held = await _connect(request, self._tls, timeouts.get("connect"))
            self._held, self._origin = held, origin
        try:
            response = await held.exchange(request, timeouts)
        except BaseException:
            self._drop()  # cut mid-request (an error, a cancelled task): never reused
            raise
        if held.h11.our_state is not h11.IDLE:
            self._drop()  # the server closes it (`Connection: close`, an HTTP/1.0 answer)
        return response

    def _drop(self) -> None:
        if self._held is not None:
            self._held.close()
            self._held = None

    async def aclose(self) -> None:
        self._drop()
