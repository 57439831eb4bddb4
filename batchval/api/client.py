"""`PartnerClient`: the async client of the Partner Valuation API.

    credentials = Credentials(client_id, client_secret)
    async with PartnerClient(base_url=..., auth_url=..., credentials=credentials) as api:
        valuation = await api.create_valuation(request, idempotency_key="...")

It does one call per method call: the only retry it makes on its own is the one the API
prescribes after a 401 (a new token, then once more). Every other failure is raised as
a typed error from `batchval.api.errors` for the caller's retry policy to judge.
"""

from __future__ import annotations

import time
import urllib.parse
from types import TracebackType
from typing import Any

import httpx
import structlog

from batchval import __version__
from batchval.api.auth import AccessToken, Credentials, TokenCache
from batchval.api.errors import (
    MalformedResponseError,
    ProblemError,
    TransportError,
    UnauthorizedError,
    problem_class,
)
from batchval.api.models import StreetAnalysis, Valuation, ValuationRequest

log = structlog.get_logger()

# The API stops a request at 30 s and answers 504; we wait a little longer for that 504.
DEFAULT_TIMEOUT_SECONDS = 35.0
# Problem-less answers (a proxy's 502 page, say) are read by their status alone.
_FALLBACK_TYPES = {429: "rate-limited", 503: "data-unavailable", 504: "timeout"}


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
    ) -> None:
        self._owns_http = http is None
        self._http = http or httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
            headers={"User-Agent": f"batchval/{__version__}"},
        )
        self._base_url = base_url.rstrip("/")
        self.tokens = TokenCache(self._http, auth_url.rstrip("/") + "/oauth2/token", credentials)
        self.calls = 0  # requests sent to the API (not the token URL)

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
        if self._owns_http:
            await self._http.aclose()

    # --- the three operations ----------------------------------------------------------

    async def create_valuation(
        self, request: ValuationRequest | dict[str, Any], *, idempotency_key: str | None
    ) -> Valuation:
        """POST /valuations. Send the same key again to retry without paying twice."""
        body = request.to_json() if isinstance(request, ValuationRequest) else request
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        response = await self._call("POST", "/valuations", json=body, headers=headers)
        return Valuation.from_json(_json(response))

    async def get_valuation(self, valuation_id: str) -> Valuation:
        """GET /valuations/{id}: a valuation exactly as created, free."""
        path = "/valuations/" + urllib.parse.quote(valuation_id, safe="")
        return Valuation.from_json(_json(await self._call("GET", path)))

    async def get_street_analysis(self, postcode: str) -> StreetAnalysis:
        """GET /street-analysis/{postcode}: charged on the first read in 30 days."""
        path = "/street-analysis/" + urllib.parse.quote(postcode, safe="")
        return StreetAnalysis.from_json(_json(await self._call("GET", path)))

    # --- plumbing ----------------------------------------------------------------------

    async def _call(
        self,
        method: str,
        path: str,
        *,
        json: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        token = await self.tokens.token()
        response = await self._send(method, path, token, json, headers)
        if response.status_code == 401:
            token = await self.tokens.refused(token)
            response = await self._send(method, path, token, json, headers)
            if response.status_code == 401:
                self.tokens.discard(token)
                raise UnauthorizedError(f"{method} {path}: the API refused a fresh token (401)")
        if response.status_code >= 400:
            raise _problem(response)
        return response

    async def _send(
        self,
        method: str,
        path: str,
        token: AccessToken,
        json: dict[str, Any] | None,
        headers: dict[str, str] | None,
    ) -> httpx.Response:
        all_headers = {"Authorization": f"Bearer {token.value}", **(headers or {})}
        started = time.monotonic()
        self.calls += 1
        try:
            response = await self._http.request(
                method, self._base_url + path, json=json, headers=all_headers
            )
        except httpx.TimeoutException as exc:
            raise TransportError(
                f"{method} {path}: no answer in time ({type(exc).__name__})"
            ) from None
        except httpx.TransportError as exc:
            raise TransportError(
                f"{method} {path}: connection failed ({type(exc).__name__})"
            ) from None
        log.debug(
            "api.call",
            method=method,
            path=path,
            status=response.status_code,
            seconds=round(time.monotonic() - started, 3),
        )
        return response


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        raise MalformedResponseError(
            f"{response.request.method} {response.request.url.path}: "
            f"{response.status_code} with a body that is not JSON",
            response.status_code,
        ) from None


def _retry_after(response: httpx.Response) -> int | None:
    value = response.headers.get("Retry-After", "").strip()
    return int(value) if value.isdigit() else None


def _problem(response: httpx.Response) -> ProblemError:
    status = response.status_code
    body: Any
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("type"), str):
        type_uri = _FALLBACK_TYPES.get(status, f"http-{status}")
        body = {"type": type_uri, "title": response.reason_phrase, "detail": ""}
    type_uri = str(body["type"])
    name = type_uri.rstrip("/").rsplit("/", 1)[-1]
    code = body.get("code")
    return problem_class(name, status)(
        status=status,
        type=type_uri,
        title=str(body.get("title", "")),
        detail=str(body.get("detail", "")),
        code=code if isinstance(code, str) else None,
        retry_after=_retry_after(response),
    )
