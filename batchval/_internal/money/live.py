"""`--live` (`run.live`): a production job never falls back to test mode.

`run`, `streets` and `verify` call `insist_on_live` before they take their DIR, so that a
refusal sends nothing, charges nothing and writes nothing but the one line on stderr
(a `RunRefusedError`, `refused`, 64). Live means an API is configured (not the embedded
sandbox, which is test mode) whose token is not of the test scope (docs/api.md, section 5:
`partners:test` is test mode, fake figures, never charged). The token is fetched once
for that; a token fetch is free and is no call.

The scope is a field the API's description does not show in the token answer (the
sandbox names it), so it can only refuse: a token answer that names no scope is let
through, and the answers' `mode` is then the only word on it (summary.json's `mode`). A
token URL that fails (refused credentials, an outage) refuses nothing either: the run
meets the same failure and stops with its own reason and code, as without `--live`.

batchval's own sandbox says in its token answer that it is one (`SANDBOX_CLAIM`): its
figures are fake whatever the scope, so `--live` refuses it, unless it was started with
`--rehearsal` (the docs' walk-throughs of a live night): the run goes on and its mode is
`rehearsal`, never `live`.

A dry run sends nothing and promises no network, so under `--live` it refuses only the
missing API; `batchval check` says what the token's scope is.

The option is declared here, once, for the three commands (as valuations/book_options
declares run's book options): cli.py stays at its size.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from batchval._internal import logs
from batchval._internal.api import TEST_SCOPE, AccessToken, Credentials, PartnerClient, PartnerError
from batchval._internal.outcome import RunRefusedError, StopReason
from batchval._internal.sending import run_async
from batchval._internal.settings import ApiSettings

log = logs.get_logger()

TOKEN_TIMEOUT_SECONDS = 10.0  # one token request: a preflight, not a run's patience

NO_API = (
    "--live (run.live): no API is configured (the config's api section, or "
    "BATCHVAL_BASE_URL, BATCHVAL_AUTH_URL, BATCHVAL_CLIENT_ID and BATCHVAL_CLIENT_SECRET); "
    "the embedded sandbox is test mode. Nothing was sent"
)

_Command = TypeVar("_Command", bound=Callable[..., Any])


def live_option(command: _Command) -> _Command:
    """`--live`, the same on `run`, `streets` and `verify` (the config's `run.live`)."""
    return click.option(
        "--live",
        is_flag=True,
        help="Refuse (64) unless a live API is configured: no sandbox, no test credentials.",
    )(command)


def insist_on_live(api: ApiSettings | None, *, dry: bool = False) -> str:
    """Under `--live`: a `RunRefusedError` (64) unless `api` is a live API; else `live`,
    or `rehearsal` for batchval's sandbox started with --rehearsal (its token says so).
    `dry`: a dry run, which fetches no token (it promises no network) and so refuses only
    a missing API."""
    if api is None:
        raise RunRefusedError(StopReason.REFUSED, NO_API)
    if dry:
        return "live"
    token = run_async(live_token, api)
    scope = None if token is None else token.scope
    sandbox = None if token is None else token.sandbox
    log.debug("engine.live.token", scope=scope, sandbox=sandbox)
    if scope == TEST_SCOPE:
        raise RunRefusedError(
            StopReason.REFUSED,
            f"--live (run.live): client id {api.client_id!r} has test credentials (its "
            f"token's scope is {TEST_SCOPE}: test mode, fake figures); give the live client "
            "id and secret, or leave out --live for a trial. Nothing was sent",
        )
    if sandbox is not None and sandbox != "rehearsal":
        raise RunRefusedError(
            StopReason.REFUSED,
            f"--live (run.live): the API at {api.base_url} is batchval's sandbox (its token "
            "says so): fake figures, never live. Start it with --rehearsal to rehearse a "
            "live night, or leave out --live for a trial. Nothing was sent",
        )
    return "rehearsal" if sandbox == "rehearsal" else "live"


def preflight_client(api: ApiSettings, timeout: float) -> PartnerClient:
    """A client of one connection to `api`, for a token and the few calls of a preflight
    (`--live` here, `batchval check`), with its own short `timeout`."""
    return PartnerClient(
        base_url=api.base_url,
        auth_url=api.auth_url,
        credentials=Credentials(api.client_id, api.client_secret),
        timeout=timeout,
        max_connections=1,
    )


async def live_token(api: ApiSettings) -> AccessToken | None:
    """`api`'s token answer (None: no token came: the run meets that failure itself)."""
    async with preflight_client(api, TOKEN_TIMEOUT_SECONDS) as client:
        try:
            return await client.tokens.token()
        except PartnerError as exc:
            log.info("engine.live.token_failed", error=str(exc))
            return None
