"""Money a finance team can reconcile: every answer that carried a charge is a line of the
charges ledger, fresh, replay or uncertain, and the credits and balance reported are the
account's own (issues 20 and 52). A replay only on proof, on the API's clock."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from support import LIVE, InProcess, env_for, outputs, portfolio, run_in_process

from batchval._internal.api.apiclock import precision
from batchval._internal.money.charges import (
    CONTESTED,
    SENT_UNKNOWN,
    Evidence,
    Received,
    place_charges,
    stamp,
)
from batchval._internal.sandbox.server import RunningSandbox
from batchval._internal.store.charges import (
    FRESH,
    REPLAY,
    UNCERTAIN,
    ChargeLine,
    Doubtful,
    lowest_since_top_up,
)
from batchval._internal.store.checkpoint import Checkpoint
from batchval._internal.store.database import Database
from batchval._internal.valuations.answers import valuation_charge

SENT = dt.datetime(2026, 12, 31, 23, 59, 59, 400_000, tzinfo=dt.UTC)
S = dt.timedelta(seconds=1)
MS = dt.timedelta(milliseconds=1)


def cut(when: dt.datetime, to: str) -> dt.datetime:
    """`when` as an API stamps it: cut to whole seconds, milliseconds or microseconds."""
    if to == "second":
        return when.replace(microsecond=0)
    if to == "milli":
        return when.replace(microsecond=when.microsecond // 1000 * 1000)
    return when


PRECISIONS = pytest.mark.parametrize("to", ["second", "milli", "micro"])


@PRECISIONS
@pytest.mark.parametrize(
    ("valued", "other", "kind"),
    [
        # Stamped, at its latest, before the send's bound on the API's clock: a replay.
        (-3 * 3600 * S, False, REPLAY),  # another DIR, hours ago
        (-2 * S, False, REPLAY),  # cut to a second, it still reads before the send
        (-2 * S, True, REPLAY),
        # Not before the send: fresh unless the run has met another holder, then uncertain,
        # however late the stamp (a replay's stamp is before the request's arrival, which
        # may come any time after it left).
        (3 * S, False, FRESH),
        (3 * S, True, UNCERTAIN),
        (3600 * S, True, UNCERTAIN),
        (0.2 * S, False, FRESH),
        (0.2 * S, True, UNCERTAIN),
    ],
)
def test_a_charge_is_a_replay_only_on_proof_on_the_api_s_clock(
    to: str, valued: dt.timedelta, other: bool, kind: str
) -> None:
    """A charge stamped (read at its latest, at every precision) before the earliest the
    send can have reached the API is a replay; any other is fresh, or uncertain where the
    run has met another holder of its keys."""
    evidence = Evidence(other_holder="a 409" if other else None)
    at = cut(SENT + valued, to)
    assert evidence.classify(at, stamp(SENT))[0] == kind


@PRECISIONS
def test_a_stamp_one_instant_before_the_send_is_a_replay_only_to_its_precision(to: str) -> None:
    """The edge: a stamp whose unit ends at the send is a replay; one whose unit holds the
    send is not (a whole-second stamp of the send's own second never is)."""
    unit = {"second": S, "milli": MS, "micro": dt.timedelta(microseconds=1)}[to]
    sent = cut(SENT, to)  # the send's bound, on a unit's edge
    assert Evidence().classify(sent - unit, stamp(sent))[0] == REPLAY
    assert Evidence().classify(sent, stamp(sent))[0] == FRESH


@pytest.mark.parametrize("first_sent", [None, SENT_UNKNOWN])
@pytest.mark.parametrize("valued", [SENT - 3600 * S, None])
def test_an_unknown_send_or_stamp_proves_nothing(
    first_sent: str | None, valued: dt.datetime | None
) -> None:
    """No send on the API's clock (a killed invocation may have lost it, or no `Date` was
    heard yet) or no readable stamp: never a replay; fresh, or uncertain once another
    holder was met."""
    assert Evidence().classify(valued, first_sent)[0] == FRESH
    assert Evidence(other_holder="a 409").classify(valued, first_sent)[0] == UNCERTAIN
    assert Evidence().classify(None, stamp(SENT))[0] == FRESH


def test_a_proven_replay_is_evidence_of_another_holder_and_is_kept() -> None:
    """A replay proves another caller paid for a key before this DIR sent it: from then on
    a charge not proven a replay is uncertain, and the evidence is handed to be kept."""
    kept: list[str] = []
    evidence = Evidence(keep=kept.append)
    after = SENT + 0.3 * S
    assert evidence.classify(after, stamp(SENT))[0] == FRESH
    assert evidence.classify(SENT - 5 * S, stamp(SENT))[0] == REPLAY
    assert evidence.classify(after, stamp(SENT))[0] == UNCERTAIN
    assert len(kept) == 1
    evidence.note_other_holder(CONTESTED)
    assert len(kept) == 1  # the first word of it only


def test_a_stamp_is_read_to_the_finest_digits_the_api_has_shown() -> None:
    """One stamp in ten of an API that writes milliseconds ends in 0: alone, `.100` may
    have been cut to tenths; once the API has written `.123`, it is to the millisecond, and
    a charge 55 ms before the send is a replay. An API seen writing only whole seconds
    stays read to seconds."""
    at = SENT.replace(microsecond=100_000)
    sent = stamp(at + 55 * MS)
    evidence = Evidence()
    assert evidence.precision(at) == 0.1 * S
    assert evidence.classify(at, sent)[0] == FRESH
    evidence.observe_stamp(SENT.replace(microsecond=123_000))
    assert evidence.precision(at) == MS
    assert evidence.classify(at, sent)[0] == REPLAY
    whole = Evidence()
    whole.observe_stamp(SENT.replace(microsecond=0))
    assert whole.precision(at) == 0.1 * S


def test_precision_is_the_last_digit_that_is_not_0() -> None:
    """`.005` was cut to milliseconds at most, `.5` to tenths, no fraction to seconds."""
    whole = SENT.replace(microsecond=0)
    assert precision(whole) == S
    assert precision(whole + 0.005 * S) == dt.timedelta(milliseconds=1)
    assert precision(whole + 0.5 * S) == dt.timedelta(milliseconds=100)
    assert precision(whole + dt.timedelta(microseconds=7)) == dt.timedelta(microseconds=1)


class FakeLedger:
    """Constructed charges for `place_charges`."""

    def __init__(self, lines: list[Doubtful]) -> None:
        self.lines = lines
        self.placed: dict[int, tuple[str, str]] = {}

    def valuation_lines(self, invocation: int | None) -> list[Doubtful]:
        return [x for x in self.lines if x.invocation == invocation or x.kind == UNCERTAIN]

    def place(self, line: Doubtful, kind: str, why: str) -> None:
        self.placed[line.line_id] = (kind, why)


def doubtful(line_id: int, valued: dt.timedelta, kind: str, invocation: int = 1) -> Doubtful:
    at = stamp(SENT + valued)
    return Doubtful(line_id, f"key-{line_id}", at, 90, invocation, kind, "", stamp(SENT))


def test_another_holder_met_later_leaves_the_invocation_s_fresh_charges_uncertain() -> None:
    """At the end of an invocation that met another holder after some charges were classed
    fresh: each becomes uncertain, however long after its send it was stamped; a replay
    stays a replay; another invocation's lines are left."""
    lines = [
        doubtful(1, 0.3 * S, FRESH),
        doubtful(2, 4 * S, FRESH),
        doubtful(3, -4 * S, REPLAY),
        doubtful(4, 0.3 * S, FRESH, invocation=2),
    ]
    alone = FakeLedger(lines)
    assert place_charges(alone, Evidence(), 1) == 0
    met = FakeLedger(lines)
    assert place_charges(met, Evidence(other_holder=CONTESTED), 1) == 2
    assert [(line_id, kind) for line_id, (kind, _) in met.placed.items()] == [
        (1, UNCERTAIN),
        (2, UNCERTAIN),
    ]
    assert CONTESTED in met.placed[1][1]


def test_a_charge_answer_is_a_ledger_line_classed_by_the_evidence() -> None:
    """An answer with a charge is a line: its stamp, credits, balance and kind."""
    answer = {
        "id": "val_x",
        "valuedAt": stamp(SENT + 0.5 * S),
        "charge": {"credits": 10, "balanceAfter": 90},
    }
    line = valuation_charge(
        "bv1-key",
        answer,
        first_sent=stamp(SENT),
        evidence=Evidence(),
        received=Received(SENT + S),
        invocation=1,
    )
    assert line is not None
    assert (line.kind, line.credits, line.balance_after, line.ref) == (FRESH, 10, 90, "val_x")
    assert valuation_charge(
        "k", {"id": "val_y"}, first_sent=None, evidence=Evidence(), received=Received(SENT),
        invocation=1,
    ) is None  # fmt: skip


def test_a_charge_an_earlier_invocation_paid_for_is_not_this_time(tmp_path: Path) -> None:
    """A resume hears the answer to a call the invocation before it paid for (a 504, a
    cut connection): fresh, counted in all, but not this time when its stamp, read at its
    latest, is before this invocation's start on the API's clock."""
    db = Checkpoint(Database.open(tmp_path))
    started = SENT + 10.3 * S
    invocation = db.database.invocations.record_start("2020-01-01T00:00:00+00:00")  # any clock
    db.database.invocations.note_api_started(stamp(started))

    def line(key: str, made: dt.datetime) -> ChargeLine:
        at = stamp(made)
        return ChargeLine("valuation", key, None, at, 10, 90, FRESH, "", invocation, at)

    db.database.charges.record(line("earlier", SENT))  # made before this invocation started
    db.database.charges.record(
        line("whole", (SENT + 10 * S).replace(microsecond=0))
    )  # may be after
    db.database.charges.record(line("edge", started - MS))  # to the ms, before
    db.database.charges.record(line("now", started + 0.2 * S))
    money = db.database.charges.money(invocation)
    assert (money.this_time, money.in_all) == (20, 40)
    db.database.close()


def test_a_version_7_dir_s_first_sends_become_unknown(tmp_path: Path) -> None:
    """A DIR a batchval of schema 7 kept its first sends in (on the machine's clock, which
    may be off the API's): opened, they are unknown, so no replay is proven against them,
    and each invocation may keep its start on the API's clock."""
    Database.open(tmp_path).close()
    path = tmp_path / "checkpoint.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = '7' WHERE name = 'schema_version'")
        db.execute("ALTER TABLE invocations DROP COLUMN api_started")
        db.execute("INSERT INTO requests (key, request, first_sent) VALUES ('k', '{}', ?)",
                   (stamp(SENT),))  # fmt: skip
        db.execute("INSERT INTO requests (key, request) VALUES ('never', '{}')")
    db.close()
    opened = Database.open(tmp_path)
    try:
        assert opened.get("schema_version") == "9"
        found = dict(opened.sql.execute("SELECT key, first_sent FROM requests").fetchall())
        assert found == {"k": SENT_UNKNOWN, "never": None}
        opened.invocations.record_start(SENT.isoformat())
        opened.invocations.note_api_started(stamp(SENT))
    finally:
        opened.close()
    assert json.dumps(found)


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
    so (0 this time: every answer a replay, or uncertain where its stamp is within the
    second of its send; the account's balance); each DIR's charges reconcile with the API's
    ledger key by key."""
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
        lines = charges_file(out)
        assert lines.height == 36
        if fresh:
            assert set(lines["kind"].to_list()) == {"fresh"}
            assert summary["charges"]["uncertain_calls"] == 0
        else:
            assert set(lines["kind"].to_list()) <= {"replay", "uncertain"}
        mine = {
            (r["idempotency_key"], r["valuation_id"], r["credits"], r["balance_after"])
            for r in lines.iter_rows(named=True)
        }
        assert mine == charged
    money = outputs(second)[2]["charges"]
    assert money["replayed_calls"] + money["uncertain_calls"] == 36
    assert money["replayed_calls"] > 0
    assert "credits: 0 this time, 0 in all; " in done.stdout
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
    B spends nothing (each answer a replay, or uncertain within the second of its send,
    never fresh), and the balance shown is the account's, on every try (AT_ONCE_PAIRS
    files, each into its own pair of DIRs)."""
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
        assert money["replayed_calls"] + money["uncertain_calls"] == 20, (
            pair,
            money,
            unplaced(first, second),
        )
        assert money["replayed_credits"] + money["uncertain_credits"] == 200, money
        assert summary["last_known_balance"] == balance == money["balance"]
        assert "credits: 0 this time, 0 in all" in said
        assert f"API credits left {balance}" in said


def unplaced(first: Path, second: Path) -> list[dict[str, Any]]:
    """DIR B's charges that are not replays, beside DIR A's line of the same key: what a
    failure needs to say why."""
    a, b = charges_file(first), charges_file(second)
    lines = b.filter(pl.col("kind") != "replay").join(a, on="item", how="left", suffix="_a")
    return lines.select("item", "at", "kind", "why", "received_at", "received_at_a").to_dicts()


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
