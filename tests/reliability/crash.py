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

Every kill is checked to have landed in its phase, from what it left behind, and a
kill that did not is counted apart (an `answered` kill is tried again, up to
`answered_tries` times):

- reading: the checkpoint's ingest is not complete;
- in_flight: requests the API's ledger shows as sent have no answer in the checkpoint
  (the pool's writes are committed in groups, so their `sent` marks may be unwritten);
- answered: a key the sandbox had charged before the signal left is not `done` in the
  checkpoint (still `pending`, `sent` or `answered`): the kill fell between the API's
  commit and the client's write. Those keys are "caught", and the audit follows each
  one to the results;
- writing: a temporary Parquet file of the killed process is left beside the outputs.

After every kill the checkpoint must pass SQLite's integrity check, and the harness
waits out any `Retry-After` the sandbox gave (a killed process cannot pass one on to
the next). Then the same command runs again while it exits 75 (after `stop.not_before`
when the summary gives one) until it completes. The audit compares the sandbox's ledger
with the outputs: no key charged twice, credits = 10 x unique valued requests = the
summary's total, no paid valuation missing from the results, every input row in the
results or the problems exactly once, no call before a `Retry-After`, no secret or
token in any log line or output file, no traceback.

`combined_jobs` run the same kills under several faults at once (`combined.py`: 503s,
cut connections and 504s after commit, truncated bodies, 429 storms, revoked tokens),
and their audit also checks that every one of those faults struck. Everything random
in the harness comes from one seed, so a failure replays (the timing does not).
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import datetime as dt
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import polars as pl
from objects_server import S3Server

from batchval._internal.outcome import BatchvalError
from batchval._internal.sandbox.app import Sandbox
from batchval._internal.sandbox.config import Faults, RateLimit, SandboxConfig
from batchval._internal.sandbox.server import RunningSandbox, serve_in_thread

from .combined import FaultTally, as_dict, combined_faults
from .places import LocalPlace, Place, StoreFaults, UrlPlace, unique_prefix

BATCHVAL = str(Path(sys.executable).with_name("batchval"))
PHASES = ("reading", "in_flight", "answered", "writing")
CLIENT_ID, CLIENT_SECRET = "sandbox-live", "sandbox-live-secret"
POSTCODES = ["SW1A 2AA", "M1 1AE", "LS6 2AB", "CF10 1AA", "BS1 4DJ", "NE1 7RU", "B33 8TH"]
VALUATION_CREDITS = 10
# Re-runs after the planned kills before a job that keeps exiting 75 counts as stuck.
MAX_RESUMES = 10
# The longest `stop.not_before` the harness waits for (a daily limit would be a failure).
MAX_NOT_BEFORE_SECONDS = 60.0
# Checkpoint states of a request whose answer is not recorded as read.
UNSETTLED = ("pending", "sent", "answered")


@dataclasses.dataclass(frozen=True, slots=True)
class CrashPlan:
    rows: int = 200
    jobs: int = 1  # jobs with latency only
    combined_jobs: int = 0  # jobs under several faults at once (combined.py)
    # Rows of a combined job (0: `rows`). 429 storms hold the pool to a few calls a second,
    # so these jobs are kept smaller than the others.
    combined_rows: int = 0
    in_flight_kills: int = 1  # per job; plus one reading, one answered, one writing
    answered_tries: int = 3  # answered kills per job until one lands
    seed: int = 2026
    concurrency: int = 8
    latency_ms: float = 10.0
    jitter_ms: float = 20.0
    rate: RateLimit = dataclasses.field(default_factory=lambda: RateLimit(150.0, 60))
    # At a URL only (`run_crash_suite(..., server=)`): the store's faults, and whether the
    # invocation after each job's last kill waits out the killed holder's lease (30 s) as
    # a real taker does (the harness lets the other killed holders' leases go).
    store_faults: StoreFaults = dataclasses.field(default_factory=StoreFaults)
    wait_out_last_lease: bool = True


@dataclasses.dataclass(frozen=True, slots=True)
class Kill:
    job: int
    phase: str  # the phase it was aimed at
    seconds: float  # after the invocation started
    integrity_ok: bool
    landed: bool  # what it left behind shows that it struck inside its phase
    evidence: str
    caught: tuple[str, ...] = ()  # answered: keys charged but not recorded as read
    caught_states: tuple[str, ...] = ()  # the checkpoint state each caught key was left in


@dataclasses.dataclass
class JobAudit:
    job: int
    rows: int
    combined: bool  # under several faults at once
    faults: dict[str, Any]  # the sandbox's fault settings
    invocations: int = 0
    seconds: float = 0.0
    stops: list[str] = dataclasses.field(default_factory=list)  # reasons of 75 (and 70) exits
    exits: dict[int, int] = dataclasses.field(default_factory=dict)  # of invocations not killed
    keys_charged_twice: int = 0
    credits_charged: int = 0
    unique_valued_requests: int = 0
    summary_credits: int | None = None
    # summary.json's balance, and the account's at the end (the charges ledger's word)
    summary_balance: int | None = None
    account_balance: int | None = None
    summary_uncertain: int | None = None  # charges the run could not tell apart
    paid_missing_from_results: int = 0
    rows_unaccounted: int = 0
    early_requests: int = 0
    secrets_leaked: int = 0
    tracebacks: int = 0
    caught_keys: int = 0
    caught_lost: int = 0  # caught keys not charged once and in the results by that charge
    struck: dict[str, int] = dataclasses.field(default_factory=dict)
    store_struck: dict[str, int] = dataclasses.field(default_factory=dict)  # at a URL
    never_struck: list[str] = dataclasses.field(default_factory=list)  # API or store faults
    final_exit: int | None = None

    @property
    def money_agrees(self) -> bool:
        """The summary's balance is the account's, and no charge was left uncertain."""
        return self.summary_balance == self.account_balance and self.summary_uncertain == 0

    @property
    def sound(self) -> bool:
        return (
            self.final_exit == 0
            and set(self.exits) <= {0, 75}
            and self.keys_charged_twice == 0
            and self.paid_missing_from_results == 0
            and self.rows_unaccounted == 0
            and self.credits_charged == VALUATION_CREDITS * self.unique_valued_requests
            and self.summary_credits == self.credits_charged
            and self.money_agrees
            and self.early_requests == 0
            and self.secrets_leaked == 0
            and self.tracebacks == 0
            and self.caught_lost == 0
            and not self.never_struck
        )


@dataclasses.dataclass
class CrashReport:
    plan: CrashPlan
    place: str = "local"  # or "url": every job's run at an s3:// URL
    kills: list[Kill] = dataclasses.field(default_factory=list)
    missed: list[str] = dataclasses.field(default_factory=list)  # planned kills the run outran
    audits: list[JobAudit] = dataclasses.field(default_factory=list)

    def phases_landed(self, job: int) -> set[str]:
        return {k.phase for k in self.kills if k.job == job and k.landed}

    @property
    def ok(self) -> bool:
        """Every kill left a sound checkpoint, every phase was really hit in every job,
        and every job's audit is clean."""
        return (
            all(k.integrity_ok for k in self.kills)
            and all(self.phases_landed(a.job) >= set(PHASES) for a in self.audits)
            and all(a.sound for a in self.audits)
        )

    def by_phase(self) -> dict[str, tuple[int, int]]:
        """(kills, of which landed) per phase aimed at."""
        tried = collections.Counter(k.phase for k in self.kills)
        landed = collections.Counter(k.phase for k in self.kills if k.landed)
        return {phase: (tried[phase], landed[phase]) for phase in PHASES}

    def totals(self) -> dict[str, int]:
        audits = self.audits
        return {
            "kills": len(self.kills),
            "kills_landed": sum(k.landed for k in self.kills),
            "kills_not_landed": sum(not k.landed for k in self.kills),
            "integrity_failures": sum(not k.integrity_ok for k in self.kills),
            "jobs_missing_a_phase": sum(
                not self.phases_landed(a.job) >= set(PHASES) for a in audits
            ),
            "rows": sum(a.rows for a in audits),
            "invocations": sum(a.invocations for a in audits),
            "keys_charged_twice": sum(a.keys_charged_twice for a in audits),
            "credits_mismatch": sum(
                a.credits_charged != VALUATION_CREDITS * a.unique_valued_requests
                or a.summary_credits != a.credits_charged
                or not a.money_agrees
                for a in audits
            ),
            "paid_missing_from_results": sum(a.paid_missing_from_results for a in audits),
            "rows_unaccounted": sum(a.rows_unaccounted for a in audits),
            "early_requests": sum(a.early_requests for a in audits),
            "secrets_leaked": sum(a.secrets_leaked for a in audits),
            "tracebacks": sum(a.tracebacks for a in audits),
            "exits_not_0_or_75": sum(
                n for a in audits for c, n in a.exits.items() if c not in (0, 75)
            ),
            "caught_keys": sum(a.caught_keys for a in audits),
            "caught_lost": sum(a.caught_lost for a in audits),
            "faults_never_struck": sum(len(a.never_struck) for a in audits),
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


# --- what a kill left behind ------------------------------------------------------------


def _query(db: Path, sql: str, params: Collection[object] = ()) -> list[tuple[Any, ...]]:
    """Rows of a query on the checkpoint; opened and closed around it, so that the next
    invocation finds it as the killed one left it."""
    connection = sqlite3.connect(db)
    try:
        return list(connection.execute(sql, tuple(params)).fetchall())
    finally:
        connection.close()


def _integrity_ok(db: Path | None) -> bool:
    if db is None:
        return True  # killed before the checkpoint was created
    return _query(db, "PRAGMA integrity_check") == [("ok",)]


def _ingest_complete(db: Path) -> bool:
    return bool(_query(db, "SELECT value FROM meta WHERE name = 'ingest_complete'"))


def _states(db: Path, keys: Collection[str]) -> dict[str, str]:
    """The checkpoint state of each of `keys` (absent keys left out)."""
    if not keys:
        return {}
    marks = ", ".join("?" * len(keys))
    found = _query(db, f"SELECT key, state FROM requests WHERE key IN ({marks})", keys)
    return {str(k): str(s) for k, s in found}


@dataclasses.dataclass(frozen=True, slots=True)
class _Landing:
    landed: bool
    evidence: str
    caught: tuple[str, ...] = ()
    caught_states: tuple[str, ...] = ()


def _landing(
    phase: str,
    db: Path | None,
    charged_before_kill: list[str],
    seen_before_kill: list[str],
    temporaries_left: int,
) -> _Landing:
    """Whether a kill struck inside `phase`, from the checkpoint the next invocation
    finds (`db`), the API's ledger and the temporary files the killed process left."""
    if db is None:
        return _Landing(phase == "reading", "no checkpoint yet")
    if phase == "reading":
        stored = _query(db, "SELECT COUNT(*) FROM rows")[0][0]
        if _ingest_complete(db):
            return _Landing(False, f"ingest already complete ({stored} rows stored)")
        return _Landing(True, f"ingest incomplete: {stored} rows stored")
    if phase == "in_flight":
        # The pool commits its writes in groups, so a request may have reached the API
        # with its `sent` mark still uncommitted: the API's ledger says what was sent.
        states = _states(db, seen_before_kill)
        open_keys = {k for k in seen_before_kill if states.get(k, "pending") in UNSETTLED}
        return _Landing(
            bool(open_keys), f"{len(open_keys)} requests the API saw without an answer kept"
        )
    if phase == "answered":
        states = _states(db, charged_before_kill)
        caught = tuple(k for k in charged_before_kill if states.get(k) in UNSETTLED)
        seen = collections.Counter(states.get(k, "absent") for k in charged_before_kill)
        detail = ", ".join(f"{state} {n}" for state, n in sorted(seen.items()))
        return _Landing(
            bool(caught),
            f"{len(charged_before_kill)} charged before the kill; checkpoint: {detail}",
            caught,
            tuple(states[k] for k in caught),
        )
    return _Landing(
        bool(temporaries_left),
        f"{temporaries_left} temporary Parquet files of the killed process left",
    )


def _wait_out_retry_after(sandbox: Sandbox, bound: float = 30.0) -> None:
    """Sleep until every short-term `Retry-After` the sandbox gave has passed."""
    ends = [d.until_monotonic for d in sandbox.ledger.deadlines if d.code is None]
    if ends:
        time.sleep(min(bound, max(0.0, max(ends) - sandbox.clock.monotonic() + 0.1)))


def _leaks(sandbox: Sandbox, place: Place, texts: list[str]) -> int:
    """Secrets and tokens found in the logs or any output file (each needle once a blob)."""
    needles = [a.client_secret for a in sandbox.config.accounts] + list(sandbox._tokens)
    blobs = [t.encode() for t in texts] + place.blobs()
    return sum(needle.encode() in blob for needle in needles for blob in blobs)


# --- one invocation -------------------------------------------------------------------


class _Invocation:
    """`batchval run` as a subprocess, its stderr read line by line in a thread."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path | None = None) -> None:
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            args, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.ingest_batches = 0
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            if '"valuations.ingest.batch"' in line:
                self.ingest_batches += 1

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> float:
        self.process.send_signal(signal.SIGKILL)
        return time.monotonic() - self.started

    def finish(self, timeout: float = 600) -> int:
        code = self.process.wait(timeout=timeout)
        self._reader.join(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()
        return code

    @property
    def text(self) -> str:
        return "".join(self.lines)


def _wait_for(condition: Callable[[], bool], run: _Invocation, poll: float = 0.001) -> bool:
    """Poll until the condition holds (True) or the process ends first (False)."""
    while run.alive():
        if condition():
            return True
        time.sleep(poll)
    return False


def _said(text: str) -> str:
    """The stop line a run ended with (stderr's `stopped: ...`), for a report."""
    lines = [line for line in text.splitlines() if line.startswith(("stopped", "batchval:"))]
    return f", {lines[-1][:200]!r}" if lines else ""


def _stop(place: Place) -> dict[str, Any]:
    """summary.json's `stop`, or {} when there is none."""
    try:
        summary = json.loads(place.read("summary.json") or b"")
    except ValueError:
        return {}
    stop = summary.get("stop")
    return stop if isinstance(stop, dict) else {}


class _Job:
    def __init__(
        self,
        number: int,
        plan: CrashPlan,
        workdir: Path,
        rng: random.Random,
        combined: bool,
        at: tuple[S3Server, str] | None = None,
    ) -> None:
        self.number, self.plan, self.rng, self.combined = number, plan, rng, combined
        self.rows = (plan.combined_rows or plan.rows) if combined else plan.rows
        self.dir = workdir / f"job-{number}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.input = self.dir / "book.csv"
        self.place: Place = LocalPlace(self.dir)
        if at is not None:
            server, prefix = at
            self.place = UrlPlace(self.dir, server, f"{prefix}/job-{number}", plan.store_faults)
        self.logs: list[str] = []
        self.outran = ""  # how the last invocation that outran its planned kill ended
        self.outran_code = 0
        self.kills: list[Kill] = []
        write_input(self.input, self.rows, rng)
        (self.dir / "config.yaml").write_text(
            "input: {batch_rows: 10}\nrun: {shutdown_grace_seconds: 2, max_attempts: 8}\n",
            encoding="utf-8",
        )

    def faults(self) -> Faults:
        if self.combined:
            return combined_faults(latency_ms=self.plan.latency_ms, jitter_ms=self.plan.jitter_ms)
        return Faults(latency_ms=self.plan.latency_ms, latency_jitter_ms=self.plan.jitter_ms)

    def args(self) -> list[str]:
        return [
            BATCHVAL, "run", str(self.input), "--out", self.place.target,
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

    def planned_kills(self) -> list[tuple[str, int]]:
        batches = max(1, self.rows // 10)
        # Early in the reading, so that the kill lands before it ends.
        kills = [("reading", self.rng.randrange(1, max(2, batches // 4)))]
        kills += sorted(
            ("in_flight", self.rng.randrange(1, max(2, self.rows * 3 // 4)))
            for _ in range(self.plan.in_flight_kills)
        )
        return [*kills, ("answered", 0), ("writing", 0)]

    def run(self, report: CrashReport) -> JobAudit:
        started = time.monotonic()
        config = SandboxConfig(rate_limit=self.plan.rate, seed=self.plan.seed + self.number)
        config.faults = self.faults()
        audit = JobAudit(self.number, self.rows, self.combined, as_dict(config.faults))
        with serve_in_thread(Sandbox(config)) as served, self.place.serving(self.rng):
            tally = FaultTally(served.sandbox)
            planned = self.planned_kills()
            for number, (phase, at) in enumerate(planned):
                tries = self.plan.answered_tries if phase == "answered" else 1
                last = number == len(planned) - 1
                outruns = 0
                while tries > 0:
                    kill = self._kill(served, phase, at, audit, last=last)
                    if kill is None:
                        # It ended before the phase came; unless it completed the run (an
                        # exit 75 or 70 on the way), the phase is still ahead: again.
                        if self.outran_code != 0 and outruns < MAX_RESUMES:
                            outruns += 1
                            continue
                        report.missed.append(f"job {self.number}: {phase} ({self.outran})")
                        break
                    report.kills.append(kill)
                    self.kills.append(kill)
                    if kill.landed:
                        break
                    tries -= 1
            code = 75
            for _ in range(MAX_RESUMES):  # resume until complete
                with self.place.machine(self.env(served)) as (cwd, env):
                    run = _Invocation(self.args(), env, cwd)
                    audit.invocations += 1
                    code = run.finish()
                self.logs.append(run.text)
                if not self._ended(code, audit):
                    break
            audit.final_exit = code
        # After the proxy stopped: every store fault it injected is counted.
        self._audit(served, audit, tally)
        audit.seconds = round(time.monotonic() - started, 1)
        return audit

    def _kill(
        self, served: RunningSandbox, phase: str, at: int, audit: JobAudit, *, last: bool
    ) -> Kill | None:
        """One invocation killed in `phase`; None when it ended before the phase came.
        After the `last` planned kill of a job the next invocation may wait out the killed
        holder's lease (at a URL, `CrashPlan.wait_out_last_lease`)."""
        # A killed client's calls may still be committing in the sandbox: let them land,
        # so that "answered" is this invocation's answer.
        time.sleep(0.3)
        with self.place.machine(self.env(served)) as (cwd, env):
            return self._kill_on(served, phase, at, audit, cwd, env, last=last)

    def _kill_on(
        self,
        served: RunningSandbox,
        phase: str,
        at: int,
        audit: JobAudit,
        cwd: Path | None,
        env: dict[str, str],
        *,
        last: bool,
    ) -> Kill | None:
        charges = served.sandbox.ledger.charges
        run = _Invocation(self.args(), env, cwd)
        audit.invocations += 1
        base = len(charges)
        seen_base = len(served.sandbox.ledger.requests)

        def condition() -> bool:
            if phase == "reading":
                return run.ingest_batches >= at
            if phase == "in_flight":
                # `at` counts the job's charges so far: one of this invocation's at least,
                # or a target an earlier invocation passed kills it before it sends.
                return len(charges) >= max(at, base + 1)
            if phase == "answered":
                return len(charges) > base
            return bool(self.place.temporaries())

        if not _wait_for(condition, run):
            code = run.finish()
            self.logs.append(run.text)
            self.outran, self.outran_code = f"exit {code}{_said(run.text)}", code
            self._ended(code, audit)
            return None
        charged = [c.idempotency_key for c in charges[base : len(charges)]]
        seconds = run.kill()
        run.finish()
        self.logs.append(run.text)
        keys = [k for k in charged if k is not None]
        seen = [
            r.idempotency_key
            for r in served.sandbox.ledger.requests[seen_base:]
            if r.idempotency_key is not None
        ]
        left = len(self.place.temporaries(run.process.pid))
        try:
            db = self.place.memory()
            landing = _landing(phase, db, keys, seen, left)
            integrity_ok = _integrity_ok(db)
        except (BatchvalError, sqlite3.Error) as exc:  # the run's memory cannot be read
            landing = _Landing(False, f"the run's memory unreadable: {exc!r}")
            integrity_ok = False
        kill = Kill(
            self.number,
            phase,
            round(seconds, 3),
            integrity_ok,
            landing.landed,
            landing.evidence,
            landing.caught,
            landing.caught_states,
        )
        self.place.killed(wait_out_lease=last and self.plan.wait_out_last_lease)
        _wait_out_retry_after(served.sandbox)
        return kill

    def _ended(self, code: int, audit: JobAudit) -> bool:
        """An invocation that was not killed ended with `code`: counted; True when the run
        should be resumed (75, or 70, so that what an internal error left is audited)."""
        audit.exits[code] = audit.exits.get(code, 0) + 1
        if code == 70:
            audit.stops.append(f"exit 70: {_stop(self.place).get('detail')}")
            return True
        return code == 75 and self._honour_stop(audit)

    def _honour_stop(self, audit: JobAudit) -> bool:
        """After an exit 75: note why, wait for `not_before`; False when it is too far."""
        stop = _stop(self.place)
        audit.stops.append(str(stop.get("reason")))
        not_before = stop.get("not_before")
        if not_before:
            wait = (dt.datetime.fromisoformat(not_before) - dt.datetime.now(dt.UTC)).total_seconds()
            if wait > MAX_NOT_BEFORE_SECONDS:
                return False
            time.sleep(max(0.0, wait))
        return True

    def _audit(self, served: RunningSandbox, audit: JobAudit, tally: FaultTally) -> None:
        sandbox = served.sandbox
        ledger = sandbox.ledger
        audit.keys_charged_twice = len(ledger.keys_charged_twice())
        audit.credits_charged = ledger.credits_charged()
        audit.early_requests = len(ledger.early_requests())
        audit.secrets_leaked = _leaks(sandbox, self.place, self.logs)
        audit.tracebacks = sum("Traceback" in text for text in self.logs)
        audit.struck = tally.counts()
        audit.store_struck = self.place.struck
        if self.combined:
            audit.never_struck = tally.never_struck(sandbox.config.faults)
        audit.never_struck += self.place.never_struck()
        try:
            summary = json.loads(self.place.read("summary.json") or b"")
            audit.summary_credits = summary["credits_charged"]["total"]
            audit.summary_balance = summary["last_known_balance"]
            audit.summary_uncertain = summary["charges"]["uncertain_calls"]
            audit.account_balance = sandbox.balances().get(CLIENT_ID)
            results = pl.read_parquet(self.place.read("results.parquet") or b"")
            problems = pl.read_parquet(self.place.read("problems.parquet") or b"")
        except (OSError, ValueError, KeyError, pl.exceptions.PolarsError):
            audit.rows_unaccounted = audit.rows  # no outputs to account with
            return
        audit.unique_valued_requests = results["idempotency_key"].n_unique()
        paid = {c.resource for c in ledger.valuations_created()}
        audit.paid_missing_from_results = len(paid - set(results["valuation_id"].to_list()))
        numbers = results["row_number"].to_list() + problems["row_number"].to_list()
        missing_or_extra = set(range(1, self.rows + 1)) ^ set(numbers)
        audit.rows_unaccounted = len(missing_or_extra) + len(numbers) - len(set(numbers))
        # Every key a kill caught between commit and write: charged once, in the results
        # with the valuation of that charge.
        by_key = dict(zip(results["idempotency_key"], results["valuation_id"], strict=True))
        charged: dict[str, list[str]] = collections.defaultdict(list)
        for c in ledger.valuations_created():
            if c.idempotency_key is not None:
                charged[c.idempotency_key].append(c.resource)
        caught = {key for kill in self.kills for key in kill.caught}
        audit.caught_keys = len(caught)
        audit.caught_lost = sum(
            len(charged[key]) != 1 or by_key.get(key) != charged[key][0] for key in caught
        )


def run_crash_suite(plan: CrashPlan, workdir: Path, server: S3Server | None = None) -> CrashReport:
    """The suite's jobs one after another, each run's place a local DIR, or with `server`
    an `s3://` URL there (each invocation from a blank machine, `places.UrlPlace`)."""
    rng = random.Random(plan.seed)
    report = CrashReport(plan, "local" if server is None else "url")
    at = None if server is None else (server, unique_prefix(plan.seed))
    for number in range(plan.jobs + plan.combined_jobs):
        job = _Job(number, plan, workdir, rng, combined=number >= plan.jobs, at=at)
        report.audits.append(job.run(report))
    return report


def report_json(report: CrashReport) -> str:
    return json.dumps(
        {
            "ok": report.ok,
            "place": report.place,
            "totals": report.totals(),
            "by_phase": report.by_phase(),
            "missed": report.missed,
            "kills": [dataclasses.asdict(k) for k in report.kills],
            "audits": [dataclasses.asdict(a) for a in report.audits],
        },
        indent=2,
    )
