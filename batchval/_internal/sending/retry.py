"""The retry policy as data: how long to wait before the same key goes again.

Which answers are retried at all is the answer table's to say (`batchval._internal.api.errors`,
`Action.RETRY`, `PAUSE`, `UNRECOGNISED`); this says only how long, and how many times.
A short-term 429 waits for the controller's shared pause, not here, and uses no attempt.
"""

from __future__ import annotations

import dataclasses
import random

from batchval._internal.api import RateLimitedError, RequestInProgressError


@dataclasses.dataclass(frozen=True, slots=True)
class RetryPolicy:
    """The API's retry table as data; tests set the waits to zero."""

    max_attempts: int = 6  # failures per request per invocation (429s not counted)
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    in_progress_wait: float = 1.0  # 409: "after a short wait"

    def wait_after(self, error: BaseException | None, failures: int) -> float:
        """Seconds before the next attempt. A 429's wait is the controller's shared pause."""
        if isinstance(error, RateLimitedError):
            return 0.0
        if isinstance(error, RequestInProgressError):
            return self.in_progress_wait * (1.0 + random.random() / 2)
        # Full jitter (AWS architecture blog): spreads retries of a failing fleet.
        ceiling = min(self.backoff_max, self.backoff_initial * 2 ** max(0, failures - 1))
        return random.uniform(0, ceiling)
