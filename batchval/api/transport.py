"""One HTTP/1.1 connection for httpx, on asyncio's own streams, one request at a time.

httpx's default async transport goes through httpcore's connection pool, whose locks and
shielded cancel scopes (anyio's, about seven a request) and layered streams cost more CPU
than the HTTP itself against a server that answers at once; h11, the protocol under it,
then validated every header of every request again with regular expressions (about
60 µs a call, a tenth of the client's CPU; docs/performance.md). The client lends each
connection to one call at a time and builds its requests from httpx's, whose headers
httpx has already checked, so this module speaks the protocol itself (RFC 9112): the
request leaves in one write, and the answer is read whole (`Content-Length`, chunked,
or to the end of the connection) before it is handed back; httpx's read timeout bounds
the whole answer, not each read of it.

A timeout, a reset, a refused connection or an answer that is not HTTP reaches the
caller as the same httpx exception as from httpx's transport (`httpx.ReadTimeout`,
`httpx.ConnectError`, `httpx.RemoteProtocolError`, ...), and the body is decoded by httpx
(`Content-Encoding`) when it is read. Proxies from the environment (`HTTPS_PROXY`, ...)
keep httpx's own transports (`api/client`).
"""

from __future__ import annotations

import asyncio
import select
import socket
import ssl
from typing import Any

import httpx

# The longest response head and chunk-size line accepted (httpcore's figure): a larger
# one is not the API.
MAX_HEAD_BYTES = 100 * 1024
_NO_BODY = frozenset({204, 304})


def _readable(sock: socket.socket | None) -> bool:
    if sock is None or sock.fileno() == -1:
        return True
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    return bool(poller.poll(0))


class _NotHttpError(Exception):
    """The answer breaks HTTP/1.1 (raised as httpx.RemoteProtocolError)."""


class _Connection:
    """One open connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.reusable = True  # the last exchange ended cleanly and the server keeps it

    @property
    def idle_and_open(self) -> bool:
        """Ready for a request. An idle keep-alive connection that is readable was closed
        by the server (or holds bytes nobody asked for): a new one is opened instead."""
        return self.reusable and not _readable(self.writer.get_extra_info("socket"))

    def close(self) -> None:
        self.writer.close()

    async def exchange(self, request: httpx.Request, timeouts: dict[str, Any]) -> httpx.Response:
        """Send `request`, read its whole answer."""
        self.reusable = False  # until the answer has been read to its end
        body = await request.aread()
        await self._write(_request_bytes(request, body), timeouts.get("write"), request)
        try:
            async with asyncio.timeout(timeouts.get("read")):
                status, version, reason, headers = await self._head()
                while 100 <= status < 200:  # interim answers come before the answer
                    status, version, reason, headers = await self._head()
                answer, keep = await self._body(request.method, status, headers)
        except TimeoutError as exc:
            raise httpx.ReadTimeout("no answer in time", request=request) from exc
        except (_NotHttpError, asyncio.LimitOverrunError, ValueError) as exc:
            raise httpx.RemoteProtocolError(str(exc), request=request) from exc
        except asyncio.IncompleteReadError as exc:
            said = "Server disconnected without sending a response."
            if exc.partial:
                said = "peer closed connection without sending complete message"
            raise httpx.RemoteProtocolError(said, request=request) from exc
        except OSError as exc:
            raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from exc
        # Bytes after the answer would be read as the start of the next one: not reused.
        leftover = bool(self.reader._buffer)  # type: ignore[attr-defined]
        self.reusable = keep and version == b"HTTP/1.1" and not leftover
        return httpx.Response(
            status_code=status,
            headers=headers,
            stream=httpx.ByteStream(answer),
            extensions={"http_version": version, "reason_phrase": reason, "network_stream": self},
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

    async def _line(self) -> bytes:
        line = await self.reader.readuntil(b"\n")
        if len(line) > MAX_HEAD_BYTES:
            raise _NotHttpError("a line of the answer's head is too long")
        return line.rstrip(b"\r\n")

    async def _head(self) -> tuple[int, bytes, bytes, list[tuple[bytes, bytes]]]:
        """The status line and header fields of an answer."""
        version, _, rest = (await self._line()).partition(b" ")
        code, _, reason = rest.partition(b" ")
        if version not in (b"HTTP/1.1", b"HTTP/1.0") or len(code) != 3 or not code.isdigit():
            raise _NotHttpError(f"not an HTTP/1.1 status line: {version[:20]!r} {code[:20]!r}")
        headers: list[tuple[bytes, bytes]] = []
        size = 0
        while line := await self._line():
            size += len(line)
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip() or size > MAX_HEAD_BYTES:
                raise _NotHttpError(f"not an HTTP header line: {line[:40]!r}")
            headers.append((name, value.strip(b" \t")))
        return int(code), version, reason, headers

    async def _body(
        self, method: str, status: int, headers: list[tuple[bytes, bytes]]
    ) -> tuple[bytes, bool]:
        """The answer's body, and whether the connection may carry another request."""
        fields: dict[bytes, list[bytes]] = {}
        for name, value in headers:
            fields.setdefault(name.lower(), []).append(value)
        keep = b"close" not in b",".join(fields.get(b"connection", [])).lower()
        if method == "HEAD" or status in _NO_BODY:
            return b"", keep
        if b"transfer-encoding" in fields:
            codings = b",".join(fields[b"transfer-encoding"]).lower().split(b",")
            if codings[-1].strip() != b"chunked":
                return await self.reader.read(), False  # delimited by the end of it
            return await self._chunked(), keep
        if b"content-length" in fields:
            lengths = {v.strip() for value in fields[b"content-length"] for v in value.split(b",")}
            if len(lengths) != 1 or not next(iter(lengths)).isdigit():
                raise _NotHttpError(f"an invalid Content-Length: {sorted(lengths)!r}")
            return await self.reader.readexactly(int(lengths.pop())), keep
        return await self.reader.read(), False  # no length: the body ends with the connection

    async def _chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size = (await self._line()).partition(b";")[0].strip()
            if not size or any(c not in b"0123456789abcdefABCDEF" for c in size):
                raise _NotHttpError(f"an invalid chunk size: {size[:20]!r}")
            length = int(size, 16)
            if length == 0:
                while await self._line():  # trailer fields, up to the blank line
                    pass
                return b"".join(parts)
            parts.append(await self.reader.readexactly(length))
            if await self._line():
                raise _NotHttpError("a chunk longer than its size")


def _request_bytes(request: httpx.Request, body: bytes) -> bytes:
    """The request as it goes on the wire: httpx has checked and completed its headers
    (Host, Content-Length) and holds its body as bytes."""
    if any(b"\r" in v or b"\n" in v for _, v in request.headers.raw):
        raise httpx.LocalProtocolError("a header value holds a line break", request=request)
    head = [request.method.encode("ascii"), b" ", request.url.raw_path, b" HTTP/1.1\r\n"]
    for name, value in request.headers.raw:
        head += [name, b": ", value, b"\r\n"]
    head.append(b"\r\n")
    return b"".join(head) + body


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
                limit=MAX_HEAD_BYTES,
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
        if not held.reusable:
            self._drop()  # the server closes it (`Connection: close`, an HTTP/1.0 answer)
        return response

    def _drop(self) -> None:
        if self._held is not None:
            self._held.close()
            self._held = None

    async def aclose(self) -> None:
        self._drop()
