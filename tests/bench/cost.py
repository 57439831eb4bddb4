"""Client cost: CPU seconds of the client's own process per valuation.

Both clients value the same book against a fresh zero-latency, no-limit sandbox in
another process. The CPU is the child's user + system time as the kernel counts it
(`os.wait4`), start-up, ingest and output writing included, divided by the valuations
the sandbox's ledger counts.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from bench.processes import BATCHVAL, PYTHON, Finished, run_measured
from bench.served import NO_DAILY_LIMIT, Ledger, ServedSandbox

SEQUENTIAL = str(Path(__file__).with_name("sequential.py"))


@dataclasses.dataclass(frozen=True, slots=True)
class ClientCost:
    client: str
    process: Finished
    ledger: Ledger
    sandbox_cpu_seconds: float

    @property
    def valuations(self) -> int:
        return self.ledger.count(201)

    @property
    def cpu_ms_per_valuation(self) -> float:
        if not self.valuations:
            return math.nan
        return 1000 * self.process.cpu_seconds / self.valuations

    @property
    def calls_per_second(self) -> float:
        return self.valuations / self.process.seconds


def client_cost(work: Path, book: Path, client: str) -> ClientCost:
    """`client` is "batchval" or "sequential"; each gets a sandbox of its own."""
    out = work / f"cost-{client}"
    options = ["--no-rate-limit", *NO_DAILY_LIMIT]
    with ServedSandbox(options, work / f"cost-{client}.sandbox.log") as api:
        if client == "batchval":
            argv = [BATCHVAL, "run", str(book), "--out", str(out)]
        else:
            argv = [PYTHON, SEQUENTIAL, str(book), str(out.with_suffix(".jsonl"))]
        process = run_measured(argv, log=work / f"cost-{client}.log", env=api.client_env())
        ledger = api.ledger()
        sandbox_cpu = api.cpu_seconds()
    return ClientCost(client, process, ledger, sandbox_cpu)
