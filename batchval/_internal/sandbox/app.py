"""A local, spec-faithful fake of the Partner Valuation API, as an ASGI app.

`Sandbox(config)` serves the API at `sandbox.app`:

    POST {auth}/oauth2/token                      client credentials, form-encoded
    POST /partners/v1/valuations                  createValuation
    GET  /partners/v1/valuations/{id}             getValuation
    GET  /partners/v1/street-analysis/{postcode}  getStreetAnalysis
    GET  /_sandbox/ledger                         read-only: charges, balances, calls
    POST /_sandbox/clock | faults | accounts/{client_id} | tokens/revoke   test controls

This module owns the routes of the three operations: it reads each request, checks it
in the order the API does, and writes every API call in the ledger. The rest lives
beside it: `auth` (the token URL, tokens, the bearer check), `state` (the idempotency
store, valuations, street reads), `limits` (the short-term and daily limits, credits),
`faults` (the injected failures), `answers` (problem documents and JSON), `controls`
(the /_sandbox routes), `config`, `ledger` and `clock`.

The app runs on one event loop; every change of state happens between two awaits, so
no lock is needed and concurrent requests see each other's effects at once, which is
what makes `request-in-progress` (409) real.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import json
import random
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from batchval._internal import postcodes
from batchval._internal.sandbox import data, rules
from batchval._internal.sandbox.answers import (
    PROBLEM_JSON,
    STATUSES,
    TITLES,
    ProblemAnswer,
    UnauthorizedAnswer,
    dumps,
    no_route_response,
    problem_response,
    rfc3339,
    unauthorized_response,
)
from batchval._internal.sandbox.auth import Token, TokenAuth
from batchval._internal.sandbox.clock import SandboxClock
from batchval._internal.sandbox.config import Account, Faults, SandboxConfig, figures_moment
from batchval._internal.sandbox.controls import Controls
from batchval._internal.sandbox.faults import FaultInjector
from batchval._internal.sandbox.lag import LoopLag
from batchval._internal.sandbox.ledger import Ledger, RequestRecord
from batchval._internal.sandbox.limits import Limits
from batchval._internal.sandbox.state import (
    STREET_REPEAT_WINDOW,
    SandboxState,
    StoredCall,
    new_valuation_id,
)

# The constants now defined in `answers` and `state` are still found here, where they were.
__all__ = [
    "API_PREFIX",
    "PROBLEM_JSON",
    "STATUSES",
    "STREET_REPEAT_WINDOW",
    "TITLES",
    "TRIGGER_FLOOR_AREA",
    "TRIGGER_OUTSIDE",
    "Sandbox",
]

API_PREFIX = "/partners/v1"
# Test-mode trigger postcodes (docs/api.md, section 5).
TRIGGER_OUTSIDE = "ZZ1 4AA"
TRIGGER_FLOOR_AREA = "ZZ1 5AA"
# Border districts the sandbox judges to be in England (the rest of BORDER is outside).
_BORDER_INSIDE = frozenset({"TD12", "TD15"})


@dataclasses.dataclass(slots=True)
class _Call:
    """What the ledger needs to know about the request being served."""

    client_id: str | None = None
    key: str | None = None
    type_name: str | None = None
    code: str | None = None
    replay: bool = False
    early: bool = False


_Handler = Callable[[Request, Account, _Call], Awaitable[Response]]


class Sandbox:
    def __init__(self, config: SandboxConfig | None = None, clock: SandboxClock | None = None):
        self.config = config or SandboxConfig()
        self.clock = clock or SandboxClock()
        # The figures' moment when their month is pinned (config.figures_month).
        self._figures_at = figures_moment(self.config.figures_month)
        self.ledger = Ledger()
        # One generator for the fault draws and the valuation ids: a seed replays both.
        self._rng = random.Random(self.config.seed)
        self._faults = FaultInjector(self.config, self.clock, self._rng)
        self._auth = TokenAuth(self.config, self.clock, self._faults)
        self._lag = LoopLag(self.clock.monotonic)
        self._limits = Limits(self.config, self.clock, self.ledger, self._lag)
        self._state = SandboxState()
        self.app = Starlette(
            routes=[
                Route("/oauth2/token", self._token, methods=["POST"]),
                Route(f"{API_PREFIX}/valuations", self._create_valuation, methods=["POST"]),
                Route(f"{API_PREFIX}/valuations/{{id}}", self._get_valuation, methods=["GET"]),
                Route(
                    f"{API_PREFIX}/street-analysis/{{postcode}}",
                    self._street_analysis,
                    methods=["GET"],
                ),
                *Controls(self).routes(),
            ],
            exception_handlers={404: self._no_route, 405: self._no_route},
        )

    async def _token(self, request: Request) -> Response:
        """The token URL's answer, with the `Date` an origin server with a clock sends (RFC
        9110), as every API answer has: the sandbox's clock when the request came."""
        at = self.clock.now()
        response = await self._auth.token_endpoint(request)
        response.headers["Date"] = email.utils.format_datetime(at, usegmt=True)
        return response

    # --- in-process controls (also served under /_sandbox) ----------------------------

    def set_faults(self, faults: Faults) -> None:
        """Replace the faults; an outage starts now and lasts `outage_seconds`."""
        self._faults.apply(faults)

    def finish_slow_work(self) -> None:
        """End every slow call's wait now (`Faults.slow_share`): the call commits."""
        self._faults.finish_slow_work()

    def account(self, client_id: str) -> Account:
        account = self.config.account(client_id)
        if account is None:
            raise KeyError(client_id)
        return account

    def top_up(self, client_id: str, credits: int) -> int:
        account = self.account(client_id)
        account.balance += credits
        return account.balance

    def revoke_tokens(self) -> int:
        return self._auth.revoke_all()

    def balances(self) -> dict[str, int]:
        return {a.client_id: a.balance for a in self.config.accounts if not a.test_mode}

    @property
    def early_grace_seconds(self) -> float:
        """How long after a 429 a call still counts as sent before it (not early)."""
        return self._limits.early_grace_seconds

    @early_grace_seconds.setter
    def early_grace_seconds(self, seconds: float) -> None:
        self._limits.early_grace_seconds = seconds

    def early_allowance_seconds(self) -> float:
        """How long after a 429 a call arriving now still counts as sent before it: the
        grace, plus how late this sandbox's own loop has lately been (`lag.LoopLag`)."""
        return self._limits.early_allowance()

    @property
    def _tokens(self) -> dict[str, Token]:
        # Every token issued, by its value: tests check that none reaches a log or a file.
        return self._auth.tokens

    # --- plumbing --------------------------------------------------------------------

    async def _serve(self, request: Request, call: _Call, handler: _Handler) -> Response:
        """Authenticate, pace, answer, and write the call in the ledger whatever happens."""
        at, mono = self.clock.now(), self.clock.monotonic()
        self._lag.watch()
        call.key = request.headers.get("Idempotency-Key")
        response: Response
        try:
            account = self._auth.authenticate(request)
            call.client_id = account.client_id
            call.early = self._limits.is_early(account.client_id, at, mono)
            storm = self._faults.storm_retry_after()
            if storm is not None:  # whatever the rate
                self._limits.refuse_short_term(account.client_id, storm)
            self._limits.take_rate_token(account, mono)
            response = await handler(request, account, call)
        except UnauthorizedAnswer:
            response = unauthorized_response()
        except ProblemAnswer as problem:
            call.type_name, call.code = problem.type_name, problem.code
            response = problem_response(problem, self.config.docs_base)
        # The API's `Date` is its own clock, the one `valuedAt` is read from.
        response.headers["Date"] = email.utils.format_datetime(at, usegmt=True)
        self.ledger.requests.append(
            RequestRecord(
                at=at,
                monotonic=mono,
                client_id=call.client_id,
                method=request.method,
                path=request.url.path,
                idempotency_key=call.key,
                status=response.status_code,
                type_name=call.type_name,
                code=call.code,
                replay=call.replay,
                early=call.early,
            )
        )
        return response

    @staticmethod
    async def _json_body(request: Request) -> Any:
        try:
            return json.loads(await request.body())
        except (ValueError, UnicodeDecodeError):
            raise ProblemAnswer(
                "invalid-request", "The body is not valid JSON.", "malformed_json"
            ) from None

    async def _no_route(self, request: Request, exc: Exception) -> Response:
        """Unknown paths and methods get problem documents too (docs/api.md, section 5)."""
        return no_route_response(request, getattr(exc, "status_code", 404), self.config.docs_base)

    # --- createValuation -------------------------------------------------------------

    async def _create_valuation(self, request: Request) -> Response:
        return await self._serve(request, _Call(), self._create_valuation_as)

    async def _create_valuation_as(
        self, request: Request, account: Account, call: _Call
    ) -> Response:
        faults = self.config.faults
        self._faults.check_outage(faults)
        # Before the replay: once the limit is reached, replays are refused too
        # (docs/api.md, section 8).
        self._limits.check_daily_limit(account)
        body = await self._json_body(request)
        refusal = rules.check_request(body)
        if refusal is not None:
            raise ProblemAnswer("invalid-request", refusal.detail, refusal.code)
        key = call.key
        if key is not None and not 8 <= len(key) <= 128:
            raise ProblemAnswer(
                "invalid-request", "Idempotency-Key must be 8 to 128 characters.", "invalid_value"
            )
        wanted = rules.canonical(body)
        stored = self._state.stored_call(account.client_id, key)
        if stored is not None:
            if stored.request != wanted:
                raise ProblemAnswer(
                    "idempotency-key-reused",
                    "This Idempotency-Key was used with a different request.",
                )
            if not stored.done:
                raise ProblemAnswer(
                    "request-in-progress", "A request with this Idempotency-Key is still running."
                )
            call.replay = True
            return self._faults.after_commit(stored.body, faults)
        self._check_coverage(account, wanted)
        self._limits.check_spend(account, self.config.valuation_credits)
        try:
            parts = data.valuation_parts(wanted, now=self._figures_at or self.clock.now())
        except data.FloorAreaUnknown:
            raise ProblemAnswer(
                "floor-area-required",
                "No typical floor area is known for that bedroom count, area and property type;"
                " send floorAreaSqm with a new Idempotency-Key.",
            ) from None
        entry = self._state.hold(account.client_id, key, wanted)
        work = asyncio.ensure_future(self._value(account, key, body, parts, entry, faults))
        try:
            outcome = await asyncio.wait_for(
                asyncio.shield(work), self.config.request_timeout_seconds
            )
        except TimeoutError:
            # The work goes on and commits; a retry with the key gets 409 until then.
            raise ProblemAnswer("timeout", "The request ran past its time limit.") from None
        if isinstance(outcome, ProblemAnswer):
            raise outcome
        return self._faults.after_commit(outcome, faults)

    @staticmethod
    def _check_coverage(account: Account, request: dict[str, Any]) -> None:
        postcode = request["postcode"]
        if account.test_mode and postcode == TRIGGER_OUTSIDE:
            raise ProblemAnswer(
                "outside-coverage", "The postcode sector is not one valued.", "unknown_sector"
            )
        if account.test_mode and postcode == TRIGGER_FLOOR_AREA:
            raise ProblemAnswer(
                "floor-area-required",
                "No typical floor area is known for this test postcode; send floorAreaSqm.",
            )
        region = postcodes.region(postcode)
        if region is postcodes.Region.UNKNOWN:
            raise ProblemAnswer(
                "outside-coverage", "The postcode sector is not one valued.", "unknown_sector"
            )
        if region.outside_coverage or (
            region is postcodes.Region.BORDER and postcodes.district(postcode) not in _BORDER_INSIDE
        ):
            raise ProblemAnswer("outside-coverage", "The postcode is not in England or Wales.")

    async def _value(
        self,
        account: Account,
        key: str | None,
        body: dict[str, Any],
        parts: dict[str, Any],
        entry: StoredCall,
        faults: Faults,
    ) -> bytes | ProblemAnswer:
        """Take the time the work takes, then commit: charge, store, answer (a 201 body)."""
        await self._faults.latency(faults)
        await self._faults.slow_work(faults)
        valuation_id = new_valuation_id(self._rng)
        try:
            charge = self._limits.charge(
                account, "valuation", self.config.valuation_credits, key, valuation_id
            )
        except ProblemAnswer as problem:
            # Nothing was created: the key is free again, and the answer is this problem.
            self._state.release(account.client_id, key)
            return problem
        valuation: dict[str, Any] = {"id": valuation_id}
        if account.test_mode:
            valuation["mode"] = "test"
        if "reference" in body:
            valuation["reference"] = body["reference"]
        valuation["valuedAt"] = rfc3339(self.clock.now(), self.config.stamp_precision)
        valuation.update(parts)
        self._state.keep_valuation(valuation_id, account.client_id, dumps(valuation))
        if charge is not None:
            valuation["charge"] = charge
        entry.body, entry.done = dumps(valuation), True
        return entry.body

    # --- getValuation ----------------------------------------------------------------

    async def _get_valuation(self, request: Request) -> Response:
        return await self._serve(request, _Call(), self._get_valuation_as)

    async def _get_valuation_as(self, request: Request, account: Account, call: _Call) -> Response:
        found = self._state.valuation(request.path_params["id"], account.client_id)
        if found is None:
            raise ProblemAnswer("not-found", "No valuation has that id.")
        return Response(found, 200, media_type="application/json")

    # --- getStreetAnalysis -----------------------------------------------------------

    async def _street_analysis(self, request: Request) -> Response:
        return await self._serve(request, _Call(), self._street_analysis_as)

    async def _street_analysis_as(
        self, request: Request, account: Account, call: _Call
    ) -> Response:
        faults = self.config.faults
        self._faults.check_outage(faults)
        postcode = postcodes.normalise(request.path_params["postcode"])
        if postcode is None:
            raise ProblemAnswer(
                "invalid-request", "postcode must be a full UK postcode.", "invalid_value"
            )
        now = self.clock.now()
        held = self._state.street_read(account.client_id, postcode, now)
        if held is not None:  # free within 30 days (docs/api.md, section 2)
            call.replay = True
            return JSONResponse(held)
        self._limits.check_daily_limit(account)
        self._limits.check_spend(account, self.config.street_analysis_credits)
        body = data.street_analysis_body(postcode, now=self._figures_at or now)
        if body is None:
            raise ProblemAnswer("not-found", "Nothing is held for that postcode.")
        await self._faults.latency(faults)
        charge = self._limits.charge(
            account, "street-analysis", self.config.street_analysis_credits, None, postcode
        )
        answer: dict[str, Any] = {"mode": "test", **body} if account.test_mode else dict(body)
        self._state.keep_street_read(account.client_id, postcode, now, answer)
        return JSONResponse(answer if charge is None else {**answer, "charge": charge})
