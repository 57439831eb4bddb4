"""The calendar's hard instants, and processes started with their clock at one of them.

A process's clock is moved by libfaketime (Debian's `faketime`, installed by `make faketime`,
which `make test` and `make test-dates` run) as a relative offset: the clock ticks on from the
instant, and intervals stay real. `make test-dates`
runs the tests marked `dates` with the whole pytest process at each instant
(`BATCHVAL_TEST_INSTANT` names it); a test that starts a process at an instant of its own
computes that process's offset from the true clock, whatever its own clock says.

Go programs (the object stores' SeaweedFS) read the clock without libc: faketime cannot
reach them, so no test marked `dates` starts one.
"""

from __future__ import annotations

import datetime as dt
import glob
import os

import pytest

# The nights a lender fears (issue 51): the year's end across midnight, the first of the
# year (Basel 3.1's triggers), the Sundays the UK clocks go back (a 01:30 local job at
# 00:30 or 01:30 UTC), the leap day and the day before it, the last day of a 30-day month.
INSTANTS: dict[str, dt.datetime] = {
    "year-end": dt.datetime(2026, 12, 31, 23, 59, 30, tzinfo=dt.UTC),
    "new-year": dt.datetime(2027, 1, 1, 0, 0, 5, tzinfo=dt.UTC),
    "clocks-back-2026-0030": dt.datetime(2026, 10, 25, 0, 30, tzinfo=dt.UTC),
    "clocks-back-2026-0130": dt.datetime(2026, 10, 25, 1, 30, tzinfo=dt.UTC),
    "clocks-back-2027-0030": dt.datetime(2027, 10, 31, 0, 30, tzinfo=dt.UTC),
    "clocks-back-2027-0130": dt.datetime(2027, 10, 31, 1, 30, tzinfo=dt.UTC),
    "leap-eve": dt.datetime(2028, 2, 28, 1, 30, tzinfo=dt.UTC),
    "leap-day": dt.datetime(2028, 2, 29, 1, 30, tzinfo=dt.UTC),
    "month-end-30": dt.datetime(2027, 6, 30, 23, 59, 30, tzinfo=dt.UTC),
}
INSTANT_VARIABLE = "BATCHVAL_TEST_INSTANT"
# The instants `make test` takes a test of every instant at (`each_instant`): a night across
# the year's end (the run ends on a day and in a year it did not start in), and the night of
# a leap day (the next is 1 March). `make test-dates` takes every instant, CI both.
MAKE_TEST_INSTANTS = ("year-end", "leap-day")


def each_instant() -> list[str]:
    """The names of the instants a test that sets its processes' clocks itself (to each
    instant in turn) takes. Under `make test-dates`, only the instant the run is at
    (`INSTANT_VARIABLE`): the make takes every instant one after another, and each would
    otherwise take all nine again, the very same cases. Otherwise `MAKE_TEST_INSTANTS`."""
    running = os.environ.get(INSTANT_VARIABLE)
    if running is None:
        return list(MAKE_TEST_INSTANTS)
    at = dt.datetime.fromisoformat(running)
    return [name for name, instant in INSTANTS.items() if instant == at]


def library() -> str:
    """libfaketime's path; the test fails (never skips) without it."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
    if not found:
        pytest.fail("libfaketime is missing: `make faketime` (run by `make test`) installs it")
    return found[0]


def own_offset() -> float:
    """Seconds this process's clock runs ahead of the true clock (0 unless faked)."""
    faked = os.environ.get("FAKETIME", "")
    if "libfaketime" not in os.environ.get("LD_PRELOAD", "") or not faked.startswith(("+", "-")):
        return 0.0
    return float(faked)


def true_now() -> dt.datetime:
    """The true UTC time, whatever offset this process runs at."""
    return dt.datetime.now(dt.UTC) - dt.timedelta(seconds=own_offset())


def at(instant: dt.datetime, env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (this process's by default) for a process whose clock reads `instant` when it
    starts, and ticks on from there."""
    offset = round((instant - true_now()).total_seconds())
    faked = dict(os.environ if env is None else env)
    # The monotonic clock is moved by the same offset, which leaves its intervals real:
    # libfaketime 0.9.10 left alone makes Python's sleep (an absolute monotonic deadline)
    # fail with EINVAL at an offset into the past.
    faked.update(LD_PRELOAD=library(), FAKETIME=f"{offset:+d}")
    faked.pop("FAKETIME_DONT_FAKE_MONOTONIC", None)
    return faked
