"""The errors batchval's Python API raises, and those of the API client users test with.

    BatchvalError                      every error batchval raises on purpose
    ├── RunError                       a run a person must act on: exit_code, reason, run
    │   └── FolderInUse                another call or process holds the folder (75)
    └── PartnerError                   an answer of the Partner API's (batchval.testing)
        ├── TransportError             no usable answer: name lookup, refused, TLS, cut
        ├── MalformedResponseError     a success whose body is not JSON (cut short)
        │   └── UnreadableAnswerError  a JSON success that cannot be read
        ├── CredentialsRefusedError    the token URL refused the client id and secret
        ├── UnauthorizedError          a 401 again after one fresh token
        ├── WrongAddressError          the base or auth URL answers as no API would
        ├── UnrecognisedAnswerError    an answer the API description does not show
        └── ProblemError               an RFC 9457 problem document
            ├── InvalidRequestError          400 invalid-request
            ├── InsufficientCreditsError     403 insufficient-credits
            ├── AccountBlockedError          403 account-blocked
            ├── NotFoundError                404 not-found
            ├── RequestInProgressError       409 request-in-progress
            ├── OutsideCoverageError         422 outside-coverage
            ├── FloorAreaRequiredError       422 floor-area-required
            ├── IdempotencyKeyReusedError    422 idempotency-key-reused
            ├── RateLimitedError             429 rate-limited
            ├── DataUnavailableError         503 data-unavailable
            ├── ApiTimeoutError              504 timeout
            └── GatewayError                 502/503/504 without a problem

`batchval.run`, `value` and `analyse_streets` raise a `RunError` for a run a person must
act on, with the exit code the command line would end with (`exit_code`), the stop reason
its line begins with (`reason`: `refused`, `input_unusable`, `dir_locked`, ...; None for a
call wrong in itself) and the run as it stands, where there is one (`run`). A defect
(exit 70) is raised as it was. Every one of these errors pickles: a process pool, joblib
or Dask hands the parent the same type with the same attributes.
"""

from batchval._internal.api import (
    AccountBlockedError,
    ApiTimeoutError,
    CredentialsRefusedError,
    DataUnavailableError,
    FloorAreaRequiredError,
    GatewayError,
    IdempotencyKeyReusedError,
    InsufficientCreditsError,
    InvalidRequestError,
    MalformedResponseError,
    NotFoundError,
    OutsideCoverageError,
    PartnerError,
    ProblemError,
    RateLimitedError,
    RequestInProgressError,
    TransportError,
    UnauthorizedError,
    UnreadableAnswerError,
    UnrecognisedAnswerError,
    WrongAddressError,
)
from batchval._internal.outcome import BatchvalError
from batchval._internal.public import FolderInUse, RunError

__all__ = [
    "AccountBlockedError",
    "ApiTimeoutError",
    "BatchvalError",
    "CredentialsRefusedError",
    "DataUnavailableError",
    "FloorAreaRequiredError",
    "FolderInUse",
    "GatewayError",
    "IdempotencyKeyReusedError",
    "InsufficientCreditsError",
    "InvalidRequestError",
    "MalformedResponseError",
    "NotFoundError",
    "OutsideCoverageError",
    "PartnerError",
    "ProblemError",
    "RateLimitedError",
    "RequestInProgressError",
    "RunError",
    "TransportError",
    "UnauthorizedError",
    "UnreadableAnswerError",
    "UnrecognisedAnswerError",
    "WrongAddressError",
]


def __dir__() -> list[str]:
    """The public names, `__all__`: what `dir()` and an editor's completion show (the
    modules behind this face are not part of it)."""
    return sorted(__all__)
