"""Live runs: `batchval run` in a process of its own against a sandbox in another.

Rate use (a hidden short-term limit) and latency hiding (no limit, slow answers) are
both read from the sandbox's side:

- valuations: the sandbox stamps each one `valuedAt` when its work ends (its clock is
  UTC wall time to the millisecond); batchval keeps it in results.parquet;
- 429s: the ledger's `retry_after_given`, stamped when the answer was given;
- requests by status and calls before a `Retry-After`: the ledger's counts.

The sending phase runs from the first call's arrival (its end, less the sandbox's
fixed latency) to the last call's end. Over it, calls per second are valuations
(201s) per second: a 429 uses nothing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import math
import secrets
from pathlib import Path

import polars as pl
from objects_server import S3Server

from batchval._internal.store.objects import ObjectStore
from bench.processes import BATCHVAL, Finished, run_measured
from bench.served import NO_DAILY_LIMIT, Ledger, ServedSandbox
from bench.workload import write_csv

RATE_LATENCY_MS = 30.0  # the paced runs' service time: a fast API
RATE_JITTER_MS = 15.0
HIDING_LATENCY_MS = 500.0


@dataclasses.dataclass(frozen=True, slots=True)
class LiveRun:
    """One `batchval run` and what the sandbox saw of it."""

    rows: int
    process: Finished
    ledger: Ledger
    sandbox_cpu_seconds: float
    valued_at: list[float]  # seconds from the phase start at which each valuation ended
    rejected_at: list[float]  # the same for each 429
    phase_seconds: float  # first arrival to last end

    @property
    def valuations(self) -> int:
        return self.ledger.count(201)

    @property
    def rate_limited(self) -> int:
        return self.ledger.count(429)

    @property
    def calls_per_second(self) -> float:
        return self.valuations / self.phase_seconds if self.phase_seconds > 0 else math.nan

    @property
    def cpu_ms_per_call(self) -> float:
        """The client process's CPU (start-up included) per call the sandbox saw."""
        if not self.ledger.requests:
            return math.nan
        return 1000 * self.process.cpu_seconds / self.ledger.requests

    @property
    def share_429(self) -> float:
        return self.rate_limited / self.ledger.requests if self.ledger.requests else math.nan

    def per_second(self) -> list[tuple[int, int]]:
        """(valuations, 429s) in each whole second of the phase."""
        seconds = math.ceil(self.phase_seconds) or 1
        counts = [[0, 0] for _ in range(seconds)]
        for at in self.valued_at:
            counts[min(seconds - 1, max(0, int(at)))][0] += 1
        for at in self.rejected_at:
            counts[min(seconds - 1, max(0, int(at)))][1] += 1
        return [(a, b) for a, b in counts]


def live_run(
    work: Path,
    name: str,
    rows: int,
    sandbox_options: list[str],
    latency_ms: float,
    run_options: list[str] | None = None,
    timeout: float | None = None,
    kept: S3Server | None = None,
) -> LiveRun:
    """Value `rows` fresh rows against a fresh sandbox served with `sandbox_options`, into
    a local DIR, or with `kept`, at a URL on that server (`--out s3://...`), from an empty
    working directory whose temporary files stay in it."""
    source = write_csv(work / f"{name}.csv", rows, seed=2)
    out, cwd = work / name, None
    with ServedSandbox([*sandbox_options, *NO_DAILY_LIMIT], work / f"{name}.sandbox.log") as api:
        env = api.client_env()
        if kept is not None:
            cwd = work / f"{name}.machine"
            cwd.mkdir()
            env.update(kept.env(), TMPDIR=str(cwd))
        # A URL of its own, however often measured on one server.
        place = str(out) if kept is None else kept.url(f"{name}-{secrets.token_hex(4)}")
        process = run_measured(
            [BATCHVAL, "run", str(source), "--out", place, *(run_options or [])],
            log=work / f"{name}.log",
            env=env,
            timeout=timeout,
            cwd=cwd,
        )
        ledger = api.ledger()
        sandbox_cpu = api.cpu_seconds()
    if kept is None:
        results = out / "results.parquet"
        valued = _valued_at(results) if results.is_file() else []
    else:
        found = ObjectStore.from_url(place, kept.env()).get("results.parquet")
        valued = [] if found is None else _valued_at(io.BytesIO(found[0]))
    latency = dt.timedelta(milliseconds=latency_ms)
    starts = [v - latency for v in valued[:1]] + ledger.short_term_429_at[:1]
    ends = valued[-1:] + ledger.short_term_429_at[-1:]
    if not starts:
        return LiveRun(rows, process, ledger, sandbox_cpu, [], [], math.nan)
    origin = min(starts)

    def offsets(times: list[dt.datetime]) -> list[float]:
        return [(t - origin).total_seconds() for t in times]

    return LiveRun(
        rows=rows,
        process=process,
        ledger=ledger,
        sandbox_cpu_seconds=sandbox_cpu,
        valued_at=offsets(valued),
        rejected_at=offsets(ledger.short_term_429_at),
        phase_seconds=(max(ends) - origin).total_seconds(),
    )


def _valued_at(results: Path | io.BytesIO) -> list[dt.datetime]:
    column = pl.read_parquet(results, columns=["valued_at"])["valued_at"].sort()
    return [t for t in column.to_list() if t is not None]


def rate_run(
    work: Path, rate: int, burst: int, rows: int, kept: S3Server | None = None, name: str = ""
) -> LiveRun:
    """A run against a hidden short-term limit of `rate`/s with a bucket of `burst` (at a
    URL on `kept`, if given)."""
    options = ["--rate", str(rate), "--burst", str(burst)]
    options += ["--latency-ms", str(RATE_LATENCY_MS), "--jitter-ms", str(RATE_JITTER_MS)]
    return live_run(work, name or f"rate-{rate}", rows, options, RATE_LATENCY_MS, kept=kept)


def hiding_run(work: Path, concurrency: int, seconds: float, timeout: float) -> LiveRun:
    """A run with no limit and 500 ms answers, sized to last `seconds` at the ideal
    throughput of `concurrency` calls in flight."""
    ideal = concurrency / (HIDING_LATENCY_MS / 1000)
    rows = round(ideal * seconds)
    options = ["--no-rate-limit", "--latency-ms", str(HIDING_LATENCY_MS)]
    return live_run(
        work,
        f"hiding-{concurrency}",
        rows,
        options,
        HIDING_LATENCY_MS,
        run_options=["--concurrency", str(concurrency)],
        timeout=timeout,
    )
