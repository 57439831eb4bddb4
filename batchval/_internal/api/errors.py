"""Errors of the Partner API client, and the one table of what every answer means.

    PartnerError
    ├── TransportError            no usable answer: name lookup, refused, TLS, cut, timeout
    ├── MalformedResponseError    a success whose body is not JSON (cut short): replayed
    │   └── UnreadableAnswerError a JSON success the parser cannot read even tolerantly
    ├── CredentialsRefusedError   the token URL refused the client id and secret
    ├── UnauthorizedError         a 401 again after one fresh token (retried)
    ├── WrongAddressError         the base or auth URL answers as no API would (404/405),
    │                             or names a host that does not exist and never answered
    ├── UnrecognisedAnswerError   an answer the API description does not show (an HTML page)
    └── ProblemError              an RFC 9457 problem document (docs/api.md, errors)
        ├── InvalidRequestError          400 invalid-request
        ├── InsufficientCreditsError     403 insufficient-credits
        ├── AccountBlockedError          403 account-blocked
        ├── NotFoundError                404 not-found (reads by id and street analyses)
        ├── RequestInProgressError       409 request-in-progress
        ├── OutsideCoverageError         422 outside-coverage
        ├── FloorAreaRequiredError       422 floor-area-required
        ├── IdempotencyKeyReusedError    422 idempotency-key-reused
        ├── RateLimitedError             429 rate-limited (`daily_limit` when code says so)
        ├── DataUnavailableError         503 data-unavailable
        ├── ApiTimeoutError              504 timeout
        └── GatewayError                 502/503/504 without a problem the API describes

Each error carries the `Action` the caller takes. `read_failure` is the one place that
turns a failed HTTP answer into one of these: it reads the status, the content type and
the problem type (in that order), and anything it does not recognise is never blamed on
a row. `read_no_answer` is its other half, for a call that got no answer at all: it
says why (`api/network`: the name does not resolve, the connection was refused, TLS
failed and why, a timeout, a cut), and a name that does not exist is a wrong address
only for a host that has never answered (`network.Reach`). No message carries a token
or a secret: they are never passed to these classes.
"""

from __future__ import annotations

import enum
import json
import re
from typing import Any, ClassVar

from batchval._internal import redaction
from batchval._internal.api.network import NoAnswer, Reach, diagnose, host_of, port_of
from batchval._internal.outcome import BatchvalError

EXCERPT_CHARS = 200  # of an unrecognised body, quoted in the stop's detail
# Of a body or a problem's field, what is read to find the secrets in it before the cut to
# `EXCERPT_CHARS`: a secret that straddles the cut is masked whole, never left half.
EXCERPT_READ_CHARS = 16_384


class Action(enum.Enum):
    RETRY = "retry"  # transient: the same key again after a short wait
    PAUSE = "pause"  # the short-term limit: every worker waits for Retry-After, same key
    ROW = "row"  # the API says this row is at fault: its problem is recorded, the run goes on
    STOP = "stop"  # nothing more before a time the API gave (daily limit): resumable
    ACCOUNT = "account"  # the account cannot spend or the credentials are refused
    CONFIG = "config"  # the API's address (or the set-up) is wrong
    UNRECOGNISED = "unrecognised"  # not an answer the API describes: kept, retried, counted
    DEFECT = "defect"  # a defect of batchval's (a key reused with another body)


class PartnerError(BatchvalError):
    default_action: ClassVar[Action] = Action.UNRECOGNISED
    # What every error of the API may carry, declared here so that a caller reads it as an
    # attribute (checked by mypy), never probes for it: the HTTP status of the answer that
    # made it (None: no answer, or none of its own), the seconds of its Retry-After (None:
    # none given) and the URL that answered as the API never would ("": not known).
    status: int | None = None
    retry_after: int | None = None
    url: str = ""

    @property
    def action(self) -> Action:
        """What the caller does next with this error."""
        return self.default_action


class TransportError(PartnerError):
    """No answer came back: the call may or may not have been served. `no_answer` says
    why when the failure was read (`read_no_answer`), `host` whom it was asked of."""

    default_action: ClassVar[Action] = Action.RETRY

    def __init__(
        self, message: str, *, no_answer: NoAnswer | None = None, host: str | None = None
    ) -> None:
        super().__init__(message)
        self.no_answer = no_answer
        self.host = host


class MalformedResponseError(PartnerError):
    """A success status with a body that is not a JSON object: cut short on the way.

    Retried with the same key: a replay returns the stored answer without a new charge.
    """

    default_action: ClassVar[Action] = Action.RETRY

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status: int | None = status


class UnreadableAnswerError(MalformedResponseError):
    """A JSON success that lacks a required field or holds one of the wrong type, after
    tolerant reading. A replay would return the same bytes, so it is not retried: the
    caller keeps the raw answer (and its valuation id) as the row's problem."""

    default_action: ClassVar[Action] = Action.ROW


class CredentialsRefusedError(PartnerError):
    """The token URL refused the credentials (client id shown, secret never)."""

    default_action: ClassVar[Action] = Action.ACCOUNT

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status: int | None = status


class UnauthorizedError(PartnerError):
    """The API refused the token twice, the second time a fresh one.

    Retried: tokens are revoked during secret rotation, and a third token usually works.
    A caller that sees this again and again should stop (the pool does, after a streak of
    fresh tokens refused). `token` is the fresh token refused (compared by identity, never
    shown): the calls that were sent with one token refused once are one refusal.
    """

    default_action: ClassVar[Action] = Action.RETRY

    def __init__(self, message: str, *, token: object | None = None) -> None:
        super().__init__(message)
        self.token = token


class WrongAddressError(PartnerError):
    """The URL answers as the API never would: 404 or 405 to `POST /valuations`, 404 from
    the token URL; or its host name does not exist and never answered (`status` None).
    The base or auth URL is wrong; nothing is the row's fault."""

    default_action: ClassVar[Action] = Action.CONFIG

    def __init__(self, message: str, *, status: int | None, url: str) -> None:
        super().__init__(message)
        self.status: int | None = status
        self.url: str = url


class UnrecognisedAnswerError(PartnerError):
    """An answer the API description does not show: a proxy's HTML page, an unknown
    status or problem type. The row is kept; the caller retries with the same key and
    stops the run after a few of these.

    Of the body only a short text is kept (`excerpt`): an HTML page, JSON or any other
    body may echo the request (a posted client secret, an `Authorization` header), so it
    is named by its type and length, never quoted (`said`)."""

    default_action: ClassVar[Action] = Action.UNRECOGNISED

    def __init__(
        self, *, status: int, content_type: str, body: bytes, url: str, quotable: bool = True
    ) -> None:
        self.status: int | None = status
        self.content_type: str = content_type
        # Text may echo too (`excerpt` masks it); the token URL's never quoted (`quotable`):
        # whatever it says beside a token is free-form and may hold the posted secret.
        self.excerpt: str = excerpt(body, content_type) if quotable else ""
        self.url: str = url
        said = repr(self.excerpt) if self.excerpt else described(body, content_type)
        super().__init__(
            f"{url} answered {status} {content_type or 'without a content type'}: {said}"
        )


class ProblemError(PartnerError):
    """An RFC 9457 problem document answered by the API."""

    type_name: ClassVar[str] = ""
    expected_status: ClassVar[int] = 0
    # The API's table says this answer is never charged ("No", "Never"). Types it leaves
    # "not stated", a 504 ("at most once") and a 409 (whose first call may yet charge)
    # are counted as possibly charged against --max-credits.
    never_charged: ClassVar[bool] = False

    def __init__(
        self,
        *,
        status: int,
        type: str,
        title: str,
        detail: str,
        code: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(f"{status} {type.rsplit('/', 1)[-1]}: {detail}")
        self.status: int | None = status
        self.type = type  # the full URI, as sent
        self.title = title
        self.detail = detail
        self.code = code
        self.retry_after = retry_after  # seconds, from the Retry-After header

    @property
    def name(self) -> str:
        """The type-name: the last segment of the type URI (`rate-limited`)."""
        return self.type.rstrip("/").rsplit("/", 1)[-1]


class InvalidRequestError(ProblemError):
    type_name: ClassVar[str] = "invalid-request"
    expected_status: ClassVar[int] = 400
    default_action: ClassVar[Action] = Action.ROW


class InsufficientCreditsError(ProblemError):
    type_name: ClassVar[str] = "insufficient-credits"
    expected_status: ClassVar[int] = 403
    default_action: ClassVar[Action] = Action.ACCOUNT
    never_charged: ClassVar[bool] = True


class AccountBlockedError(ProblemError):
    type_name: ClassVar[str] = "account-blocked"
    expected_status: ClassVar[int] = 403
    default_action: ClassVar[Action] = Action.ACCOUNT
    never_charged: ClassVar[bool] = True


class NotFoundError(ProblemError):
    """Nothing held for an id or a postcode. To `POST /valuations`, which has no 404, the
    same answer means a wrong address instead (`read_failure`)."""

    type_name: ClassVar[str] = "not-found"
    expected_status: ClassVar[int] = 404
    default_action: ClassVar[Action] = Action.ROW


class RequestInProgressError(ProblemError):
    type_name: ClassVar[str] = "request-in-progress"
    expected_status: ClassVar[int] = 409
    default_action: ClassVar[Action] = Action.RETRY


class OutsideCoverageError(ProblemError):
    type_name: ClassVar[str] = "outside-coverage"
    expected_status: ClassVar[int] = 422
    default_action: ClassVar[Action] = Action.ROW
    never_charged: ClassVar[bool] = True


class FloorAreaRequiredError(ProblemError):
    type_name: ClassVar[str] = "floor-area-required"
    expected_status: ClassVar[int] = 422
    default_action: ClassVar[Action] = Action.ROW
    never_charged: ClassVar[bool] = True


class IdempotencyKeyReusedError(ProblemError):
    """Our keys are derived from the request's exact bytes, so another body under one key
    is a defect of ours (or a collision): never the row's fault, never retried."""

    type_name: ClassVar[str] = "idempotency-key-reused"
    expected_status: ClassVar[int] = 422
    default_action: ClassVar[Action] = Action.DEFECT


class RateLimitedError(ProblemError):
    type_name: ClassVar[str] = "rate-limited"
    expected_status: ClassVar[int] = 429
    default_action: ClassVar[Action] = Action.PAUSE

    @property
    def daily_limit(self) -> bool:
        """The account's daily limit is used: nothing more before midnight UTC."""
        return self.code == "daily_limit"

    @property
    def action(self) -> Action:
        # Never retried before midnight UTC: the run stops and a later run carries on.
        return Action.STOP if self.daily_limit else Action.PAUSE


class DataUnavailableError(ProblemError):
    type_name: ClassVar[str] = "data-unavailable"
    expected_status: ClassVar[int] = 503
    default_action: ClassVar[Action] = Action.RETRY
    never_charged: ClassVar[bool] = True


class ApiTimeoutError(ProblemError):
    """504 `timeout`: the API stopped the request at 30 s; charged at most once."""

    type_name: ClassVar[str] = "timeout"
    expected_status: ClassVar[int] = 504
    default_action: ClassVar[Action] = Action.RETRY


class GatewayError(ProblemError):
    """502, 503 or 504 without a problem type the API describes: a gateway or load
    balancer in front of the API, transient by the nature of those statuses."""

    default_action: ClassVar[Action] = Action.RETRY


# The 0.1 client's name for a problem type it did not know. Such an answer is now a
# GatewayError on 502/503/504 and an UnrecognisedAnswerError otherwise; the alias keeps
# `except UnknownProblemError` of 0.1 code catching the transient case.
UnknownProblemError = GatewayError

PROBLEM_TYPES: dict[str, type[ProblemError]] = {
    cls.type_name: cls
    for cls in (
        InvalidRequestError,
        InsufficientCreditsError,
        AccountBlockedError,
        NotFoundError,
        RequestInProgressError,
        OutsideCoverageError,
        FloorAreaRequiredError,
        IdempotencyKeyReusedError,
        RateLimitedError,
        DataUnavailableError,
        ApiTimeoutError,
    )
}
_GATEWAY_STATUSES = frozenset({502, 503, 504})
# Operations with no 404 or 405 of their own: such an answer means the URL is wrong.
_NO_NOT_FOUND = frozenset({("POST", "/valuations")})


def is_json_type(content_type: str) -> bool:
    """`application/json`, `application/problem+json` and other `+json` types."""
    media = media_type(content_type)
    return media == "application/json" or media.endswith("+json")


# The bodies whose start may be quoted in a stop's detail: a person's short text and the
# problem documents of docs/api.md. Anything else (an HTML page, JSON, XML) is only named.
_QUOTABLE = frozenset({"text/plain", "application/problem+json"})


def media_type(content_type: str) -> str:
    """`text/html` of `text/html; charset=utf-8`, in lower case."""
    return content_type.split(";", 1)[0].strip().lower()


def excerpt(body: bytes, content_type: str) -> str:
    """The first `EXCERPT_CHARS` characters of a `text/plain` or problem+json body, on one
    line, for a person to recognise it; empty for any other body (never quoted). Masked
    (`understood_text`) before it is cut."""
    if media_type(content_type) not in _QUOTABLE:
        return ""
    return understood_text(body[: EXCERPT_READ_CHARS * 4].decode("utf-8", "replace"))


def understood_text(text: str) -> str:
    """Words an answer not understood gave, as kept: read up to `EXCERPT_READ_CHARS` (a
    last word the read cut is left out), every secret the process knows masked in every
    form (`redaction.scrub`) and any long run that looks random (a token it does not
    know), then cut to `EXCERPT_CHARS` between words. Nothing is kept that still holds a
    run of a known secret (`redaction.holds_part`)."""
    if len(text) > EXCERPT_READ_CHARS:
        text = text[:EXCERPT_READ_CHARS].rsplit(None, 1)[0] if " " in text else ""
    return understood_fields(text)[0]


def understood_fields(*texts: str) -> list[str]:
    """`understood_text` of each of the fields of one answer (a problem's `title` and
    `detail`): a secret split across two of them is masked in each."""
    kept = []
    for text in redaction.scrub_parts([t[:EXCERPT_READ_CHARS] for t in texts]):
        text = redaction.cut(redaction.mask_random(text), EXCERPT_CHARS)
        kept.append(redaction.REDACTED if redaction.holds_part(text) else text)
    return kept


# A problem's `code` is kept only as a short word (`daily_limit`): anything else is not one.
_CODE_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,39}")


def _understood_code(code: object) -> str | None:
    if not isinstance(code, str) or not _CODE_WORD.fullmatch(code):
        return None
    return None if redaction.holds_part(code) else code


def _understood_type(uri: str) -> str:
    """A problem's type URI as kept: masked, and cut to `EXCERPT_CHARS`."""
    uri = redaction.scrub(uri[:EXCERPT_READ_CHARS])[:EXCERPT_CHARS]
    return redaction.REDACTED if redaction.holds_part(uri) else uri


def described(body: bytes, content_type: str) -> str:
    """What a body is, by its type and length alone: `an HTML page of 5,321 bytes`."""
    media = media_type(content_type)
    if not body:
        return "an empty body"
    if media in ("text/html", "application/xhtml+xml"):
        kind = "an HTML page"
    elif media == "application/json" or media.endswith("+json"):
        kind = "a JSON body"
    else:
        kind = f"a body ({media})" if media else "a body of no stated type"
    return f"{kind} of {len(body):,} bytes, not kept"


def read_failure(
    *,
    method: str,
    operation: str,
    url: str,
    status: int,
    content_type: str,
    body: bytes,
    retry_after: int | None,
) -> PartnerError:
    """What a failed answer (status >= 400, not the 401 the client handles) means.

    The table, in order:

    | answer                                                | error                | action   |
    |-------------------------------------------------------|----------------------|----------|
    | JSON problem, type and status as in the API's table    | that type's class    | its own  |
    | 404 not-found to an operation without a 404            | WrongAddressError    | CONFIG   |
    | any 404 or 405 that is not a problem the API describes | WrongAddressError    | CONFIG   |
    | 429 without the API's problem type                     | RateLimitedError     | PAUSE    |
    | 502, 503, 504 without a problem the API describes      | GatewayError         | RETRY    |
    | anything else (HTML 403, 500, unknown type or status)  | UnrecognisedAnswer   | UNRECOG. |

    `operation` is the path template (`/valuations`, `/valuations/{id}`).
    """
    problem = _problem_document(content_type, body)
    name = problem["type"].rstrip("/").rsplit("/", 1)[-1] if problem else None
    known = PROBLEM_TYPES.get(name or "")
    # Only what is understood is kept (the allow-list): the status, the type, a code that
    # is a word, and the title and detail masked and cut as an excerpt is.
    title, detail = understood_fields(
        str(problem.get("title", "")) if problem else "",
        str(problem.get("detail", "")) if problem else "",
    )
    fields: dict[str, Any] = {
        "status": status,
        "type": _understood_type(problem["type"]) if problem else f"about:blank#http-{status}",
        "title": title,
        "detail": detail,
        "code": _understood_code(problem.get("code")) if problem else None,
        "retry_after": retry_after,
    }
    if known is not None and known.expected_status == status:
        if known is NotFoundError and (method, operation) in _NO_NOT_FOUND:
            return WrongAddressError(
                f"{method} {url} answered 404 not-found: the base URL is not the API's",
                status=status,
                url=url,
            )
        return known(**fields)
    if status in (404, 405):
        return WrongAddressError(
            f"{method} {url} answered {status}: the base URL is not the API's",
            status=status,
            url=url,
        )
    if status == 429:
        # A 429 is the short-term limit whoever wrote it; only the API's own type may say
        # `daily_limit`, which only it can lift.
        return RateLimitedError(**{**fields, "type": RateLimitedError.type_name, "code": None})
    if status in _GATEWAY_STATUSES:
        return GatewayError(**fields)
    return UnrecognisedAnswerError(status=status, content_type=content_type, body=body, url=url)


def _problem_document(content_type: str, body: bytes) -> dict[str, Any] | None:
    """The body as a problem document (a JSON object with a string `type`), or None."""
    if not is_json_type(content_type):
        return None
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    if isinstance(parsed, dict) and isinstance(parsed.get("type"), str):
        return parsed
    return None


# What a call that got no answer says, by why (`network.diagnose`): {host}, {where}
# (host:port) and {detail} filled in. A name that does not exist and never answered is
# not here: it is a wrong address (`read_no_answer`).
_NO_ANSWER_SAYS = {
    NoAnswer.NO_SUCH_NAME: "the host name {host} does not resolve (no such name: {detail}); it "
    "has answered before, so this is taken for an outage of DNS",
    NoAnswer.NAME_LOOKUP: "name lookup failed for {host} ({detail})",
    NoAnswer.TLS: "TLS failed with {where}: {detail}",
    NoAnswer.REFUSED: "connection refused by {where} (nothing listens there)",
    NoAnswer.TIMEOUT: "timed out ({detail}, {where})",
    NoAnswer.CUT: "connection cut by {where} ({detail})",
    NoAnswer.OTHER: "connection to {where} failed ({detail})",
}


def read_no_answer(
    error: BaseException, *, doing: str, url: str, address: str, reach: Reach
) -> PartnerError:
    """What a call that got no answer at all means: `error` is the HTTP library's (an
    `httpx.TransportError`), whose own type does not tell a name that does not exist from
    a port where nothing listens; `network.diagnose` reads its causes.

    | why (`NoAnswer`)                                     | error             | action |
    |------------------------------------------------------|-------------------|--------|
    | no such name (EAI_NONAME), the host never answered   | WrongAddressError | CONFIG |
    | no such name, the host answered before (in `reach`)  | TransportError    | RETRY  |
    | name lookup failed for now (EAI_AGAIN, ...)          | TransportError    | RETRY  |
    | TLS failed (certificate, host name, not TLS at all)  | TransportError    | RETRY  |
    | connection refused, timed out, cut, anything else    | TransportError    | RETRY  |

    `doing` begins the message (`POST https://...`), `url` is the URL asked, `address` the
    setting a person would fix (`base URL`, `auth URL`). A TransportError carries its
    `NoAnswer` and the host.
    """
    why = diagnose(error)
    host = host_of(url)
    if why.kind is NoAnswer.NO_SUCH_NAME and host not in reach:
        return WrongAddressError(
            f"{doing}: the host name {host} does not resolve (no such name: {why.detail}), "
            f"and no call has ever reached it: the {address} is wrong",
            status=None,
            url=url,
        )
    said = _NO_ANSWER_SAYS[why.kind].format(host=host, where=port_of(url), detail=why.detail)
    return TransportError(f"{doing}: {said}", no_answer=why.kind, host=host)
