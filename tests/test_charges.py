"""Money a finance team can reconcile: every answer that carried a charge is a line of the
charges ledger, fresh, replay or uncertain, and the credits and balance reported are the
account's own (issue 20)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import LIVE, InProcess, env_for, outputs, portfolio, run_in_process

from batchval.engine.charges import (
    AGREEMENT,
    CONCURRENT,
    CONTESTED,
    SKEW,
    Offset,
    Received,
    ServerClock,
    api_time,
    classify,
    place_charges,
    stamp,
)
from batchval.sandbox.server import RunningSandbox
from batchval.store.charges import (
    FRESH,
    REPLAY,
    UNCERTAIN,
    ChargeLine,
    Doubtful,
    lowest_since_top_up,
    precision,
)
from batchval.store.checkpoint import Checkpoint
from batchval.store.database import Database
from batchval.valuations.answers import valuation_charge

SENT = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.UTC)
S = dt.timedelta(seconds=1)


def http_date(when: dt.datetime) -> str:
    return when.strftime("%a, %d %b %Y %H:%M:%S GMT")


def clock(offset: dt.timedelta | None, *, dated: bool) -> ServerClock:
    """A clock that has seen one answer of an API `offset` ahead of batchval's clock, to a
    request sent at SENT and received 2 s later (with its Date header, when `dated`)."""
    seen = ServerClock()
    if offset is not None:
        received = SENT + 2 * S
        seen.observe(received + offset - 0.05 * S, received)
        if dated:
            seen.observe_date(http_date(received + offset), received, SENT)
    return seen


@pytest.mark.parametrize("dated", [True, False])
@pytest.mark.parametrize(
    ("valued_at", "offset", "kind"),
    [
        (SENT + 0.2 * S, dt.timedelta(0), FRESH),  # valued as it was sent
        (SENT - 0.7 * S, dt.timedelta(0), REPLAY),  # 0.7 s before it, to the 0.1 s
        (SENT - 3 * 3600 * S, dt.timedelta(0), REPLAY),  # another DIR, hours ago
        (SENT - 40 * S, dt.timedelta(0), REPLAY),  # another DIR, a run ago
        (SENT - 10 * 60 * S, None, REPLAY),  # no answer seen yet: further off than SKEW
        (SENT - 0.2 * S, None, REPLAY),  # nor does one show the clocks apart
        (SENT - 0.01 * S, None, UNCERTAIN),  # within AGREEMENT: too near to tell
        # The API's clock a minute ahead of batchval's: its stamps show it.
        (SENT + 60 * S + 0.2 * S, 60 * S, FRESH),
        (SENT + 60 * S - 0.7 * S, 60 * S, REPLAY),
    ],
)
def test_a_charge_is_told_by_when_it_was_made(
    valued_at: dt.datetime, offset: dt.timedelta | None, kind: str, dated: bool
) -> None:
    """Made before this DIR first sent the key (by the API's clock) is a replay; made
    after it is fresh, whether or not the API sends a Date header."""
    assert classify(valued_at, stamp(SENT), clock(offset, dated=dated))[0] == kind


@pytest.mark.parametrize(
    ("valued_at", "kind"),
    [(SENT - 60 * S + 0.2 * S, FRESH), (SENT - 60 * S - 0.7 * S, REPLAY)],
)
def test_a_clock_a_minute_behind_is_shown_by_the_date_header(
    valued_at: dt.datetime, kind: str
) -> None:
    """The API's clock a minute behind batchval's: the answer's Date header shows it (the
    API answered after the send, less than a second past its Date), and its stamps say
    by how much: fresh is fresh, a replay a replay."""
    assert classify(valued_at, stamp(SENT), clock(-60 * S, dated=True))[0] == kind


@pytest.mark.parametrize(
    ("sent", "valued_at", "lower", "kind"),
    [
        # valuedAt cut to whole seconds: 12:00:00 stands for up to 12:00:00.999...
        (SENT + 0.7 * S, SENT, -0.3 * S, UNCERTAIN),  # ... before or after a send at .700
        (SENT - 0.3 * S, SENT, -0.3 * S, FRESH),  # ... after a send at 11:59:59.700
        (SENT + S, SENT, -0.3 * S, UNCERTAIN),  # ... before a send at :01, not surely
        (SENT + S, SENT, 0 * S, REPLAY),  # ... before it, the clocks measured equal
        # Cut to milliseconds: 12:00:00.005 stands for up to 12:00:00.006.
        (SENT + 0.006 * S, SENT + 0.005 * S, 0 * S, REPLAY),
        (SENT + 0.0055 * S, SENT + 0.005 * S, 0 * S, FRESH),  # within its millisecond
        (SENT + 0.0045 * S, SENT + 0.005 * S, 0 * S, FRESH),
        (SENT + 0.02 * S, SENT + 0.005 * S, -0.6 * S, UNCERTAIN),  # 15 ms before the send
        # A second DIR started at once after the first: the first's last charge 0.3 s
        # before the send, the API's clock known only to a second (a Date header), but
        # nothing showing the clocks apart: they are taken to agree (AGREEMENT).
        (SENT, SENT - 0.3 * S, -0.6 * S, REPLAY),
        (SENT, SENT - 0.3 * S, -0.2 * S, REPLAY),
        (SENT, SENT - 0.03 * S, -0.6 * S, UNCERTAIN),
    ],
)
def test_a_stamp_is_read_to_the_precision_its_digits_show(
    sent: dt.datetime, valued_at: dt.datetime, lower: dt.timedelta, kind: str
) -> None:
    """The one-second edge: a stamp with no fraction may have been cut to whole seconds,
    one with digits is as precise as its last digit. A stamp that may stand for an instant
    before the send and one after it is uncertain: never spent, never free."""
    seen = ServerClock()
    seen.observe(SENT + lower, SENT)  # an instant of the API's clock `lower` from ours
    assert classify(valued_at, stamp(sent), seen)[0] == kind


def test_precision_is_the_last_digit_that_is_not_0() -> None:
    """`.005` was cut to milliseconds at most, `.5` to tenths, no fraction to seconds."""
    assert precision(SENT) == S
    assert precision(SENT + 0.005 * S) == dt.timedelta(milliseconds=1)
    assert precision(SENT + 0.5 * S) == dt.timedelta(milliseconds=100)
    assert precision(SENT + dt.timedelta(microseconds=7)) == dt.timedelta(microseconds=1)


@pytest.mark.parametrize("valued", [0.1, 0.0, 0.25])  # .100, .000, .250 (a key of DIR A)
def test_a_stamp_is_read_to_the_finest_digits_the_api_has_shown(valued: float) -> None:
    """One stamp in ten of an API that writes milliseconds ends in 0, one in a thousand is
    `.000`. Alone, such a stamp may have been cut coarser; once the API has written
    `12:00:00.123`, its stamps are to the millisecond, and a charge 55 ms before a second
    DIR's send is a replay. An API seen writing only whole seconds stays read to seconds."""
    at = SENT + valued * S
    sent = stamp(at + 0.055 * S)
    seen = ServerClock()
    assert seen.precision(at) == precision(at) > dt.timedelta(milliseconds=1)
    assert classify(at, sent, seen)[0] == UNCERTAIN
    seen.observe_stamp(SENT + 0.3 * S)  # tenths: finer than a second, not yet milliseconds
    seen.observe_stamp(SENT)
    assert seen.precision(SENT) == 0.1 * S
    seen.observe_stamp(SENT - 2.123 * S)
    assert seen.precision(at) == dt.timedelta(milliseconds=1)
    assert classify(at, sent, seen)[0] == REPLAY
    whole = ServerClock()
    for earlier in range(5):
        whole.observe_stamp(SENT - earlier * S)
    assert whole.precision(at) == precision(at)
    assert classify(at, sent, whole)[0] == UNCERTAIN


def test_the_clocks_are_taken_to_agree_until_the_answers_show_them_apart() -> None:
    """No answer says otherwise: the clocks agree within AGREEMENT, the API's not ahead.
    A Date header bounds the API's clock from above (the API answered after the send, less
    than a second past its Date): a minute behind batchval's shows, and from then on the
    API's clock is taken to be as far behind as its stamps measured."""
    seen = ServerClock()
    assert seen.offset() == Offset(-AGREEMENT, dt.timedelta(0), apart=False)
    received = SENT + 0.1 * S
    behind = -60 * S
    seen.observe(received + behind - 0.002 * S, received)  # a fresh stamp: lower bound
    assert seen.offset() == Offset(-AGREEMENT, dt.timedelta(0), apart=False)
    seen.observe_date(http_date(received + behind), received, SENT)
    assert seen.upper < -58 * S
    assert seen.offset() == Offset(behind - 0.002 * S, behind - 0.002 * S, apart=True)
    ahead = ServerClock()
    ahead.observe(received + 60 * S - 0.002 * S, received)
    assert ahead.offset().apart
    assert ahead.offset().fresh_from == 60 * S - 0.002 * S


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
    offset=st.one_of(
        st.floats(min_value=-AGREEMENT.total_seconds(), max_value=SKEW.total_seconds()),
        st.floats(min_value=-SKEW.total_seconds(), max_value=-32.0),
    ),
    latency=st.floats(min_value=0.001, max_value=30.0),
    gap=st.floats(min_value=2.5, max_value=86_400.0),
)
def test_fresh_is_never_a_replay_and_a_replay_never_fresh(
    offset: float, latency: float, gap: float
) -> None:
    """For any clock difference within AGREEMENT, any with the API's clock ahead, and any
    with the API's clock behind by more than one answer's length and a second (which the
    answer's Date shows), within SKEW, and any latency: a charge made after the send is
    never a replay (fresh when it is stamped after the send by batchval's clock too), one
    made `gap` (over 2.5 s) before it a replay. (Behind by between AGREEMENT
    and about a second, one answer cannot show it: docs/explanation/keys-and-charges.md.)"""
    off = dt.timedelta(seconds=offset)
    received = SENT + dt.timedelta(seconds=latency) + 0.01 * S
    made = SENT + off + dt.timedelta(seconds=latency)  # the API's clock
    seen = ServerClock()
    seen.observe_date(http_date(made), received, SENT)
    seen.observe(made, received)
    kind = classify(made, stamp(SENT), seen)[0]
    assert kind != REPLAY
    if offset + latency >= 0:  # else the API behind by under AGREEMENT: maybe uncertain
        assert kind == FRESH
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
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """The same file into two DIRs the same UTC day: the second is answered free and says
    so (0 this time, every answer a replay, the account's balance); each DIR's charges
    reconcile with the API's ledger key by key."""
    source = portfolio(tmp_path / "book.csv", 40, duplicates=4)
    first, second = tmp_path / "first", tmp_path / "second"
    assert batchval("run", str(source), "--out", str(first), env=env_for(served)).returncode == 0
    charged = ledger_lines(served)
    assert len(charged) == 36
    done = batchval("run", str(source), "--out", str(second), env=env_for(served))
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
    status = batchval("status", str(second), "--json", env=env_for(served))
    assert '"this_time": 0' in status.stdout
    assert outputs(second)[0]["credits_charged"].sum() == 0


@pytest.mark.slow
def test_retries_after_charged_504s_and_drops_count_each_charge_once(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
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
        done = batchval("run", str(source), "--out", str(out), env=env_for(served))
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


def test_the_balance_is_the_lowest_since_the_last_top_up(tmp_path: Path) -> None:
    """Two calls served at once: the later valuedAt may carry the earlier, higher balance;
    the balance shown is the lowest the answers gave, a replay's too (the balance after a
    real charge), never one from before a top-up."""
    db = Checkpoint(Database.open(tmp_path))

    def line(key: str, seconds: float, balance: int, kind: str = FRESH) -> ChargeLine:
        at = stamp(SENT + dt.timedelta(seconds=seconds))
        return ChargeLine("valuation", key, None, at, 10, balance, kind, "", 1, at)

    for charge in (
        line("a", -120, 500),  # before a top-up: lower, but long before
        line("b", 0.0, 980),  # charged last, stamped first
        line("c", 0.2, 990),  # stamped last, charged before b
        line("d", 1.0, 970, REPLAY),  # a replay of a charge made after b
    ):
        db.database.charges.record(charge)
    money = db.database.charges.money(1)
    assert (money.balance, money.in_all, money.replayed_calls) == (970, 30, 1)
    db.database.close()


# Pairs of DIRs in one test: each a new file, so each first DIR charges afresh.
AT_ONCE_PAIRS = 8


@pytest.mark.slow  # sixteen runs end to end: make test, not test-fast
def test_a_second_dir_at_once_after_the_first_never_counts_a_replay_as_spent(
    served: RunningSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """The same 20 rows into DIR A, then at once into DIR B (in this process: B's first
    send comes well within a second of A's last charge, which a Date header cannot place):
    B spends nothing, every answer is a replay, and the balance shown is the account's,
    on every try (AT_ONCE_PAIRS files, each into its own pair of DIRs)."""
    env = env_for(served)
    for pair in range(AT_ONCE_PAIRS):
        source = portfolio(tmp_path / f"book-{pair}.csv", 20)
        source.write_text(source.read_text().replace("CASE-", f"CASE{pair}-"))
        first, second = tmp_path / f"a-{pair}", tmp_path / f"b-{pair}"
        code, _, _ = run_in_process(
            "run", str(source), "--out", str(first), env=env, monkeypatch=monkeypatch, capsys=capsys
        )
        assert code == 0
        charged = ledger_lines(served)
        code, said, _ = run_in_process(
            "run",
            str(source),
            "--out",
            str(second),
            env=env,
            monkeypatch=monkeypatch,
            capsys=capsys,
        )
        assert code == 0
        assert ledger_lines(served) == charged  # nothing charged the second time
        balance = served.sandbox.balances()[LIVE.client_id]
        assert outputs(first)[2]["credits_charged"] == {"this_invocation": 200, "total": 200}
        summary = outputs(second)[2]
        assert summary["credits_charged"] == {"this_invocation": 0, "total": 0}, pair
        money = summary["charges"]
        assert (money["replayed_calls"], money["uncertain_calls"]) == (20, 0), (
            pair,
            money,
            unplaced(first, second),
        )
        assert money["replayed_credits"] == 200, money
        assert summary["last_known_balance"] == balance == money["balance"]
        assert "credits: 0 this time, 0 in all" in said
        assert f"API credits left {balance}" in said


def unplaced(first: Path, second: Path) -> list[dict[str, Any]]:
    """DIR B's charges that are not replays, beside DIR A's line of the same key: what a
    failure needs to say why."""
    a, b = charges_file(first), charges_file(second)
    lines = b.filter(pl.col("kind") != "replay").join(a, on="item", how="left", suffix="_a")
    return lines.select("item", "at", "kind", "why", "received_at", "received_at_a").to_dicts()


class FakeLedger:
    """Constructed charges for `place_charges`: the lines to look at, and every line's
    (received_at, balanceAfter)."""

    def __init__(self, lines: list[Doubtful], received: list[tuple[float, int]]) -> None:
        self.lines = lines
        self.received = sorted((stamp(SENT + s * S), b) for s, b in received)
        self.placed: dict[int, tuple[str, str]] = {}

    def valuation_lines(self, invocation: int | None) -> list[Doubtful]:
        return [
            line for line in self.lines if line.invocation == invocation or line.kind == UNCERTAIN
        ]

    def received_balances(self) -> list[tuple[str, int]]:
        return self.received

    def place(self, line: Doubtful, kind: str, why: str) -> None:
        self.placed[line.line_id] = (kind, why)

    def kind(self, line: Doubtful) -> str:
        return self.placed.get(line.line_id, (line.kind, ""))[0]


def doubtful(
    line_id: int,
    valued: float | None,
    balance: int,
    sent: float,
    invocation: int = 1,
    kind: str = UNCERTAIN,
    why: str = "",
) -> Doubtful:
    at = None if valued is None else stamp(SENT + valued * S + dt.timedelta(microseconds=1))
    key = f"key-{line_id}"
    return Doubtful(line_id, key, at, balance, invocation, kind, why, stamp(SENT + sent * S))


@pytest.mark.parametrize(
    ("line", "received", "kind"),
    [
        # Above a balance this DIR had received before it sent the key: charged before it.
        (doubtful(1, 0.99, 990, sent=1.0), [(0.5, 980)], REPLAY),
        # The lower balance came after the send: nothing said of before.
        (doubtful(2, 0.99, 990, sent=1.0), [(1.5, 980)], UNCERTAIN),
        # Below every balance received before the send: maybe this DIR's charge.
        (doubtful(3, 0.99, 970, sent=1.0), [(0.5, 980)], UNCERTAIN),
        # Without a readable stamp, a top-up between the two cannot be ruled out.
        (doubtful(4, None, 5_000, sent=1.0), [(0.2, 4_990), (0.9, 100)], UNCERTAIN),
        # A first send met another call (409): left uncertain.
        (doubtful(5, 0.99, 990, sent=1.0, why=CONTESTED), [(0.5, 980)], UNCERTAIN),
    ],
)
def test_a_balance_above_one_received_before_the_send_is_a_replay(
    line: Doubtful, received: list[tuple[float, int]], kind: str
) -> None:
    """Without a top-up the balance only falls: a charge whose balanceAfter is above one
    whose answer this DIR had received before it first sent the key was made before that
    send. No clock is needed, and nothing is ever placed as fresh by it."""
    ledger = FakeLedger([line], received)
    place_charges(ledger, ServerClock(), 1, SENT)
    assert ledger.kind(line) == kind


def test_the_end_of_an_invocation_reads_every_stamp_to_the_finest_digits_shown() -> None:
    """A second DIR's first answer, a replay of the first DIR's last charge stamped `.400`
    60 ms before its send, was uncertain when it came; a later answer stamped `.123` shows
    the API writes milliseconds, and the end of the invocation places it as a replay,
    though its balance, the lowest, cannot."""
    last = Doubtful(
        1, "key-1", stamp(SENT + 0.4 * S), 980, 1, UNCERTAIN, "", stamp(SENT + 0.46 * S)
    )
    other = Doubtful(2, "key-2", stamp(SENT + 0.123 * S), 990, 1, REPLAY, "", stamp(SENT + S))
    assert classify(api_time(last.at), last.first_sent, ServerClock())[0] == UNCERTAIN
    ledger = FakeLedger([last, other], [(0.5, 980), (1.1, 990)])
    place_charges(ledger, ServerClock(), 1, SENT + 0.45 * S)
    assert (ledger.kind(last), ledger.kind(other)) == (REPLAY, REPLAY)


def test_a_later_answer_shows_the_clocks_apart_for_an_earlier_one() -> None:
    """The API's clock a minute behind batchval's: the first answer, before any Date showed
    it, reads as a replay; at the end of the invocation, with a Date that shows the
    clocks apart, it is fresh. A line of an earlier invocation that is not uncertain is
    not classed again by this invocation's clock."""
    now = doubtful(1, -59.9, 990, sent=0.0, kind=REPLAY)
    earlier = doubtful(2, -59.9, 990, sent=0.0, invocation=0, kind=REPLAY)
    seen = ServerClock()
    seen.observe(SENT - 59.8 * S, SENT + 0.2 * S)
    assert classify(api_time(now.at), now.first_sent, seen)[0] == REPLAY
    seen.observe_date(http_date(SENT - 59 * S), SENT + 1.1 * S, SENT + S)
    ledger = FakeLedger([now, earlier], [])
    assert place_charges(ledger, seen, 1, SENT - S) == 1
    assert ledger.placed[1][0] == FRESH
    assert 2 not in ledger.placed


@pytest.mark.parametrize(
    ("other", "uncertain"),
    [
        (None, False),  # nobody else: this invocation's charges are its own
        (doubtful(9, -3600, 5_000, sent=0.5, kind=REPLAY), False),  # a replay of long ago
        (doubtful(9, -0.5, 995, sent=0.5, kind=REPLAY), True),  # of a charge made meanwhile
        (doubtful(9, 0.4, 985, sent=0.3, why=CONTESTED), True),  # a first send met a call
    ],
)
def test_another_caller_valuing_the_same_homes_meanwhile_leaves_fresh_charges_uncertain(
    other: Doubtful | None, uncertain: bool
) -> None:
    """Another DIR valuing the same homes while this invocation ran (a 409 to a first send,
    or a replay of a charge made after this invocation started): a charge made while this
    DIR's request was on its way may be the other's, answered as a replay, and looks just
    like this DIR's own; this invocation's fresh charges are uncertain. A replay of a
    charge made before the invocation started says nothing of now."""
    mine = doubtful(1, 1.01, 980, sent=1.0, kind=FRESH)
    ledger = FakeLedger([mine] if other is None else [mine, other], [])
    place_charges(ledger, ServerClock(), 1, SENT - S)
    assert ledger.kind(mine) == (UNCERTAIN if uncertain else FRESH)
    if uncertain:
        assert ledger.placed[1][1] == CONCURRENT


@pytest.mark.parametrize(
    ("lines", "balance"),
    [
        ([("00:00:00", 990), ("00:00:01", 980), ("00:00:02", 970)], 970),
        # A top-up between: what came before says nothing of after.
        ([("00:00:00", 50), ("00:01:00", 10_040), ("00:01:01", 10_030)], 10_030),
        # Two calls at once, their balances the other way round: no top-up.
        ([("00:00:00", 990), ("00:00:00.5", 1_000), ("00:00:01", 980)], 980),
        # A stamp unreadable: counts while no top-up is seen, not after one.
        ([("00:00:00", 990), (None, 900)], 900),
        ([("00:00:00", 50), ("00:01:00", 10_040), (None, 40)], 10_040),
        ([], None),
    ],
)
def test_the_balance_is_the_lowest_since_the_last_top_up_seen(
    lines: list[tuple[str | None, int]], balance: int | None
) -> None:
    """The lowest balanceAfter of the charges since the last top-up seen (a balance above
    one stamped more than a call's length before it)."""
    day = "2026-11-25T"
    stamped = [
        (None if at is None else stamp(dt.datetime.fromisoformat(day + at + "+00:00")), b)
        for at, b in lines
    ]
    assert lowest_since_top_up(stamped)[0] == balance


def test_a_charge_whose_first_send_met_another_call_is_never_fresh() -> None:
    """This DIR's first send of the key was answered 409 request-in-progress: another
    DIR's call was valuing it, so the charge answered later is not counted as spent."""
    valued = SENT + 0.5 * S
    answer = {
        "id": "val_x",
        "valuedAt": stamp(valued),
        "charge": {"credits": 10, "balanceAfter": 90},
    }
    received = Received(SENT + S)
    for contested, kind in ((False, FRESH), (True, UNCERTAIN)):
        line = valuation_charge(
            "bv1-key",
            answer,
            first_sent=stamp(SENT),
            clock=ServerClock(),
            received=received,
            invocation=1,
            contested=contested,
        )
        assert line is not None
        assert line.kind == kind


def test_a_charge_an_earlier_invocation_paid_for_is_not_this_time(tmp_path: Path) -> None:
    """A resume hears the answer to a call the invocation before it paid for (a 504, a
    cut connection): fresh, counted in all, but not this time, which is what the account
    was charged while this invocation ran."""
    db = Checkpoint(Database.open(tmp_path))
    started = SENT + 10.3 * S
    invocation = db.database.invocations.record_start(started.isoformat())

    def line(key: str, made: dt.datetime) -> ChargeLine:
        at = stamp(made)
        return ChargeLine("valuation", key, None, at, 10, 90, FRESH, "", invocation, at)

    db.database.charges.record(line("earlier", SENT))  # made before this invocation started
    db.database.charges.record(line("whole", SENT + 10 * S))  # cut to a second: may be after
    db.database.charges.record(line("edge", started - dt.timedelta(milliseconds=1)))  # to the ms
    db.database.charges.record(line("now", started + 0.2 * S))
    money = db.database.charges.money(invocation)
    assert (money.this_time, money.in_all) == (20, 40)
    db.database.close()
