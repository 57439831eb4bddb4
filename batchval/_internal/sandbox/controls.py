"""The test controls served beside the API, under /_sandbox (docs/how-to/sandbox-in-tests.md).

They are not part of the partner's API: no token, no ledger record, no faults. Each one
does over HTTP what the `Sandbox` methods do in-process (`sandbox/app`), on the
`Controlled` this module states, so that the app imports its controls and never the other
way round.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from batchval._internal.sandbox.answers import rfc3339
from batchval._internal.sandbox.clock import SandboxClock
from batchval._internal.sandbox.config import Account, Faults, SandboxConfig
from batchval._internal.sandbox.ledger import Ledger


class Controlled(Protocol):
    """What the controls change and read of the sandbox (`sandbox/app.Sandbox`)."""

    @property
    def config(self) -> SandboxConfig: ...

    @property
    def clock(self) -> SandboxClock: ...

    @property
    def ledger(self) -> Ledger: ...

    def balances(self) -> dict[str, int]: ...

    def set_faults(self, faults: Faults) -> None: ...

    def account(self, client_id: str) -> Account: ...

    def revoke_tokens(self) -> int: ...


class Controls:
    def __init__(self, sandbox: Controlled) -> None:
        self._sandbox = sandbox

    def routes(self) -> list[Route]:
        return [
            Route("/_sandbox/ledger", self._ledger_view, methods=["GET"]),
            Route("/_sandbox/clock", self._clock_control, methods=["POST"]),
            Route("/_sandbox/faults", self._faults_control, methods=["POST"]),
            Route("/_sandbox/accounts/{client_id}", self._account_control, methods=["POST"]),
            Route("/_sandbox/tokens/revoke", self._revoke_control, methods=["POST"]),
        ]

    async def _ledger_view(self, request: Request) -> Response:
        sandbox = self._sandbox
        snapshot = sandbox.ledger.snapshot(sandbox.balances())
        snapshot["clock"] = rfc3339(sandbox.clock.now())
        return JSONResponse(snapshot)

    async def _clock_control(self, request: Request) -> Response:
        clock = self._sandbox.clock
        body = await request.json()
        if "set" in body:
            clock.set(dt.datetime.fromisoformat(body["set"]))
        else:
            clock.advance(float(body.get("advance_seconds", 0)))
        return JSONResponse({"clock": rfc3339(clock.now())})

    async def _faults_control(self, request: Request) -> Response:
        body = await request.json()
        self._sandbox.set_faults(Faults(**body))
        return JSONResponse(dataclasses.asdict(self._sandbox.config.faults))

    async def _account_control(self, request: Request) -> Response:
        body = await request.json()
        try:
            account = self._sandbox.account(request.path_params["client_id"])
        except KeyError:
            return JSONResponse({"error": "no such account"}, 404)
        if "top_up" in body:
            account.balance += int(body["top_up"])
        if "balance" in body:
            account.balance = int(body["balance"])
        if "blocked" in body:
            account.blocked = bool(body["blocked"])
        if "daily_limit" in body:
            account.daily_limit = body["daily_limit"]
        return JSONResponse(
            {"client_id": account.client_id, "balance": account.balance, "blocked": account.blocked}
        )

    async def _revoke_control(self, request: Request) -> Response:
        return JSONResponse({"revoked": self._sandbox.revoke_tokens()})
