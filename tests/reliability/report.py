"""`make reliability`: the suites at full size, and docs/reliability.md from what they measured.

    python tests/reliability/report.py [--scale 10] [--jobs 6] [--rows 2000]
        [--combined-jobs 2] [--combined-rows 200]

Runs the crash suite (at least 30 SIGKILLs over every phase, each checked to have landed;
some jobs under several faults at once), the fault matrix and the bad-input corpus
(pytest, with junit XML read back), then writes the table. Exits 1 when any suite
failed, after writing the table all the same: a red table is still a result.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime as dt
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from reliability.crash import (  # noqa: E402
    PHASES,
    CrashPlan,
    CrashReport,
    report_json,
    run_crash_suite,
)

# The fault-matrix scenarios with several faults at once (test names contain this).
COMBINED = "combined"


@dataclasses.dataclass(frozen=True, slots=True)
class SuiteResult:
    """What one pytest file measured: counts, time, and each case's outcome."""

    passed: int
    failed: int
    skipped: int
    seconds: float
    outcomes: dict[str, str]  # test name -> passed, failed or skipped
    reasons: dict[str, str]  # test name -> why it was skipped or is expected to fail

    def named(self, part: str) -> dict[str, str]:
        return {name: o for name, o in self.outcomes.items() if part in name}


def _pytest(target: str, scale: int, junit: Path, only: str = "test_") -> SuiteResult:
    """The tests of one file whose name starts with `only`, run at `scale`."""
    env = {**os.environ, "BATCHVAL_RELIABILITY_SCALE": str(scale)}
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", target,
         f"--junitxml={junit}"],
        cwd=ROOT, env=env, check=False,
    )  # fmt: skip
    seconds = time.monotonic() - started
    if not junit.exists():
        return SuiteResult(0, 1, 0, seconds, {target: "failed"}, {})
    outcomes: dict[str, str] = {}
    reasons: dict[str, str] = {}
    for case in ET.parse(junit).iter("testcase"):
        name = case.get("name", "")
        if not name.startswith(only):
            continue
        if case.find("failure") is not None or case.find("error") is not None:
            outcomes[name] = "failed"
        elif (skipped := case.find("skipped")) is not None:
            outcomes[name] = "skipped"
            reasons[name] = skipped.get("message", "")
        else:
            outcomes[name] = "passed"
    counts = collections.Counter(outcomes.values())
    return SuiteResult(
        counts["passed"], counts["failed"], counts["skipped"], seconds, outcomes, reasons
    )


def _commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    return done.stdout.strip() or "unknown"


def _crash_rows(crash: CrashReport, crash_seconds: float) -> list[str]:
    totals = crash.totals()
    phases = crash.by_phase()
    landed = ", ".join(f"{p} {phases[p][1]} of {phases[p][0]}" for p in PHASES)
    combined = sum(a.combined for a in crash.audits)
    stops = collections.Counter(reason for a in crash.audits for reason in a.stops)
    said = ", ".join(f"{r} {n}" for r, n in sorted(stops.items())) or "none"
    left = collections.Counter(state for k in crash.kills for state in k.caught_states)
    states = ", ".join(f"{state} {n}" for state, n in sorted(left.items())) or "none"
    return [
        f"| SIGKILLs | {totals['kills']}: {totals['kills_landed']} landed in the phase they "
        f"were aimed at, {totals['kills_not_landed']} did not (counted apart, not as hits) |",
        f"| kills landed, by phase (landed of tried) | {landed} |",
        f"| jobs where some phase was never hit | {totals['jobs_missing_a_phase']} |",
        f"| planned kills the run outran | {len(crash.missed)} |",
        f"| paid answers caught by an `answered` kill between the API's commit and the "
        f"checkpoint write | {totals['caught_keys']} (left {states}); lost or charged again: "
        f"{totals['caught_lost']} |",
        f"| checkpoint integrity failures after a kill | {totals['integrity_failures']} |",
        f"| crash-suite jobs completed | {sum(a.final_exit == 0 for a in crash.audits)} of "
        f"{len(crash.audits)} ({len(crash.audits) - combined} with latency only, "
        f"{combined} under combined faults; {totals['rows']} rows, "
        f"{totals['invocations']} invocations, {crash_seconds:.0f} s) |",
        f"| stop reasons of the exits 75 on the way to completion | {said} |",
    ]


def _combined_rows(crash: CrashReport, faults: SuiteResult) -> list[str]:
    combined = [a for a in crash.audits if a.combined]
    struck: collections.Counter[str] = collections.Counter()
    for audit in combined:
        struck.update(audit.struck)
    met = ", ".join(f"{name} {n}" for name, n in struck.items()) or "none"
    never = sorted({name for a in combined for name in a.never_struck})
    scenarios = faults.named(COMBINED)
    passed = [name for name, o in scenarios.items() if o == "passed"]
    return [
        f"| combined-fault crash jobs sound (faults all struck, audit clean) | "
        f"{sum(a.sound for a in combined)} of {len(combined)} "
        f"({sum(a.rows for a in combined)} rows) |",
        f"| faults struck in those jobs | {met}; never struck: {', '.join(never) or 'none'} |",
        f"| combined-fault scenarios of the fault matrix passed | {len(passed)} of "
        f"{len(scenarios)} ({', '.join(sorted(scenarios)) or 'none run'}) |",
    ]


def _table(
    crash: CrashReport,
    crash_seconds: float,
    faults: SuiteResult,
    corpus: SuiteResult,
    scale: int,
    command: str,
) -> str:
    totals = crash.totals()
    ok = crash.ok and faults.failed == 0 and corpus.failed == 0
    expected = len(faults.reasons) + len(corpus.reasons)
    verdict = "all suites passed" if ok else "FAILURES: see below"
    if expected:
        verdict += f"; {expected} skipped or expected to fail, named below with the reason"
    plan = crash.plan
    lines = [
        "# Reliability",
        "",
        "Generated by `make reliability` (tests/reliability/report.py) from what the suites",
        "measured; do not edit by hand. To reproduce:",
        "",
        f"    {command}",
        "",
        f"- commit `{_commit()}`, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, "
        f"seed {plan.seed}, fault-matrix scale {scale}",
        f"- crash suite: {plan.jobs} jobs of {plan.rows} rows with latency only, "
        f"{plan.combined_jobs} of {plan.combined_rows or plan.rows} rows under combined "
        f"faults; {plan.in_flight_kills} in-flight kills a job besides one each of the other "
        f"phases, up to {plan.answered_tries} tries for an `answered` kill to land",
        "- the combined-fault jobs and the fault matrix's two combined scenarios are kept",
        "  small (the scenarios stop growing at 200 rows): 429 storms hold the pool to a few",
        "  calls a second, so one combined job of 2,000 rows would take about half an hour",
        f"- verdict: **{verdict}**",
        "",
        "| measure | figure |",
        "|---|---|",
        *_crash_rows(crash, crash_seconds),
        *_combined_rows(crash, faults),
        f"| fault-matrix scenarios passed | {faults.passed} of {faults.passed + faults.failed}"
        f" ({faults.skipped} skipped or xfailed, {faults.seconds:.0f} s) |",
        f"| bad-input corpus cases tried, passed | {corpus.passed + corpus.failed}, "
        f"{corpus.passed} ({corpus.skipped} skipped or xfailed, {corpus.seconds:.0f} s) |",
        f"| keys charged twice (crash suite) | {totals['keys_charged_twice']} |",
        "| crash jobs where credits != 10 x unique valued requests or the summary's total,"
        " balance or uncertain charges | "
        f"{totals['credits_mismatch']} |",
        f"| paid valuations lost (not in results) | {totals['paid_missing_from_results']} |",
        f"| rows unaccounted (missing or twice) | {totals['rows_unaccounted']} |",
        f"| calls before a Retry-After (crash suite) | {totals['early_requests']} |",
        f"| secrets or tokens in logs or outputs (crash suite) | {totals['secrets_leaked']} |",
        "",
        "How a kill is known to have landed: `reading`, the checkpoint's ingest is not",
        "complete; `in_flight`, requests are `sent` without an answer; `answered`, a key the",
        "sandbox charged before the signal left is not `done` in the checkpoint; `writing`, a",
        "temporary Parquet file of the killed process is left. After a kill the harness waits",
        "out any Retry-After still running before it starts the next invocation (a killed",
        "process cannot pass one on); after an exit 75 it waits only for `stop.not_before`.",
        "",
        "Every fault-matrix scenario and corpus case asserts the same invariants itself",
        "(no key charged twice, no paid valuation lost, every row once, no call before a",
        "Retry-After, no secret in any log or file); a passed scenario measured zero of each,",
        "and each fault-matrix scenario checks that its faults really struck.",
        "",
    ]
    failed = sorted(n for o in (faults, corpus) for n, r in o.outcomes.items() if r == "failed")
    if failed:
        lines += ["Failed: " + ", ".join(failed), ""]
    for name, reason in sorted({**faults.reasons, **corpus.reasons}.items()):
        lines += [f"Skipped or expected to fail: `{name}`: {reason}", ""]
    if crash.missed:
        lines += ["Planned kills the run finished before: " + "; ".join(crash.missed), ""]
    missed = [k for k in crash.kills if not k.landed]
    if missed:
        lines += [
            "Kills that did not land in their phase: "
            + "; ".join(f"job {k.job} {k.phase} ({k.evidence})" for k in missed),
            "",
        ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=6)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--combined-jobs", type=int, default=2)
    parser.add_argument("--combined-rows", type=int, default=200)
    parser.add_argument("--in-flight-kills", type=int, default=3)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "reliability.md")
    args = parser.parse_args()
    plan = CrashPlan(
        rows=args.rows,
        jobs=args.jobs,
        combined_jobs=args.combined_jobs,
        combined_rows=args.combined_rows,
        in_flight_kills=args.in_flight_kills,
        seed=args.seed,
    )
    command = (
        f"python tests/reliability/report.py --scale {args.scale} --jobs {args.jobs} "
        f"--rows {args.rows} --combined-jobs {args.combined_jobs} "
        f"--combined-rows {args.combined_rows} --in-flight-kills {args.in_flight_kills} "
        f"--seed {args.seed}"
    )
    with tempfile.TemporaryDirectory(prefix="batchval-reliability-") as scratch:
        work = Path(scratch)
        started = time.monotonic()
        crash = run_crash_suite(plan, work)
        crash_seconds = time.monotonic() - started
        (work / "crash.json").write_text(report_json(crash), encoding="utf-8")
        print(report_json(crash))
        faults = _pytest("tests/test_fault_matrix.py", args.scale, work / "faults.xml")
        corpus = _pytest("tests/test_corpus.py", 1, work / "corpus.xml", "test_corpus_case")
    table = _table(crash, crash_seconds, faults, corpus, args.scale, command)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table, encoding="utf-8")
    print(table)
    return 0 if crash.ok and faults.failed == 0 and corpus.failed == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
