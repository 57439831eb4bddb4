"""How the sandbox writes its answers: JSON bytes, times, and the error answers.

Errors are RFC 9457 problem documents (docs/api.md, section 5), with one exception:
a refused token gets the bare 401 of section 1. A handler raises `ProblemAnswer` or
`UnauthorizedAnswer` wherever it finds the problem, and the route turns it into a
response with the functions here.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

PROBLEM_JSON = "application/problem+json"
TITLES = {
    "invalid-request": "Invalid request",
    "insufficient-credits": "Insufficient credits",
    "account-blocked": "Account blocked",
    "not-found": "Not found",
    "request-in-progress": "Request in progress",
    "outside-coverage": "Outside coverage",
    "floor-area-required": "Floor area required",
    "idempotency-key-reused": "Idempotency key reused",
    "rate-limited": "Rate limited",
    "data-unavailable": "Data unavailable",
    "timeout": "Timeout",
}
STATUSES = {
    "invalid-request": 400,
    "insufficient-credits": 403,
    "account-blocked": 403,
    "not-found": 404,
    "request-in-progress": 409,
    "outside-coverage": 422,
    "floor-area-required": 422,
    "idempotency-key-reused": 422,
    "rate-limited": 429,
    "data-unavailable": 503,
    "timeout": 504,
}


def dumps(body: Any) -> bytes:
    """Compact JSON, UTF-8 rather than escaped: the bytes of every JSON body we build."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


# A stamp's precision (`SandboxConfig.stamp_precision`): the API's description says only
# "date-time", and APIs cut their stamps to seconds, milliseconds or microseconds.
STAMP_PRECISIONS = {"second": "seconds", "milli": "milliseconds", "micro": "microseconds"}


def rfc3339(when: dt.datetime, precision: str = "milli") -> str:
    """`when` in UTC with a `Z`, cut (never rounded) to `precision` (`STAMP_PRECISIONS`)."""
    spec = STAMP_PRECISIONS[precision]
    return when.astimezone(dt.UTC).isoformat(timespec=spec).replace("+00:00", "Z")


class ProblemAnswer(Exception):  # noqa: N818 (an answer, not an error)
    """Raised inside a handler to answer with a problem document."""

    def __init__(
        self, type_name: str, detail: str, code: str | None = None, retry_after: int | None = None
    ) -> None:
        super().__init__(detail)
        self.type_name, self.detail, self.code, self.retry_after = (
            type_name,
            detail,
            code,
            retry_after,
        )


class UnauthorizedAnswer(Exception):  # noqa: N818 (an answer, not an error)
    """A missing, invalid, expired or revoked token (answered as docs/api.md, section 1 says)."""


def problem_response(problem: ProblemAnswer, docs_base: str) -> Response:
    status = STATUSES[problem.type_name]
    body: dict[str, Any] = {
        "type": f"{docs_base}/errors/{problem.type_name}",
        "title": TITLES[problem.type_name],
        "status": status,
        "detail": problem.detail,
    }
    if problem.code is not None:
        body["code"] = problem.code
    headers = {}
    if problem.retry_after is not None:
        headers["Retry-After"] = str(problem.retry_after)
    return Response(dumps(body), status, headers=headers, media_type=PROBLEM_JSON)


def unauthorized_response() -> Response:
    return JSONResponse(
        {"error": "invalid_token"},
        401,
        headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
    )


def no_route_response(request: Request, status: int, docs_base: str) -> Response:
    """Unknown paths and methods get problem documents too (docs/api.md, section 5)."""
    body = {
        "type": f"{docs_base}/errors/not-found",
        "title": TITLES["not-found"] if status == 404 else "Method not allowed",
        "status": status,
        "detail": f"No operation answers {request.method} {request.url.path}.",
    }
    if status != 404:
        body["type"] = "about:blank"
    return Response(dumps(body), status, media_type=PROBLEM_JSON)
