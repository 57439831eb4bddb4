"""`batchval check`: a preflight that costs nothing.

It resolves the settings, gets a token from the token URL, asks the API one free
question, says what can and cannot be known of the mode and the balance, and, given an
INPUT, prices it with the code of `run --dry-run` (`valuations/ingest.price_input`). One line per
check, then a final line; the exit code is the first failing check's:

| what fails                                                          | exit |
|---------------------------------------------------------------------|------|
| the settings (a partly configured API, a bad config file)           | 64   |
| the token URL refuses the credentials (401, or 400/403 of any body) | 77   |
| the token URL or the API answers as no API would (404, 405, a page) | 64   |
| a host name that does not exist (the resolver's "no such name")     | 64   |
| the API refuses the token URL's fresh tokens, or the account        | 77   |
| no answer (connection refused, TLS, a timeout, 502/503/504): why    | 75   |
| the account's daily limit is used                                   | 75   |
| the input cannot be used, or `run` would refuse most of its rows    | 65   |
| `input.passthrough` lists a column the input does not have          | 64   |

The free questions are two `GET /valuations/{id}` with a well-formed id no valuation has.
Without a token, the API answers 401 (docs/api.md, section 1: a missing token gets 401):
an address where that path is not the API answers otherwise (the sandbox, like many
servers, answers an unknown path with a not-found problem, so the second question alone
could not tell). With the token, a `not-found` problem document proves that the token
works. Nothing is created, so nothing is charged.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
from collections.abc import Callable
from pathlib import Path

import httpx

from batchval._internal.api import (
    LIVE_SCOPE,
    PROBE_ID,
    TEST_SCOPE,
    VALUATION_CREDITS,
    AccessToken,
    Action,
    CredentialsRefusedError,
    NotFoundError,
    PartnerClient,
    PartnerError,
    ProblemError,
    RateLimitedError,
    Reach,
    TransportError,
    UnauthorizedError,
    UnrecognisedAnswerError,
    WrongAddressError,
    described,
    excerpt,
    read_no_answer,
    tls_context,
)
from batchval._internal.input import InputError, left_out_line, open_input
from batchval._internal.money import preflight_client
from batchval._internal.outcome import ExitCode, RunRefusedError, SettingsError
from batchval._internal.sending import resume_after_daily_limit, run_async
from batchval._internal.settings import ApiSettings, Settings
from batchval._internal.valuations import price_input
from batchval._version import __version__

# Well-formed (`^val_[0-9a-z]{26}$`) and never issued: real ids are random, and this one
# spells out what it is for anyone who finds it in the API's access logs.
PROBE_TIMEOUT_SECONDS = 10.0  # a preflight says "unreachable" sooner than a run would
# The token URL's answers read as refused credentials (docs/api.md, section 8): the safe
# reading of answers the API does not show, since only a person can fix them.
_REFUSING_STATUSES = frozenset({400, 401, 403})


@dataclasses.dataclass(frozen=True, slots=True)
class Finding:
    """One check's line."""

    name: str  # settings, token, api, mode, balance, input
    text: str
    code: ExitCode = ExitCode.COMPLETE  # COMPLETE: the check passed (or only informs)

    @property
    def ok(self) -> bool:
        return self.code is ExitCode.COMPLETE

    def line(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'}  {self.name}: {self.text}"


@dataclasses.dataclass(frozen=True, slots=True)
class CheckReport:
    findings: tuple[Finding, ...]

    @property
    def failure(self) -> Finding | None:
        return next((f for f in self.findings if not f.ok), None)

    @property
    def exit_code(self) -> ExitCode:
        failure = self.failure
        return ExitCode.COMPLETE if failure is None else failure.code

    def final_line(self) -> str:
        failure = self.failure
        if failure is None:
            return "check: ok (exit 0)"
        return f"check: {failure.name}: {failure.text} (exit {int(failure.code)})"

    def render(self) -> str:
        return "\n".join([*(f.line() for f in self.findings), self.final_line()])


def run_check(
    settings: Settings,
    input_path: Path | None,
    *,
    embedded_api: Callable[[], contextlib.AbstractContextManager[ApiSettings]],
) -> CheckReport:
    """Every check, in order; the API is asked only once the settings resolved."""
    findings: list[Finding] = []
    if settings.api is None:
        findings.append(
            Finding(
                "settings",
                "no API configured: `run` would value against the embedded sandbox in "
                "TEST mode (fake figures, never charged); checking that sandbox",
            )
        )
        with embedded_api() as api:
            findings += run_async(_probe, api, True, settings.run.now)
    else:
        api = settings.api
        findings.append(
            Finding(
                "settings",
                f"API {api.base_url}, token URL {api.auth_url.rstrip('/')}/oauth2/token, "
                f"client id {api.client_id!r}",
            )
        )
        findings += run_async(_probe, api, False, settings.run.now)
    if input_path is not None:
        findings.append(_price(settings, input_path))
    return CheckReport(tuple(findings))


async def _probe(api: ApiSettings, embedded: bool, now: Callable[[], dt.datetime]) -> list[Finding]:
    async with preflight_client(api, PROBE_TIMEOUT_SECONDS) as client:
        try:
            token = await client.tokens.token()
        except PartnerError as exc:
            return [_token_failure(exc)]
        findings = [Finding("token", "the token URL gave an access token")]
        findings.append(
            await _ask_without_token(api, client.reach) or await _ask_api(client, api, now)
        )
        if findings[-1].code in (ExitCode.USAGE, ExitCode.ACCOUNT):
            return findings
        return [*findings, *_mode_and_balance(api, token, embedded)]


def _token_failure(exc: PartnerError) -> Finding:
    if isinstance(exc, CredentialsRefusedError) or (
        isinstance(exc, UnrecognisedAnswerError) and exc.status in _REFUSING_STATUSES
    ):
        return Finding(
            "token",
            f"credentials refused: the token URL answered {exc.status} to this client id and "
            "secret; check BATCHVAL_CLIENT_ID and BATCHVAL_CLIENT_SECRET",
            ExitCode.ACCOUNT,
        )
    if isinstance(exc, TransportError):
        return Finding("token", f"unreachable: {exc}", ExitCode.RESUMABLE)
    return Finding("token", f"wrong address: {exc}; check BATCHVAL_AUTH_URL", ExitCode.USAGE)


async def _ask_without_token(api: ApiSettings, reach: Reach) -> Finding | None:
    """GET /valuations/{PROBE_ID} with no token: None when it answers 401, as the API does."""
    url = f"{api.base_url.rstrip('/')}/valuations/{PROBE_ID}"
    async with httpx.AsyncClient(
        verify=tls_context(),
        timeout=PROBE_TIMEOUT_SECONDS,
        headers={"User-Agent": f"batchval/{__version__}"},
    ) as http:
        try:
            response = await http.get(url)
        except httpx.TransportError as exc:
            failure = read_no_answer(
                exc, doing=f"GET {url}", url=url, address="base URL", reach=reach
            )
            if isinstance(failure, WrongAddressError):
                return Finding(
                    "api", f"wrong address: {failure}; check BATCHVAL_BASE_URL", ExitCode.USAGE
                )
            return Finding("api", f"unreachable: {failure}", ExitCode.RESUMABLE)
    status = response.status_code
    if status in (401, 429):
        return None
    if status in (502, 503, 504):
        return Finding("api", f"GET {url} answered {status}: not answering now", ExitCode.RESUMABLE)
    content_type = response.headers.get("Content-Type", "")
    quoted = excerpt(response.content, content_type)[:80]
    said = f"{content_type} " + (
        repr(quoted) if quoted else described(response.content, content_type)
    )
    return Finding(
        "api",
        f"wrong address: GET {url} without a token answered {status} {said}, not the 401 "
        "the API gives a call without a token; check BATCHVAL_BASE_URL",
        ExitCode.USAGE,
    )


async def _ask_api(
    client: PartnerClient, api: ApiSettings, now: Callable[[], dt.datetime]
) -> Finding:
    """GET /valuations/{PROBE_ID}: a not-found problem document is the good answer. At
    the daily limit, the time a run may start is read as a run reads it (`sending/midnight`),
    on the run's clock `now`."""
    where = f"GET {api.base_url.rstrip('/')}/valuations/{PROBE_ID}"
    try:
        await client.get_valuation(PROBE_ID)
    except NotFoundError:
        return Finding(
            "api",
            f"{where} answered 401 without a token and the API's not-found problem with "
            "one: address and token work",
        )
    except RateLimitedError as exc:
        if exc.daily_limit:
            not_before = resume_after_daily_limit(now(), exc.retry_after)
            # Whole seconds, rounded up: never a time before the run's own not_before.
            shown = (not_before + dt.timedelta(microseconds=999_999)).replace(microsecond=0)
            return Finding(
                "api",
                "the account's daily limit is used: a run now would stop at once; "
                f"run after {shown.isoformat()} (midnight UTC, as a run reads the "
                "API's Retry-After)",
                ExitCode.RESUMABLE,
            )
        return Finding("api", f"{where} answered 429 (short-term limit): address and token work")
    except UnauthorizedError:
        return Finding(
            "api",
            "the API refused fresh tokens from the token URL: are BATCHVAL_AUTH_URL and "
            "BATCHVAL_BASE_URL the same API's, and is the client allowed to use it?",
            ExitCode.ACCOUNT,
        )
    except (WrongAddressError, UnrecognisedAnswerError) as exc:
        return Finding("api", f"wrong address: {exc}; check BATCHVAL_BASE_URL", ExitCode.USAGE)
    except ProblemError as exc:
        if exc.action is Action.ACCOUNT:
            return Finding("api", f"the account cannot spend: {exc}", ExitCode.ACCOUNT)
        if exc.action is Action.RETRY:
            return Finding("api", f"not answering now: {exc}", ExitCode.RESUMABLE)
        return Finding("api", f"{where} answered a problem document ({exc}): address works")
    except PartnerError as exc:  # TransportError, a 502 page, a body cut short
        return Finding("api", f"unreachable: {exc}", ExitCode.RESUMABLE)
    return Finding("api", f"{where} answered a valuation: address and token work")


def _mode_and_balance(api: ApiSettings, token: AccessToken, embedded: bool) -> list[Finding]:
    """What can be known of the mode and the balance without paying (docs/api.md: the mode
    shows only on a valuation, the balance only in a paid answer's charge)."""
    if embedded:
        mode = "test: the embedded sandbox, with the shared test credential"
    elif token.scope == TEST_SCOPE:
        mode = (
            "test: the token answer's scope is partners:test (a field the API's description "
            "does not show, so a hint); a run's first answer confirms it"
        )
    elif token.scope == LIVE_SCOPE:
        mode = (
            "live: the token answer's scope is partners:read (a field the API's description "
            f"does not show, so a hint); each valuation costs {VALUATION_CREDITS} credits"
        )
    else:
        mode = (
            "unknown until the first valuation: the API shows the mode only on a valuation "
            "(mode = test) and the token answer names no scope"
        )
    if api.client_id == "sandbox-test":
        mode += " (sandbox-test is the sandbox's documented test credential)"
    test = mode.startswith("test")
    balance = (
        "none: test mode is never charged"
        if test
        else "unknown until the first paid call (the API tells it only in a paid answer)"
    )
    return [Finding("mode", mode), Finding("balance", balance)]


def _price(settings: Settings, input_path: Path) -> Finding:
    try:
        source = open_input(input_path, settings.input)
        priced = price_input(source, max_refused_share=settings.run.max_refused_share)
    except InputError as exc:
        return Finding("input", str(exc), ExitCode.INPUT)
    except SettingsError as exc:  # a passthrough naming a column the file does not have
        return Finding("input", str(exc), ExitCode.USAGE)
    except RunRefusedError as exc:
        return Finding("input", exc.detail, exc.exit_code)
    if priced.stop is not None:  # `run` would refuse it before any call
        return Finding("input", priced.stop.line(), priced.exit_code)
    left_out = left_out_line(source.read_as.personal_left_out)
    problems = (
        f", {priced.rows_with_problems} with problems (see `run --dry-run`)"
        if priced.rows_with_problems
        else ""
    )
    return Finding(
        "input",
        f"{priced.rows} rows{problems}; {priced.calls} distinct requests: "
        f"{priced.credits} credits (£{priced.credits / 100:.2f} live), "
        f"{priced.days_at_daily_limit} day(s) at {priced.daily_limit} calls a day"
        + (f"; {left_out}" if left_out else ""),
    )
