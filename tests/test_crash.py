"""The crash suite, small and seeded: SIGKILL at every phase, resume, audit."""

from __future__ import annotations

from pathlib import Path

from reliability.crash import PHASES, CrashPlan, report_json, run_crash_suite


def test_killed_runs_never_pay_twice_nor_lose_anything(tmp_path: Path) -> None:
    """Killed while reading, with calls in flight, after an answer and while writing:
    the resumed run completes, nothing charged twice, lost or unaccounted."""
    report = run_crash_suite(CrashPlan(rows=400, jobs=1, in_flight_kills=2, seed=7), tmp_path)
    assert {k.phase for k in report.kills} == set(PHASES), report_json(report)
    assert report.ok, report_json(report)
    totals = report.totals()
    assert totals["keys_charged_twice"] == 0
    assert totals["paid_missing_from_results"] == 0
    assert totals["rows_unaccounted"] == 0
    assert totals["integrity_failures"] == 0
