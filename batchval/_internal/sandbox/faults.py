"""The injected failures (`Faults` in config): when each one strikes, and how.

Every draw comes from the sandbox's one seeded generator, the same that draws valuation
ids, so a seed replays a run: the fault matrix and the crash suite depend on it. The
order of draws is therefore part of the behaviour. A call whose token is good draws its
revocation, then, once its account is known, the storm. createValuation and
getStreetAnalysis then draw the 503 (none during an outage). A new valuation draws the
latency's jitter (always, even at 0 ms), the slow share and the 26 characters of its id;
a street analysis only the jitter. Every 201, replays included, draws the 504, the drop
and the truncation, each only when the one before did not strike. A share of 0 draws
nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import random

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from batchval._internal.sandbox.answers import ProblemAnswer
from batchval._internal.sandbox.clock import SandboxClock
from batchval._internal.sandbox.config import Faults, SandboxConfig


class DroppedError(Exception):
    """Raised after part of a response went out, so that the server cuts the connection."""


class DroppedResponse(Response):
    """Sends the headers and half the body, then fails: the client sees a cut connection."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        await send(
            {
                "type": "http.response.body",
                "body": self.body[: len(self.body) // 2],
                "more_body": True,
            }
        )
        raise DroppedError("connection dropped after commit (sandbox fault)")


class FaultInjector:
    """Decides, call by call, which of the configured faults strike."""

    def __init__(self, config: SandboxConfig, clock: SandboxClock, rng: random.Random) -> None:
        self._config, self._clock, self._rng = config, clock, rng
        self._outage_until = 0.0
        self._outage_waits = False
        # Set to end the slow calls' waits at once (`finish_slow_work`), on their loop.
        self._finish_slow = asyncio.Event()
        self._slow_loop: asyncio.AbstractEventLoop | None = None
        self.apply(config.faults)

    @property
    def current(self) -> Faults:
        return self._config.faults

    def apply(self, faults: Faults) -> None:
        """Replace the faults; an outage starts now and lasts `outage_seconds`."""
        self._config.faults = faults
        self._outage_until = self._clock.monotonic() + faults.outage_seconds
        # Started by the first call (`check_outage`) when the faults say so.
        self._outage_waits = faults.outage_from_first_call and faults.outage_seconds > 0

    def _chance(self, share: float) -> bool:
        return share > 0 and self._rng.random() < share

    def revokes_token(self) -> bool:
        """Whether the caller's token is revoked before the call is served."""
        return self._chance(self.current.revoke_token_share)

    def storm_retry_after(self) -> int | None:
        """The `Retry-After` of a rate-limit storm striking this call, or None."""
        faults = self.current
        if self._chance(faults.rate_limit_storm_share):
            return max(1, faults.storm_retry_after_seconds)
        return None

    def check_outage(self, faults: Faults) -> None:
        """503 data-unavailable before any work: never charged (docs/api.md, section 5)."""
        if self._outage_waits:
            self._outage_waits = False
            self._outage_until = self._clock.monotonic() + faults.outage_seconds
        if self._clock.monotonic() < self._outage_until or self._chance(faults.error_503_share):
            raise ProblemAnswer(
                "data-unavailable", "Market data is unavailable just now; retry shortly."
            )

    async def latency(self, faults: Faults) -> None:
        delay = faults.latency_ms + self._rng.random() * faults.latency_jitter_ms
        if delay > 0:
            await asyncio.sleep(delay / 1000)

    async def slow_work(self, faults: Faults) -> None:
        """Work that may outlast the request's time limit (a 504, then 409s until done)."""
        if self._chance(faults.slow_share):
            self._slow_loop = asyncio.get_running_loop()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._finish_slow.wait(), faults.slow_seconds)

    def finish_slow_work(self) -> None:
        """End the wait of every slow call under way now, as if `slow_seconds` had passed: a
        test holds a call in progress for as long as it needs, whatever the machine's speed,
        then lets it commit. Safe from any thread (a sandbox served in one, a test in another)."""
        finish, self._finish_slow = self._finish_slow, asyncio.Event()
        if self._slow_loop is None:
            finish.set()
        else:
            self._slow_loop.call_soon_threadsafe(finish.set)

    def after_commit(self, payload: bytes, faults: Faults) -> Response:
        """The 201, or one of the faults that strike after the valuation is made."""
        media = "application/json"
        if self._chance(faults.timeout_504_after_commit_share):
            raise ProblemAnswer("timeout", "The request ran past its time limit.")
        if self._chance(faults.drop_after_commit_share):
            return DroppedResponse(payload, 201, media_type=media)
        if self._chance(faults.malformed_share):
            return Response(payload[: len(payload) // 2], 201, media_type=media)
        return Response(payload, 201, media_type=media)
