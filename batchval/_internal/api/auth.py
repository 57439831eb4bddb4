"""OAuth 2.0 client credentials with one shared, cached token.

The token is fetched once and shared by every task; it is refreshed about a minute
before it expires (docs/api.md, section 1). Concurrent tasks that find it stale wait
on one lock, so only one of them asks the token URL. After a 401 the caller hands back
the token that was refused: if another task already replaced it, the new one is used
without a second fetch.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import anyio
import httpx

from batchval._internal import logs, redaction
from batchval._internal.api.apiclock import ApiClock
from batchval._internal.api.errors import (
    CredentialsRefusedError,
    TransportError,
    UnrecognisedAnswerError,
    WrongAddressError,
    read_no_answer,
)
from batchval._internal.api.network import Reach, host_of
from batchval._internal.api.vocabulary import SANDBOX_CLAIM

log = logs.get_logger()

REFRESH_EARLY_SECONDS = 60.0  # advised by the API; short-lived test tokens use a quarter


@dataclasses.dataclass(frozen=True, slots=True)
class Credentials:
    client_id: str
    client_secret: str = dataclasses.field(repr=False)  # never in a repr, log or message


@dataclasses.dataclass(frozen=True, slots=True)
class AccessToken:
    value: str = dataclasses.field(repr=False)
    refresh_at: float  # on the monotonic clock: about a minute before it expires
    # The token answer's `scope`, if it has one: beyond the API's description (which
    # shows access_token, token_type and expires_in), so only ever a hint (`check`).
    scope: str | None = None
    # batchval's sandbox says it is one (`SANDBOX_CLAIM`: `fake` or `rehearsal`); None
    # from any other API.
    sandbox: str | None = None

    def fresh(self, now: float) -> bool:
        return now < self.refresh_at


class TokenCache:
    def __init__(
        self,
        http: httpx.AsyncClient,
        token_url: str,
        credentials: Credentials,
        *,
        clock: Callable[[], float] = time.monotonic,
        reach: Reach | None = None,
        api_clock: ApiClock | None = None,
    ) -> None:
        """`api_clock`: hears each answer's `Date`, when the token URL is the API's host."""
        self._http = http
        self._api_clock = api_clock
        self._token_url = token_url
        self._token_host = host_of(token_url)
        self._reach = Reach() if reach is None else reach  # the client's, shared
        self._credentials = credentials
        # Whatever answers the token URL may echo the form: the secret is masked in every
        # output before it is first sent (the Basic form too, which some proxies log).
        redaction.hide(credentials.client_secret, user=credentials.client_id)
        self._clock = clock
        self._token: AccessToken | None = None
        self._lock = anyio.Lock()
        self.fetches: int = 0  # how many times the token URL was asked (for tests and the summary)

    async def token(self) -> AccessToken:
        """A token valid for at least another minute, fetched only when needed."""
        current = self._token
        if current is not None and current.fresh(self._clock()):
            return current
        async with self._lock:
            current = self._token
            if current is not None and current.fresh(self._clock()):
                return current
            self._token = await self._fetch()
            return self._token

    async def refused(self, token: AccessToken) -> AccessToken:
        """The API answered 401 to `token`: a new one, unless another task already got it."""
        async with self._lock:
            if self._token is token or self._token is None:
                self._token = await self._fetch()
            return self._token

    def discard(self, token: AccessToken) -> None:
        """Forget a token the API refused even fresh: the next call fetches another
        rather than starting from one that is certain to fail."""
        if self._token is token:
            self._token = None

    async def _fetch(self) -> AccessToken:
        started = self._clock()
        form = {
            "grant_type": "client_credentials",
            "client_id": self._credentials.client_id,
            "client_secret": self._credentials.client_secret,
        }
        sent = dt.datetime.now(dt.UTC)
        try:
            response = await self._http.post(self._token_url, data=form)
        except httpx.TransportError as exc:
            raise read_no_answer(
                exc,
                doing=f"token request to {self._token_url}",
                url=self._token_url,
                address="auth URL",
                reach=self._reach,
            ) from None
        self._reach.note(self._token_host)
        if self._api_clock is not None:
            self._api_clock.heard(response.headers.get("Date"), sent)
        self.fetches += 1
        status = response.status_code
        oauth_error = _oauth_error(response)
        if status == 401 or (status in (400, 403) and oauth_error is not None):
            raise CredentialsRefusedError(
                f"the token URL refused client id {self._credentials.client_id!r} "
                f"({status} {oauth_error or 'no error code'})",
                status,
            )
        if status in (404, 405):
            raise WrongAddressError(
                f"the token URL {self._token_url} answered {status}: the auth URL is wrong",
                status=status,
                url=self._token_url,
            )
        if status in (502, 503, 504):
            raise TransportError(f"the token URL answered {status}")
        body = _json_object(response)
        value = body.get("access_token") if body is not None else None
        expires_in = body.get("expires_in") if body is not None else None
        if (
            status != 200
            or body is None
            or not isinstance(value, str)
            or not value
            or isinstance(expires_in, bool)
            or not isinstance(expires_in, int | float)
        ):
            # Not a token answer: a proxy's page, a login portal, another service.
            raise UnrecognisedAnswerError(
                status=status,
                content_type=response.headers.get("Content-Type", ""),
                body=response.content,
                url=self._token_url,
                quotable=False,  # nothing free-form from the token URL: named, never quoted
            )
        redaction.hide(value)  # a page that reflects headers may echo it: masked everywhere
        expires_in = float(expires_in)
        log.debug("api.auth.token.fetched", expires_in=expires_in)
        early = min(REFRESH_EARLY_SECONDS, expires_in / 4)
        scope, sandbox = body.get("scope"), body.get(SANDBOX_CLAIM)
        return AccessToken(
            value,
            started + expires_in - early,
            scope if isinstance(scope, str) else None,
            sandbox if isinstance(sandbox, str) else None,
        )


def _json_object(response: httpx.Response) -> dict[str, Any] | None:
    try:
        body = response.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


# The error codes of RFC 6749 (section 5.2): the only words of the token URL's kept.
OAUTH_ERRORS = frozenset(
    {
        "invalid_request",
        "invalid_client",
        "invalid_grant",
        "unauthorized_client",
        "unsupported_grant_type",
        "invalid_scope",
    }
)


def _oauth_error(response: httpx.Response) -> str | None:
    """The RFC 6749 `error` code of a JSON answer, if it has one: one of the standard's
    codes as it is, any other `error` as "an error code of its own" (never quoted: the
    token URL's free words may echo the posted secret)."""
    body = _json_object(response)
    error = body.get("error") if body is not None else None
    if not error:
        return None
    return error if isinstance(error, str) and error in OAUTH_ERRORS else "an error code of its own"
