"""The crash harness: SIGKILL a live-mode run at every phase, resume, and audit.

Each job serves a fresh sandbox (latency, a short-term limit) on loopback in this
process, writes an input of `rows` homes (with duplicates and a few rows the API
refuses), and runs `batchval run` as a subprocess. Planned kills hit, in order:

- reading: after a random number of ingest batches have been stored;
- in_flight: once the sandbox has charged a random number of valuations, with calls
  in the air (the pool is 8 wide and the sandbox slow);
- answered: the instant a charge appears, between the sandbox's commit and the
  client's checkpoint write;
- writing: while `results.parquet` or `problems.parquet` is being written.

After every kill the checkpoint must pass SQLite's integrity check. Then the same
command runs again, and again, until it completes. The audit compares the sandbox's
ledger with the outputs: no key charged twice, credits = 10 x unique valued requests,
no paid valuation missing from the results, every input row in the results or the
problems exactly once. Everything random comes from one seed, so a failure replays.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl

from batchval.sandbox.app import Sandbox
from batchval.sandbox.config import Faults, RateLimit, SandboxConfig
from batchval.sandbox.server import RunningSandbox, serve_in_thread

BATCHVAL = str(Path(sys.executable).with_name("batchval"))
PHASES = ("reading", "in_flight", "answered", "writing")
CLIENT_ID, CLIENT_SECRET = "sandbox-live", "sandbox-live-secret"
POSTCODES = ["SW1A 2AA", "M1 1AE", "LS6 2AB", "CF10 1AA", "BS1 4DJ", "NE1 7RU", "B33 8TH"]


@dataclasses.dataclass(frozen=True, slots=True)
class CrashPlan:
    rows: int = 200
    jobs: int = 1
    in_flight_kills: int = 1  # per job; plus one reading, one answered, one writing
    seed: int = 2026
    concurrency: int = 8
    latency_ms: float = 10.0
    jitter_ms: float = 20.0
    rate: RateLimit = dataclasses.field(default_factory=lambda: RateLimit(150.0, 60))


@dataclasses.dataclass(frozen=True, slots=True)
class Kill:
    job: int
    phase: str
    seconds: float  # after the invocation started
    integrity_ok: bool


@dataclasses.dataclass
class JobAudit:
    rows: int
    invocations: int = 0
    keys_charged_twice: int = 0
    credits_charged: int = 0
    unique_valued_requests: int = 0
    paid_missing_from_results: int = 0
    rows_unaccounted: int = 0
    final_exit: int | None = None


@dataclasses.dataclass
class CrashReport:
    plan: CrashPlan
    kills: list[Kill] = dataclasses.field(default_factory=list)
    missed: list[str] = dataclasses.field(default_factory=list)  # planned kills the run outran
    audits: list[JobAudit] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(k.integrity_ok for k in self.kills) and all(
            a.final_exit == 0
            and a.keys_charged_twice == 0
            and a.paid_missing_from_results == 0
            and a.rows_unaccounted == 0
            and a.credits_charged == 10 * a.unique_valued_requests
            for a in self.audits
        )

    def totals(self) -> dict[str, int]:
        return {
            "kills": len(self.kills),
            "integrity_failures": sum(not k.integrity_ok for k in self.kills),
            "rows": sum(a.rows for a in self.audits),
            "invocations": sum(a.invocations for a in self.audits),
            "keys_charged_twice": sum(a.keys_charged_twice for a in self.audits),
            "credits_mismatch": sum(
                a.credits_charged != 10 * a.unique_valued_requests for a in self.audits
            ),
            "paid_missing_from_results": sum(a.paid_missing_from_results for a in self.audits),
            "rows_unaccounted": sum(a.rows_unaccounted for a in self.audits),
        }


def write_input(path: Path, rows: int, rng: random.Random) -> None:
    """Homes with ~5% duplicate requests, a few rows refused locally or by the API."""
    with path.open("w", newline="", encoding="utf-8") as stream:
        out = csv.writer(stream)
        out.writerow(["loan_id", "postcode", "property_type", "bedrooms", "reference"])
        for n in range(rows):
            m = rng.randrange(n) if n > 20 and rng.random() < 0.05 else n
            postcode, kind, beds = POSTCODES[m % len(POSTCODES)], "terraced", str(1 + m % 5)
            if m % 97 == 13:
                postcode = "EH1 1AA"  # outside England and Wales: refused before sending
            if m % 89 == 7:
                kind, beds = "flat", "9"  # the sandbox knows no typical area: 422
            out.writerow([f"LN-{n:06d}", postcode, kind, beds, f"CASE-{m:06d}"])


def _integrity_ok(out: Path) -> bool:
    path = out / "checkpoint.sqlite"
    if not path.exists():
        return True  # killed before the checkpoint was created
    db = sqlite3.connect(path)
    try:
        return bool(db.execute("PRAGMA integrity_check").fetchone() == ("ok",))
    finally:
        db.close()


def _ingest_complete(out: Path) -> bool:
    db = sqlite3.connect(out / "checkpoint.sqlite")
    try:
        found = db.execute("SELECT value FROM meta WHERE name = 'ingest_complete'").fetchone()
    finally:
        db.close()
    return found is not None


class _Invocation:
    """`batchval run` as a subprocess, its stderr read line by line in a thread."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        self.ingest_batches = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            if '"run.ingest.batch"' in line:
                self.ingest_batches += 1

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> float:
        self.process.send_signal(signal.SIGKILL)
        return time.monotonic() - self.started

    def finish(self, timeout: float = 600) -> int:
        code = self.process.wait(timeout=timeout)
        self._reader.join(timeout=10)
        if self.process.stderr is not None:
            self.process.stderr.close()
        return code


def _wait_for(condition: Callable[[], bool], run: _Invocation, poll: float = 0.001) -> bool:
    """Poll until the condition holds (True) or the process ends first (False)."""
    while run.alive():
        if condition():
            return True
        time.sleep(poll)
    return False


def _writing(out: Path) -> Callable[[], bool]:
    return lambda: any(out.glob(".*.parquet.tmp-*"))


class _Job:
    def __init__(self, number: int, plan: CrashPlan, workdir: Path, rng: random.Random) -> None:
        self.number, self.plan, self.rng = number, plan, rng
        self.dir = workdir / f"job-{number}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.input = self.dir / "book.csv"
        self.out = self.dir / "out"
        write_input(self.input, plan.rows, rng)
        (self.dir / "config.yaml").write_text(
            "input: {batch_rows: 10}\nrun: {shutdown_grace_seconds: 2, max_attempts: 8}\n",
            encoding="utf-8",
        )

    def args(self) -> list[str]:
        return [
            BATCHVAL, "run", str(self.input), "--out", str(self.out),
            "--config", str(self.dir / "config.yaml"),
            "--concurrency", str(self.plan.concurrency),
        ]  # fmt: skip

    def env(self, served: RunningSandbox) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BATCHVAL_")}
        env.update(
            BATCHVAL_BASE_URL=served.base_url,
            BATCHVAL_AUTH_URL=served.auth_url,
            BATCHVAL_CLIENT_ID=CLIENT_ID,
            BATCHVAL_CLIENT_SECRET=CLIENT_SECRET,
        )
        return env

    def run(self, report: CrashReport) -> JobAudit:
        config = SandboxConfig(rate_limit=self.plan.rate, seed=self.plan.seed + self.number)
        config.faults = Faults(
            latency_ms=self.plan.latency_ms, latency_jitter_ms=self.plan.jitter_ms
        )
        audit = JobAudit(rows=self.plan.rows)
        with serve_in_thread(Sandbox(config)) as served:
            charges = served.sandbox.ledger.charges
            batches = max(1, self.plan.rows // 10)
            # Early in the reading, so that the kill lands before it ends.
            kills: list[tuple[str, int]] = [
                ("reading", self.rng.randrange(1, max(2, batches // 4)))
            ]
            kills += sorted(
                ("in_flight", self.rng.randrange(1, max(2, self.plan.rows * 3 // 4)))
                for _ in range(self.plan.in_flight_kills)
            )
            kills += [("answered", 0), ("writing", 0)]
            for phase, at in kills:
                # A killed client's calls may still be committing in the sandbox: let
                # them land, so that "answered" is this invocation's answer.
                time.sleep(0.3)
                run = _Invocation(self.args(), self.env(served))
                audit.invocations += 1
                base = len(charges)
                conditions: dict[str, Callable[[], bool]] = {
                    "reading": lambda run=run, at=at: run.ingest_batches >= at,
                    "in_flight": lambda at=at: len(charges) >= at,
                    "answered": lambda base=base: len(charges) > base,
                    "writing": _writing(self.out),
                }
                if _wait_for(conditions[phase], run):
                    seconds = run.kill()
                    run.finish()
                    if phase == "reading" and _ingest_complete(self.out):
                        # The stderr line came late: the kill landed after reading.
                        report.missed.append(f"job {self.number}: reading (landed after it)")
                        phase = "after_reading"
                    report.kills.append(
                        Kill(self.number, phase, round(seconds, 3), _integrity_ok(self.out))
                    )
                else:
                    run.finish()
                    report.missed.append(f"job {self.number}: {phase}")
            code = 75
            for _ in range(10):  # resume until complete
                run = _Invocation(self.args(), self.env(served))
                audit.invocations += 1
                code = run.finish()
                if code != 75:
                    break
            audit.final_exit = code
            self._audit(served, audit)
        return audit

    def _audit(self, served: RunningSandbox, audit: JobAudit) -> None:
        ledger = served.sandbox.ledger
        audit.keys_charged_twice = len(ledger.keys_charged_twice())
        audit.credits_charged = ledger.credits_charged()
        results = pl.read_parquet(self.out / "results.parquet")
        problems = pl.read_parquet(self.out / "problems.parquet")
        audit.unique_valued_requests = results["idempotency_key"].n_unique()
        paid = {c.resource for c in ledger.valuations_created()}
        audit.paid_missing_from_results = len(paid - set(results["valuation_id"].to_list()))
        numbers = results["row_number"].to_list() + problems["row_number"].to_list()
        missing_or_extra = set(range(1, self.plan.rows + 1)) ^ set(numbers)
        audit.rows_unaccounted = len(missing_or_extra) + len(numbers) - len(set(numbers))


def run_crash_suite(plan: CrashPlan, workdir: Path) -> CrashReport:
    rng = random.Random(plan.seed)
    report = CrashReport(plan)
    for number in range(plan.jobs):
        report.audits.append(_Job(number, plan, workdir, rng).run(report))
    return report


def report_json(report: CrashReport) -> str:
    return json.dumps(
        {
            "ok": report.ok,
            "totals": report.totals(),
            "missed": report.missed,
            "kills": [dataclasses.asdict(k) for k in report.kills],
            "audits": [dataclasses.asdict(a) for a in report.audits],
        },
        indent=2,
    )
