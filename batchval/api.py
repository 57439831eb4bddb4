"""Deprecated: `batchval.api` was the client's place in 0.1.0; its client and errors are
now in `batchval.testing` and `batchval.exceptions`. Each name is still found here, with a
`DeprecationWarning`, for one release."""

from __future__ import annotations

import warnings
from typing import Any

__all__: list[str] = []

# What batchval.api held in 0.1.0, and all it still answers for.
_NAMES = frozenset(
    {
        "DEFAULT_TIMEOUT_SECONDS",
        "AccountBlockedError",
        "Action",
        "Answer",
        "ApiTimeoutError",
        "Charge",
        "Credentials",
        "CredentialsRefusedError",
        "DataUnavailableError",
        "FloorAreaRequiredError",
        "GatewayError",
        "IdempotencyKeyReusedError",
        "InsufficientCreditsError",
        "InvalidRequestError",
        "MalformedResponseError",
        "NoAnswer",
        "NotFoundError",
        "OutsideCoverageError",
        "PartnerClient",
        "PartnerError",
        "ProblemError",
        "RateLimitedError",
        "Reach",
        "RequestInProgressError",
        "StreetAnalysis",
        "TransportError",
        "UnauthorizedError",
        "UnknownProblemError",
        "UnreadableAnswerError",
        "UnrecognisedAnswerError",
        "Valuation",
        "ValuationRequest",
        "WrongAddressError",
        "host_of",
        "read_failure",
        "read_no_answer",
    }
)


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import batchval.exceptions
    import batchval.testing

    home = next(
        (
            module.__name__
            for module in (batchval.testing, batchval.exceptions)
            if name in module.__all__
        ),
        None,
    )
    instead = f"import it from {home}" if home else "it is private and will be removed"
    warnings.warn(
        f"batchval.api is deprecated and goes in the next release: {name}: {instead}",
        DeprecationWarning,
        stacklevel=2,
    )
    from batchval._internal import api

    return getattr(api, name)
