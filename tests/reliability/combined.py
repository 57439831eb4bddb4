"""Several faults at once: the mix the crash suite and the fault matrix both run, and a
tally of what struck, so that a green run means every fault was met and survived.

The tally reads most faults from the sandbox's ledger (503s, 401s of revoked tokens,
429 storms by the length of the `Retry-After` given). The three faults that strike
after the commit (504, a cut connection, a truncated body) look alike in the ledger
(a 201 or 504, then a replay), so the tally also watches the sandbox's post-commit
step (`Sandbox._after_commit`) and sorts what it answered: a test spy on a private
method, the one place where the sandbox decides between them.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

from starlette.responses import Response

from batchval._internal.sandbox.app import Sandbox
from batchval._internal.sandbox.config import Faults
from batchval._internal.sandbox.faults import DroppedResponse

# The sandbox's short-term limit answers Retry-After: 1 at the rates the suites use; a
# storm's is longer, so that a deadline's length tells the two apart.
STORM_RETRY_AFTER = 2


def combined_faults(
    *, latency_ms: float = 0.0, jitter_ms: float = 0.0, storm_seconds: int = STORM_RETRY_AFTER
) -> Faults:
    """503s, cut connections and 504s after commit, truncated bodies, 429 storms and
    revoked tokens, all at once. About half the calls fail in one way or another, so that
    a run of 60 rows meets each fault several times (none of them: about 1 in 500)."""
    return Faults(
        latency_ms=latency_ms,
        latency_jitter_ms=jitter_ms,
        error_503_share=0.2,
        drop_after_commit_share=0.12,
        timeout_504_after_commit_share=0.1,
        malformed_share=0.1,
        rate_limit_storm_share=0.06,
        storm_retry_after_seconds=storm_seconds,
        revoke_token_share=0.08,
    )


# Each fault of the mix: the Faults field that turns it on, the tally's name for it.
FAULT_NAMES = {
    "error_503_share": "503",
    "drop_after_commit_share": "dropped_after_commit",
    "timeout_504_after_commit_share": "504_after_commit",
    "malformed_share": "truncated_body",
    "rate_limit_storm_share": "429_storm",
    "revoke_token_share": "token_revoked",
}


@dataclasses.dataclass
class FaultTally:
    """How often each fault of the mix struck one sandbox (attach before the run)."""

    sandbox: Sandbox
    storm_seconds: int = STORM_RETRY_AFTER
    after_commit: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)

    def __post_init__(self) -> None:
        injector = self.sandbox._faults
        original = injector.after_commit

        def watched(payload: bytes, faults: Faults) -> Response:
            try:
                response = original(payload, faults)
            except Exception:
                self.after_commit["504_after_commit"] += 1  # the only way it raises
                raise
            if isinstance(response, DroppedResponse):
                self.after_commit["dropped_after_commit"] += 1
            elif len(response.body) < len(payload):
                self.after_commit["truncated_body"] += 1
            else:
                self.after_commit["whole"] += 1
            return response

        # An instance attribute: the sandbox calls `self._faults.after_commit(...)`.
        injector.after_commit = watched  # type: ignore[method-assign]

    def counts(self) -> dict[str, int]:
        """Strikes of each fault, plus the replays that recovered paid answers."""
        ledger = self.sandbox.ledger
        requests = ledger.requests
        storms = sum(
            d.code is None and d.until_monotonic - d.issued_monotonic >= self.storm_seconds
            for d in ledger.deadlines
        )
        return {
            "503": sum(r.status == 503 and r.type_name == "data-unavailable" for r in requests),
            "dropped_after_commit": self.after_commit["dropped_after_commit"],
            "504_after_commit": self.after_commit["504_after_commit"],
            "truncated_body": self.after_commit["truncated_body"],
            "429_storm": storms,
            "token_revoked": sum(r.status == 401 for r in requests),
            "replays": sum(r.replay for r in requests),
        }

    def never_struck(self, faults: Faults) -> list[str]:
        """The faults switched on in `faults` that never struck."""
        counts = self.counts()
        on = [name for field, name in FAULT_NAMES.items() if getattr(faults, field) > 0]
        return [name for name in on if counts[name] == 0]


def as_dict(faults: Faults) -> dict[str, Any]:
    """The settings of `faults` that differ from none at all, for a report."""
    default = Faults()
    names = [f.name for f in dataclasses.fields(faults)]
    return {n: getattr(faults, n) for n in names if getattr(faults, n) != getattr(default, n)}
