"""Helpers shared by the tests: credentials, the default test config, raw token calls."""

from __future__ import annotations

import httpx

from batchval.api import Credentials, PartnerClient
from batchval.sandbox.config import Account, SandboxConfig
from batchval.sandbox.server import RunningSandbox

LIVE = Credentials("sandbox-live", "sandbox-live-secret")
TEST = Credentials("sandbox-test", "sandbox-test-secret")
# A live account with few credits, for the spending rules.
POOR = Credentials("poor-live", "poor-live-secret")


def make_config() -> SandboxConfig:
    """The sandbox as tests want it by default: no short-term limit unless a test sets one."""
    config = SandboxConfig(rate_limit=None)
    config.accounts.append(Account(POOR.client_id, POOR.client_secret, balance=25))
    return config


def client_for(served: RunningSandbox, credentials: Credentials, **kwargs: object) -> PartnerClient:
    return PartnerClient(
        base_url=served.base_url,
        auth_url=served.auth_url,
        credentials=credentials,
        **kwargs,  # type: ignore[arg-type]
    )


async def token_for(http: httpx.AsyncClient, credentials: Credentials) -> str:
    response = await http.post(
        "/oauth2/token",
        data={
            "grant_type": "client_credentials",
            "client_id": credentials.client_id,
            "client_secret": credentials.client_secret,
        },
    )
    response.raise_for_status()
    token: str = response.json()["access_token"]
    return token
