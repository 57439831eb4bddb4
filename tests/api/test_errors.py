"""The answer table (batchval._internal.api.errors.read_failure) and the client's reading of
successes and of the token URL: every cell, each with the action the pool takes."""

from __future__ import annotations

import base64
import errno
import itertools
import json
import socket
import ssl
from collections.abc import Callable

import httpx
import pytest

from batchval._internal import redaction
from batchval._internal.api import (
    Action,
    Credentials,
    GatewayError,
    InvalidRequestError,
    PartnerClient,
    PartnerError,
    RateLimitedError,
    TransportError,
    UnrecognisedAnswerError,
    WrongAddressError,
    read_failure,
)
from batchval._internal.api.errors import EXCERPT_CHARS, PROBLEM_TYPES, excerpt, read_no_answer
from batchval._internal.api.network import NoAnswer, Reach

PROBLEM = "application/problem+json"
HTML = "text/html; charset=utf-8"
DOCS = "https://developer.example/errors/"
POST = ("POST", "/valuations")
GET = ("GET", "/valuations/{id}")
STREET = ("GET", "/street-analysis/{postcode}")
PAGE = b"<html><body><h1>403 Forbidden</h1><p>Request blocked by the proxy.</p></body></html>"


def problem(name: str, status: int, code: str | None = None) -> bytes:
    body = {"type": DOCS + name, "title": name, "status": status, "detail": f"{name} here"}
    if code:
        body["code"] = code
    return json.dumps(body).encode()


def read(
    operation: tuple[str, str],
    status: int,
    content_type: str,
    body: bytes,
    retry_after: int | None = None,
) -> PartnerError:
    method, path = operation
    return read_failure(
        method=method,
        operation=path,
        url=f"https://api.example/partners/v1{path}",
        status=status,
        content_type=content_type,
        body=body,
        retry_after=retry_after,
    )


# Every type of the API's error table, at its own status, on the operation it is for.
KNOWN = [
    ("invalid-request", 400, POST, Action.ROW),
    ("insufficient-credits", 403, POST, Action.ACCOUNT),
    ("account-blocked", 403, POST, Action.ACCOUNT),
    ("not-found", 404, GET, Action.ROW),
    ("not-found", 404, STREET, Action.ROW),
    ("request-in-progress", 409, POST, Action.RETRY),
    ("outside-coverage", 422, POST, Action.ROW),
    ("floor-area-required", 422, POST, Action.ROW),
    ("idempotency-key-reused", 422, POST, Action.DEFECT),
    ("rate-limited", 429, POST, Action.PAUSE),
    ("data-unavailable", 503, POST, Action.RETRY),
    ("timeout", 504, POST, Action.RETRY),
]


@pytest.mark.parametrize(("name", "status", "operation", "action"), KNOWN)
def test_known_problem_types_keep_their_meaning(
    name: str, status: int, operation: tuple[str, str], action: Action
) -> None:
    """Each documented type at its status is its own class, with the table's action."""
    error = read(operation, status, PROBLEM, problem(name, status), retry_after=3)
    assert type(error) is PROBLEM_TYPES[name]
    assert error.action is action


def test_every_documented_type_is_in_the_table() -> None:
    """No type of the API's table is left out of the cases above."""
    assert {name for name, *_ in KNOWN} == set(PROBLEM_TYPES)


def test_daily_limit_stops_resumably() -> None:
    """429 rate-limited with code daily_limit: stop (75), keeping its Retry-After."""
    error = read(POST, 429, PROBLEM, problem("rate-limited", 429, "daily_limit"), 3600)
    assert isinstance(error, RateLimitedError)
    assert error.action is Action.STOP
    assert error.retry_after == 3600


@pytest.mark.parametrize(
    ("operation", "status", "content_type", "body", "expected", "action"),
    [
        # The address is wrong: POST /valuations has no 404, nothing has a 405.
        (POST, 404, PROBLEM, problem("not-found", 404), WrongAddressError, Action.CONFIG),
        (POST, 404, HTML, b"<h1>Not Found</h1>", WrongAddressError, Action.CONFIG),
        (
            POST,
            405,
            PROBLEM,
            b'{"type":"about:blank","status":405}',
            WrongAddressError,
            Action.CONFIG,
        ),
        (GET, 404, "text/plain", b"404 page not found", WrongAddressError, Action.CONFIG),
        # 429 from anyone is the short-term limit; only the API's type can say daily_limit.
        (POST, 429, HTML, b"<h1>Too many</h1>", RateLimitedError, Action.PAUSE),
        (
            POST,
            429,
            PROBLEM,
            b'{"type":"https://proxy/slow","code":"daily_limit"}',
            RateLimitedError,
            Action.PAUSE,
        ),
        # Gateways in front of the API: transient by the nature of the status.
        (POST, 502, HTML, b"<h1>Bad Gateway</h1>", GatewayError, Action.RETRY),
        (POST, 503, HTML, b"<h1>Service Unavailable</h1>", GatewayError, Action.RETRY),
        (POST, 504, "", b"", GatewayError, Action.RETRY),
        (POST, 503, PROBLEM, problem("maintenance", 503), GatewayError, Action.RETRY),
        # Anything else is not recognised: never a row's fault.
        (POST, 403, HTML, PAGE, UnrecognisedAnswerError, Action.UNRECOGNISED),
        (
            POST,
            500,
            PROBLEM,
            problem("server-error", 500),
            UnrecognisedAnswerError,
            Action.UNRECOGNISED,
        ),
        (
            POST,
            400,
            PROBLEM,
            problem("outside-coverage", 400),
            UnrecognisedAnswerError,
            Action.UNRECOGNISED,
        ),
        (
            POST,
            422,
            PROBLEM,
            problem("brand-new-type", 422),
            UnrecognisedAnswerError,
            Action.UNRECOGNISED,
        ),
        (
            POST,
            403,
            "text/plain",
            problem("account-blocked", 403),
            UnrecognisedAnswerError,
            Action.UNRECOGNISED,
        ),
        (POST, 418, "application/json", b"[]", UnrecognisedAnswerError, Action.UNRECOGNISED),
        (POST, 400, PROBLEM, b'{"type":', UnrecognisedAnswerError, Action.UNRECOGNISED),
    ],
    ids=[
        "404-problem-to-post",
        "404-html-to-post",
        "405-about-blank",
        "404-text-to-get",
        "429-html",
        "429-foreign-daily-limit",
        "502-html",
        "503-html",
        "504-empty",
        "503-unknown-type",
        "403-html-proxy",
        "500-unknown-type",
        "known-type-wrong-status",
        "unknown-type-422",
        "problem-as-text-plain",
        "418-json-array",
        "400-truncated-problem",
    ],
)
def test_answers_the_api_does_not_describe(
    operation: tuple[str, str],
    status: int,
    content_type: str,
    body: bytes,
    expected: type[PartnerError],
    action: Action,
) -> None:
    """Answers outside the API's table are read by status and content type, never blamed
    on a row."""
    error = read(operation, status, content_type, body)
    assert type(error) is expected
    assert error.action is action
    assert error.action is not Action.ROW


def test_unrecognised_html_page_is_named_never_quoted() -> None:
    """An HTML page is said by its status, type and length; none of its text is kept."""
    error = read(POST, 403, HTML, PAGE + b"x" * 5000)
    assert isinstance(error, UnrecognisedAnswerError)
    assert str(error).endswith(
        f"answered 403 {HTML}: an HTML page of {len(PAGE) + 5000:,} bytes, not kept"
    )
    assert error.excerpt == ""
    assert "Forbidden" not in str(error)


@pytest.mark.parametrize("content_type", ["text/plain; charset=utf-8", PROBLEM])
def test_unrecognised_text_keeps_its_first_characters(content_type: str) -> None:
    """A text/plain or problem+json body keeps at most EXCERPT_CHARS characters, cut
    between words (a word the cut would break, such as a secret's first half, is left out)."""
    error = read(POST, 418, content_type, b"I am a teapot. " * 100)
    assert isinstance(error, UnrecognisedAnswerError)
    assert error.excerpt.startswith("I am a teapot.")
    assert EXCERPT_CHARS - len("teapot. ") <= len(error.excerpt) <= EXCERPT_CHARS
    assert error.excerpt.endswith(("I", "am", "a", "teapot."))
    assert repr(error.excerpt) in str(error)


@pytest.mark.parametrize(
    ("content_type", "body", "said"),
    [
        ("application/json", b'{"echo": "s3cret"}', "a JSON body of 18 bytes, not kept"),
        ("application/xml", b"<a>s3cret</a>", "a body (application/xml) of 13 bytes, not kept"),
        ("", b"s3cret", "a body of no stated type of 6 bytes, not kept"),
        ("text/html", b"", "an empty body"),
    ],
)
def test_other_bodies_are_named_by_type_and_length(
    content_type: str, body: bytes, said: str
) -> None:
    """JSON, XML or a body of no type: only its type and length are said."""
    error = read(POST, 418, content_type, body)
    assert str(error).endswith(said)
    assert "s3cret" not in str(error)


def test_excerpt_is_one_line() -> None:
    """Newlines and runs of spaces in a text body become single spaces."""
    assert excerpt(b"Bad\n  gateway\r\n\tsorry", "text/plain") == "Bad gateway sorry"


# --- successes and the token URL, read by the client ---------------------------------

TOKEN = {"access_token": "t0k3n", "token_type": "Bearer", "expires_in": 1800}


def client_with(handler: Callable[[httpx.Request], httpx.Response]) -> PartnerClient:
    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return PartnerClient(
        base_url="https://api.example/partners/v1",
        auth_url="https://api.example",
        credentials=Credentials("id", "secret"),
        http=http,
    )


def api_answer(
    status: int, content_type: str, body: bytes
) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/oauth2/token":
            return httpx.Response(200, json=TOKEN)
        return httpx.Response(status, headers={"Content-Type": content_type}, content=body)

    return handler


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "content_type", "body", "action"),
    [
        (201, HTML, b"<html>Sign in to the Wi-Fi</html>", Action.UNRECOGNISED),
        (201, "application/json", b"[1, 2]", Action.UNRECOGNISED),
        (201, "application/json", b'{"id": "val_', Action.RETRY),  # cut short: replayed
        (200, "application/json", b'{"status": "ok"}', Action.UNRECOGNISED),
        (302, "application/json", b'{"location": "/login"}', Action.UNRECOGNISED),
    ],
    ids=["html-portal", "json-array", "truncated-json", "json-not-a-valuation", "redirect"],
)
async def test_a_success_that_is_not_a_json_object(
    status: int, content_type: str, body: bytes, action: Action
) -> None:
    """A 2xx that is not a JSON object is never read as a valuation."""
    async with client_with(api_answer(status, content_type, body)) as api:
        with pytest.raises(PartnerError) as caught:
            await api.post_valuation(b"{}", idempotency_key="key-12345678")
    assert caught.value.action is action


@pytest.mark.anyio
async def test_a_success_keeps_its_exact_bytes() -> None:
    """post_valuation returns the answer's bytes as received, and the object they hold."""
    raw = b'{"id": "val_x",  "valuation": {"estimate": 250000.0}, "riskBand": "B"}'
    async with client_with(api_answer(201, "application/json", raw)) as api:
        answer = await api.post_valuation(b"{}", idempotency_key="key-12345678")
    assert answer.body == raw
    assert answer.data["riskBand"] == "B"


def token_answer(
    status: int, content_type: str, body: bytes
) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers={"Content-Type": content_type}, content=body)

    return handler


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "content_type", "body", "action"),
    [
        (401, "application/json", b'{"error": "invalid_client"}', Action.ACCOUNT),
        (400, "application/json", b'{"error": "invalid_client"}', Action.ACCOUNT),
        (401, HTML, b"<h1>Unauthorized</h1>", Action.ACCOUNT),
        (404, HTML, b"<h1>Not Found</h1>", Action.CONFIG),
        (405, "", b"", Action.CONFIG),
        (403, HTML, PAGE, Action.UNRECOGNISED),
        (200, HTML, b"<html>login</html>", Action.UNRECOGNISED),
        (200, "application/json", b'{"token": "x"}', Action.UNRECOGNISED),
        (503, HTML, b"<h1>down</h1>", Action.RETRY),
    ],
    ids=[
        "401-invalid-client",
        "400-invalid-client",
        "401-html",
        "404",
        "405",
        "403-html-proxy",
        "200-html",
        "200-not-a-token",
        "503",
    ],
)
async def test_token_url_answers(
    status: int, content_type: str, body: bytes, action: Action
) -> None:
    """The token URL's answers: refused credentials, a wrong address, or unrecognised."""
    async with client_with(token_answer(status, content_type, body)) as api:
        with pytest.raises(PartnerError) as caught:
            await api.post_valuation(b"{}", idempotency_key="key-12345678")
    assert caught.value.action is action
    assert "secret" not in str(caught.value)


# --- only what is understood is kept (issue 54, part 1) ------------------------------

RANDOM_RUN = "Zx8kQ2vN7pLm4RtY9wBc3Hd6"  # 24 characters of a token no one told the redactor of


def test_a_problem_keeps_only_what_is_understood() -> None:
    """Of a problem: its status and type as they are, a `code` only when it is a short
    word, and title and detail with any run that looks random masked and cut between
    words; nothing else of the body (an `echo` field) is kept anywhere."""
    body = {
        "type": DOCS + "invalid-request",
        "status": 400,
        "title": f"Bad token {RANDOM_RUN}",
        "detail": "word " * 39 + "straddling-the-cut-here and more",
        "code": "not a code: it has spaces",
        "echo": RANDOM_RUN,
    }
    error = read(POST, 400, PROBLEM, json.dumps(body).encode())
    assert isinstance(error, InvalidRequestError)
    assert (error.status, error.type, error.code) == (400, DOCS + "invalid-request", None)
    assert error.title == "Bad token [redacted]"
    assert error.detail == ("word " * 39).strip()  # the word the cut would break left out
    assert RANDOM_RUN not in str(vars(error))
    kept = read(POST, 429, PROBLEM, problem("rate-limited", 429, code="daily_limit"))
    assert isinstance(kept, RateLimitedError)
    assert kept.code == "daily_limit"


def test_random_runs_are_masked_in_words_only() -> None:
    """Words keep their ids, versions and dates: only long random-looking runs go."""
    kept = "valuation val_123 model avm-2025.11.1 at 2026-12-06T10:00:00Z for SW1A 2AA"
    assert redaction.mask_random(kept) == kept
    assert redaction.mask_random(f"token {RANDOM_RUN}.") == "token [redacted]"
    assert redaction.mask_random("a" * 40 + "1") == "a" * 40 + "1"  # long, not random


@pytest.mark.anyio
async def test_a_paid_answer_keeps_its_ids_and_loses_known_tokens() -> None:
    """A 2xx is kept whole: its ids and a random-looking field as they are (never guessed
    at), every token the process knows masked, in any encoding, and any `Bearer` token."""
    redactor = redaction.Redactor()
    redactor.add("t0k3n-of-the-api-1234567890")
    body = {
        "id": "val_" + RANDOM_RUN,
        "modelVersion": RANDOM_RUN,
        "note": "t0k3n-of-the-api-1234567890",
        "trace": base64.b64encode(b"Bearer t0k3n-of-the-api-1234567890").decode(),
        "auth": "Bearer abc.def",
    }
    before = redaction.active()
    redaction.use(redactor)
    try:
        async with client_with(
            api_answer(201, "application/json", json.dumps(body).encode())
        ) as api:
            answer = await api.post_valuation(b"{}", idempotency_key="key-12345678")
    finally:
        redaction.use(before)
    assert answer.data["id"] == "val_" + RANDOM_RUN
    assert answer.data["modelVersion"] == RANDOM_RUN
    assert answer.data["note"] == redaction.REDACTED
    assert "[redacted]" in answer.data["trace"]
    assert answer.data["auth"] == "Bearer [redacted]"
    assert json.loads(answer.body) == answer.data  # the bytes kept are the masked answer


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b'{"error": "invalid_client", "error_description": "s3cret"}', "(401 invalid_client)"),
        (b'{"error": "s3cret-echoed"}', "(401 an error code of its own)"),
        (b'{"error": ["s3cret"]}', "(401 an error code of its own)"),
    ],
)
async def test_the_token_url_s_words_are_never_quoted(body: bytes, said: str) -> None:
    """Nothing free-form from the token URL: a standard RFC 6749 code is named, any other
    `error` is "an error code of its own", a description is never kept; a page it answers
    is named by type and length (even text, which the API's own pages may have quoted)."""
    async with client_with(token_answer(401, "application/json", body)) as api:
        with pytest.raises(PartnerError) as caught:
            await api.post_valuation(b"{}", idempotency_key="key-12345678")
    assert said in str(caught.value)
    assert "s3cret" not in str(caught.value)
    async with client_with(token_answer(500, "text/plain", b"form: s3cret")) as api:
        with pytest.raises(UnrecognisedAnswerError) as unknown:
            await api.post_valuation(b"{}", idempotency_key="key-12345678")
    assert unknown.value.excerpt == ""
    assert "a body (text/plain) of 12 bytes, not kept" in str(unknown.value)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("header", "date", "expected"),
    [
        ("7", None, 7),
        ("Wed, 21 Oct 2015 07:28:00 GMT", None, 0),
        # Measured from the server's Date, not this machine's clock (years later here).
        ("Wed, 21 Oct 2015 00:00:00 GMT", "Tue, 20 Oct 2015 23:59:30 GMT", 30),
        ("Wed, 21 Oct 2015 00:00:00 GMT", "not a date", 0),
        ("soon", None, None),
        ("", None, None),
    ],
    ids=["seconds", "http-date-past", "http-date-from-date", "bad-date", "garbage", "absent"],
)
async def test_retry_after_in_seconds_or_as_a_date(
    header: str, date: str | None, expected: int | None
) -> None:
    """Retry-After is read as seconds, or as the seconds until an HTTP-date from the
    answer's Date (from this machine's clock without one)."""
    body = problem("rate-limited", 429)

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/oauth2/token":
            return httpx.Response(200, json=TOKEN)
        headers = {"Content-Type": PROBLEM}
        if header:
            headers["Retry-After"] = header
        if date is not None:
            headers["Date"] = date
        return httpx.Response(429, headers=headers, content=body)

    async with client_with(handler) as api:
        with pytest.raises(RateLimitedError) as caught:
            await api.post_valuation(b"{}", idempotency_key="key-12345678")
    assert caught.value.retry_after == expected


# --- no answer at all: read_no_answer ----------------------------------------------------

API_URL = "https://api.example/partners/v1/valuations"


def chained(*errors: BaseException) -> BaseException:
    """The first error, raised from the second, raised from the third... (as httpx raises
    its own error from httpcore's, from the operating system's)."""
    for outer, inner in itertools.pairwise(errors):
        outer.__cause__ = inner
    return errors[0]


def no_answer(error: BaseException, reached: tuple[str, ...] = ()) -> PartnerError:
    return read_no_answer(
        error, doing=f"POST {API_URL}", url=API_URL, address="base URL", reach=Reach(reached)
    )


def connect_error(*causes: BaseException) -> BaseException:
    return chained(httpx.ConnectError("wrapped"), *causes)


def gaierror(code: int) -> socket.gaierror:
    return socket.gaierror(code, {socket.EAI_NONAME: "Name or service not known"}.get(code, "x"))


def tls_error(reason: str, verify_message: str | None = None) -> ssl.SSLError:
    error: ssl.SSLError
    if verify_message is None:
        error = ssl.SSLError(1, f"[SSL: {reason}] {reason.lower()}")
    else:
        error = ssl.SSLCertVerificationError(1, f"[SSL: {reason}] {verify_message}")
        error.verify_message = verify_message
    error.reason = reason
    return error


def test_a_name_that_does_not_exist_and_never_answered_is_a_wrong_address() -> None:
    """EAI_NONAME for a host never reached: a wrong address (64), naming the host."""
    error = no_answer(connect_error(gaierror(socket.EAI_NONAME)))
    assert isinstance(error, WrongAddressError)
    assert error.action is Action.CONFIG
    assert error.status is None
    assert "the host name api.example does not resolve (no such name" in str(error)
    assert "the base URL is wrong" in str(error)


def test_a_name_that_answered_before_is_an_outage_of_dns() -> None:
    """EAI_NONAME for a host that answered before: transient, said as it is."""
    error = no_answer(connect_error(gaierror(socket.EAI_NONAME)), reached=("API.example",))
    assert isinstance(error, TransportError)
    assert error.action is Action.RETRY
    assert error.no_answer is NoAnswer.NO_SUCH_NAME
    assert "does not resolve" in str(error)
    assert "outage of DNS" in str(error)


@pytest.mark.parametrize("code", [socket.EAI_AGAIN, socket.EAI_FAIL])
def test_a_lookup_that_may_work_later_is_transient(code: int) -> None:
    """EAI_AGAIN (try again) and the like: transient even for a host never reached."""
    error = no_answer(connect_error(gaierror(code)))
    assert isinstance(error, TransportError)
    assert error.action is Action.RETRY
    assert error.no_answer is NoAnswer.NAME_LOOKUP
    assert "name lookup failed for api.example" in str(error)


# The causes as httpx, httpcore, anyio and asyncio chain them, and what each is read as.
NO_ANSWERS: list[tuple[str, BaseException, NoAnswer, str]] = [
    (
        "refused",
        connect_error(ConnectionRefusedError(errno.ECONNREFUSED, "Connect call failed")),
        NoAnswer.REFUSED,
        "connection refused by api.example:443",
    ),
    (
        "refused-anyio",  # anyio: every address failed, the causes in a group
        connect_error(
            OSError("All connection attempts failed"),
            ExceptionGroup(
                "multiple connection attempts failed",
                [
                    OSError(errno.EADDRNOTAVAIL, "Cannot assign requested address"),
                    ConnectionRefusedError(errno.ECONNREFUSED, "Connect call failed"),
                ],
            ),
        ),
        NoAnswer.REFUSED,
        "connection refused",
    ),
    (
        "refused-asyncio",  # Python 3.11's asyncio: every address's error in one message
        connect_error(
            OSError(
                f"Multiple exceptions: [Errno {errno.ECONNREFUSED}] Connect call failed "
                f"('::1', 443, 0, 0), [Errno {errno.ECONNREFUSED}] Connect call failed "
                "('127.0.0.1', 443)"
            )
        ),
        NoAnswer.REFUSED,
        "connection refused",
    ),
    (
        "self-signed",
        connect_error(tls_error("CERTIFICATE_VERIFY_FAILED", "self-signed certificate")),
        NoAnswer.TLS,
        "TLS failed with api.example:443: certificate verify failed: self-signed certificate",
    ),
    (
        "hostname-mismatch",
        connect_error(
            tls_error(
                "CERTIFICATE_VERIFY_FAILED",
                "Hostname mismatch, certificate is not valid for 'api.example'.",
            )
        ),
        NoAnswer.TLS,
        "certificate verify failed: Hostname mismatch, certificate is not valid for",
    ),
    (
        "not-tls",
        connect_error(tls_error("WRONG_VERSION_NUMBER")),
        NoAnswer.TLS,
        "TLS failed with api.example:443: wrong version number",
    ),
    (
        "connect-timeout",
        httpx.ConnectTimeout("no connection in time"),
        NoAnswer.TIMEOUT,
        "timed out (no connection in time, api.example:443)",
    ),
    (
        "read-timeout",
        chained(httpx.ReadTimeout("slow"), TimeoutError()),
        NoAnswer.TIMEOUT,
        "timed out (no answer in time, api.example:443)",
    ),
    (
        "reset",
        chained(httpx.ReadError("reset"), ConnectionResetError(errno.ECONNRESET, "reset")),
        NoAnswer.CUT,
        "connection cut by api.example:443",
    ),
    (
        "disconnected",
        httpx.RemoteProtocolError("Server disconnected without sending a response."),
        NoAnswer.CUT,
        "Server disconnected without sending a response.",
    ),
    (
        "unreachable",
        connect_error(OSError(errno.ENETUNREACH, "Network is unreachable")),
        NoAnswer.OTHER,
        "connection to api.example:443 failed ([Errno 101] Network is unreachable)",
    ),
]


@pytest.mark.parametrize(
    ("error", "kind", "said"),
    [case[1:] for case in NO_ANSWERS],
    ids=[case[0] for case in NO_ANSWERS],
)
def test_no_answer_is_named(error: BaseException, kind: NoAnswer, said: str) -> None:
    """Refused, TLS (and why), a timeout, a cut: transient, and the message says which."""
    read = no_answer(error)
    assert isinstance(read, TransportError)
    assert read.action is Action.RETRY
    assert read.no_answer is kind
    assert read.host == "api.example"
    assert said in str(read)
    assert str(read).startswith(f"POST {API_URL}: ")


@pytest.mark.anyio
async def test_the_client_reads_a_failed_lookup_of_the_token_url() -> None:
    """The token URL's name does not exist: a wrong address naming the auth URL."""

    def handler(request: httpx.Request) -> httpx.Response:
        raise connect_error(gaierror(socket.EAI_NONAME))

    async with client_with(handler) as api:
        with pytest.raises(WrongAddressError) as caught:
            await api.post_valuation(b"{}", idempotency_key="key-12345678")
    assert "token request to https://api.example/oauth2/token" in str(caught.value)
    assert "the host name api.example does not resolve" in str(caught.value)
    assert "the auth URL is wrong" in str(caught.value)


@pytest.mark.anyio
async def test_a_host_that_answered_the_token_request_is_reached() -> None:
    """Once a host has answered (the token URL, same host), its name failing is an
    outage, and the client's reach says so."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/oauth2/token":
            return httpx.Response(200, json=TOKEN)
        raise connect_error(gaierror(socket.EAI_NONAME))

    async with client_with(handler) as api:
        with pytest.raises(TransportError) as caught:
            await api.post_valuation(b"{}", idempotency_key="key-12345678")
    assert caught.value.no_answer is NoAnswer.NO_SUCH_NAME
    assert "api.example" in api.reach
