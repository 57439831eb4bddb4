"""The calendar's hard nights, end to end: batchval started as a process whose clock reads
each instant of `clocks.INSTANTS` (libfaketime), against the embedded sandbox or one in this
process whose clock reads the same instant.

Each of these tests sets its processes' clocks itself, so they pass whatever day the suite
runs on. `make test` runs the two nights of a book (marked `dates`) at two of the instants
(`clocks.each_instant`), and `make test-dates` at each instant in turn, with this process
moved to it as well.
"""

from __future__ import annotations

import calendar
import datetime as dt
import json
import os
import subprocess
from pathlib import Path

import clocks
import polars as pl
import pytest
import yaml
from support import BATCHVAL, LIVE, ROOT, env_for, make_config, portfolio

from batchval._internal.sandbox.app import Sandbox
from batchval._internal.sandbox.clock import SandboxClock
from batchval._internal.sandbox.server import serve_in_thread

pytestmark = pytest.mark.slow

DAY = dt.timedelta(days=1)


def no_api() -> dict[str, str]:
    """This process's environment without an API: batchval values against its embedded
    sandbox (in the same process, so on the same faked clock)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("BATCHVAL_")}


def night(
    args: list[str], when: dt.datetime, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`args` as a process whose clock reads `when` as it starts."""
    return subprocess.run(
        args,
        env=clocks.at(when, env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def summary(out: Path) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return loaded


@pytest.mark.dates
@pytest.mark.parametrize("name", clocks.each_instant())
def test_two_nights_of_a_book_each_name_the_utc_day_they_started_on(
    tmp_path: Path, name: str
) -> None:
    """A book valued on the night of each hard instant, then the night after: both exit 0,
    each run id names the UTC day its night started on, and the second night carries every
    loan from the book (valued the night before, fresh for 30 days) and sends nothing."""
    first = clocks.INSTANTS[name]
    loans = portfolio(tmp_path / "loans.csv", 12)
    book = tmp_path / "book.parquet"
    env = no_api()
    for when, source in ((first, "api"), (first + DAY, "book")):
        out = tmp_path / "nights" / f"{when:%Y-%m-%d}"
        args = [BATCHVAL, "run", str(loans), "--out", str(out), "--book", str(book)]
        done = night([*args, "--row-id", "loan_id"], when, env)
        assert done.returncode == 0, done.stderr
        ran = summary(out)
        assert ran["run_id"] == f"day-{when:%Y-%m-%d}", (name, when)
        results = pl.read_parquet(out / "results.parquet")
        assert results.height == 12
        assert set(results.get_column("source")) == {source}


def test_a_night_that_meets_the_daily_limit_before_midnight_finishes_after_it(
    tmp_path: Path,
) -> None:
    """Started at 23:59:30 UTC on 31 December with a day's limit of 6 calls and 10 loans:
    the run stops sending at the limit, waits for the API's midnight (`--wait-for-midnight`),
    spends the new day's limit on the rest, and keeps its run id, the day it started on.
    The sandbox's ledger is the referee: no call after the limit before its midnight, each
    loan charged once."""
    start = clocks.INSTANTS["year-end"]
    config = make_config()
    for account in config.accounts:
        account.daily_limit = 6
    sandbox = Sandbox(config, SandboxClock(start))
    loans = portfolio(tmp_path / "loans.csv", 10)
    out = tmp_path / "out"
    with serve_in_thread(sandbox) as served:
        env = env_for(served)
        args = [BATCHVAL, "run", str(loans), "--out", str(out), "--wait-for-midnight"]
        done = night([*args, "--concurrency", "2"], start, env)
    assert done.returncode == 0, done.stderr
    assert summary(out)["run_id"] == "day-2026-12-31"
    midnight = dt.datetime(2027, 1, 1, tzinfo=dt.UTC)
    charged = sandbox.ledger.charges
    assert sorted(c.idempotency_key or "" for c in charged) == sorted(
        set(c.idempotency_key or "" for c in charged)
    )
    assert len(charged) == 10
    before = [c for c in charged if c.at < midnight]
    assert len(before) == 6
    limited = [r for r in sandbox.ledger.requests if r.code == "daily_limit"]
    assert limited, "the day's limit was met before midnight"
    posts = [r for r in sandbox.ledger.requests if r.method == "POST" and r.at >= limited[0].at]
    assert all(r.at >= midnight for r in posts[len(limited) :])
    assert pl.read_parquet(out / "results.parquet").height == 10


@pytest.mark.parametrize("year", [2026, 2027])
def test_a_local_0130_job_that_fires_twice_as_the_clocks_go_back_calls_once(
    tmp_path: Path, year: int
) -> None:
    """The cron recipe (examples/cron/nightly.sh) at 01:30 Europe/London on the Sunday the
    clocks go back, fired at both 01:30s (00:30 and 01:30 UTC), as some schedulers do: both
    name the same UTC day, so the second finds the night's directory done, sends nothing,
    and exits 0 (docs/how-to/cron.md)."""
    first = clocks.INSTANTS[f"clocks-back-{year}-0030"]
    assert dt.datetime(year, 10, 25 if year == 2026 else 31).weekday() == calendar.SUNDAY
    rehearsing = make_config()
    rehearsing.rehearsal = True  # the recipe runs --live: batchval's sandbox only so
    sandbox = Sandbox(rehearsing, SandboxClock(first))
    work = tmp_path / "srv"
    work.mkdir()
    pl.read_csv(portfolio(tmp_path / "loans.csv", 6)).write_parquet(work / "loans.parquet")
    script = str(ROOT / "examples" / "cron" / "nightly.sh")
    with serve_in_thread(sandbox) as served:
        config = tmp_path / "live.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "api": {
                        "base_url": served.base_url,
                        "auth_url": served.auth_url,
                        "client_id": LIVE.client_id,
                        "client_secret": LIVE.client_secret,
                    }
                }
            )
        )
        env = {**no_api(), "TZ": "Europe/London", "BATCHVAL": BATCHVAL}
        calls: list[int] = []
        for when in (first, first + dt.timedelta(hours=1)):
            sandbox.clock.set(when)
            local = when.astimezone(_london())
            assert (local.hour, local.minute) == (1, 30), local
            done = night([script, "loans.parquet", "--config", str(config)], when, env, work)
            assert done.returncode == 0, done.stdout + done.stderr
            calls.append(len([r for r in sandbox.ledger.requests if r.method == "POST"]))
    nights = sorted(p.name for p in (work / "nights").iterdir())
    assert nights == [f"{first:%Y-%m-%d}"]
    assert calls[0] == 6
    assert calls[1] == calls[0], "the second firing made a call"
    assert (work / "nights" / nights[0] / "report.html").is_file()


def _london() -> dt.tzinfo:
    from zoneinfo import ZoneInfo

    return ZoneInfo("Europe/London")


def reached(valued: dt.date, years: int, night: dt.date) -> bool:
    """The triggers page's rule, in its words: a valuation is `years` old on its anniversary
    that many years on; one of 29 February, in a year without one, on 28 February."""
    year = valued.year + years
    day = valued.day
    if (valued.month, valued.day) == (2, 29) and not calendar.isleap(year):
        day = 28
    return night >= dt.date(year, valued.month, day)


LEAP_LOANS = {
    # loan id: (last valuation date, current balance): small loans (five years) and large
    # loans (above £2.6 m: three years), valued on and around leap days.
    "LN-LEAP-1": (dt.date(2024, 2, 29), 150_000),
    "LN-LEAP-2": (dt.date(2023, 2, 28), 150_000),
    "LN-LEAP-3": (dt.date(2023, 3, 1), 150_000),
    "LN-LEAP-4": (dt.date(2025, 2, 28), 2_700_000),
    "LN-LEAP-5": (dt.date(2025, 3, 1), 2_700_000),
    "LN-LEAP-6": (dt.date(2026, 2, 28), 2_700_000),
    "LN-LEAP-7": (dt.date(2020, 2, 29), 2_700_000),
}


@pytest.mark.parametrize(
    "when",
    [
        dt.datetime(2028, 2, 28, 1, 30, tzinfo=dt.UTC),
        dt.datetime(2028, 2, 29, 1, 30, tzinfo=dt.UTC),
        dt.datetime(2029, 2, 27, 23, 59, 50, tzinfo=dt.UTC),
        dt.datetime(2029, 2, 28, 1, 30, tzinfo=dt.UTC),
        dt.datetime(2029, 3, 1, 1, 30, tzinfo=dt.UTC),
    ],
    ids=lambda when: f"{when:%Y-%m-%d}",
)
def test_valuations_on_and_around_leap_days_reach_their_anniversaries_by_the_page_s_rule(
    tmp_path: Path, when: dt.datetime
) -> None:
    """Loans last valued on 29 February and the days around it, run on the nights around
    leap days: each loan's `trigger_age` (five years) and `trigger_large_loan_age` (three,
    for a balance above £2.6 m) are what the triggers page's rule says for the run's UTC
    date."""
    source = tmp_path / "book.csv"
    lines = ["Loan Ref,Postcode,Property Type,Bedrooms,Current Balance,Last Valuation,"
             "Last Valuation Date"]  # fmt: skip
    for n, (loan, (valued, balance)) in enumerate(LEAP_LOANS.items()):
        postcode = ["SW1A 2AA", "M1 1AE", "LS6 2AB", "CF10 1AA", "BS1 4DJ", "NE1 7RU"][n % 6]
        lines.append(f"{loan},{postcode},terraced,3,{balance},400000,{valued:%d/%m/%Y}")
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    done = night([BATCHVAL, "run", str(source), "--out", str(out)], when, no_api())
    assert done.returncode == 0, done.stderr
    results = pl.read_parquet(out / "results.parquet").sort("Loan Ref")
    assert results.height == len(LEAP_LOANS)
    # The run's date: the UTC day it started on (a run started at 23:59:50 may end after).
    as_of = when.date()
    for row in results.iter_rows(named=True):
        valued, balance = LEAP_LOANS[row["Loan Ref"]]
        assert row["trigger_age"] is reached(valued, 5, as_of), row["Loan Ref"]
        large = reached(valued, 3, as_of) if balance > 2_600_000 else False
        assert row["trigger_large_loan_age"] is large, row["Loan Ref"]
