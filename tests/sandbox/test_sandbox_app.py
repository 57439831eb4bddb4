"""The sandbox as a server, over a real loopback socket: every rule of docs/api.md."""

from __future__ import annotations

import datetime as dt
import email.utils
import re
import time
from typing import Any

import anyio
import httpx
import pytest
from openapi_check import validate_response
from support import LIVE, POOR, TEST, apart_on_the_clock, token_for, wait_until_async

from batchval._internal.sandbox.app import Sandbox
from batchval._internal.sandbox.clock import SandboxClock
from batchval._internal.sandbox.config import (
    ConfigError,
    Faults,
    RateLimit,
    SandboxConfig,
    config_from_mapping,
)

pytestmark = pytest.mark.anyio

V = "/partners/v1/valuations"
S = "/partners/v1/street-analysis"
GOOD: dict[str, Any] = {"postcode": "SW1A 2AA", "propertyType": "terraced", "bedrooms": 3}


async def bearer(raw: httpx.AsyncClient, credentials: Any = LIVE) -> dict[str, str]:
    return {"Authorization": f"Bearer {await token_for(raw, credentials)}"}


async def past_the_grace(sandbox: Sandbox) -> None:
    """Until the last Retry-After given is older than the sandbox's allowance (its grace and
    its loop's recent lateness) and a margin, so that a call now is counted early (one sent
    before the answer arrived is not)."""
    issued = sandbox.ledger.deadlines[-1].issued_monotonic
    await wait_until_async(
        lambda: sandbox.clock.monotonic() > issued + sandbox.early_allowance_seconds() + 0.1,
        10,
        "the Retry-After's grace to pass",
    )


async def post(
    raw: httpx.AsyncClient, body: Any, headers: dict[str, str], key: str | None = None
) -> httpx.Response:
    extra = {"Idempotency-Key": key} if key is not None else {}
    response = await raw.post(V, json=body, headers={**headers, **extra})
    check(response, "POST", "/valuations")
    return response


def check(response: httpx.Response, method: str, template: str) -> None:
    """Every answer the tests see must be one the OpenAPI description allows."""
    body = response.json() if response.content else None
    validate_response(
        method,
        template,
        response.status_code,
        response.headers.get("content-type", ""),
        body,
        headers=dict(response.headers),
    )


def problem_name(response: httpx.Response) -> str:
    return str(response.json()["type"]).rsplit("/", 1)[-1]


# --- OAuth ------------------------------------------------------------------------------


async def test_token_for_good_credentials(raw: httpx.AsyncClient) -> None:
    """The token URL answers a bearer token lasting 1800 s for form-encoded credentials."""
    response = await raw.post(
        "/oauth2/token",
        data={
            "grant_type": "client_credentials",
            "client_id": "sandbox-test",
            "client_secret": "sandbox-test-secret",
        },
    )
    assert response.status_code == 200
    body = response.json()
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 1800
    assert body["scope"] == "partners:test"
    assert len(body["access_token"]) >= 32


@pytest.mark.parametrize(
    ("form", "status", "error"),
    [
        (
            {
                "grant_type": "client_credentials",
                "client_id": "sandbox-live",
                "client_secret": "wrong",
            },
            401,
            "invalid_client",
        ),
        (
            {"grant_type": "client_credentials", "client_id": "nobody", "client_secret": "x"},
            401,
            "invalid_client",
        ),
        (
            {
                "grant_type": "password",
                "client_id": "sandbox-live",
                "client_secret": "sandbox-live-secret",
            },
            400,
            "unsupported_grant_type",
        ),
    ],
)
async def test_token_refused(
    raw: httpx.AsyncClient, form: dict[str, str], status: int, error: str
) -> None:
    """Bad credentials or grant types are refused with an RFC 6749 error."""
    response = await raw.post("/oauth2/token", data=form)
    assert (response.status_code, response.json()["error"]) == (status, error)


async def test_token_needs_a_form(raw: httpx.AsyncClient) -> None:
    """Credentials sent as JSON rather than a form are refused."""
    response = await raw.post("/oauth2/token", json={"grant_type": "client_credentials"})
    assert response.status_code == 400


@pytest.mark.parametrize(
    "authorization", [None, "Bearer not-a-token", "Basic c2FuZGJveDpzZWNyZXQ=", "Bearer"]
)
async def test_missing_or_invalid_token_gets_the_exact_401(
    raw: httpx.AsyncClient, authorization: str | None
) -> None:
    """A missing or invalid token gets 401, WWW-Authenticate and a small JSON body."""
    headers = {"Authorization": authorization} if authorization else {}
    response = await raw.post(V, json=GOOD, headers=headers)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == 'Bearer error="invalid_token"'
    assert response.json() == {"error": "invalid_token"}
    check(response, "POST", "/valuations")


async def test_expired_token_gets_401(raw: httpx.AsyncClient, sandbox: Sandbox) -> None:
    """A token is refused once the sandbox clock passes its expiry."""
    headers = await bearer(raw)
    assert (await post(raw, GOOD, headers)).status_code == 201
    sandbox.clock.advance(1801)
    assert (await post(raw, GOOD, headers)).status_code == 401


async def test_revoked_token_gets_401(raw: httpx.AsyncClient, sandbox: Sandbox) -> None:
    """A revoked token is refused; a new one works."""
    headers = await bearer(raw)
    assert sandbox.revoke_tokens() == 1
    assert (await post(raw, GOOD, headers)).status_code == 401
    assert (await post(raw, GOOD, await bearer(raw))).status_code == 201


# --- POST /valuations: the request rules ----------------------------------------------


def with_(**changes: Any) -> dict[str, Any]:
    body = dict(GOOD)
    for name, value in changes.items():
        if value is _DROP:
            body.pop(name, None)
        else:
            body[name] = value
    return body


_DROP = object()


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (with_(colour="red"), "unknown_field"),
        (with_(postcode=_DROP), "missing_field"),
        (with_(propertyType=_DROP), "missing_field"),
        (with_(bedrooms=_DROP), "missing_field"),
        (with_(postcode="SW1A"), "invalid_value"),
        (with_(postcode=12345), "invalid_value"),
        (with_(propertyType="castle"), "invalid_value"),
        (with_(bedrooms=21), "invalid_value"),
        (with_(bedrooms=-1), "invalid_value"),
        (with_(bedrooms=2.5), "invalid_value"),
        (with_(bedrooms="3"), "invalid_value"),
        (with_(bedrooms=True), "invalid_value"),
        (with_(bedrooms=None), "invalid_value"),
        (with_(floorAreaSqm=9.9), "invalid_value"),
        (with_(floorAreaSqm=2000.1), "invalid_value"),
        (with_(yearBuilt=1499), "invalid_value"),
        (with_(yearBuilt=2101), "invalid_value"),
        (with_(builtForm="bungalow"), "invalid_value"),
        (with_(wallsEnergyEfficiency="excellent"), "invalid_value"),
        (with_(reference="x" * 65), "invalid_value"),
        (with_(reference="Flat 2, 10 Downing St, SW1A 2AA"), "invalid_value"),
        (with_(include=["commentary", "photos"]), "invalid_value"),
        (with_(include="commentary"), "invalid_value"),
        ([GOOD], "invalid_value"),
    ],
)
async def test_invalid_requests_are_400(
    raw: httpx.AsyncClient, sandbox: Sandbox, body: Any, code: str
) -> None:
    """Every rule of sections 2.1 and 8 is enforced with invalid-request, and not charged."""
    response = await post(raw, body, await bearer(raw))
    assert response.status_code == 400
    assert problem_name(response) == "invalid-request"
    assert response.json()["code"] == code
    assert sandbox.ledger.credits_charged() == 0


@pytest.mark.parametrize(
    "body",
    [
        with_(bedrooms=0, propertyType="flat"),
        with_(bedrooms=20.0, propertyType="terraced", floorAreaSqm=150),
        with_(bedrooms=_DROP, floorAreaSqm=10),
        with_(bedrooms=_DROP, floorAreaSqm=2000),
        with_(yearBuilt=1500, builtForm="end_terrace", wallsEnergyEfficiency="very_poor"),
        with_(yearBuilt=2100),
        with_(reference="x" * 64),
        with_(postcode="sw1a2aa"),
        with_(include=["rebuildCost", "commentary", "commentary"]),
        with_(include=[]),
    ],
)
async def test_edge_values_are_accepted(raw: httpx.AsyncClient, body: dict[str, Any]) -> None:
    """Values at the edges of every range, and lower-case postcodes, are valued."""
    assert (await post(raw, body, await bearer(raw))).status_code == 201


async def test_malformed_json_is_400(raw: httpx.AsyncClient) -> None:
    """A body that is not JSON is invalid-request."""
    headers = {**(await bearer(raw)), "Content-Type": "application/json"}
    response = await raw.post(V, content=b'{"postcode": ', headers=headers)
    assert response.status_code == 400
    assert response.json()["code"] == "malformed_json"


@pytest.mark.parametrize(
    ("key", "status"), [("1234567", 400), ("12345678", 201), ("k" * 128, 201), ("k" * 129, 400)]
)
async def test_idempotency_key_length(raw: httpx.AsyncClient, key: str, status: int) -> None:
    """Idempotency keys of 8 to 128 characters are accepted, others refused."""
    assert (await post(raw, GOOD, await bearer(raw), key)).status_code == status


# --- coverage, triggers, floor area, extras ---------------------------------------------


@pytest.mark.parametrize(
    ("postcode", "code"),
    [
        ("EH1 1AA", None),
        ("G1 1AA", None),
        ("BT1 1AA", None),
        ("IM1 1AA", None),
        ("JE2 3AA", None),
        ("GY1 1AA", None),
        ("TD9 0AA", None),
        ("QQ1 1AA", "unknown_sector"),
    ],
)
async def test_outside_coverage(raw: httpx.AsyncClient, postcode: str, code: str | None) -> None:
    """Postcodes outside England and Wales get 422 outside-coverage, uncharged."""
    response = await post(raw, with_(postcode=postcode), await bearer(raw))
    assert response.status_code == 422
    assert problem_name(response) == "outside-coverage"
    assert response.json().get("code") == code


@pytest.mark.parametrize("postcode", ["TD15 1AA", "CF10 1AA", "LL11 1AA", "CH1 1AA"])
async def test_border_and_welsh_postcodes_are_valued(raw: httpx.AsyncClient, postcode: str) -> None:
    """Wales and the English side of the border are in coverage."""
    assert (await post(raw, with_(postcode=postcode), await bearer(raw))).status_code == 201


@pytest.mark.parametrize(
    ("postcode", "type_name", "code"),
    [("ZZ1 4AA", "outside-coverage", "unknown_sector"), ("ZZ1 5AA", "floor-area-required", None)],
)
async def test_test_mode_triggers(
    raw: httpx.AsyncClient, postcode: str, type_name: str, code: str | None
) -> None:
    """The two trigger postcodes of section 7 answer their problems in test mode."""
    response = await post(raw, with_(postcode=postcode), await bearer(raw, TEST))
    assert (response.status_code, problem_name(response)) == (422, type_name)
    assert response.json().get("code") == code


async def test_floor_area_required_then_new_key_with_area(raw: httpx.AsyncClient) -> None:
    """No typical area for a 9-bedroom flat: 422, then the request with an area is valued."""
    headers = await bearer(raw)
    flat = with_(propertyType="flat", bedrooms=9)
    first = await post(raw, flat, headers, "key-flat-9-bed")
    assert (first.status_code, problem_name(first)) == (422, "floor-area-required")
    second = await post(raw, {**flat, "floorAreaSqm": 140}, headers, "key-flat-9-bed-area")
    assert second.status_code == 201
    assert second.json()["input"]["floorAreaSource"] == "request"


async def test_floor_area_from_bedrooms(raw: httpx.AsyncClient) -> None:
    """Bedrooms alone give an estimated floor area, marked as from bedrooms."""
    body = (await post(raw, GOOD, await bearer(raw))).json()
    assert body["input"]["floorAreaSource"] == "bedrooms"
    assert body["input"]["floorAreaSqm"] > 0
    assert body["valuation"]["range"]["low"] < body["valuation"]["estimate"]
    assert body["valuation"]["estimate"] < body["valuation"]["range"]["high"]


async def test_include_extras(raw: httpx.AsyncClient) -> None:
    """include gives commentary and rebuildCost; a flat's rebuild cost says `flat`."""
    headers = await bearer(raw)
    house = (await post(raw, with_(include=["commentary", "rebuildCost"]), headers)).json()
    assert house["commentary"]["disclaimer"]
    assert house["rebuildCost"]["estimated"] is True
    flat = with_(propertyType="flat", include=["rebuildCost"])
    body = (await post(raw, flat, headers)).json()
    assert body["rebuildCost"] == {"estimated": False, "reason": "flat"}
    assert "commentary" not in body
    huge = with_(
        bedrooms=_DROP, floorAreaSqm=1500, propertyType="detached", include=["rebuildCost"]
    )
    assert (await post(raw, huge, headers)).json()["rebuildCost"]["reason"] == "size"


# --- idempotency ----------------------------------------------------------------------


async def test_replay_returns_the_first_answer_and_charges_once(
    raw: httpx.AsyncClient, sandbox: Sandbox
) -> None:
    """The same key and request returns the same status and bytes, charged once."""
    headers = await bearer(raw)
    first = await post(raw, GOOD, headers, "replay-key-0001")
    again = await post(raw, {**GOOD, "postcode": "sw1a2aa"}, headers, "replay-key-0001")
    assert first.status_code == again.status_code == 201
    assert first.content == again.content
    assert first.json()["charge"] == {"credits": 10, "balanceAfter": 1_000_000 - 10}
    assert sandbox.ledger.charges_by_key() == {"replay-key-0001": 1}
    assert sandbox.balances()["sandbox-live"] == 1_000_000 - 10


async def test_key_reused_with_other_request_is_422(raw: httpx.AsyncClient) -> None:
    """The same key with a different request is idempotency-key-reused."""
    headers = await bearer(raw)
    assert (await post(raw, GOOD, headers, "reuse-key-0001")).status_code == 201
    other = await post(raw, with_(bedrooms=4), headers, "reuse-key-0001")
    assert (other.status_code, problem_name(other)) == (422, "idempotency-key-reused")


async def test_include_order_and_repeats_are_the_same_request(raw: httpx.AsyncClient) -> None:
    """include order and repeats do not make a different request for the same key."""
    headers = await bearer(raw)
    one = await post(raw, with_(include=["commentary", "rebuildCost"]), headers, "incl-key-01")
    two = await post(
        raw, with_(include=["rebuildCost", "commentary", "rebuildCost"]), headers, "incl-key-01"
    )
    assert one.content == two.content


async def test_concurrent_same_key_gets_409(raw: httpx.AsyncClient, sandbox: Sandbox) -> None:
    """While the first call with a key runs, a second one gets request-in-progress. The
    first to arrive is held until the other has its answer, so no machine outruns it."""
    sandbox.set_faults(Faults(slow_share=1.0, slow_seconds=3600))
    headers = await bearer(raw)
    answers: list[httpx.Response] = []

    async def send() -> None:
        answers.append(await post(raw, GOOD, headers, "race-key-0001"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(send)
        tg.start_soon(send)
        await wait_until_async(lambda: answers, 10, "the second call's answer")
        sandbox.finish_slow_work()
    assert sorted(a.status_code for a in answers) == [201, 409]
    conflict = next(a for a in answers if a.status_code == 409)
    assert problem_name(conflict) == "request-in-progress"
    assert sandbox.ledger.charges_by_key() == {"race-key-0001": 1}


async def test_no_key_means_a_new_valuation_each_time(
    raw: httpx.AsyncClient, sandbox: Sandbox
) -> None:
    """Without an Idempotency-Key every call is a new, charged valuation."""
    headers = await bearer(raw)
    ids = {(await post(raw, GOOD, headers)).json()["id"] for _ in range(3)}
    assert len(ids) == 3
    assert sandbox.ledger.credits_charged() == 30


async def test_keys_are_per_account(raw: httpx.AsyncClient, sandbox: Sandbox) -> None:
    """Two accounts using the same key get their own valuations."""
    live = await post(raw, GOOD, await bearer(raw, LIVE), "shared-key-001")
    poor = await post(raw, GOOD, await bearer(raw, POOR), "shared-key-001")
    assert live.json()["id"] != poor.json()["id"]


# --- charging and accounts ---------------------------------------------------------------


async def test_test_mode_is_never_charged(raw: httpx.AsyncClient, sandbox: Sandbox) -> None:
    """Test credentials give mode test, no charge object and no credits taken."""
    body = (await post(raw, GOOD, await bearer(raw, TEST))).json()
    assert body["mode"] == "test"
    assert "charge" not in body
    assert sandbox.ledger.credits_charged() == 0


async def test_insufficient_credits(raw: httpx.AsyncClient, sandbox: Sandbox) -> None:
    """With 25 credits, two valuations are charged and the third is refused with the figures."""
    headers = await bearer(raw, POOR)
    for n in range(2):
        assert (await post(raw, with_(bedrooms=n + 1), headers)).status_code == 201
    refused = await post(raw, with_(bedrooms=3), headers)
    assert (refused.status_code, problem_name(refused)) == (403, "insufficient-credits")
    assert "10 credits" in refused.json()["detail"]
    assert "5 credits" in refused.json()["detail"]
    sandbox.top_up(POOR.client_id, 100)
    assert (await post(raw, with_(bedrooms=3), headers)).status_code == 201


async def test_account_blocked(raw: httpx.AsyncClient, sandbox: Sandbox) -> None:
    """A blocked account cannot spend."""
    sandbox.account(LIVE.client_id).blocked = True
    response = await post(raw, GOOD, await bearer(raw))
    assert (response.status_code, problem_name(response)) == (403, "account-blocked")


# --- limits -------------------------------------------------------------------------------


async def test_daily_limit_until_midnight(raw: httpx.AsyncClient, sandbox: Sandbox) -> None:
    """Past the daily limit: 429 daily_limit with Retry-After to midnight; next day it works."""
    sandbox.account(LIVE.client_id).daily_limit = 2
    headers = await bearer(raw)
    for n in range(2):
        assert (await post(raw, with_(bedrooms=n + 1), headers)).status_code == 201
    refused = await post(raw, with_(bedrooms=5), headers)
    assert (refused.status_code, refused.json()["code"]) == (429, "daily_limit")
    retry_after = int(refused.headers["Retry-After"])
    assert apart_on_the_clock(retry_after, sandbox.clock.seconds_to_midnight()) <= 2
    sandbox.clock.advance(retry_after + 1)
    assert (await post(raw, with_(bedrooms=5), await bearer(raw))).status_code == 201
    days = sandbox.ledger.calls_per_day(LIVE.client_id)
    assert sorted(days.values()) == [1, 2]


async def test_calls_before_a_daily_retry_after_are_recorded_as_early(
    raw: httpx.AsyncClient, sandbox: Sandbox
) -> None:
    """The ledger names calls made before midnight after a daily_limit answer."""
    sandbox.account(LIVE.client_id).daily_limit = 0
    headers = await bearer(raw)
    assert (await post(raw, GOOD, headers)).status_code == 429
    await past_the_grace(sandbox)
    assert (await post(raw, GOOD, headers)).status_code == 429
    assert len(sandbox.ledger.early_requests()) == 1


# A Retry-After of 5 s: the call after the grace arrives inside it, however loaded the machine.
@pytest.mark.parametrize("config", [SandboxConfig(rate_limit=RateLimit(0.2, 2))])
async def test_short_term_limit(raw: httpx.AsyncClient, sandbox: Sandbox) -> None:
    """A burst past the bucket gets 429 with Retry-After; calls before it are recorded."""
    headers = await bearer(raw)
    statuses = [(await post(raw, GOOD, headers)).status_code for _ in range(3)]
    assert statuses == [201, 201, 429]
    await past_the_grace(sandbox)
    early = await post(raw, GOOD, headers)
    assert early.status_code in (201, 429)
    assert len(sandbox.ledger.early_requests()) == 1
    snapshot = (await raw.get("/_sandbox/ledger")).json()
    assert snapshot["retry_after_given"][0]["code"] is None


# --- reads --------------------------------------------------------------------------------


async def test_get_valuation_is_free_and_exact(raw: httpx.AsyncClient, sandbox: Sandbox) -> None:
    """A valuation reads back as created, without charge, only by its own account."""
    headers = await bearer(raw)
    created = (await post(raw, with_(include=["commentary"]), headers)).json()
    read = await raw.get(f"{V}/{created['id']}", headers=headers)
    check(read, "GET", "/valuations/{id}")
    assert read.json() == {k: v for k, v in created.items() if k != "charge"}
    assert sandbox.ledger.credits_charged() == 10
    other = await raw.get(f"{V}/{created['id']}", headers=await bearer(raw, POOR))
    assert other.status_code == 404
    missing = await raw.get(f"{V}/val_{'0' * 26}", headers=headers)
    assert (missing.status_code, problem_name(missing)) == (404, "not-found")
    check(missing, "GET", "/valuations/{id}")


async def test_street_analysis_charged_then_free_for_30_days(
    raw: httpx.AsyncClient, sandbox: Sandbox
) -> None:
    """The first read is charged, repeats within 30 days are free, then charged again."""
    headers = await bearer(raw)
    first = await raw.get(f"{S}/sw1a%202aa", headers=headers)
    check(first, "GET", "/street-analysis/{postcode}")
    assert first.json()["charge"]["credits"] == sandbox.config.street_analysis_credits
    repeat = await raw.get(f"{S}/SW1A2AA", headers=headers)
    assert "charge" not in repeat.json()
    assert repeat.json()["generatedAt"] == first.json()["generatedAt"]
    sandbox.clock.advance(dt.timedelta(days=30, seconds=1).total_seconds())
    later = await raw.get(f"{S}/SW1A2AA", headers=await bearer(raw))
    assert "charge" in later.json()
    assert sandbox.ledger.credits_charged() == 2 * sandbox.config.street_analysis_credits


@pytest.mark.parametrize(
    ("postcode", "status"), [("SW1A%202ZZ", 404), ("EH1%201AA", 404), ("not-a-postcode", 400)]
)
async def test_street_analysis_errors(raw: httpx.AsyncClient, postcode: str, status: int) -> None:
    """Nothing held gives not-found; a malformed postcode invalid-request."""
    response = await raw.get(f"{S}/{postcode}", headers=await bearer(raw))
    assert response.status_code == status
    check(response, "GET", "/street-analysis/{postcode}")


async def test_street_analysis_test_mode(raw: httpx.AsyncClient, sandbox: Sandbox) -> None:
    """Test mode street analyses carry mode test and are never charged."""
    body = (await raw.get(f"{S}/M1%201AE", headers=await bearer(raw, TEST))).json()
    assert body["mode"] == "test"
    assert "charge" not in body


# --- faults and controls ------------------------------------------------------------------


async def test_503_share_is_never_charged(raw: httpx.AsyncClient, sandbox: Sandbox) -> None:
    """Injected 503s are data-unavailable and charge nothing."""
    sandbox.set_faults(Faults(error_503_share=1.0))
    response = await post(raw, GOOD, await bearer(raw), "fault-key-503")
    assert (response.status_code, problem_name(response)) == (503, "data-unavailable")
    assert sandbox.ledger.credits_charged() == 0


async def test_outage_then_recovery(raw: httpx.AsyncClient) -> None:
    """An outage set over HTTP answers 503 to everything until it ends."""
    headers = await bearer(raw)
    began = time.monotonic()
    await raw.post("/_sandbox/faults", json={"outage_seconds": 2})
    assert (await post(raw, GOOD, headers)).status_code == 503
    # The behaviour: an outage that lasts 2 s of real time (the 503 above came well inside it).
    await anyio.sleep(2.05 - (time.monotonic() - began))
    assert (await post(raw, GOOD, headers)).status_code == 201


async def test_504_after_commit_then_replay(raw: httpx.AsyncClient, sandbox: Sandbox) -> None:
    """A 504 after commit has charged; the retry with the key returns it without paying."""
    sandbox.set_faults(Faults(timeout_504_after_commit_share=1.0))
    headers = await bearer(raw)
    first = await post(raw, GOOD, headers, "fault-key-504")
    assert (first.status_code, problem_name(first)) == (504, "timeout")
    sandbox.set_faults(Faults())
    again = await post(raw, GOOD, headers, "fault-key-504")
    assert again.status_code == 201
    assert sandbox.ledger.charges_by_key() == {"fault-key-504": 1}


@pytest.mark.slow
async def test_slow_call_is_cut_at_the_request_timeout(
    config: SandboxConfig, raw: httpx.AsyncClient, sandbox: Sandbox
) -> None:
    """Past the request timeout: 504, then 409 while the work runs, then the replay. The
    work is held until the test ends it (an hour's slowness), so no machine outruns it."""
    sandbox.config.request_timeout_seconds = 0.2
    sandbox.set_faults(Faults(slow_share=1.0, slow_seconds=3600))
    headers = await bearer(raw)
    assert (await post(raw, GOOD, headers, "slow-key-0001")).status_code == 504
    assert (await post(raw, GOOD, headers, "slow-key-0001")).status_code == 409
    assert sandbox.ledger.charges_by_key() == {}
    sandbox.finish_slow_work()
    # The sandbox charges and stores the answer in one step: charged is committed.
    await wait_until_async(sandbox.ledger.charges_by_key, 10, "the work to commit")
    sandbox.set_faults(Faults())
    assert (await post(raw, GOOD, headers, "slow-key-0001")).status_code == 201
    assert sandbox.ledger.charges_by_key() == {"slow-key-0001": 1}


async def test_drop_after_commit_cuts_the_connection(
    raw: httpx.AsyncClient, sandbox: Sandbox
) -> None:
    """The drop fault charges, then cuts the connection mid-body."""
    sandbox.set_faults(Faults(drop_after_commit_share=1.0))
    headers = await bearer(raw)
    with pytest.raises(httpx.RemoteProtocolError):
        await raw.post(V, json=GOOD, headers={**headers, "Idempotency-Key": "drop-key-001"})
    assert sandbox.ledger.charges_by_key() == {"drop-key-001": 1}


async def test_controls_over_http(raw: httpx.AsyncClient, sandbox: Sandbox) -> None:
    """The /_sandbox endpoints move the clock, top up, block and show the ledger."""
    before = sandbox.clock.now()
    moved = (await raw.post("/_sandbox/clock", json={"advance_seconds": 86400})).json()
    assert dt.datetime.fromisoformat(moved["clock"]) - before >= dt.timedelta(days=1)
    topped = await raw.post(f"/_sandbox/accounts/{POOR.client_id}", json={"top_up": 75})
    assert topped.json()["balance"] == 100
    await raw.post(f"/_sandbox/accounts/{POOR.client_id}", json={"blocked": True})
    assert sandbox.account(POOR.client_id).blocked
    assert (await raw.post("/_sandbox/accounts/nobody", json={})).status_code == 404
    await post(raw, GOOD, await bearer(raw), "ledger-key-01")
    ledger = (await raw.get("/_sandbox/ledger")).json()
    assert ledger["charges_by_key"] == {"ledger-key-01": 1}
    assert ledger["balances"][POOR.client_id] == 100
    assert ledger["keys_charged_twice"] == []
    assert ledger["requests_by_status"] == {"201": 1}


async def test_rate_limit_storm(raw: httpx.AsyncClient, sandbox: Sandbox) -> None:
    """The storm fault answers 429 with its long Retry-After and records the deadline."""
    sandbox.set_faults(Faults(rate_limit_storm_share=1.0, storm_retry_after_seconds=7))
    response = await post(raw, GOOD, await bearer(raw))
    assert (response.status_code, problem_name(response)) == (429, "rate-limited")
    assert response.headers["Retry-After"] == "7"
    assert len(sandbox.ledger.deadlines) == 1


async def _figures(month: str | None, now: dt.datetime) -> dict[str, Any]:
    """The `valuation` object a fresh sandbox whose clock reads `now` gives GOOD, its
    figures' month pinned or not."""
    sandbox = Sandbox(SandboxConfig(figures_month=month), SandboxClock(now))
    transport = httpx.ASGITransport(app=sandbox.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://sandbox") as http:
        response = await post(http, GOOD, await bearer(http, TEST), key="k-figures")
    assert response.status_code == 201, response.text
    figures: dict[str, Any] = response.json()["valuation"]
    return figures


# Clocks of their own, never today's: a month's figures are compared by what the month
# promises (its index month), not by whether one property's estimate happens to round alike.
@pytest.mark.parametrize(
    ("first", "second"),
    [
        (dt.datetime(2026, 12, 6, 4, tzinfo=dt.UTC), dt.datetime(2027, 3, 11, tzinfo=dt.UTC)),
        (
            dt.datetime(2026, 12, 31, 23, 59, 59, tzinfo=dt.UTC),
            dt.datetime(2028, 2, 29, tzinfo=dt.UTC),
        ),
    ],
)
async def test_a_pinned_figures_month_keeps_the_figures_whatever_the_clock(
    first: dt.datetime, second: dt.datetime
) -> None:
    """config.figures_month (BATCHVAL_SANDBOX_FIGURES_MONTH) fixes the figures for snapshot
    tests: under any two clocks they are the figures an unpinned sandbox gives in that month,
    indexed to two months before it; unpinned, each clock's figures are indexed to two months
    before its own month."""
    in_the_month = await _figures(None, dt.datetime(2026, 11, 3, tzinfo=dt.UTC))
    assert in_the_month["indexedTo"] == "2026-09"
    assert await _figures("2026-11", first) == in_the_month
    assert await _figures("2026-11", second) == in_the_month
    for clock in (first, second):
        month = clock.year * 12 + clock.month - 1 - 2
        expected = f"{month // 12:04d}-{month % 12 + 1:02d}"
        assert (await _figures(None, clock))["indexedTo"] == expected


@pytest.mark.parametrize("month", ["2026-13", "November", "2026-11-01"])
def test_a_figures_month_that_is_no_month_is_refused(month: str) -> None:
    with pytest.raises(ConfigError, match="YYYY-MM"):
        config_from_mapping({"figures_month": month})


@pytest.mark.parametrize(
    ("precision", "pattern"),
    [
        ("second", r"T\d\d:\d\d:\d\dZ$"),
        ("milli", r"T\d\d:\d\d:\d\d\.\d{3}Z$"),
        ("micro", r"T\d\d:\d\d:\d\d\.\d{6}Z$"),
    ],
)
async def test_valued_at_is_stamped_to_the_configured_precision(
    precision: str, pattern: str
) -> None:
    """stamp_precision cuts valuedAt to whole seconds, milliseconds or microseconds, never
    later than the instant it stands for."""
    config = config_from_mapping({"stamp_precision": precision})
    before = dt.datetime.now(dt.UTC)
    sandbox = Sandbox(config, SandboxClock())
    transport = httpx.ASGITransport(app=sandbox.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://sandbox") as http:
        response = await post(http, GOOD, await bearer(http, TEST), key="k-precision")
    assert response.status_code == 201, response.text
    stamped = response.json()["valuedAt"]
    assert re.search(pattern, stamped), stamped
    when = dt.datetime.fromisoformat(stamped.replace("Z", "+00:00"))
    assert before.replace(microsecond=0) <= when <= dt.datetime.now(dt.UTC)


def test_a_stamp_precision_that_is_none_of_the_three_is_refused() -> None:
    with pytest.raises(ConfigError, match="stamp_precision"):
        config_from_mapping({"stamp_precision": "nano"})


async def test_an_outage_from_the_first_call_strikes_however_late_it_comes(
    raw: httpx.AsyncClient, sandbox: Sandbox
) -> None:
    """outage_from_first_call: the outage's clock starts at the first call, not when the
    faults were set (a client slow to start still meets it)."""
    sandbox.set_faults(Faults(outage_seconds=1, outage_from_first_call=True))
    headers = await bearer(raw)
    await anyio.sleep(1.2)  # the behaviour: longer than the outage, before the first call
    assert (await post(raw, GOOD, headers)).status_code == 503
    sandbox.set_faults(Faults())
    assert (await post(raw, GOOD, headers)).status_code == 201


async def test_the_token_url_answers_with_the_sandbox_s_date(
    raw: httpx.AsyncClient, sandbox: Sandbox
) -> None:
    """The token answer carries a `Date` on the sandbox's clock, as every API answer does
    (a client reads the API's clock from it before its first call)."""
    sandbox.clock.advance(86_400 * 400)
    response = await raw.post(
        "/oauth2/token",
        data={"grant_type": "client_credentials", "client_id": LIVE.client_id,
              "client_secret": LIVE.client_secret},
    )  # fmt: skip
    assert response.status_code == 200
    dated = email.utils.parsedate_to_datetime(response.headers["Date"])
    assert abs((dated - sandbox.clock.now()).total_seconds()) < 5
