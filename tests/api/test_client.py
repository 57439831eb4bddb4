"""`batchval._internal.api.PartnerClient` against the sandbox served on a real loopback socket.

Every answer of the API the tests read goes through `Recorder`, an httpx response hook
on the client's injected session, and is checked against the OpenAPI description when
the test ends: the client is tested and the sandbox is held to the description at once.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import json
import re
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from openapi_check import validate_response
from support import (
    LIVE,
    POOR,
    TEST,
    apart_on_the_clock,
    client_for,
    token_for,
    wait_until_async,
)

from batchval._internal import logs
from batchval._internal.api import (
    AccountBlockedError,
    Action,
    ApiTimeoutError,
    Charge,
    Credentials,
    CredentialsRefusedError,
    DataUnavailableError,
    FloorAreaRequiredError,
    IdempotencyKeyReusedError,
    InsufficientCreditsError,
    InvalidRequestError,
    MalformedResponseError,
    NotFoundError,
    OutsideCoverageError,
    PartnerClient,
    PartnerError,
    ProblemError,
    RateLimitedError,
    RequestInProgressError,
    TransportError,
    UnauthorizedError,
    UnreadableAnswerError,
    Valuation,
    ValuationRequest,
    WrongAddressError,
    record_of,
    record_of_text,
)
from batchval._internal.api.auth import TokenCache
from batchval._internal.sandbox import data, rules
from batchval._internal.sandbox.app import API_PREFIX, TITLES, Sandbox
from batchval._internal.sandbox.config import Faults, RateLimit
from batchval._internal.sandbox.server import RunningSandbox

HOME = ValuationRequest("SW1A 1AA", "terraced", bedrooms=3)
EXTRAS = ("commentary", "rebuildCost")
UNKNOWN_ID = "val_" + "0" * 26


def new_key() -> str:
    return f"test-{uuid.uuid4()}"


def home(**changes: Any) -> ValuationRequest:
    return dataclasses.replace(HOME, **changes)


def statuses(sandbox: Sandbox) -> dict[int, int]:
    return sandbox.ledger.requests_by_status()


# --- recording every answer, to check it against the OpenAPI description ---------------

_NOT_JSON = object()
_TEMPLATES = (
    (re.compile(r"/valuations"), "/valuations"),
    (re.compile(r"/valuations/[^/]+"), "/valuations/{id}"),
    (re.compile(r"/street-analysis/[^/]+"), "/street-analysis/{postcode}"),
)


@dataclasses.dataclass(frozen=True, slots=True)
class Seen:
    """One answer of the API as the client received it."""

    method: str
    template: str  # the operation's path in the description, e.g. "/valuations/{id}"
    status: int
    content_type: str
    body: Any  # parsed JSON, or _NOT_JSON
    headers: dict[str, str]

    def validate(self) -> None:
        validate_response(
            self.method,
            self.template,
            self.status,
            self.content_type,
            self.body,
            headers=self.headers,
        )


class Recorder:
    """An httpx response hook that keeps every answer of the API (not the token URL)."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.expected_malformed = 0  # bodies a test broke on purpose (malformed_share)

    async def __call__(self, response: httpx.Response) -> None:
        path = response.request.url.path
        if not path.startswith(API_PREFIX):
            return  # the token URL is not part of the description
        path = path.removeprefix(API_PREFIX)
        template = next(t for pattern, t in _TEMPLATES if pattern.fullmatch(path))
        await response.aread()
        try:
            body: Any = json.loads(response.content)
        except ValueError:
            body = _NOT_JSON
        self.seen.append(
            Seen(
                response.request.method,
                template,
                response.status_code,
                response.headers.get("content-type", ""),
                body,
                dict(response.headers),
            )
        )

    def last(self, status: int) -> Seen:
        return next(s for s in reversed(self.seen) if s.status == status)

    def check(self) -> None:
        """Every JSON answer matches the description; only the expected ones are not JSON."""
        broken = [s for s in self.seen if s.body is _NOT_JSON]
        assert len(broken) == self.expected_malformed, broken
        for seen in self.seen:
            if seen.body is not _NOT_JSON:
                seen.validate()


@asynccontextmanager
async def recorded_client(
    served: RunningSandbox,
    credentials: Credentials,
    seen: Recorder,
    *,
    clock: Callable[[], float] | None = None,
) -> AsyncIterator[PartnerClient]:
    """A client on an injected httpx session whose answers `seen` records; with `clock`,
    its token cache reads that monotonic clock (the test moves it) instead of the real one."""
    async with (
        httpx.AsyncClient(timeout=10.0, event_hooks={"response": [seen]}) as http,
        PartnerClient(
            base_url=served.base_url, auth_url=served.auth_url, credentials=credentials, http=http
        ) as api,
    ):
        if clock is not None:  # the client takes no clock: its cache is the one that reads it
            token_url = served.auth_url.rstrip("/") + "/oauth2/token"
            api.tokens = TokenCache(http, token_url, credentials, clock=clock, reach=api.reach)
        yield api


@pytest.fixture
def seen() -> Iterator[Recorder]:
    """The answers of the test's clients, checked against the description at the end."""
    recorder = Recorder()
    yield recorder
    recorder.check()


@pytest.fixture
async def api(served: RunningSandbox, seen: Recorder) -> AsyncIterator[PartnerClient]:
    async with recorded_client(served, LIVE, seen) as client:
        yield client


@pytest.fixture
async def test_api(served: RunningSandbox, seen: Recorder) -> AsyncIterator[PartnerClient]:
    async with recorded_client(served, TEST, seen) as client:
        yield client


@pytest.fixture
async def poor_api(served: RunningSandbox, seen: Recorder) -> AsyncIterator[PartnerClient]:
    async with recorded_client(served, POOR, seen) as client:
        yield client


# --- 1. every problem type of section 7, typed, with the retry table's action ----------


@dataclasses.dataclass(frozen=True, slots=True)
class Scene:
    sandbox: Sandbox
    live: PartnerClient
    test: PartnerClient
    poor: PartnerClient


async def _bedrooms_out_of_range(s: Scene) -> object:
    body = {"postcode": "SW1A 1AA", "propertyType": "terraced", "bedrooms": 25}
    return await s.live.create_valuation(body, idempotency_key=new_key())


async def _unknown_field(s: Scene) -> object:
    body = {**HOME.to_json(), "colour": "red"}
    return await s.live.create_valuation(body, idempotency_key=new_key())


async def _third_valuation_on_25_credits(s: Scene) -> object:
    await s.poor.create_valuation(home(bedrooms=2), idempotency_key=new_key())
    await s.poor.create_valuation(home(bedrooms=3), idempotency_key=new_key())
    return await s.poor.create_valuation(home(bedrooms=4), idempotency_key=new_key())


async def _blocked_account(s: Scene) -> object:
    s.sandbox.account(LIVE.client_id).blocked = True
    return await s.live.create_valuation(HOME, idempotency_key=new_key())


async def _unknown_valuation_id(s: Scene) -> object:
    return await s.live.get_valuation(UNKNOWN_ID)


async def _street_with_nothing_held(s: Scene) -> object:
    # Unit ZZ: nothing held (batchval/_internal/sandbox/streets.py).
    return await s.live.get_street_analysis("SW1A 1ZZ")


async def _same_key_twice_at_once(s: Scene) -> object:
    s.sandbox.set_faults(Faults(latency_ms=300))
    key = new_key()
    outcomes: list[object] = []

    async def one() -> None:
        try:
            outcomes.append(await s.live.create_valuation(HOME, idempotency_key=key))
        except PartnerError as exc:
            outcomes.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(one)
        tg.start_soon(one)
    assert sorted(type(o).__name__ for o in outcomes) == ["RequestInProgressError", "Valuation"]
    raise next(o for o in outcomes if isinstance(o, PartnerError))


async def _scottish_postcode(s: Scene) -> object:
    return await s.live.create_valuation(home(postcode="EH1 1AA"), idempotency_key=new_key())


async def _outside_trigger(s: Scene) -> object:
    return await s.test.create_valuation(home(postcode="ZZ1 4AA"), idempotency_key=new_key())


async def _floor_area_trigger(s: Scene) -> object:
    return await s.test.create_valuation(home(postcode="ZZ1 5AA"), idempotency_key=new_key())


async def _flat_with_seven_bedrooms(s: Scene) -> object:
    request = home(property_type="flat", bedrooms=7)
    return await s.live.create_valuation(request, idempotency_key=new_key())


async def _same_key_other_request(s: Scene) -> object:
    key = new_key()
    await s.live.create_valuation(home(bedrooms=3), idempotency_key=key)
    return await s.live.create_valuation(home(bedrooms=4), idempotency_key=key)


async def _two_quick_calls(s: Scene) -> object:
    s.sandbox.config.rate_limit = RateLimit(rate_per_second=1, burst=1)
    await s.live.create_valuation(home(bedrooms=2), idempotency_key=new_key())
    return await s.live.create_valuation(home(bedrooms=3), idempotency_key=new_key())


async def _past_daily_limit(s: Scene) -> object:
    s.sandbox.account(LIVE.client_id).daily_limit = 1
    await s.live.create_valuation(home(bedrooms=2), idempotency_key=new_key())
    return await s.live.create_valuation(home(bedrooms=3), idempotency_key=new_key())


async def _valuation_data_down(s: Scene) -> object:
    s.sandbox.set_faults(Faults(error_503_share=1.0))
    return await s.live.create_valuation(HOME, idempotency_key=new_key())


async def _street_data_down(s: Scene) -> object:
    s.sandbox.set_faults(Faults(error_503_share=1.0))
    return await s.live.get_street_analysis("SW1A 1AA")


async def _slow_work(s: Scene) -> object:
    s.sandbox.config.request_timeout_seconds = 0.2
    s.sandbox.set_faults(Faults(slow_share=1.0, slow_seconds=0.4))
    return await s.live.create_valuation(HOME, idempotency_key=new_key())


def _nothing_more(error: ProblemError, sandbox: Sandbox) -> None:
    pass


def _states_cost_and_balance(error: ProblemError, sandbox: Sandbox) -> None:
    # 25 credits less two valuations of 10: the call costs 10, the balance is 5.
    assert re.search(r"\b10\b.*\b5\b", error.detail), error.detail
    assert sandbox.account(POOR.client_id).balance == 5


def _short_wait(error: ProblemError, sandbox: Sandbox) -> None:
    assert isinstance(error, RateLimitedError)
    assert not error.daily_limit
    assert error.retry_after is not None
    assert 1 <= error.retry_after <= 2


def _wait_until_midnight(error: ProblemError, sandbox: Sandbox) -> None:
    assert isinstance(error, RateLimitedError)
    assert error.daily_limit
    assert error.retry_after is not None
    assert apart_on_the_clock(error.retry_after, sandbox.clock.seconds_to_midnight()) <= 2


PROBLEM_CASES = [
    # provoke, error class, status, code, action (section 8), further checks
    pytest.param(
        _bedrooms_out_of_range,
        InvalidRequestError,
        400,
        "invalid_value",
        Action.ROW,
        _nothing_more,
        id="invalid-request-bedrooms-25",
    ),
    pytest.param(
        _unknown_field,
        InvalidRequestError,
        400,
        "unknown_field",
        Action.ROW,
        _nothing_more,
        id="invalid-request-unknown-field",
    ),
    pytest.param(
        _third_valuation_on_25_credits,
        InsufficientCreditsError,
        403,
        None,
        Action.ACCOUNT,
        _states_cost_and_balance,
        id="insufficient-credits",
    ),
    pytest.param(
        _blocked_account,
        AccountBlockedError,
        403,
        None,
        Action.ACCOUNT,
        _nothing_more,
        id="account-blocked",
    ),
    pytest.param(
        _unknown_valuation_id,
        NotFoundError,
        404,
        None,
        Action.ROW,
        _nothing_more,
        id="not-found-valuation",
    ),
    pytest.param(
        _street_with_nothing_held,
        NotFoundError,
        404,
        None,
        Action.ROW,
        _nothing_more,
        id="not-found-street",
    ),
    pytest.param(
        _same_key_twice_at_once,
        RequestInProgressError,
        409,
        None,
        Action.RETRY,
        _nothing_more,
        id="request-in-progress",
    ),
    pytest.param(
        _scottish_postcode,
        OutsideCoverageError,
        422,
        None,
        Action.ROW,
        _nothing_more,
        id="outside-coverage-scotland",
    ),
    pytest.param(
        _outside_trigger,
        OutsideCoverageError,
        422,
        "unknown_sector",
        Action.ROW,
        _nothing_more,
        id="outside-coverage-test-trigger",
    ),
    pytest.param(
        _floor_area_trigger,
        FloorAreaRequiredError,
        422,
        None,
        Action.ROW,
        _nothing_more,
        id="floor-area-required-test-trigger",
    ),
    pytest.param(
        _flat_with_seven_bedrooms,
        FloorAreaRequiredError,
        422,
        None,
        Action.ROW,
        _nothing_more,
        id="floor-area-required-live",
    ),
    pytest.param(
        _same_key_other_request,
        IdempotencyKeyReusedError,
        422,
        None,
        Action.DEFECT,
        _nothing_more,
        id="idempotency-key-reused",
    ),
    pytest.param(
        _two_quick_calls,
        RateLimitedError,
        429,
        None,
        Action.PAUSE,
        _short_wait,
        id="rate-limited",
    ),
    pytest.param(
        _past_daily_limit,
        RateLimitedError,
        429,
        "daily_limit",
        Action.STOP,
        _wait_until_midnight,
        id="rate-limited-daily-limit",
    ),
    pytest.param(
        _valuation_data_down,
        DataUnavailableError,
        503,
        None,
        Action.RETRY,
        _nothing_more,
        id="data-unavailable-valuation",
    ),
    pytest.param(
        _street_data_down,
        DataUnavailableError,
        503,
        None,
        Action.RETRY,
        _nothing_more,
        id="data-unavailable-street",
    ),
    pytest.param(
        _slow_work,
        ApiTimeoutError,
        504,
        None,
        Action.RETRY,
        _nothing_more,
        id="timeout",
    ),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("provoke", "error", "status", "code", "action", "check"), PROBLEM_CASES)
async def test_problem_is_raised_typed_with_every_field(
    provoke: Callable[[Scene], Awaitable[object]],
    error: type[ProblemError],
    status: int,
    code: str | None,
    action: Action | None,
    check: Callable[[ProblemError, Sandbox], None],
    sandbox: Sandbox,
    seen: Recorder,
    api: PartnerClient,
    test_api: PartnerClient,
    poor_api: PartnerClient,
) -> None:
    """Each problem type of section 7 is raised as its class, fields and action filled."""
    with pytest.raises(error) as caught:
        await provoke(Scene(sandbox, api, test_api, poor_api))
    problem = caught.value
    name = error.type_name
    assert problem.status == status
    assert problem.name == name
    assert problem.type == f"{sandbox.config.docs_base}/errors/{name}"
    assert problem.title == TITLES[name]
    assert problem.detail
    assert problem.code == code
    if status == 429:
        assert problem.retry_after is not None
    else:
        assert problem.retry_after is None
    if action is not None:
        assert problem.action is action
    check(problem, sandbox)
    # The exception says what the body said, and the body matches the description.
    answer = seen.last(status)
    assert answer.content_type == "application/problem+json"
    assert answer.body["type"] == problem.type
    assert answer.body["title"] == problem.title
    assert answer.body["detail"] == problem.detail
    assert answer.body.get("code") == problem.code
    answer.validate()


def test_daily_limit_stops_the_run() -> None:
    """A 429 with code daily_limit asks the caller to stop the run, not to retry."""
    problem = RateLimitedError(
        status=429,
        type="https://developer.partner-valuations.example/errors/rate-limited",
        title="Rate limited",
        detail="The account's daily limit of 1 calls is used.",
        code="daily_limit",
        retry_after=3600,
    )
    assert problem.daily_limit
    assert problem.action is Action.STOP


@pytest.mark.anyio
@pytest.mark.slow
async def test_timeout_retry_with_same_key_returns_the_stored_valuation(
    sandbox: Sandbox, api: PartnerClient
) -> None:
    """After a 504 the work commits; the same key then gets it, charged once."""
    sandbox.config.request_timeout_seconds = 0.3
    # The work is held until the test ends it, so no machine outruns the 409.
    sandbox.set_faults(Faults(slow_share=1.0, slow_seconds=3600))
    key = new_key()
    with pytest.raises(ApiTimeoutError) as caught:
        await api.create_valuation(HOME, idempotency_key=key)
    assert caught.value.action is Action.RETRY
    # Still running: the same key is told to wait (idempotency rule 2).
    with pytest.raises(RequestInProgressError):
        await api.create_valuation(HOME, idempotency_key=key)
    sandbox.finish_slow_work()
    # The sandbox charges and stores the answer in one step: charged is committed.
    await wait_until_async(lambda: sandbox.ledger.charges_by_key(), 10, "the work to commit")
    valuation = await api.create_valuation(HOME, idempotency_key=key)
    assert valuation.charge is not None
    assert sandbox.ledger.charges_by_key() == {key: 1}
    assert sandbox.ledger.requests[-1].replay


# --- 2. idempotency ---------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("include", [(), EXTRAS], ids=["plain", "extras"])
@pytest.mark.parametrize("credentials", [LIVE, TEST], ids=["live", "test"])
async def test_replay_returns_an_equal_valuation_charged_once(
    credentials: Credentials,
    include: tuple[str, ...],
    served: RunningSandbox,
    sandbox: Sandbox,
    seen: Recorder,
) -> None:
    """A retry with the same key returns the same valuation; live pays once, test never."""
    request = home(include=include)
    key = new_key()
    async with recorded_client(served, credentials, seen) as api:
        first = await api.create_valuation(request, idempotency_key=key)
        again = await api.create_valuation(request, idempotency_key=key)
        read = await api.get_valuation(first.id)
    assert again == first
    assert again.raw == first.raw
    assert read == dataclasses.replace(first, charge=None)  # a read is free
    assert (first.commentary is not None, first.rebuild_cost is not None) == (
        bool(include),
        bool(include),
    )
    assert [r.replay for r in sandbox.ledger.requests] == [False, True, False]
    assert sandbox.ledger.charges_by_key() == {key: 1}
    if credentials is LIVE:
        balance = sandbox.account(LIVE.client_id).balance
        assert first.mode is None
        assert first.charge == Charge(credits=10, balance_after=balance)
        assert sandbox.ledger.credits_charged(LIVE.client_id) == 10
    else:
        assert first.mode == "test"
        assert first.charge is None
        assert sandbox.ledger.credits_charged() == 0


# --- 3. tokens --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_concurrent_calls_share_one_token(sandbox: Sandbox, test_api: PartnerClient) -> None:
    """Twenty calls started at once fetch exactly one token between them."""
    valuations: list[Valuation] = []

    async def value(bedrooms: int) -> None:
        request = home(bedrooms=bedrooms)
        valuations.append(await test_api.create_valuation(request, idempotency_key=new_key()))

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(value, i % 6 + 1)
    assert len(valuations) == 20
    assert test_api.tokens.fetches == 1
    assert statuses(sandbox) == {201: 20}


class _Clock:
    """A monotonic clock that moves only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.anyio
async def test_token_is_refreshed_before_it_expires(
    served: RunningSandbox, sandbox: Sandbox, seen: Recorder
) -> None:
    """A token about to expire is replaced before use, so no call ever gets a 401: kept
    until its refresh time, a quarter of its life before it expires, and replaced after."""
    sandbox.config.token_ttl_seconds = 2  # refreshed a quarter of its life early: at 1.5 s
    clock = _Clock()

    def wait(seconds: float) -> None:  # the client's clock and the sandbox's, together
        clock.now += seconds
        sandbox.clock.advance(seconds)

    async with recorded_client(served, TEST, seen, clock=clock) as test_api:
        await test_api.get_street_analysis("SW1A 1AA")
        wait(1.4)
        await test_api.get_street_analysis("SW1A 1AA")
        assert test_api.tokens.fetches == 1
        wait(0.2)  # 1.6 s: past its refresh time, not yet expired
        await test_api.get_street_analysis("SW1A 1AA")
        assert test_api.tokens.fetches == 2
    assert 401 not in statuses(sandbox)


@pytest.mark.anyio
async def test_revoked_token_is_replaced_once(sandbox: Sandbox, api: PartnerClient) -> None:
    """After a 401 the client gets one new token and sends the call once more."""
    created = await api.create_valuation(HOME, idempotency_key=new_key())
    assert sandbox.revoke_tokens() == 1
    assert await api.get_valuation(created.id) == dataclasses.replace(created, charge=None)
    assert api.tokens.fetches == 2
    assert api.calls == 3
    assert statuses(sandbox) == {201: 1, 401: 1, 200: 1}


@pytest.mark.anyio
async def test_concurrent_401s_fetch_one_new_token(sandbox: Sandbox, api: PartnerClient) -> None:
    """Ten calls refused together share one replacement token."""
    created = await api.create_valuation(HOME, idempotency_key=new_key())
    sandbox.revoke_tokens()
    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(api.get_valuation, created.id)
    assert api.tokens.fetches == 2
    assert statuses(sandbox)[200] == 10


@pytest.mark.anyio
async def test_token_refused_twice_raises_unauthorized(
    sandbox: Sandbox, api: PartnerClient
) -> None:
    """When a fresh token is refused too, the client gives up after exactly one retry
    (and the error is a retry for the caller: revocation at rotation time is transient)."""
    sandbox.set_faults(Faults(revoke_token_share=1.0))
    with pytest.raises(UnauthorizedError) as caught:
        await api.get_street_analysis("SW1A 1AA")
    assert caught.value.action is Action.RETRY
    assert api.tokens.fetches == 2
    assert api.calls == 2
    assert statuses(sandbox) == {401: 2}


@pytest.mark.anyio
async def test_wrong_secret_is_refused_without_showing_it(
    served: RunningSandbox, sandbox: Sandbox
) -> None:
    """A wrong secret raises CredentialsRefusedError naming the client id, never the secret."""
    secret = "wrong-secret-5f2d9c"
    async with client_for(served, Credentials(LIVE.client_id, secret)) as api:
        with pytest.raises(CredentialsRefusedError) as caught:
            await api.create_valuation(HOME, idempotency_key=new_key())
    refused = caught.value
    assert refused.status == 401
    assert refused.action is Action.ACCOUNT
    assert LIVE.client_id in str(refused)
    assert secret not in str(refused)
    assert secret not in repr(refused)
    assert api.calls == 0
    assert sandbox.ledger.requests == []


# --- 4. transport -----------------------------------------------------------------------


@pytest.mark.anyio
async def test_cut_connection_then_retry_is_charged_once(
    sandbox: Sandbox, api: PartnerClient
) -> None:
    """A connection cut after the commit is a TransportError; the same key then gets it."""
    sandbox.set_faults(Faults(drop_after_commit_share=1.0))
    key = new_key()
    with pytest.raises(TransportError) as caught:
        await api.create_valuation(HOME, idempotency_key=key)
    assert caught.value.action is Action.RETRY
    sandbox.set_faults(Faults())
    valuation = await api.create_valuation(HOME, idempotency_key=key)
    assert valuation.charge == Charge(10, sandbox.account(LIVE.client_id).balance)
    assert sandbox.ledger.charges_by_key() == {key: 1}


@pytest.mark.anyio
async def test_client_timeout_below_latency_is_a_transport_error(
    served: RunningSandbox, sandbox: Sandbox
) -> None:
    """No answer within the client's own timeout raises TransportError."""
    sandbox.set_faults(Faults(latency_ms=1000))
    async with client_for(served, LIVE, timeout=0.3) as api:
        with pytest.raises(TransportError, match="no answer in time") as caught:
            await api.create_valuation(HOME, idempotency_key=new_key())
    assert caught.value.action is Action.RETRY


@pytest.mark.anyio
async def test_malformed_body_then_clean_retry_is_charged_once(
    sandbox: Sandbox, seen: Recorder, api: PartnerClient
) -> None:
    """A truncated 201 body is a MalformedResponseError; a retry gets it without a charge."""
    sandbox.set_faults(Faults(malformed_share=1.0))
    seen.expected_malformed = 1
    key = new_key()
    with pytest.raises(MalformedResponseError) as caught:
        await api.create_valuation(HOME, idempotency_key=key)
    assert caught.value.status == 201
    assert caught.value.action is Action.RETRY
    balance = sandbox.account(LIVE.client_id).balance
    sandbox.set_faults(Faults())
    valuation = await api.create_valuation(HOME, idempotency_key=key)
    assert valuation.charge == Charge(10, balance)
    assert sandbox.account(LIVE.client_id).balance == balance
    assert sandbox.ledger.charges_by_key() == {key: 1}


def _dead_url() -> str:
    """The address of a loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.anyio
@pytest.mark.parametrize("dead", ["token URL", "API"])
async def test_unreachable_port_is_a_transport_error(dead: str, served: RunningSandbox) -> None:
    """A port nobody listens on raises TransportError, for the token URL and the API."""
    root = _dead_url()
    auth_url = root if dead == "token URL" else served.auth_url
    api = PartnerClient(base_url=root + API_PREFIX, auth_url=auth_url, credentials=LIVE)
    async with api:
        with pytest.raises(TransportError) as caught:
            await api.get_valuation(UNKNOWN_ID)
    assert caught.value.action is Action.RETRY
    assert LIVE.client_secret not in str(caught.value)


# --- 5. secrets -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_no_secret_or_token_reaches_logs_or_errors(
    served: RunningSandbox, sandbox: Sandbox, seen: Recorder
) -> None:
    """Logs and exceptions of a run with errors never hold a secret or a token."""
    wrong_secret = "wrong-secret-8a1e77"
    raised: list[PartnerError] = []

    async def attempt(call: Awaitable[object]) -> None:
        try:
            await call
        except PartnerError as exc:
            raised.append(exc)

    with logs.capture() as captured:
        async with recorded_client(served, LIVE, seen) as api:
            created = await api.create_valuation(home(include=EXTRAS), idempotency_key=new_key())
            await api.get_street_analysis("SW1A 1AA")
            await attempt(api.create_valuation({"postcode": "SW1A 1AA"}, idempotency_key=None))
            await attempt(api.get_valuation(UNKNOWN_ID))
            sandbox.revoke_tokens()
            await api.get_valuation(created.id)
            sandbox.set_faults(Faults(revoke_token_share=1.0))
            await attempt(api.get_valuation(created.id))
            sandbox.set_faults(Faults(error_503_share=1.0))
            await attempt(api.create_valuation(HOME, idempotency_key=new_key()))
            token_repr = repr(api.tokens)
        async with client_for(served, Credentials(LIVE.client_id, wrong_secret)) as refused:
            await attempt(refused.get_valuation(created.id))

    assert [type(e).__name__ for e in raised] == [
        "InvalidRequestError",
        "NotFoundError",
        "UnauthorizedError",
        "DataUnavailableError",
        "CredentialsRefusedError",
    ]
    events = {entry["event"] for entry in captured}
    assert {"api.call", "api.auth.token.fetched"} <= events  # the capture saw the client's events
    tokens = list(sandbox._tokens)
    assert len(tokens) == 4  # the first, after the revoke, and two for the refused pair
    forbidden = [LIVE.client_secret, wrong_secret, *tokens]
    texts = [repr(captured), repr(LIVE), token_repr]
    for exc in raised:
        texts += [str(exc), repr(exc), repr(exc.args), repr(vars(exc))]
        if exc.__context__ is not None:
            texts += [str(exc.__context__), repr(exc.__context__)]
    for text in texts:
        for secret in forbidden:
            assert secret not in text


# --- 6. models and the description -----------------------------------------------------


@pytest.mark.anyio
async def test_valuation_from_json_reads_a_sandbox_201_body(
    sandbox: Sandbox, raw: httpx.AsyncClient
) -> None:
    """A 201 body with both extras matches the description and parses field by field."""
    token = await token_for(raw, LIVE)
    request = home(include=EXTRAS, reference="case-17")
    response = await raw.post(
        API_PREFIX + "/valuations",
        json=request.to_json(),
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": new_key()},
    )
    assert response.status_code == 201
    body = response.json()
    validate_response(
        "POST",
        "/valuations",
        201,
        response.headers["content-type"],
        body,
        headers=response.headers,
    )
    valuation = Valuation.from_json(body)
    assert valuation.id == body["id"]
    assert valuation.reference == "case-17"
    assert valuation.mode is None
    assert valuation.valued_at == body["valuedAt"]
    figures = body["valuation"]
    assert (valuation.figures.low, valuation.figures.estimate, valuation.figures.high) == (
        figures["range"]["low"],
        figures["estimate"],
        figures["range"]["high"],
    )
    assert valuation.figures.coverage == figures["range"]["coverage"]
    assert valuation.figures.currency == "GBP"
    assert valuation.figures.indexed_to == figures.get("indexedTo")
    assert valuation.sector == body["location"]["sector"]
    assert valuation.local_authority == body["location"]["localAuthority"]
    assert valuation.data_quality == body["dataQuality"] == "partial"
    assert valuation.model_version == body["model"]["version"]
    assert valuation.input.postcode == "SW1A 1AA"
    assert valuation.input.bedrooms == 3
    assert valuation.input.floor_area_source == "bedrooms"
    assert valuation.input.floor_area_sqm == body["input"]["floorAreaSqm"]
    assert valuation.commentary == body["commentary"]
    assert valuation.rebuild_cost == body["rebuildCost"]
    assert valuation.charge == Charge(10, sandbox.account(LIVE.client_id).balance)
    assert valuation.raw == body


@pytest.mark.anyio
async def test_street_analysis_is_charged_once_and_matches_the_description(
    sandbox: Sandbox, seen: Recorder, api: PartnerClient
) -> None:
    """A street analysis parses and matches the description; a repeat read is free."""
    first = await api.get_street_analysis("SW1A1AA")
    repeat = await api.get_street_analysis("SW1A 1AA")
    assert first.postcode == "SW1A 1AA"
    assert first.covered_postcodes[0] == "SW1A 1AA"
    assert first.mode is None
    assert first.charge == Charge(
        sandbox.config.street_analysis_credits, sandbox.account(LIVE.client_id).balance
    )
    assert repeat.charge is None
    assert dataclasses.replace(first, charge=None) == repeat
    assert [s.status for s in seen.seen] == [200, 200]
    for answer in seen.seen:
        answer.validate()


_REQUIRED = [
    ("id",),
    ("valuedAt",),
    ("valuation", "estimate"),
    ("valuation", "range", "high"),
    ("location", "localAuthority"),
    ("dataQuality",),
    ("model", "version"),
    ("input", "floorAreaSqm"),
    ("input", "floorAreaSource"),
]


def _sandbox_body() -> dict[str, Any]:
    """A 201 body as the sandbox builds it, made without a server."""
    now = dt.datetime.now(dt.UTC)
    parts = data.valuation_parts(rules.canonical(HOME.to_json()), now=now)
    return {"id": UNKNOWN_ID, "valuedAt": now.isoformat(), **parts}


@pytest.mark.parametrize("broken", ["missing", "wrong type"])
@pytest.mark.parametrize("path", _REQUIRED, ids=".".join)
def test_from_json_refuses_a_body_without_a_required_field(
    path: tuple[str, ...], broken: str
) -> None:
    """A required field missing or of the wrong type is an UnreadableAnswerError: a replay
    would return the same bytes, so it is the row's problem (answer kept), not a retry."""
    body = copy.deepcopy(_sandbox_body())
    Valuation.from_json(body)
    parent = body
    for name in path[:-1]:
        parent = parent[name]
    if broken == "missing":
        del parent[path[-1]]
    else:
        parent[path[-1]] = True if isinstance(parent[path[-1]], str) else "12"
    with pytest.raises(UnreadableAnswerError) as caught:
        Valuation.from_json(body)
    assert caught.value.action is Action.ROW


def _answer_of(request: ValuationRequest, **changes: Any) -> dict[str, Any]:
    """The sandbox's body for `request`, with top-level members changed (None: removed)."""
    now = dt.datetime(2026, 12, 31, 23, 59, 59, 999_000, tzinfo=dt.UTC)
    parts = data.valuation_parts(rules.canonical(request.to_json()), now=now)
    body = {"id": UNKNOWN_ID, "valuedAt": "2026-12-31T23:59:59.999Z", **parts, **changes}
    return {name: value for name, value in body.items() if value is not None}


@pytest.mark.parametrize(
    "body",
    [
        _answer_of(HOME, charge={"credits": 10, "balanceAfter": 0}),
        _answer_of(home(include=EXTRAS, reference='Caf\u00e9 "\u00a3" \U0001f3e0'), mode="test"),
        _answer_of(home(property_type="flat", bedrooms=None, floor_area_sqm=52.0), charge=None),
        _answer_of(home(year_built=1890, built_form="end_terrace", walls_energy_efficiency="poor")),
        {
            **_answer_of(home(include=("rebuildCost",))),
            "valuation": {
                "estimate": 250000.0,
                "range": {"low": 1, "high": 2**62},
                "currency": "GBP",
            },
            "futureField": {"kept": "in raw only"},
        },
    ],
    ids=["plain", "extras, test, unicode", "flat, no charge", "every field", "whole floats"],
)
def test_a_valuation_is_made_again_from_its_record_without_reading_the_answer(
    body: dict[str, Any],
) -> None:
    """`to_record` keeps every field the parser read; `of_record` makes the same valuation
    from it (equal field by field, `raw` left empty: the answer is kept raw beside it)."""
    read = Valuation.from_json(body)
    record = read.to_record()
    again = Valuation.of_record(record)
    assert again == read
    assert dataclasses.astuple(again)[:-1] == dataclasses.astuple(read)[:-1]
    assert again.raw == {}
    assert "futureField" not in record
    assert record_of(body) == record


@pytest.mark.parametrize(
    "record",
    ["[2" + ",null" * 25 + "]", "[1,2,3]", '{"id": "val_x"}', "[]", "not JSON"],
    ids=["a later layout", "too short", "an object", "empty", "not JSON"],
)
def test_a_text_that_is_not_a_record_is_refused(record: str) -> None:
    with pytest.raises(ValueError, match=r"not a valuation's record|Expecting value"):
        Valuation.of_record(record)


@pytest.mark.parametrize(
    ("answer", "why", "found"),
    [
        (
            '{"id": "val_x", "valuedAt": 3}',
            "valuation: required field 'valuation' is missing",
            "val_x",
        ),
        ('{"id": 7}', "valuation: required field 'valuation' is missing", None),
        ('["a list"]', "valuation: the body is not a JSON object", None),
        ("<html>", "not JSON: Expecting value: line 1 column 1 (char 0)", None),
    ],
)
def test_an_answer_the_parser_refuses_is_recorded_with_why(
    answer: str, why: str, found: str | None
) -> None:
    """The record of an unreadable answer says why and the id it gives, read once."""
    assert json.loads(record_of_text(answer)) == {"unreadable": why, "id": found}


@pytest.mark.anyio
async def test_a_not_found_from_a_wrong_base_url_is_a_wrong_address(
    served: RunningSandbox,
) -> None:
    """A read's not-found is believed only once a call without a token has answered 401
    there: under another version's path it is a wrong address, never a missing id."""
    async with PartnerClient(
        base_url=served.base_url.replace("/v1", "/v2"),
        auth_url=served.auth_url,
        credentials=LIVE,
    ) as client:
        with pytest.raises(WrongAddressError, match="not the API's"):
            await client.read_valuation("val_" + "0" * 26)
    async with client_for(served, LIVE) as client:
        with pytest.raises(NotFoundError):
            await client.read_valuation("val_" + "0" * 26)
        with pytest.raises(NotFoundError):  # proven once: no second probe
            await client.read_valuation("val_" + "1" * 26)
        assert client.calls == 3
