"""The sandbox's OAuth side (docs/api.md, section 1): the token URL, the tokens it
issued, and the bearer check of every API call.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import secrets
import urllib.parse

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from batchval._internal.api import SANDBOX_CLAIM
from batchval._internal.sandbox.answers import UnauthorizedAnswer
from batchval._internal.sandbox.clock import SandboxClock
from batchval._internal.sandbox.config import Account, SandboxConfig
from batchval._internal.sandbox.faults import FaultInjector


@dataclasses.dataclass(slots=True)
class Token:
    client_id: str
    expires_at: dt.datetime
    revoked: bool = False


class TokenAuth:
    """Issues bearer tokens for client credentials and checks them on every API call."""

    def __init__(self, config: SandboxConfig, clock: SandboxClock, faults: FaultInjector) -> None:
        self._config, self._clock, self._faults = config, clock, faults
        # Every token issued, by its value, revoked and expired ones included.
        self.tokens: dict[str, Token] = {}

    async def token_endpoint(self, request: Request) -> Response:
        """POST {auth}/oauth2/token, client credentials, form-encoded."""
        # Error answers of the token URL are "not shown" by the API: these follow RFC 6749 5.2.
        if not request.headers.get("content-type", "").startswith(
            "application/x-www-form-urlencoded"
        ):
            return JSONResponse({"error": "invalid_request"}, 400)
        form = urllib.parse.parse_qs((await request.body()).decode("utf-8", "replace"))
        if form.get("grant_type") != ["client_credentials"]:
            return JSONResponse({"error": "unsupported_grant_type"}, 400)
        client_id = form.get("client_id", [""])[0]
        secret = form.get("client_secret", [""])[0]
        account = self._config.account(client_id)
        if account is None or not secrets.compare_digest(
            secret.encode(), account.client_secret.encode()
        ):
            return JSONResponse({"error": "invalid_client"}, 401)
        token = secrets.token_urlsafe(32)
        ttl = self._config.token_ttl_seconds
        self.tokens[token] = Token(account.client_id, self._clock.now() + dt.timedelta(seconds=ttl))
        return JSONResponse(
            {
                "access_token": token,
                "token_type": "Bearer",
                "expires_in": ttl,
                "scope": account.scope,
                SANDBOX_CLAIM: "rehearsal" if self._config.rehearsal else "fake",
            }
        )

    def authenticate(self, request: Request) -> Account:
        """The account whose live token the call bears; else `UnauthorizedAnswer`."""
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        token = self.tokens.get(value.strip()) if scheme.lower() == "bearer" else None
        if token is None or token.revoked or token.expires_at <= self._clock.now():
            raise UnauthorizedAnswer
        if self._faults.revokes_token():
            token.revoked = True
            raise UnauthorizedAnswer
        account = self._config.account(token.client_id)
        if account is None:  # removed from the config since the token was issued
            raise UnauthorizedAnswer
        return account

    def revoke_all(self) -> int:
        """Revoke every live token; how many there were."""
        live = [t for t in self.tokens.values() if not t.revoked]
        for token in live:
            token.revoked = True
        return len(live)
