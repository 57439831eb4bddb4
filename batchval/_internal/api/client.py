"""`PartnerClient`: the async client of the Partner Valuation API.

    credentials = Credentials(client_id, client_secret)
    async with PartnerClient(base_url=..., auth_url=..., credentials=credentials) as api:
        valuation = await api.create_valuation(request, idempotency_key="...")

It does one call per method call: the only retry it makes on its own is the one the API
prescribes after a 401 (a new token, then once more). Every other failure is raised as
a typed error from `batchval._internal.api.errors` (whose `read_failure` says what each answer
means) for the caller's retry policy to judge.

`post_valuation` and `read_valuation` take a `gate`, awaited right before each request
leaves, the retry after a 401 included: the caller's pacing (a `Retry-After` pause, a
stopping run) holds however long the task waited for a token.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import datetime as dt
import functools
import json
import math
import os
import ssl
import time
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import Any, Protocol

import anyio
import httpx

from batchval._internal import logs, redaction
from batchval._internal.api.apiclock import ApiClock, http_date
from batchval._internal.api.auth import AccessToken, Credentials, TokenCache
from batchval._internal.api.errors import (
    MalformedResponseError,
    NotFoundError,
    TransportError,
    UnauthorizedError,
    UnrecognisedAnswerError,
    WrongAddressError,
    is_json_type,
    read_failure,
    read_no_answer,
)
from batchval._internal.api.models import StreetAnalysis, Valuation, ValuationRequest
from batchval._internal.api.network import Reach, host_of, port_of
from batchval._version import __version__

log = logs.get_logger()

# The API stops a request at 30 s and answers 504; we wait a little longer for that 504.
DEFAULT_TIMEOUT_SECONDS = 35.0
_JSON_HEADERS = {"Content-Type": "application/json"}
_USER_AGENT = f"batchval/{__version__}"
# A well-formed valuation id that no valuation has: asked without a token, it proves an
# address is the API's (401) before a not-found from that address is believed.
PROBE_ID = "val_batchvalcheck0000000000"


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    """A successful answer: the exact bytes (which a caller may keep before reading them)
    and the JSON object they hold."""

    status: int
    body: bytes
    data: dict[str, Any]
    date: str | None = None  # the `Date` header: the API's clock (money/charges reads it)


def canonical_json(body: dict[str, Any]) -> bytes:
    """The request bytes: sorted keys, no spaces, UTF-8 (what the input stage builds)."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


class PartnerClient:
    def __init__(
        self,
        *,
        base_url: str,
        auth_url: str,
        credentials: Credentials,
        http: httpx.AsyncClient | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        max_connections: int = 32,
        reach: Reach | None = None,
        api_clock: ApiClock | None = None,
    ) -> None:
        """`reach`: the hosts that have answered before (a DIR's memory of them), which
        decides whether a host name that does not resolve is a wrong address or an outage
        (`read_no_answer`); every host that answers is noted in it. `api_clock` hears the
        `Date` of every answer of the API's host (`apiclock`)."""
        self._owns_http = http is None
        self._closers: list[Callable[[], Awaitable[None]]] = []
        self._timeouts = {"timeout": _timeout(timeout).as_dict()}
        if http is None:
            # A lane a call in flight: httpx's own transport with one connection, lent
            # to one call at a time and asked directly. One httpx client with a pool of
            # them all costs more CPU the more connections it holds (httpcore walks the
            # whole pool for each request): 1.4 to 1.7 ms a call in HTTP at 8, 2.4 to
            # 3.8 ms at 32, against 0.7 to 1 ms for the lanes; a client around each lane
            # adds 0.1 ms (its cookie jar, auth and redirect loops).
            tls = tls_context()  # loading the CA bundle is costly: once
            transports = [_one_connection(base_url, tls) for _ in range(max_connections)]
            self._lanes: list[_Lane] = [_Direct(transport) for transport in transports]
            self._closers = [transport.aclose for transport in transports]
            # Tokens are rare: httpx's own client (and its reading of proxy variables).
            http = httpx.AsyncClient(
                verify=tls, timeout=_timeout(timeout), headers={"User-Agent": _USER_AGENT}
            )
            self._closers.append(http.aclose)
        else:
            self._lanes = [http.send]  # the caller's (a MockTransport in tests), shared
        self._idle = list(self._lanes)
        # A free lane is taken without a trip through the event loop (fast_acquire): the
        # call yields soon enough, on its socket.
        self._free = anyio.Semaphore(len(self._lanes), fast_acquire=True)
        self._base_url = base_url.rstrip("/")
        # Parsed once: the URL of every POST (parsing it for each call was 3 % of the CPU).
        self._valuations_url = httpx.URL(self._base_url + "/valuations")
        self._base_host = host_of(self._valuations_url)
        self.reach: Reach = Reach() if reach is None else reach
        self.api_clock: ApiClock = ApiClock() if api_clock is None else api_clock
        token_url = auth_url.rstrip("/") + "/oauth2/token"
        self.tokens: TokenCache = TokenCache(
            http,
            token_url,
            credentials,
            reach=self.reach,
            # The token URL's `Date` is the API's clock only on the API's own host and port.
            api_clock=self.api_clock if port_of(token_url) == port_of(base_url) else None,
        )
        self.calls: int = 0  # requests sent to the API (not the token URL)
        # Those calls by the status answered, "no_answer" when none came back (metrics).
        self.statuses: collections.Counter[str] = collections.Counter()
        self._address_proven = False

    async def __aenter__(self) -> PartnerClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for close in self._closers:
            await close()

    # --- the three operations ----------------------------------------------------------

    async def post_valuation(
        self,
        body: bytes,
        *,
        idempotency_key: str | None,
        gate: Callable[[], Awaitable[None]] | None = None,
    ) -> Answer:
        """POST /valuations with these exact bytes; the answer before it is read as a
        Valuation (so that a caller can keep a paid answer it may fail to read)."""
        headers = dict(_JSON_HEADERS)
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        answer = await self._call("POST", "/valuations", "/valuations", body, headers, gate)
        return self._shaped(answer, "/valuations", "id", "valuation")

    async def create_valuation(
        self, request: ValuationRequest | dict[str, Any], *, idempotency_key: str | None
    ) -> Valuation:
        """POST /valuations. Send the same key again to retry without paying twice."""
        body = request.to_json() if isinstance(request, ValuationRequest) else request
        answer = await self.post_valuation(canonical_json(body), idempotency_key=idempotency_key)
        return Valuation.from_json(answer.data)

    async def get_valuation(self, valuation_id: str) -> Valuation:
        """GET /valuations/{id}: a valuation exactly as created, free."""
        return Valuation.from_json((await self.read_valuation(valuation_id)).data)

    async def read_valuation(
        self, valuation_id: str, *, gate: Callable[[], Awaitable[None]] | None = None
    ) -> Answer:
        """GET /valuations/{id}, free; the answer before it is read as a Valuation (so that
        a read-back can keep the bytes, or judge an answer it cannot read)."""
        path = "/valuations/" + urllib.parse.quote(valuation_id, safe="")
        answer = await self._call("GET", "/valuations/{id}", path, gate=gate)
        return self._shaped(answer, path, "id", "valuation")

    async def get_street_analysis(self, postcode: str) -> StreetAnalysis:
        """GET /street-analysis/{postcode}: charged on the first read in 30 days."""
        return StreetAnalysis.from_json((await self.read_street_analysis(postcode)).data)

    async def read_street_analysis(
        self, postcode: str, *, gate: Callable[[], Awaitable[None]] | None = None
    ) -> Answer:
        """GET /street-analysis/{postcode}, the answer before it is read: a first read is
        charged, so a caller keeps the bytes before it reads them (docs/api.md, 4.3)."""
        path = "/street-analysis/" + urllib.parse.quote(postcode, safe="")
        answer = await self._call("GET", "/street-analysis/{postcode}", path, gate=gate)
        return self._shaped(answer, path, "postcode", "coveredPostcodes")

    # --- plumbing ----------------------------------------------------------------------

    def _shaped(self, answer: Answer, path: str, *members: str) -> Answer:
        """`answer`, if it holds one of the members its resource always has; otherwise it
        is not that resource's answer (a proxy's `{"status": "ok"}`): unrecognised, never
        read as the resource, never blamed on the row."""
        if any(member in answer.data for member in members):
            return answer
        raise UnrecognisedAnswerError(
            status=answer.status,
            content_type="application/json",
            body=answer.body,
            url=self._base_url + path,
        )

    @contextlib.asynccontextmanager
    async def _lend(self) -> AsyncIterator[_Lane]:
        """A connection for one call: the one used last (still warm) first."""
        if not self._owns_http:
            yield self._lanes[0]
            return
        async with self._free:
            lane = self._idle.pop()
            try:
                yield lane
            finally:
                self._idle.append(lane)

    async def _call(
        self,
        method: str,
        operation: str,
        path: str,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
        gate: Callable[[], Awaitable[None]] | None = None,
    ) -> Answer:
        token = await self.tokens.token()
        response = await self._send(method, path, token, content, headers, gate)
        if response.status_code == 401:
            token = await self.tokens.refused(token)
            response = await self._send(method, path, token, content, headers, gate)
            if response.status_code == 401:
                self.tokens.discard(token)
                raise UnauthorizedError(
                    f"{method} {path}: the API refused a fresh token (401)", token=token
                )
        content_type = response.headers.get("Content-Type", "")
        if response.status_code >= 400:
            failure = read_failure(
                method=method,
                operation=operation,
                url=str(response.request.url),
                status=response.status_code,
                content_type=content_type,
                body=response.content,
                retry_after=_retry_after(response),
            )
            if isinstance(failure, NotFoundError) and not self._address_proven:
                await self._prove_address(gate)
            raise failure
        if not 200 <= response.status_code < 300:
            # A redirect or an informational answer: the API gives neither.
            raise UnrecognisedAnswerError(
                status=response.status_code,
                content_type=content_type,
                body=response.content,
                url=str(response.request.url),
            )
        return _answer(response, content_type)

    async def _prove_address(self, gate: Callable[[], Awaitable[None]] | None) -> None:
        """A not-found blames a postcode or an id only if it came from the API: a wrong
        base URL (another version, a proxy's catch-all) can answer every path with a
        not-found. The API answers a call without a token with 401 (docs/api.md, 5), so
        one such call, before the first not-found is believed, proves the address; any
        other answer is a wrong address (64), never a row's problem."""
        if gate is not None:
            await gate()
        url = f"{self._base_url}/valuations/{PROBE_ID}"
        request = httpx.Request(
            "GET", url, headers={"User-Agent": _USER_AGENT}, extensions=self._timeouts
        )
        self.calls += 1
        sent = dt.datetime.now(dt.UTC)
        try:
            async with self._lend() as send:
                response = await send(request)
        except httpx.TransportError as exc:
            self.statuses["no_answer"] += 1
            raise read_no_answer(
                exc, doing=f"GET {url}", url=url, address="base URL", reach=self.reach
            ) from None
        except httpx.HTTPError as exc:  # a body that cannot be decoded: not the API's 401
            self.statuses["no_answer"] += 1
            raise TransportError(f"GET {url}: {type(exc).__name__}") from None
        status = response.status_code
        self.statuses[str(status)] += 1
        self.reach.note(self._base_host)
        self.api_clock.heard(response.headers.get("Date"), sent)
        if status in (401, 429):
            self._address_proven = True
            return
        if status in (502, 503, 504):  # not answering now: prove it on a later not-found
            raise TransportError(f"GET {url} answered {status}: the address is not proven yet")
        raise WrongAddressError(
            f"a not-found came from {self._base_url}, where a call without a token answers "
            f"{status}, not the API's 401: the base URL is not the API's",
            status=status,
            url=url,
        )

    async def _send(
        self,
        method: str,
        path: str,
        token: AccessToken,
        content: bytes | None,
        headers: dict[str, str] | None,
        gate: Callable[[], Awaitable[None]] | None,
    ) -> httpx.Response:
        if gate is not None:
            await gate()
        all_headers = {
            "User-Agent": _USER_AGENT,
            "Authorization": f"Bearer {token.value}",
            **(headers or {}),
        }
        url = self._valuations_url if path == "/valuations" else self._base_url + path
        started, sent = time.monotonic(), dt.datetime.now(dt.UTC)
        self.calls += 1
        answered = "no_answer"
        try:
            request = httpx.Request(
                method, url, content=content, headers=all_headers, extensions=self._timeouts
            )
            async with self._lend() as send:
                response = await send(request)
            answered = str(response.status_code)
        except httpx.DecodingError:
            # The body could not be decoded (a Content-Encoding that lies): not an answer
            # the API gives, so never read, never blamed on the row.
            raise UnrecognisedAnswerError(
                status=0,
                content_type="undecodable body",
                body=b"",
                url=self._base_url + path,
            ) from None
        except httpx.UnsupportedProtocol:
            raise WrongAddressError(
                f"{self._base_url}: not an http or https URL", status=0, url=self._base_url
            ) from None
        except httpx.TransportError as exc:  # no answer: why, from the exception's causes
            raise read_no_answer(
                exc,
                doing=f"{method} {self._base_url}{path}",
                url=str(url),
                address="base URL",
                reach=self.reach,
            ) from None
        finally:
            self.statuses[answered] += 1
        self.reach.note(self._base_host)
        self.api_clock.heard(response.headers.get("Date"), sent)
        log.debug(
            "api.call",
            method=method,
            path=path,
            status=response.status_code,
            seconds=round(time.monotonic() - started, 3),
        )
        return response


class _Lane(Protocol):
    """Sends one request and returns its answer, read."""

    async def __call__(self, request: httpx.Request) -> httpx.Response: ...


class _Direct:
    """A lane on one transport, asked without an httpx client around it: the answer is
    read whole and the connection handed back before the call goes on."""

    def __init__(self, transport: httpx.AsyncBaseTransport) -> None:
        self._transport = transport

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        response = await self._transport.handle_async_request(request)
        response.request = request
        try:
            await response.aread()
        finally:
            await response.aclose()
        return response


def _timeout(seconds: float) -> httpx.Timeout:
    return httpx.Timeout(seconds, connect=min(seconds, 10.0))


def tls_context() -> ssl.SSLContext:
    """httpx's context for verifying a server (the CA bundle at `SSL_CERT_FILE` or
    `SSL_CERT_DIR` when set, else certifi's), made once a process for each bundle and
    shared by every client: loading a bundle costs up to 20 ms of CPU (a system bundle of
    some 140 certificates), paid by each client and each run of a process that runs many
    (the Python API's caller, a scheduler's worker). A bundle changed on disk is loaded
    again. (Sharing is safe: no client changes it, but for the same ALPN protocols on
    each TLS connection, set under the GIL.)"""
    bundle, folder = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
    stamp = None
    if bundle:
        with contextlib.suppress(OSError):
            found = os.stat(bundle)
            stamp = (found.st_mtime_ns, found.st_size)
    return _tls_context(bundle, folder, stamp)


@functools.lru_cache(maxsize=8)
def _tls_context(
    bundle: str | None, folder: str | None, stamp: tuple[int, int] | None
) -> ssl.SSLContext:
    """The context for one bundle (the arguments are the cache's key: httpx reads the
    environment itself)."""
    del bundle, folder, stamp
    return httpx.create_ssl_context()


def _one_connection(url: str, tls: ssl.SSLContext) -> httpx.AsyncBaseTransport:
    """httpx's transport with one keep-alive connection to `url`'s server, through the
    proxy the environment names for it, if any."""
    return httpx.AsyncHTTPTransport(
        verify=tls,
        proxy=environment_proxy(url),
        limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
    )


def environment_proxy(url: str) -> str | None:
    """The proxy that `HTTPS_PROXY`, `HTTP_PROXY` or `ALL_PROXY` name for `url`, unless
    `NO_PROXY` excludes its host (the standard library's reading of the variables)."""
    parts = urllib.parse.urlsplit(url)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return proxy


def _answer(response: httpx.Response, content_type: str) -> Answer:
    """A success read as a JSON object. A JSON body cut short is malformed (a replay gets
    it whole); a success that is not JSON at all (a portal's HTML page) is unrecognised."""
    body = response.content
    url = str(response.request.url)
    if content_type and not is_json_type(content_type):
        raise UnrecognisedAnswerError(
            status=response.status_code, content_type=content_type, body=body, url=url
        )
    try:
        data = json.loads(body)
    except ValueError:
        raise MalformedResponseError(
            f"{response.request.method} {response.request.url.path}: "
            f"{response.status_code} with a body that is not JSON",
            response.status_code,
        ) from None
    if not isinstance(data, dict):
        raise UnrecognisedAnswerError(
            status=response.status_code, content_type=content_type, body=body, url=url
        )
    body, data = _masked(body, data)
    return Answer(response.status_code, body, data, response.headers.get("Date"))


def _masked(body: bytes, data: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """A success as it is kept: paid, so whole, but with every secret and token the
    process knows masked in each of its strings, in every form (`batchval._internal.redaction`),
    and any `Bearer` token; its bytes written again from the masked object then, and
    exactly as they came otherwise."""
    text = body.decode("utf-8", "replace")
    if not redaction.active().holds(text) and "bearer" not in text.lower():
        return body, data
    masked: dict[str, Any] = redaction.scrub_data(data)
    if masked == data:
        return body, data
    return json.dumps(masked, ensure_ascii=False, separators=(",", ":")).encode(), masked


def _retry_after(response: httpx.Response) -> int | None:
    """Whole seconds from `Retry-After`: the API sends seconds; an HTTP-date (which RFC
    9110 also allows, and a gateway may send) is read as the seconds until it from the
    answer's own `Date` (the clock that wrote the date), or from this machine's clock
    when there is none. A clock a minute ahead of the server's would otherwise hear 30 s
    before the server's midnight as 0 s, and a daily limit would lose a day."""
    value = response.headers.get("Retry-After", "").strip()
    if value.isdigit():
        return int(value)
    when = http_date(value)
    if when is None:
        return None
    sent = http_date(response.headers.get("Date", "")) or dt.datetime.now(dt.UTC)
    return max(0, math.ceil((when - sent).total_seconds()))
