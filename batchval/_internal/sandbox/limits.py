"""What a call may use and what it costs: the short-term and daily limits, credits.

docs/api.md, section 6. The short-term limit is a token bucket per account (its rate is a
setting, since the API does not publish its own); the daily limit counts calls that create
a valuation or a charged street analysis, per UTC day of the sandbox clock. Every
`Retry-After` given is a deadline in the ledger, and a call that arrives before one (less
a grace, and less the lateness of the sandbox's own loop: `lag.LoopLag`) is marked early
there. Charges are written in the ledger as they are taken.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections import Counter
from typing import NoReturn

from batchval._internal.sandbox.answers import ProblemAnswer
from batchval._internal.sandbox.clock import SandboxClock
from batchval._internal.sandbox.config import Account, SandboxConfig
from batchval._internal.sandbox.lag import LoopLag
from batchval._internal.sandbox.ledger import ChargeRecord, Deadline, Ledger


@dataclasses.dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


class Limits:
    def __init__(
        self, config: SandboxConfig, clock: SandboxClock, ledger: Ledger, lag: LoopLag
    ) -> None:
        self._config, self._clock, self._ledger, self._lag = config, clock, ledger, lag
        # Forgives calls already on the wire when the 429 went out: a client cannot stop a
        # request it sent before it heard the answer.
        self.early_grace_seconds = 0.05
        self._buckets: dict[str, _Bucket] = {}
        self._counted: Counter[tuple[str, dt.date]] = Counter()
        self._active_deadlines: dict[str, list[Deadline]] = {}

    def is_early(self, client_id: str, at: dt.datetime, mono: float) -> bool:
        """True when a call arrives before a deadline given to the account, later after it
        was given than the grace plus the loop's recent lateness (a call seen late may have
        been sent before its sender could hear the 429)."""
        active = [
            d
            for d in self._active_deadlines.get(client_id, [])
            if (at < d.until_at if d.code == "daily_limit" else mono < d.until_monotonic)
        ]
        self._active_deadlines[client_id] = active
        if not active:
            return False
        grace = self.early_allowance()
        return any(mono > d.issued_monotonic + grace for d in active)

    def early_allowance(self) -> float:
        return self.early_grace_seconds + self._lag.recent()

    def _give_deadline(self, client_id: str, code: str | None, retry_after: int) -> None:
        now, mono = self._clock.now(), self._clock.monotonic()
        deadline = Deadline(
            client_id=client_id,
            code=code,
            issued_monotonic=mono,
            until_monotonic=mono + retry_after,
            issued_at=now,
            until_at=now + dt.timedelta(seconds=retry_after),
        )
        self._ledger.deadlines.append(deadline)
        self._active_deadlines.setdefault(client_id, []).append(deadline)

    def refuse_short_term(self, client_id: str, retry_after: int) -> NoReturn:
        """Answer 429 rate-limited with a `Retry-After`, and remember the deadline."""
        self._give_deadline(client_id, None, retry_after)
        raise ProblemAnswer("rate-limited", "Too many requests in a short time.", None, retry_after)

    def take_rate_token(self, account: Account, mono: float) -> None:
        """Spend one token of the account's bucket, or refuse until one is back."""
        limit = self._config.rate_limit
        if limit is None:
            return
        bucket = self._buckets.setdefault(account.client_id, _Bucket(float(limit.burst), mono))
        bucket.tokens = min(
            float(limit.burst), bucket.tokens + (mono - bucket.updated) * limit.rate_per_second
        )
        bucket.updated = mono
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return
        retry_after = max(1, math.ceil((1.0 - bucket.tokens) / limit.rate_per_second))
        self.refuse_short_term(account.client_id, retry_after)

    def check_daily_limit(self, account: Account) -> None:
        if self._counted[(account.client_id, self._clock.now().date())] >= (
            account.effective_daily_limit
        ):
            retry_after = self._clock.seconds_to_midnight()
            self._give_deadline(account.client_id, "daily_limit", retry_after)
            raise ProblemAnswer(
                "rate-limited",
                f"The account's daily limit of {account.effective_daily_limit} calls is used.",
                "daily_limit",
                retry_after,
            )

    @staticmethod
    def check_spend(account: Account, cost: int) -> None:
        """Refuse when the account cannot pay; checked again at commit time."""
        if account.test_mode:
            return
        if account.blocked:
            raise ProblemAnswer("account-blocked", "This account is not allowed to spend credits.")
        if account.balance < cost:
            raise ProblemAnswer(
                "insufficient-credits",
                f"This call costs {cost} credits; the balance is {account.balance} credits.",
            )

    def charge(
        self, account: Account, kind: str, cost: int, key: str | None, resource: str
    ) -> dict[str, int] | None:
        """Count the call against the daily limit and, in live mode, take its credits.

        The answer's `charge` member, or None in test mode (counted, never charged).
        """
        self.check_daily_limit(account)
        self.check_spend(account, cost)
        now = self._clock.now()
        self._counted[(account.client_id, now.date())] += 1
        credits = 0 if account.test_mode else cost
        account.balance -= credits
        self._ledger.charges.append(
            ChargeRecord(now, account.client_id, kind, credits, key, resource, account.balance)
        )
        if account.test_mode:
            return None
        return {"credits": credits, "balanceAfter": account.balance}
