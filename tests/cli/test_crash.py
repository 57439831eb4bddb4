"""The crash suite, small and seeded: SIGKILL at every phase, resume, audit; in a local
DIR, and at an `s3://` URL with every invocation on a blank machine."""

from __future__ import annotations

from pathlib import Path

import pytest
from objects_server import S3Server
from reliability.crash import PHASES, CrashPlan, CrashReport, report_json, run_crash_suite
from reliability.places import StoreFaults

# End to end: the CLI as a process against the sandbox (`make test-fast` leaves it out).
pytestmark = pytest.mark.slow


def assert_clean(report: CrashReport) -> None:
    """Every phase really hit in every job, and nothing paid twice, lost or unaccounted."""
    for audit in report.audits:
        assert report.phases_landed(audit.job) == set(PHASES), report_json(report)
    assert report.ok, report_json(report)
    totals = report.totals()
    assert totals["keys_charged_twice"] == 0
    assert totals["paid_missing_from_results"] == 0
    assert totals["rows_unaccounted"] == 0
    assert totals["integrity_failures"] == 0
    assert totals["early_requests"] == 0
    assert totals["secrets_leaked"] == 0
    # An answered kill lands only by catching a paid answer the checkpoint had not read.
    assert totals["caught_keys"] >= len(report.audits)
    assert totals["caught_lost"] == 0


def test_killed_runs_never_pay_twice_nor_lose_anything(tmp_path: Path) -> None:
    """Killed while reading, with calls in flight, after an answer and while writing:
    the resumed run completes, nothing charged twice, lost or unaccounted."""
    report = run_crash_suite(CrashPlan(rows=400, jobs=1, in_flight_kills=2, seed=7), tmp_path)
    assert_clean(report)


def test_killed_runs_under_combined_faults(tmp_path: Path) -> None:
    """The same kills while 503s, drops and 504s after commit, truncated bodies, 429
    storms and revoked tokens strike at once: every fault met, the audit still clean."""
    plan = CrashPlan(rows=60, jobs=0, combined_jobs=1, in_flight_kills=1, seed=11)
    report = run_crash_suite(plan, tmp_path)
    assert [a.never_struck for a in report.audits] == [[]], report_json(report)
    assert_clean(report)


def test_killed_runs_at_a_url_resumed_by_blank_machines(
    s3_server: S3Server, tmp_path: Path
) -> None:
    """The same kills with the run at an s3:// URL, every invocation from an empty
    directory of its own, while the store answers 503s and drops the answers of uploads
    that landed: every store fault met, the audit still clean. (The suite's stalled
    upload costs the client's 30 s timeout: `make reliability` runs it, not this test;
    nor is any killed holder's lease waited out here.)"""
    plan = CrashPlan(
        rows=40,
        jobs=1,
        in_flight_kills=1,
        seed=5,
        store_faults=StoreFaults(stalls=0, first_within=10),
        wait_out_last_lease=False,
    )
    report = run_crash_suite(plan, tmp_path, s3_server)
    assert report.place == "url"
    assert [a.never_struck for a in report.audits] == [[]], report_json(report)
    assert_clean(report)
