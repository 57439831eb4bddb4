"""Money a finance team can reconcile: every answer that carried a charge is a line of the
charges ledger, fresh, replay or uncertain, and the credits and balance reported are the
account's own (issue 20)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import LIVE, env_for, outputs, portfolio, run_cli

from batchval.engine.charges import SKEW, ServerClock, classify, stamp
from batchval.sandbox.server import RunningSandbox
from batchval.store.charges import FRESH, REPLAY, UNCERTAIN, ChargeLine
from batchval.store.checkpoint import Checkpoint

SENT = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.UTC)
S = dt.timedelta(seconds=1)


def clock(offset: dt.timedelta | None, *, dated: bool) -> ServerClock:
    """A clock that has seen one answer of an API `offset` ahead of batchval's clock."""
    seen = ServerClock()
    if offset is not None:
        received = SENT + 2 * S
        if dated:
            seen.observe_date((received + offset).strftime("%a, %d %b %Y %H:%M:%S GMT"), received)
        else:
            seen.observe(received + offset - 0.05 * S, received)
    return seen


@pytest.mark.parametrize("dated", [True, False])
@pytest.mark.parametrize(
    ("valued_at", "offset", "kind"),
    [
        (SENT + 0.2 * S, dt.timedelta(0), FRESH),  # valued as it was sent
        (SENT - 0.4 * S, dt.timedelta(0), FRESH),  # valuedAt cut to whole seconds
        (SENT - 3 * 3600 * S, dt.timedelta(0), REPLAY),  # another DIR, hours ago
        (SENT - 40 * S, dt.timedelta(0), REPLAY),  # another DIR, a run ago
        (SENT - 10 * 60 * S, None, REPLAY),  # no answer seen yet: further off than SKEW
    ],
)
def test_a_charge_is_told_by_when_it_was_made(
    valued_at: dt.datetime, offset: dt.timedelta | None, kind: str, dated: bool
) -> None:
    """Made before this DIR first sent the key (by the API's clock) is a replay; made
    after it is fresh, whether or not the API sends a Date header."""
    assert classify(valued_at, stamp(SENT), clock(offset, dated=dated))[0] == kind


def test_a_clock_behind_the_apis_is_measured_by_its_date_header() -> None:
    """batchval's clock a minute ahead: a fresh charge reads a minute before the send.
    With a Date header that is measured, and the charge is fresh; without one, nothing
    tells it from a replay a minute old, so it is uncertain, never counted."""
    behind = dt.timedelta(seconds=-60)
    valued_at = SENT + behind + 0.1 * S
    assert classify(valued_at, stamp(SENT), clock(behind, dated=True))[0] == FRESH
    kind, why = classify(valued_at, stamp(SENT), clock(behind, dated=False))
    assert kind == UNCERTAIN
    assert "Date header" in why
    replay = SENT + behind - 30 * S  # made half a minute before the send, by the API
    assert classify(replay, stamp(SENT), clock(behind, dated=True))[0] == REPLAY


@pytest.mark.parametrize(
    ("valued_at", "first_sent", "why"),
    [(None, stamp(SENT), "valuedAt"), (SENT, None, "first send")],
)
def test_missing_evidence_is_uncertain(
    valued_at: dt.datetime | None, first_sent: str | None, why: str
) -> None:
    """No readable valuedAt, or no record of the first send: uncertain, saying which."""
    kind, words = classify(valued_at, first_sent, ServerClock())
    assert kind == UNCERTAIN
    assert why in words


@given(
    offset=st.floats(min_value=-SKEW.total_seconds(), max_value=SKEW.total_seconds()),
    latency=st.floats(min_value=0.0, max_value=30.0),
    gap=st.floats(min_value=2.5, max_value=86_400.0),
)
def test_fresh_is_never_a_replay_and_a_replay_never_fresh(
    offset: float, latency: float, gap: float
) -> None:
    """For any clock difference within SKEW and any latency, with a Date header seen on
    the answer: a charge made after the send is fresh, one made `gap` (over 2.5 s)
    before it is a replay."""
    off = dt.timedelta(seconds=offset)
    received = SENT + dt.timedelta(seconds=latency) + 0.01 * S
    made = SENT + off + dt.timedelta(seconds=latency)  # the API's clock
    seen = ServerClock()
    seen.observe_date(made.strftime("%a, %d %b %Y %H:%M:%S GMT"), received)
    seen.observe(made, received)
    assert classify(made, stamp(SENT), seen)[0] == FRESH
    earlier = SENT + off - dt.timedelta(seconds=gap)
    assert classify(earlier, stamp(SENT), seen)[0] == REPLAY


def ledger_lines(served: RunningSandbox) -> set[tuple[str | None, str, int, int]]:
    return {
        (c.idempotency_key, c.resource, c.credits, c.balance_after)
        for c in served.sandbox.ledger.charges
        if c.client_id == LIVE.client_id
    }


def charges_file(out: Path) -> pl.DataFrame:
    return pl.read_parquet(out / "charges.parquet")


@pytest.mark.slow
def test_a_second_dir_the_same_day_reports_no_credits(
    served: RunningSandbox, tmp_path: Path
) -> None:
    """The same file into two DIRs the same UTC day: the second is answered free and says
    so (0 this time, every answer a replay, the account's balance); each DIR's charges
    reconcile with the API's ledger key by key."""
    source = portfolio(tmp_path / "book.csv", 40, duplicates=4)
    first, second = tmp_path / "first", tmp_path / "second"
    assert run_cli("run", str(source), "--out", str(first), env=env_for(served)).returncode == 0
    charged = ledger_lines(served)
    assert len(charged) == 36
    done = run_cli("run", str(source), "--out", str(second), env=env_for(served))
    assert done.returncode == 0, done.stderr
    assert ledger_lines(served) == charged  # nothing charged the second time
    balance = served.sandbox.balances()[LIVE.client_id]
    for out, fresh in ((first, 360), (second, 0)):
        summary = outputs(out)[2]
        assert summary["credits_charged"] == {"this_invocation": fresh, "total": fresh}
        assert summary["last_known_balance"] == balance
        assert summary["charges"]["uncertain_calls"] == 0
        lines = charges_file(out)
        assert lines.height == 36
        assert set(lines["kind"].to_list()) == {"fresh" if fresh else "replay"}
        mine = {
            (r["idempotency_key"], r["valuation_id"], r["credits"], r["balance_after"])
            for r in lines.iter_rows(named=True)
        }
        assert mine == charged
    assert outputs(second)[2]["charges"]["replayed_calls"] == 36
    assert "credits: 0 this time, 0 in all; 36 replay(s) answered free" in done.stdout
    status = run_cli("status", str(second), "--json", env=env_for(served))
    assert '"this_time": 0' in status.stdout
    assert outputs(second)[0]["credits_charged"].sum() == 0


@pytest.mark.slow
def test_retries_after_charged_504s_and_drops_count_each_charge_once(
    served: RunningSandbox, tmp_path: Path
) -> None:
    """504s and cut connections after the charge: the retry is answered with the first
    call's charge, which is this DIR's own: counted once, fresh, and the figures equal
    the API's ledger and balance."""
    served.sandbox.config.faults.timeout_504_after_commit_share = 0.3
    served.sandbox.config.faults.drop_after_commit_share = 0.2
    source = portfolio(tmp_path / "book.csv", 30)
    out = tmp_path / "out"
    # Half the calls fail, replays too: a request may fail all six of an invocation's
    # attempts (about one run in three), and the run then stops 75, to be run again.
    for _ in range(4):
        done = run_cli("run", str(source), "--out", str(out), env=env_for(served))
        if done.returncode != 75:
            break
    assert done.returncode == 0, done.stderr
    statuses = served.sandbox.ledger.requests_by_status()
    assert statuses.get(504, 0) > 0  # the faults struck
    summary = outputs(out)[2]
    assert summary["credits_charged"]["total"] == 300
    assert served.sandbox.ledger.credits_charged(LIVE.client_id) == 300
    assert summary["last_known_balance"] == served.sandbox.balances()[LIVE.client_id]
    lines = charges_file(out)
    assert lines["kind"].to_list() == ["fresh"] * 30
    assert {(r[0], r[1]) for r in lines.select("idempotency_key", "credits").rows()} == {
        (key, credits) for key, _, credits, _ in ledger_lines(served)
    }


def test_the_balance_is_the_lowest_of_the_charges_made_last(tmp_path: Path) -> None:
    """Two calls served at once: the later valuedAt may carry the earlier, higher balance;
    the balance shown is the lowest of the charges made within a call's length of the
    latest, never one from before (a balance since topped up) nor a replay's."""
    db = Checkpoint.open(tmp_path)

    def line(key: str, seconds: float, balance: int, kind: str = FRESH) -> ChargeLine:
        at = stamp(SENT + dt.timedelta(seconds=seconds))
        return ChargeLine("valuation", key, None, at, 10, balance, kind, "", 1, at)

    for charge in (
        line("a", -120, 500),  # before a top-up: lower, but long before
        line("b", 0.0, 980),  # charged last, stamped first
        line("c", 0.2, 990),  # stamped last, charged before b
        line("d", 1.0, 100, REPLAY),  # a replay never stands for the balance
    ):
        db.record_charge(charge)
    money = db.money(1)
    assert (money.balance, money.in_all, money.replayed_calls) == (980, 30, 1)
    db.close()
