"""The daily limit near midnight with batchval's clock a minute off the API's, at the
command line in this process (the `batchval` fixture) against the sandbox over loopback
(docs: README, "The daily limit and midnight").

The sandbox is put shortly before its midnight UTC (`sandbox.clock.advance`) and batchval
by as much, plus or minus a minute (BATCHVAL_CLOCK_OFFSET_SECONDS): both clocks then tick
together, a minute apart. The sandbox's ledger, on its own clock, is the referee: no call
reaches it before its midnight, and the run carries on soon after it.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

import pytest
from support import LIVE, InProcess, Ran, assert_accounted, assert_paid_once, env_for, portfolio

from batchval._internal.sandbox.ledger import RequestRecord
from batchval._internal.sandbox.server import RunningSandbox
from batchval._internal.sending.midnight import next_midnight

# End to end: the CLI in this process against the sandbox (`make test-fast` leaves it out).
pytestmark = [pytest.mark.slow, pytest.mark.dates]

DAY = 86_400
# batchval's clock a minute ahead of the sandbox's, and a minute behind.
SKEWS = pytest.mark.parametrize("skew", [60, -60], ids=["ahead", "behind"])
LIMIT, ROWS = 5, 8  # the day's calls, and the rows: 3 left for after midnight
# From the sandbox's answer to batchval's reading of it, and Retry-After's rounding.
SLACK = dt.timedelta(seconds=5)


class Skewed:
    """The sandbox `before` seconds from its midnight, and batchval's clock `skew` seconds
    off the sandbox's."""

    def __init__(self, served: RunningSandbox, before: int, skew: int) -> None:
        self.served, self.skew = served, skew
        clock = served.sandbox.clock
        # Forward only: the sandbox's clock never goes back.
        self.offset = float((clock.seconds_to_midnight() - before) % DAY)
        clock.advance(self.offset)
        self.midnight = next_midnight(clock.now())  # the sandbox's: the API's midnight
        # The same instant on batchval's clock.
        self.midnight_seen = self.midnight + dt.timedelta(seconds=skew)

    def env(self) -> dict[str, str]:
        return env_for(self.served, BATCHVAL_CLOCK_OFFSET_SECONDS=str(self.offset + self.skew))

    def past_midnight(self, seconds: float = 2.0) -> None:
        """Both clocks to `seconds` after the sandbox's midnight, still a minute apart."""
        clock = self.served.sandbox.clock
        step = (self.midnight - clock.now()).total_seconds() + seconds
        clock.advance(step)
        self.offset += step


def stop_of(done: Ran, out: Path) -> dict[str, Any]:
    assert done.returncode == 75, done.stderr[-3000:]
    assert "batchval: daily_limit: " in done.stderr
    stop: dict[str, Any] = json.loads((out / "summary.json").read_text())["stop"]
    assert stop["reason"] == "daily_limit", stop
    return stop


def assert_the_api_s_midnight(stop: dict[str, Any], skewed: Skewed) -> None:
    """not_before is the sandbox's midnight as batchval's clock shows it: not a day later,
    not a minute later, never earlier."""
    not_before = dt.datetime.fromisoformat(stop["not_before"])
    assert skewed.midnight_seen <= not_before <= skewed.midnight_seen + SLACK, (
        not_before,
        skewed.midnight_seen,
    )


def after_the_limit(served: RunningSandbox) -> list[RequestRecord]:
    """Every call the sandbox saw after its first daily_limit answer."""
    requests = served.sandbox.ledger.requests
    first = next(n for n, r in enumerate(requests) if r.code == "daily_limit")
    return requests[first + 1 :]


def assert_nothing_before_midnight(served: RunningSandbox, skewed: Skewed) -> None:
    """From the sandbox's side: calls after the limit came after its midnight, on its own
    clock; none before a deadline it gave; the day's calls split as the limit allows."""
    late = after_the_limit(served)
    assert late, "nothing was sent after midnight"
    early = [r.at for r in late if r.at < skewed.midnight]
    assert early == [], f"calls before the sandbox's midnight {skewed.midnight}: {early}"
    assert served.sandbox.ledger.early_requests() == []
    assert sorted(served.sandbox.ledger.calls_per_day(LIVE.client_id).values()) == [
        ROWS - LIMIT,
        LIMIT,
    ]


@SKEWS
def test_a_re_run_after_the_api_s_midnight_resumes(
    served: RunningSandbox, tmp_path: Path, skew: int, batchval: InProcess
) -> None:
    """Limit used up 30 s before the sandbox's midnight, batchval's clock a minute off:
    75 with not_before = the sandbox's midnight; a re-run before it sends nothing; one
    2 s after it completes, and no call reached the sandbox before its midnight."""
    skewed = Skewed(served, 30, skew)
    served.sandbox.account(LIVE.client_id).daily_limit = LIMIT
    out = tmp_path / "out"
    args = ["run", str(portfolio(tmp_path / "book.csv", ROWS)), "--out", str(out)]
    args += ["--concurrency", "1"]
    assert_the_api_s_midnight(stop_of(batchval(*args, env=skewed.env()), out), skewed)
    sent = len(served.sandbox.ledger.requests)
    stop_of(batchval(*args, env=skewed.env()), out)
    assert len(served.sandbox.ledger.requests) == sent, "a call went out before midnight"
    skewed.past_midnight()
    done = batchval(*args, env=skewed.env())
    assert done.returncode == 0, done.stderr[-3000:]
    assert_nothing_before_midnight(served, skewed)
    assert_accounted(out, ROWS)
    assert_paid_once(served, out)


@SKEWS
@pytest.mark.parametrize("how", ["one-invocation", "re-run"])
def test_wait_for_midnight_resumes_at_the_api_s_midnight(
    served: RunningSandbox, tmp_path: Path, skew: int, how: str, batchval: InProcess
) -> None:
    """--wait-for-midnight, batchval's clock a minute off the sandbox's, the limit used up
    10 s before the sandbox's midnight: the run sleeps until that midnight (not the next
    one) and completes; the wait ends within seconds of it, and no call comes early. Once
    in the invocation that met the limit, once in a re-run that found it stored."""
    skewed = Skewed(served, 10, skew)
    served.sandbox.account(LIVE.client_id).daily_limit = LIMIT
    out = tmp_path / "out"
    args = ["run", str(portfolio(tmp_path / "book.csv", ROWS)), "--out", str(out)]
    args += ["--concurrency", "1"]
    if how == "re-run":
        assert_the_api_s_midnight(stop_of(batchval(*args, env=skewed.env()), out), skewed)
    done = batchval(*args, "--wait-for-midnight", env=skewed.env())
    finished = served.sandbox.clock.now()
    assert done.returncode == 0, done.stderr[-3000:]
    assert "engine.sending.daily_limit.sleeping" in done.stderr
    assert finished - skewed.midnight < dt.timedelta(seconds=20), "resumed late"
    assert_nothing_before_midnight(served, skewed)
    assert_accounted(out, ROWS)
    assert_paid_once(served, out)


def test_verify_after_the_api_s_midnight_reads(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A run stopped at the limit keeps not_before; verify, on the same clock a minute
    ahead, reads nothing before the sandbox's midnight and reads 2 s after it."""
    skewed = Skewed(served, 30, 60)
    served.sandbox.account(LIVE.client_id).daily_limit = LIMIT
    out = tmp_path / "out"
    args = ["run", str(portfolio(tmp_path / "book.csv", ROWS)), "--out", str(out)]
    assert_the_api_s_midnight(stop_of(batchval(*args, env=skewed.env()), out), skewed)
    sent = len(served.sandbox.ledger.requests)
    held = batchval("verify", str(out), env=skewed.env())
    assert held.returncode == 75, held.stderr[-3000:]
    assert len(served.sandbox.ledger.requests) == sent
    skewed.past_midnight()
    read = batchval("verify", str(out), env=skewed.env())
    assert read.returncode == 0, read.stderr[-3000:]
    reads = served.sandbox.ledger.requests[sent:]
    assert len(reads) == LIMIT
    assert all(r.method == "GET" and r.at >= skewed.midnight for r in reads)


def test_streets_after_the_api_s_midnight_reads(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """streets meets the same limit with its clock a minute ahead: not_before is the
    sandbox's midnight, and a re-run 2 s after it reads the rest."""
    skewed = Skewed(served, 30, 60)
    served.sandbox.account(LIVE.client_id).daily_limit = 2
    source = tmp_path / "homes.csv"
    postcodes = ["SW1A 2AA", "M1 1AE", "LS6 2AB", "CF10 1AA"]
    source.write_text(
        "loan_id,postcode\n" + "".join(f"L{n},{p}\n" for n, p in enumerate(postcodes)),
        encoding="utf-8",
    )
    out = tmp_path / "out"
    args = ["streets", str(source), "--out", str(out), "--concurrency", "1"]
    assert_the_api_s_midnight(stop_of(batchval(*args, env=skewed.env()), out), skewed)
    skewed.past_midnight()
    started = time.monotonic()
    done = batchval(*args, env=skewed.env())
    assert done.returncode == 0, done.stderr[-3000:]
    assert time.monotonic() - started < 30
    late = after_the_limit(served)
    assert late, "nothing was read after midnight"
    assert all(r.at >= skewed.midnight for r in late)
    assert served.sandbox.ledger.early_requests() == []
    assert sorted(served.sandbox.ledger.calls_per_day(LIVE.client_id).values()) == [2, 2]
