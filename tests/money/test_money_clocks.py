"""Money under any clock and any stamp precision (issue 52): batchval as a process whose wall
clock is minutes off the API's (libfaketime), against the sandbox in this process stamping
`valuedAt` to whole seconds, milliseconds or microseconds. The sandbox's ledger is the
referee: what a DIR reports as spent equals what the account was charged for its calls,
and `--max-credits` is never passed.
"""

from __future__ import annotations

import datetime as dt
import signal
import sqlite3
import subprocess
import threading
from pathlib import Path

import clocks
import pytest
from support import BATCHVAL, LIVE, InProcess, Ran, env_for, outputs, portfolio, wait_until

from batchval._internal.sandbox.config import Faults
from batchval._internal.sandbox.server import RunningSandbox

pytestmark = pytest.mark.slow

PRECISIONS = pytest.mark.parametrize("to", ["second", "milli", "micro"])
# This machine's wall clock against the API's, in seconds: behind, a little, a lot ahead.
SKEWS = pytest.mark.parametrize("skew", [-600, 2, 180, 600], ids=lambda s: f"{s:+d}s")


def charged(served: RunningSandbox) -> int:
    """The credits the sandbox charged the live account, in all."""
    return served.sandbox.ledger.credits_charged(LIVE.client_id)


def run(
    batchval: InProcess,
    served: RunningSandbox,
    source: Path,
    out: Path,
    *extra: str,
    skew: int = 0,
) -> Ran | subprocess.CompletedProcess[str]:
    """`batchval run` in this process; as a process of its own, its wall clock `skew`
    seconds off the API's, when `skew` (a clock is a process's)."""
    env = env_for(served)
    if not skew:
        return batchval("run", str(source), "--out", str(out), *extra, env=env)
    env = clocks.at(clocks.true_now() + dt.timedelta(seconds=skew), env)
    return subprocess.run(
        [BATCHVAL, "run", str(source), "--out", str(out), *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def money(out: Path) -> tuple[int, int, int, int]:
    """(this time, in all, uncertain credits, replayed credits) of DIR's summary."""
    figures = outputs(out)[2]["charges"]
    return (
        figures["this_time"],
        figures["in_all"],
        figures["uncertain_credits"],
        figures["replayed_credits"],
    )


@PRECISIONS
def test_one_calm_dir_and_a_second_after_it_report_what_the_ledger_charged(
    served: RunningSandbox, tmp_path: Path, to: str, batchval: InProcess
) -> None:
    """One DIR of 40 rows, nobody else on the account: this time and in all equal what the
    ledger charged, none uncertain. The same file into a second DIR after it: nothing
    charged, nothing counted spent."""
    served.sandbox.config.stamp_precision = to
    source = portfolio(tmp_path / "book.csv", 40)
    first = run(batchval, served, source, tmp_path / "a")
    assert first.returncode == 0, first.stderr
    assert charged(served) == 400
    assert money(tmp_path / "a")[:3] == (400, 400, 0)
    assert "credits: 400 this time, 400 in all" in first.stdout
    # Every first send is placed on the API's clock, the very first too (the token's Date,
    # heard before it: the token URL is the API's host).
    with sqlite3.connect(tmp_path / "a" / "checkpoint.sqlite") as db:
        unplaced = db.execute(
            "SELECT COUNT(*) FROM requests WHERE first_sent IS NULL OR first_sent = 'unknown'"
        ).fetchone()[0]
    db.close()
    assert unplaced == 0
    second = run(batchval, served, source, tmp_path / "b")
    assert second.returncode == 0, second.stderr
    assert charged(served) == 400
    this_time, in_all, uncertain, replayed = money(tmp_path / "b")
    assert (this_time, in_all) == (0, 0)
    assert uncertain + replayed == 400


@pytest.mark.parametrize(
    ("to", "skew"),
    # Every skew with whole-second stamps (the coarsest: the most rounding), and
    # milliseconds at the two skews nearest and furthest from the API's clock.
    [("second", s) for s in (-600, 2, 180, 600)] + [("milli", 2), ("milli", -600)],
    ids=lambda value: f"{value:+d}s" if isinstance(value, int) else str(value),
)
def test_a_skewed_machine_clock_counts_what_the_ledger_charged(
    served: RunningSandbox, tmp_path: Path, skew: int, to: str, batchval: InProcess
) -> None:
    """This machine's clock ten minutes behind, two seconds, three minutes or ten minutes
    ahead of the API's: a calm DIR's fresh credits equal the ledger's, and the summary
    says how far off the clock is (a warning beyond a minute)."""
    served.sandbox.config.stamp_precision = to
    source = portfolio(tmp_path / "book.csv", 30)
    done = run(batchval, served, source, tmp_path / "out", skew=skew)
    assert done.returncode == 0, done.stderr
    assert charged(served) == 300
    assert money(tmp_path / "out")[:3] == (300, 300, 0)
    offset = outputs(tmp_path / "out")[2]["api_clock"]
    assert offset["at_least_seconds"] - 1 <= -skew <= offset["at_most_seconds"] + 1
    assert ("valuations.clock.offset" in done.stderr) == (abs(skew) > 60)


@SKEWS
def test_the_spending_cap_holds_whatever_the_machine_clock(
    served: RunningSandbox, tmp_path: Path, skew: int, batchval: InProcess
) -> None:
    """`--max-credits 300` on 60 rows, whole-second stamps, the machine's clock off the
    API's: the ledger charges at most 300, the run stops 75 `max_credits`, and what it
    reports spent is what was charged; the same command again spends its own 300."""
    served.sandbox.config.stamp_precision = "second"
    source = portfolio(tmp_path / "book.csv", 60)
    out = tmp_path / "out"
    done = run(batchval, served, source, out, "--max-credits", "300", skew=skew)
    assert done.returncode == 75, done.stderr
    assert outputs(out)[2]["stop"]["reason"] == "max_credits"
    assert 0 < charged(served) <= 300
    assert money(out)[:2] == (charged(served), charged(served))
    before = charged(served)
    again = run(batchval, served, source, out, "--max-credits", "300", skew=skew)
    assert again.returncode in (0, 75), again.stderr
    assert charged(served) - before <= 300
    assert money(out)[:2] == (charged(served) - before, charged(served))


@pytest.mark.parametrize(
    ("to", "skew"),
    [("second", 0), ("milli", 0), ("micro", 0), ("second", -600), ("second", 180)],
    ids=["second", "milli", "micro", "second-600s", "second+180s"],
)
def test_a_dir_through_kills_reports_what_the_ledger_charged(
    served: RunningSandbox, tmp_path: Path, to: str, skew: int, batchval: InProcess
) -> None:
    """A DIR of 60 rows killed (SIGKILL) three times while sending, then run to the end,
    its machine's clock on the API's or minutes off it: in all equals what the ledger
    charged, none uncertain, no key charged twice."""
    served.sandbox.config.stamp_precision = to
    served.sandbox.config.faults.latency_ms = 30
    source = portfolio(tmp_path / "book.csv", 60)
    out = tmp_path / "out"
    env = env_for(served)
    if skew:
        env = clocks.at(clocks.true_now() + dt.timedelta(seconds=skew), env)
    for kill in range(3):
        with subprocess.Popen(
            [BATCHVAL, "run", str(source), "--out", str(out), "--concurrency", "4"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ) as process:
            target = 100 * (kill + 1)
            wait_until(
                lambda target=target: charged(served) >= target,  # type: ignore[misc]
                60,
                f"{target} credits",
                process=process,
            )
            process.send_signal(signal.SIGKILL)
    done = run(batchval, served, source, out, skew=skew)
    assert done.returncode == 0, done.stderr
    assert served.sandbox.ledger.keys_charged_twice() == []
    assert charged(served) == 600
    this_time, in_all, uncertain, _ = money(out)
    assert (in_all, uncertain) == (600, 0)
    assert this_time <= 600


def test_the_api_clock_moved_mid_run_counts_no_charge_twice_and_loses_none(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """The API's clock (its Date headers and stamps) jumps an hour ahead while a DIR of 60
    rows is sending, whole-second stamps: what the DIR reports equals the ledger."""
    served.sandbox.config.stamp_precision = "second"
    served.sandbox.config.faults.latency_ms = 30
    source = portfolio(tmp_path / "book.csv", 60)

    def jump() -> None:
        wait_until(lambda: charged(served) >= 200, 60, "200 credits")
        served.sandbox.clock.advance(3600)

    jumper = threading.Thread(target=jump)
    jumper.start()
    done = run(batchval, served, source, tmp_path / "out", "--concurrency", "4")
    jumper.join()
    assert done.returncode == 0, done.stderr
    assert served.sandbox.ledger.keys_charged_twice() == []
    assert charged(served) == 600
    assert money(tmp_path / "out")[:3] == (600, 600, 0)


@pytest.mark.parametrize("to", ["second", "milli"])
def test_two_dirs_at_once_never_report_more_than_the_ledger_charged(
    served: RunningSandbox, tmp_path: Path, to: str
) -> None:
    """The same 48 rows into two DIRs started at once: together they report at most what
    the ledger charged, and what they report fresh or uncertain covers it."""
    served.sandbox.config.stamp_precision = to
    served.sandbox.config.faults.latency_ms = 20
    source = portfolio(tmp_path / "book.csv", 48)
    env = env_for(served)
    processes = [
        subprocess.Popen(
            [BATCHVAL, "run", str(source), "--out", str(tmp_path / name)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    for process in processes:
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr
    assert served.sandbox.ledger.keys_charged_twice() == []
    spent = charged(served)
    assert spent == 480
    a, b = money(tmp_path / "a"), money(tmp_path / "b")
    assert a[1] + b[1] <= spent
    assert a[1] + b[1] + a[2] + b[2] >= spent


def test_a_charge_met_after_two_409s_is_never_counted_fresh_however_late_its_stamp(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """DIR a's call holds the key (the API's work held by the test, a killed at its 504);
    DIR b's first send and its retry are both answered 409, then a's valuation is stamped
    seconds after b's retry went out. The answer b then gets is a's charge replayed: b,
    having met another holder, counts it uncertain, never fresh, however late the stamp,
    and a and b together report at most what the ledger charged."""
    served.sandbox.config.request_timeout_seconds = 0.3
    served.sandbox.set_faults(Faults(slow_share=1.0, slow_seconds=3600))
    source = portfolio(tmp_path / "book.csv", 1)
    env = env_for(served)

    def start(name: str) -> subprocess.Popen[str]:
        command = [BATCHVAL, "run", str(source), "--out", str(tmp_path / name)]
        return subprocess.Popen(
            [*command, "--run-id", "night-1"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    def status(code: int) -> int:
        return served.sandbox.ledger.requests_by_status().get(code, 0)

    a = start("a")
    wait_until(lambda: status(504) > 0, 60, "a's 504", process=a)
    a.send_signal(signal.SIGKILL)
    a.communicate(timeout=30)
    held = status(409)  # a's own retries, if any went out before the kill
    b = start("b")
    wait_until(lambda: status(409) >= held + 2, 60, "b's two 409s", process=b)
    served.sandbox.clock.advance(2)  # a's stamp comes 2 s after b's retry, on the API's clock
    served.sandbox.finish_slow_work()
    _, stderr = b.communicate(timeout=120)
    assert b.returncode == 0, stderr
    assert charged(served) == 10
    this_time, in_all, uncertain, replayed = money(tmp_path / "b")
    assert (this_time, in_all) == (0, 0), money(tmp_path / "b")
    assert uncertain + replayed == 10
    again = batchval(
        "run", str(source), "--out", str(tmp_path / "a"), "--run-id", "night-1", env=env
    )
    assert again.returncode == 0, again.stderr
    assert money(tmp_path / "a")[1] + in_all <= charged(served)
