"""The rate controller against a token-bucket model of the API, on a fake clock.

    python tests/bench/ratemodel.py

No network and no waiting: each request is answered at once, accepted when the bucket
(refill R a second, at most B tokens) holds a token, else 429 with the Retry-After the
sandbox would give. Prints, for each (R, B), the use of the limit, (rows - B) / R over
the time from the first to the last accepted call (the burst is not counted as use),
and the share of calls answered 429. The figures behind the controller's constants
(batchval/_internal/sending/ratecontrol.py); `make bench` measures the real thing over loopback.
"""

from __future__ import annotations

import asyncio
import math

from batchval._internal.sending.ratecontrol import RateController

CASES = [(5.0, 5), (5.0, 1), (20.0, 20), (20.0, 1), (100.0, 100), (100.0, 1)]


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


async def simulate(rate: float, burst: int, rows: int) -> tuple[float, float]:
    """(use of the limit, share of calls answered 429) for `rows` accepted calls."""
    clock = FakeTime()
    control = RateController(clock=clock, sleep=clock.sleep)
    tokens, updated = float(burst), 0.0
    accepted = refused = 0
    first = last = 0.0
    while accepted < rows:
        sent = await control.slot()
        tokens = min(float(burst), tokens + (sent - updated) * rate)
        updated = sent
        if accepted == 0:
            first = sent
        if tokens >= 1.0:
            tokens -= 1.0
            accepted += 1
            last = sent
            control.on_success()
        else:
            refused += 1
            control.on_rate_limited(max(1, math.ceil((1.0 - tokens) / rate)), sent)
    ideal = max(0.0, (rows - burst) / rate)
    return ideal / (last - first), refused / (accepted + refused)


async def main() -> None:
    for rate, burst in CASES:
        rows = 500 if rate < 10 else 2000
        use, share = await simulate(rate, burst, rows)
        print(f"limit {rate:>5.0f}/s burst {burst:>3}: use {use:.3f}, 429s {share:.2%}")


if __name__ == "__main__":
    asyncio.run(main())
