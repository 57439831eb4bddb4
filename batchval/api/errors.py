"""Errors of the Partner API client, grouped by what the caller does next.

    PartnerError
    ├── TransportError            no usable answer: connect failure, cut connection, timeout
    ├── MalformedResponseError    an answer whose body is not what the API promises
    ├── CredentialsRefusedError   the token URL refused the client id and secret
    ├── UnauthorizedError         a 401 again after one fresh token (retried)
    └── ProblemError              an RFC 9457 problem document (partner-api.md section 7)
        ├── InvalidRequestError          400 invalid-request
        ├── InsufficientCreditsError     403 insufficient-credits
        ├── AccountBlockedError          403 account-blocked
        ├── NotFoundError                404 not-found
        ├── RequestInProgressError       409 request-in-progress
        ├── OutsideCoverageError         422 outside-coverage
        ├── FloorAreaRequiredError       422 floor-area-required
        ├── IdempotencyKeyReusedError    422 idempotency-key-reused
        ├── RateLimitedError             429 rate-limited (`daily_limit` when code says so)
        ├── DataUnavailableError         503 data-unavailable
        ├── ApiTimeoutError              504 timeout
        └── UnknownProblemError          any other type the API may add

Each error says how the caller should treat it through `action`: `RETRY` (same
idempotency key), `ROW` (the row gets a problem and the run goes on) or `STOP` (the run
stops: the account, the credentials or the API itself must be fixed first). No message
carries a token or a secret: they are never passed to these classes.
"""

from __future__ import annotations

import enum
from typing import ClassVar


class Action(enum.Enum):
    RETRY = "retry"  # transient: send again with the same key, after a wait
    ROW = "row"  # this request cannot succeed as it is: record a problem for the row
    STOP = "stop"  # nothing else can succeed now: stop the whole run


class PartnerError(Exception):
    default_action: ClassVar[Action] = Action.STOP

    @property
    def action(self) -> Action:
        """What the caller does next with this error."""
        return self.default_action


class TransportError(PartnerError):
    """No answer came back: the call may or may not have been served."""

    default_action = Action.RETRY


class MalformedResponseError(PartnerError):
    """A success status with a body that is not valid JSON or lacks required fields.

    Retried with the same key: a replay returns the stored answer without a new charge.
    """

    default_action = Action.RETRY

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class CredentialsRefusedError(PartnerError):
    """The token URL refused the credentials (client id shown, secret never)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class UnauthorizedError(PartnerError):
    """The API refused the token twice, the second time a fresh one.

    Retried: tokens are revoked during secret rotation, and a third token usually works.
    A caller that sees this again and again should stop (the pool does, after a streak).
    """

    default_action = Action.RETRY


class ProblemError(PartnerError):
    """An RFC 9457 problem document answered by the API."""

    type_name: ClassVar[str] = ""

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
        self.status = status
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
    type_name = "invalid-request"
    default_action = Action.ROW


class InsufficientCreditsError(ProblemError):
    type_name = "insufficient-credits"
    default_action = Action.STOP


class AccountBlockedError(ProblemError):
    type_name = "account-blocked"
    default_action = Action.STOP


class NotFoundError(ProblemError):
    type_name = "not-found"
    default_action = Action.ROW


class RequestInProgressError(ProblemError):
    type_name = "request-in-progress"
    default_action = Action.RETRY


class OutsideCoverageError(ProblemError):
    type_name = "outside-coverage"
    default_action = Action.ROW


class FloorAreaRequiredError(ProblemError):
    type_name = "floor-area-required"
    default_action = Action.ROW


class IdempotencyKeyReusedError(ProblemError):
    """Our keys are derived from the request, so this means a key collision or a bug:
    the row gets a problem rather than a retry that could never succeed."""

    type_name = "idempotency-key-reused"
    default_action = Action.ROW


class RateLimitedError(ProblemError):
    type_name = "rate-limited"
    default_action = Action.RETRY

    @property
    def daily_limit(self) -> bool:
        """The account's daily limit is used: nothing more before midnight UTC."""
        return self.code == "daily_limit"

    @property
    def action(self) -> Action:
        # Never retried before midnight UTC: the run stops and a later run carries on.
        return Action.STOP if self.daily_limit else Action.RETRY


class DataUnavailableError(ProblemError):
    type_name = "data-unavailable"
    default_action = Action.RETRY


class ApiTimeoutError(ProblemError):
    """504 `timeout`: the API stopped the request at 30 s; charged at most once."""

    type_name = "timeout"
    default_action = Action.RETRY


class UnknownProblemError(ProblemError):
    """A type this client does not know. 5xx are treated as transient, the rest as the
    row's problem: the safe reading of an answer the API description does not show."""

    default_action = Action.ROW


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


class _TransientUnknownProblemError(UnknownProblemError):
    default_action = Action.RETRY


def problem_class(type_name: str, status: int) -> type[ProblemError]:
    """The exception class for a problem's type-name (the status decides unknown ones)."""
    known = PROBLEM_TYPES.get(type_name)
    if known is not None:
        return known
    return _TransientUnknownProblemError if status >= 500 else UnknownProblemError
