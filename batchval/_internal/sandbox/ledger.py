"""What the sandbox saw and charged, for tests and for users' own integration tests.

The ledger is append-only and read through the query methods below or, over HTTP, at
`GET /_sandbox/ledger`. It is the referee of the promises batchval makes: no key charged
twice (live charges, per account), credits = 10 x unique valuations, no call before a
`Retry-After` it was given.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
from typing import Any


@dataclasses.dataclass(frozen=True, slots=True)
class RequestRecord:
    at: dt.datetime  # sandbox clock
    monotonic: float
    client_id: str | None
    method: str
    path: str
    idempotency_key: str | None
    status: int = 0
    type_name: str | None = None  # the problem type, when the answer was a problem
    code: str | None = None
    replay: bool = False  # answered from the idempotency store
    early: bool = False  # arrived before a Retry-After deadline given to this account


@dataclasses.dataclass(frozen=True, slots=True)
class ChargeRecord:
    at: dt.datetime
    client_id: str
    kind: str  # "valuation" or "street-analysis"
    credits: int  # 0 in test mode: counted, never charged
    idempotency_key: str | None
    resource: str  # valuation id or postcode
    balance_after: int


@dataclasses.dataclass(frozen=True, slots=True)
class Deadline:
    """A `Retry-After` the sandbox gave: no call from the account should come before it."""

    client_id: str
    code: str | None  # "daily_limit" or None for the short-term limit
    issued_monotonic: float
    until_monotonic: float  # short-term limit: real time
    issued_at: dt.datetime
    until_at: dt.datetime  # daily limit: sandbox clock (midnight UTC)


class Ledger:
    def __init__(self) -> None:
        self.requests: list[RequestRecord] = []
        self.charges: list[ChargeRecord] = []
        self.deadlines: list[Deadline] = []

    # --- queries -------------------------------------------------------------------

    def charges_by_key(self) -> dict[str, int]:
        """How many times each idempotency key was charged (valuations only)."""
        counts: collections.Counter[str] = collections.Counter(
            c.idempotency_key
            for c in self.charges
            if c.kind == "valuation" and c.idempotency_key is not None
        )
        return dict(counts)

    def keys_charged_twice_by_account(self) -> dict[str, list[str]]:
        """The keys one account paid for more than once, by account: live charges only (a
        test client's valuation costs nothing), so the same key valued by the test client
        and the live client on one day, two accounts' own valuations, is no double charge."""
        counts: collections.Counter[tuple[str, str]] = collections.Counter(
            (c.client_id, c.idempotency_key)
            for c in self.charges
            if c.kind == "valuation" and c.idempotency_key is not None and c.credits > 0
        )
        twice: dict[str, list[str]] = {}
        for (client_id, key), times in sorted(counts.items()):
            if times > 1:
                twice.setdefault(client_id, []).append(key)
        return twice

    def keys_charged_twice(self) -> list[str]:
        """Every key some account paid for more than once (`keys_charged_twice_by_account`)."""
        return sorted({k for keys in self.keys_charged_twice_by_account().values() for k in keys})

    def credits_charged(self, client_id: str | None = None) -> int:
        return sum(c.credits for c in self.charges if client_id in (None, c.client_id))

    def valuations_created(self, client_id: str | None = None) -> list[ChargeRecord]:
        return [
            c for c in self.charges if c.kind == "valuation" and client_id in (None, c.client_id)
        ]

    def calls_per_day(self, client_id: str | None = None) -> dict[str, int]:
        """Counted (limit-consuming) calls per UTC day of the sandbox clock."""
        counts: collections.Counter[str] = collections.Counter(
            c.at.date().isoformat() for c in self.charges if client_id in (None, c.client_id)
        )
        return dict(counts)

    def requests_by_status(self) -> dict[int, int]:
        return dict(collections.Counter(r.status for r in self.requests))

    def early_requests(self) -> list[RequestRecord]:
        return [r for r in self.requests if r.early]

    def snapshot(self, balances: dict[str, int]) -> dict[str, Any]:
        """The JSON form served at `GET /_sandbox/ledger`."""
        return {
            "balances": balances,
            "credits_charged": self.credits_charged(),
            "charges_by_key": self.charges_by_key(),
            "keys_charged_twice": self.keys_charged_twice(),
            "keys_charged_twice_by_account": self.keys_charged_twice_by_account(),
            "valuations_created": len(self.valuations_created()),
            "calls_per_day": self.calls_per_day(),
            "requests": len(self.requests),
            "requests_by_status": {str(k): v for k, v in self.requests_by_status().items()},
            "retry_after_given": [
                {
                    "client_id": d.client_id,
                    "code": d.code,
                    "issued_at": d.issued_at.isoformat(),
                    "until": d.until_at.isoformat(),
                }
                for d in self.deadlines
            ],
            "early_requests": [
                {
                    "client_id": r.client_id,
                    "at": r.at.isoformat(),
                    "path": r.path,
                    "idempotency_key": r.idempotency_key,
                }
                for r in self.early_requests()
            ],
        }
