"""The checkpoint: rows, requests, states, counts, and the directory lock."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from api_bodies import valuation_body

from batchval._internal.api import Valuation
from batchval._internal.store import schema
from batchval._internal.store.checkpoint import (
    SCHEMA_VERSION,
    Checkpoint,
    CheckpointVersionError,
)
from batchval._internal.store.database import Database
from batchval._internal.store.lock import DirLockedError, RunLock


def filled(tmp_path: Path) -> Checkpoint:
    """Five rows: one input problem, two sharing request k1, and k2, k3."""
    checkpoint = Checkpoint(Database.open(tmp_path))
    checkpoint.rows.add(
        [
            (1, "k1", None, None, None),
            (2, None, "bedrooms", "out_of_range", "bedrooms 25 is above 20"),
            (3, "k1", None, None, None),
            (4, "k2", None, None, None),
            (5, "k3", None, None, None),
        ],
        [("k1", '{"r":1}'), ("k2", '{"r":2}'), ("k3", '{"r":3}')],
        pa.record_batch({"loan": list("abcde")}),
    )
    checkpoint.rows.finish()
    return checkpoint


def test_counts_follow_states(tmp_path: Path) -> None:
    """Rows are valued, problems or pending according to their request's state."""
    checkpoint = filled(tmp_path)
    assert checkpoint.counts().pending_rows == 4
    checkpoint.requests.mark_sent("k1")
    checkpoint.requests.record_answer("k1", b'{"id":"val_x"}')
    checkpoint.requests.record_done("k1", 10)
    checkpoint.requests.record_problem("k2", {"type": "outside-coverage", "status": 422})
    counts = checkpoint.counts()
    assert (counts.rows, counts.valued_rows, counts.api_problem_rows, counts.input_problems) == (
        5,
        2,
        1,
        1,
    )
    assert (counts.pending_rows, counts.requests_pending, counts.credits) == (1, 1, 10)
    assert not counts.complete
    assert checkpoint.problem_types() == {"out_of_range": 1, "outside-coverage": 1}


def test_sent_and_retried_requests_stay_pending(tmp_path: Path) -> None:
    """A sent request, and one that failed transiently, are pending with their attempts."""
    checkpoint = filled(tmp_path)
    checkpoint.requests.mark_sent("k1")
    checkpoint.requests.mark_sent("k2")
    checkpoint.requests.record_retry("k2", "503 data-unavailable")
    pending = {p.key: p.attempts for p in checkpoint.requests.pending()}
    assert pending == {"k1": 1, "k2": 1, "k3": 0}


def test_pending_pages_in_order(tmp_path: Path) -> None:
    """pending() pages through requests after a rowid."""
    checkpoint = filled(tmp_path)
    first = checkpoint.requests.pending(limit=2)
    rest = checkpoint.requests.pending(first[-1].rowid)
    assert [p.key for p in first + rest] == ["k1", "k2", "k3"]


def test_reingest_keeps_answers(tmp_path: Path) -> None:
    """Reading the input again forgets rows, never a paid answer."""
    checkpoint = filled(tmp_path)
    checkpoint.requests.record_answer("k3", b'{"id":"val_y"}')
    checkpoint.requests.record_done("k3", 10)
    checkpoint.rows.restart()
    assert not checkpoint.rows.complete
    checkpoint.rows.add([(1, "k1", None, None, None)], [("k1", '{"r":1}')])
    checkpoint.rows.finish()
    keys = {p.key for p in checkpoint.requests.pending()}
    assert keys == {"k1"}
    assert checkpoint.counts().credits == 10


def test_valued_and_problem_rows_in_row_order(tmp_path: Path) -> None:
    """Both read-backs come in row order, every row in exactly one of them or pending."""
    checkpoint = filled(tmp_path)
    for key in ("k1", "k3"):
        checkpoint.requests.record_answer(key, json.dumps({"id": key}).encode())
        checkpoint.requests.record_done(key, 10)
    checkpoint.requests.record_problem("k2", {"type": "outside-coverage"})
    valued = [row.row_number for batch in checkpoint.valued_rows() for row in batch]
    problems = [row.row_number for batch in checkpoint.problem_rows() for row in batch]
    assert valued == [1, 3, 5]
    assert problems == [2, 4]


def test_meta_round_trips_and_survives_reopening(tmp_path: Path) -> None:
    """Meta values persist across processes (a reopened file)."""
    checkpoint = filled(tmp_path)
    checkpoint.set("run_id", "night-1")
    checkpoint.database.close()
    again = Checkpoint(Database.open(tmp_path))
    assert again.get("run_id") == "night-1"
    assert again.rows.complete
    assert again.counts().rows == 5


def test_newer_schema_version_is_refused(tmp_path: Path) -> None:
    """A checkpoint written by a newer batchval is not read, and the message says why."""
    filled(tmp_path).set("schema_version", "999")
    with pytest.raises(CheckpointVersionError, match=r"schema 999.*new --out DIR"):
        Checkpoint(Database.open(tmp_path))


def test_version_1_checkpoint_is_migrated(tmp_path: Path) -> None:
    """A checkpoint of batchval 0.1 (schema 1) is brought up to date and read."""
    old = filled(tmp_path)
    old.set("schema_version", "1")
    old.database.close()
    checkpoint = Checkpoint(Database.open(tmp_path))
    assert checkpoint.get("schema_version") == SCHEMA_VERSION
    assert checkpoint.counts().rows == 5


def test_stored_answer_is_read_after_a_crash(tmp_path: Path) -> None:
    """An answer stored but never settled is pending for counts and listed to settle."""
    checkpoint = filled(tmp_path)
    checkpoint.requests.mark_sent("k1")
    checkpoint.requests.record_answer("k1", b'{"id":"val_x"}')
    assert checkpoint.requests.answered() == [("k1", '{"id":"val_x"}', None)]
    assert checkpoint.requests.pending()[0].key != "k1"  # never sent again
    assert checkpoint.counts().requests_pending == 3


def test_checkpoint_is_durable_on_every_commit(tmp_path: Path) -> None:
    """synchronous=FULL: a committed answer survives a power cut, not only a kill."""
    checkpoint = filled(tmp_path)
    assert checkpoint.database.sql.execute("PRAGMA synchronous").fetchone() == (2,)


def test_integrity(tmp_path: Path) -> None:
    """The file passes SQLite's integrity check."""
    filled(tmp_path).database.close()
    db = sqlite3.connect(tmp_path / "checkpoint.sqlite")
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_lock_is_exclusive_across_processes(tmp_path: Path) -> None:
    """While one process holds DIR, another cannot; after it ends, it can."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path\n"
            "from batchval._internal.store.lock import RunLock\n"
            "with RunLock(Path(sys.argv[1])):\n print('held', flush=True); time.sleep(30)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(DirLockedError), RunLock(tmp_path):
            pass
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    with RunLock(tmp_path):
        pass


def test_duplicate_rows_are_counted(tmp_path: Path) -> None:
    """Rows asking for a request an earlier row asks for are counted as duplicates."""
    checkpoint = filled(tmp_path)
    assert checkpoint.counts().duplicate_rows == 1
    assert checkpoint.counts().as_json()["rows"]["duplicates"] == 1


def test_a_sent_request_outlives_an_accepted_change(tmp_path: Path) -> None:
    """After --accept-changes, a request no row asks for is dropped if it was never sent,
    and kept (to be replayed for its possibly paid answer) if it was."""
    checkpoint = filled(tmp_path)
    checkpoint.requests.mark_sent("k2")
    checkpoint.rows.restart()
    checkpoint.rows.add([(1, "k1", None, None, None)], [("k1", '{"r":1}')])
    checkpoint.rows.finish()
    pending = {p.key for p in checkpoint.requests.pending()}
    assert pending == {"k1", "k2"}


def test_valued_rows_carry_the_answer_and_its_credits(tmp_path: Path) -> None:
    """Each valued row comes with its request's key, raw answer and charge."""
    checkpoint = filled(tmp_path)
    checkpoint.requests.record_answer("k1", b'{"id":"val_x"}')
    checkpoint.requests.record_done("k1", 10)
    valued = [row for batch in checkpoint.valued_rows(batch=1) for row in batch]
    assert [(r.row_number, r.key, r.answer, r.credits) for r in valued] == [
        (1, "k1", '{"id":"val_x"}', 10),
        (3, "k1", '{"id":"val_x"}', 10),
    ]


def test_problem_rows_carry_the_rule_or_the_problem(tmp_path: Path) -> None:
    """An input problem comes with its rule; an API problem with its JSON and attempts."""
    checkpoint = filled(tmp_path)
    checkpoint.requests.mark_sent("k2")
    checkpoint.requests.record_problem("k2", {"type": "outside-coverage", "status": 422})
    first, second = [row for batch in checkpoint.problem_rows() for row in batch]
    assert (first.row_number, first.field, first.rule, first.problem) == (
        2,
        "bedrooms",
        "out_of_range",
        None,
    )
    assert (second.row_number, second.rule, second.attempts) == (4, None, 1)
    assert json.loads(second.problem or "") == {"status": 422, "type": "outside-coverage"}


def test_asked_extras_are_those_of_requests_rows_ask_for(tmp_path: Path) -> None:
    """The include items of the requests rows ask for; a request no row asks for (kept
    after an accepted change) does not count."""
    checkpoint = Checkpoint(Database.open(tmp_path))
    assert checkpoint.asked_extras() == frozenset()
    checkpoint.rows.add(
        [(1, "k1", None, None, None), (2, "k2", None, None, None)],
        [("k1", '{"include":["commentary"],"r":1}'), ("k2", '{"r":2}')],
    )
    checkpoint.requests.mark_sent("k1")
    assert checkpoint.asked_extras() == {"commentary"}
    checkpoint.rows.restart()
    asks = [("k3", '{"include":["rebuildCost"]}')]
    checkpoint.rows.add([(1, "k3", None, None, None)], asks)
    checkpoint.rows.finish()
    assert checkpoint.asked_extras() == {"rebuildCost"}


def test_passthrough_values_come_back_typed_in_row_order(tmp_path: Path) -> None:
    """Each batch's pass-through values are kept typed, with their schema, and read back
    batch by batch in row order (whatever order the batches were added in)."""
    checkpoint = Checkpoint(Database.open(tmp_path))
    schema = pa.schema([("loan", pa.int64()), ("balance", pa.decimal128(12, 2))])
    for first in (3, 1):
        numbers = [first, first + 1]
        checkpoint.rows.add(
            [(n, None, "f", "r", "d") for n in numbers],
            [],
            pa.record_batch([pa.array(numbers), pa.array([None, None], schema[1].type)], schema),
        )
    assert checkpoint.passthrough_schema() == schema
    found = [(first, batch.to_pylist()) for first, batch in checkpoint.passthrough_batches()]
    assert [first for first, _ in found] == [1, 3]
    assert found[1][1] == [{"loan": 3, "balance": None}, {"loan": 4, "balance": None}]


def test_a_batch_of_passthrough_values_must_fit_its_rows(tmp_path: Path) -> None:
    """Values must come one a row for consecutive rows, and keep the ingest's schema; a
    refused batch leaves nothing behind (one transaction)."""
    checkpoint = Checkpoint(Database.open(tmp_path))
    rows = [(1, None, "f", "r", "d"), (3, None, "f", "r", "d")]
    with pytest.raises(ValueError, match="consecutive"):
        checkpoint.rows.add(rows, [], pa.record_batch({"loan": [1, 3]}))
    assert checkpoint.counts().rows == 0
    assert checkpoint.passthrough_schema() is None
    checkpoint.rows.add(rows[:1], [], pa.record_batch({"loan": [1]}))
    with pytest.raises(ValueError, match="schema changed"):
        checkpoint.rows.add([(2, None, "f", "r", "d")], [], pa.record_batch({"loan": ["2"]}))
    assert checkpoint.counts().rows == 1


def test_reading_again_forgets_the_passthrough_values(tmp_path: Path) -> None:
    """restart_ingest and forget_requests drop the values and their schema with the rows:
    the input read again may have other columns or types."""
    checkpoint = filled(tmp_path)
    checkpoint.rows.restart()
    assert checkpoint.passthrough_schema() is None
    assert list(checkpoint.passthrough_batches()) == []
    checkpoint.rows.add([(1, "k1", None, None, None)], [], pa.record_batch({"loan": [1.5]}))
    assert checkpoint.passthrough_schema() == pa.schema([("loan", pa.float64())])
    checkpoint.forget_requests()
    assert checkpoint.passthrough_schema() is None
    assert list(checkpoint.passthrough_batches()) == []


def test_version_2_checkpoint_is_read_and_its_input_read_again(tmp_path: Path) -> None:
    """A checkpoint of schema 2 (pass-through values as JSON in rows) opens: the column is
    dropped, rows and answers stay, and no pass-through schema says: read the input again."""
    db = sqlite3.connect(tmp_path / "checkpoint.sqlite")
    db.executescript(
        "CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "CREATE TABLE rows (row_number INTEGER PRIMARY KEY, key TEXT, field TEXT, rule TEXT,"
        " detail TEXT, passthrough TEXT NOT NULL);"
        "INSERT INTO meta VALUES ('schema_version', '2'), ('ingest_complete', '1');"
        "INSERT INTO rows VALUES (1, 'k1', NULL, NULL, NULL, '{\"loan\":\"a\"}');"
    )
    db.commit()
    db.close()
    checkpoint = Checkpoint(Database.open(tmp_path))
    assert checkpoint.get("schema_version") == SCHEMA_VERSION
    assert (checkpoint.counts().rows, checkpoint.rows.complete) == (1, True)
    assert checkpoint.passthrough_schema() is None
    checkpoint.rows.restart()
    checkpoint.rows.add([(1, "k1", None, None, None)], [], pa.record_batch({"loan": ["a"]}))
    assert checkpoint.counts().rows == 1


def _joined_counts(path: Path) -> tuple[int, ...]:
    """The row figures as a join of rows and requests reads them (as schema 3 did)."""
    db = sqlite3.connect(path / "checkpoint.sqlite")
    try:
        found = db.execute(
            "SELECT COUNT(*), SUM(r.key IS NULL), SUM(q.state = 'done'),"
            " SUM(q.state = 'problem'), SUM(q.state IN ('pending', 'sent', 'answered')),"
            " COUNT(r.key) - COUNT(DISTINCT r.key)"
            " FROM rows r LEFT JOIN requests q ON q.key = r.key"
        ).fetchone()
    finally:
        db.close()
    return tuple(int(v or 0) for v in found)


def _row_figures(checkpoint: Checkpoint) -> tuple[int, ...]:
    c = checkpoint.counts()
    return (
        c.rows,
        c.input_problems,
        c.valued_rows,
        c.api_problem_rows,
        c.pending_rows,
        c.duplicate_rows,
    )


def test_counts_agree_with_a_join_through_batches_states_and_reingests(tmp_path: Path) -> None:
    """The counts kept on each request (`row_count`) agree with a join over every row:
    rows sharing a request within and across batches, a batch naming no request of its
    own, every state, an ingest begun again and a request kept that no row asks for."""
    checkpoint = filled(tmp_path)
    checkpoint.rows.add(
        [(6, "k1", None, None, None), (7, "k4", None, None, None), (8, "k4", None, None, None)],
        [("k4", '{"r":4}')],
    )
    checkpoint.rows.add([(9, "k2", None, None, None)], [])
    assert _row_figures(checkpoint) == _joined_counts(tmp_path) == (9, 1, 0, 0, 8, 4)
    checkpoint.requests.mark_sent("k1")
    checkpoint.requests.record_answer("k1", b'{"id":"val_x"}')
    checkpoint.requests.record_done("k1", 10)
    checkpoint.requests.record_problem("k2", {"type": "outside-coverage"})
    checkpoint.requests.mark_sent("k4")
    checkpoint.requests.record_answer("k4", b'{"id":"val_y"}')
    assert _row_figures(checkpoint) == _joined_counts(tmp_path) == (9, 1, 3, 2, 3, 4)
    checkpoint.requests.mark_sent("k3")
    checkpoint.rows.restart()  # k3 was sent: kept when no row asks for it any more
    assert _row_figures(checkpoint) == _joined_counts(tmp_path) == (0, 0, 0, 0, 0, 0)
    checkpoint.rows.add(
        [(1, "k1", None, None, None), (2, "k4", None, None, None), (3, "k5", None, None, None)],
        [("k1", '{"r":1}'), ("k4", '{"r":4}'), ("k5", '{"r":5}')],
    )
    checkpoint.rows.finish()
    assert _row_figures(checkpoint) == _joined_counts(tmp_path) == (3, 0, 1, 0, 2, 0)
    counts = checkpoint.counts()
    # k1 done; k2 (problem) and k3 (sent) kept with no row; k4 answered, k5 pending.
    assert (counts.requests, counts.requests_done, counts.requests_pending) == (5, 1, 3)
    assert {p.key for p in checkpoint.requests.pending()} == {"k3", "k5"}


def test_pending_pages_merge_sent_and_pending_in_rowid_order(tmp_path: Path) -> None:
    """Sent and pending requests come in one rowid order, a page at a time, whatever the
    mix of states; done ones never."""
    checkpoint = Checkpoint(Database.open(tmp_path))
    keys = [f"k{n}" for n in range(10)]
    checkpoint.rows.add(
        [(n, key, None, None, None) for n, key in enumerate(keys, 1)],
        [(key, "{}") for key in keys],
    )
    for key in keys[1::3]:
        checkpoint.requests.mark_sent(key)
    checkpoint.requests.record_answer("k4", b"{}")
    checkpoint.requests.record_done("k4", 10)
    seen: list[str] = []
    after = 0
    while page := checkpoint.requests.pending(after, limit=2):
        seen += [p.key for p in page]
        after = page[-1].rowid
    assert seen == [key for key in keys if key != "k4"]


def test_version_3_checkpoint_gets_its_row_counts(tmp_path: Path) -> None:
    """A checkpoint of schema 3 (no `row_count`) opens as the current version: each request
    counts the rows asking for it, so the counts agree with the join, and the tally index
    is there."""
    db = sqlite3.connect(tmp_path / "checkpoint.sqlite")
    db.executescript(
        "CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "CREATE TABLE rows (row_number INTEGER PRIMARY KEY, key TEXT, field TEXT, rule TEXT,"
        " detail TEXT);"
        "CREATE INDEX rows_by_key ON rows (key);"
        "CREATE TABLE passthrough (first_row INTEGER PRIMARY KEY, rows INTEGER NOT NULL,"
        " batch BLOB NOT NULL);"
        "CREATE TABLE requests (key TEXT PRIMARY KEY, request TEXT NOT NULL,"
        " state TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0,"
        " last_error TEXT, answer TEXT, problem TEXT, credits INTEGER);"
        "CREATE INDEX requests_by_state ON requests (state);"
        "CREATE TABLE invocations (id INTEGER PRIMARY KEY, started_at TEXT NOT NULL,"
        " ended_at TEXT, exit_code INTEGER, calls INTEGER, rate_limited INTEGER,"
        " credits INTEGER, balance INTEGER);"
        "INSERT INTO meta VALUES ('schema_version', '3'), ('ingest_complete', '1');"
        "INSERT INTO rows VALUES (1, 'k1', NULL, NULL, NULL), (2, NULL, 'f', 'r', 'd'),"
        " (3, 'k1', NULL, NULL, NULL), (4, 'k2', NULL, NULL, NULL);"
        "INSERT INTO requests (key, request, state, credits) VALUES"
        " ('k1', '{}', 'done', 10), ('k2', '{}', 'pending', NULL), ('k9', '{}', 'sent', NULL);"
    )
    db.commit()
    db.close()
    checkpoint = Checkpoint(Database.open(tmp_path))
    assert checkpoint.get("schema_version") == SCHEMA_VERSION == "9"
    assert _row_figures(checkpoint) == _joined_counts(tmp_path) == (4, 1, 2, 0, 1, 1)
    counts = checkpoint.counts()
    assert (counts.requests, counts.requests_pending) == (3, 2)
    # Its charge is kept, as uncertain: schema 3 kept no evidence of fresh or replay.
    money = checkpoint.database.charges.money(None)
    assert (counts.credits, money.in_all, money.uncertain_credits) == (0, 0, 10)
    indexes = {row[1] for row in checkpoint.database.sql.execute("PRAGMA index_list(requests)")}
    assert "requests_tally" in indexes
    checkpoint.database.close()
    assert _row_figures(Checkpoint(Database.open(tmp_path))) == (4, 1, 2, 0, 1, 1)  # opened again


def test_counts_read_indexes_only(tmp_path: Path) -> None:
    """Where a run stands is read from indexes, never by a join over every row (which
    took seconds a million rows, before a resumed run's first call)."""
    checkpoint = filled(tmp_path)
    statements: list[str] = []
    checkpoint.database.sql.set_trace_callback(statements.append)
    checkpoint.counts()
    checkpoint.requests.any_pending()
    checkpoint.database.sql.set_trace_callback(None)
    assert statements
    for statement in statements:
        assert "JOIN" not in statement.upper()
        for row in checkpoint.database.sql.execute(f"EXPLAIN QUERY PLAN {statement}"):
            detail = str(row[3])
            scans = detail.startswith("SCAN") and detail != "SCAN CONSTANT ROW"
            assert not scans or "COVERING INDEX" in detail, statement


def _updates(checkpoint: Checkpoint, work: Callable[[], object]) -> list[str]:
    """The UPDATE statements `work` makes the checkpoint run."""
    statements: list[str] = []
    checkpoint.database._connection.set_trace_callback(statements.append)
    work()
    checkpoint.database._connection.set_trace_callback(None)
    return [s for s in statements if s.lstrip().upper().startswith("UPDATE")]


def test_a_request_sent_answered_and_valued_in_a_group_is_one_update(tmp_path: Path) -> None:
    """While sending (a group), a request's send, answer and reading are written as one
    statement; outside a group each is written at once, as before."""
    checkpoint = filled(tmp_path)

    def value(key: str) -> None:
        checkpoint.requests.mark_sent(key)
        checkpoint.requests.record_answer(key, b'{"id":"val_' + key.encode() + b'"}')
        checkpoint.requests.record_done(key, 10, f"[1,{key!r}]")

    def value_in_a_group(key: str) -> None:
        checkpoint.database.begin_group()
        value(key)
        checkpoint.database.commit_group()

    assert len(_updates(checkpoint, lambda: value_in_a_group("k1"))) == 1
    assert len(_updates(checkpoint, lambda: value("k2"))) == 3
    stored = checkpoint.database.sql.execute(
        "SELECT key, state, attempts, answer, credits, record FROM requests ORDER BY key"
    ).fetchall()
    assert stored[:2] == [
        ("k1", "done", 1, '{"id":"val_k1"}', 10, "[1,'k1']"),
        ("k2", "done", 1, '{"id":"val_k2"}', 10, "[1,'k2']"),
    ]


@pytest.mark.parametrize("grouped", [True, False], ids=["in a group", "at once"])
def test_a_result_recorded_again_replaces_its_record(tmp_path: Path, grouped: bool) -> None:
    """A request's record is the one its last result was recorded with: a later result
    with none leaves none (never a record of another answer); other writes keep it."""
    checkpoint = filled(tmp_path)

    def write(work: Callable[[], object]) -> None:
        if grouped:
            checkpoint.database.begin_group()
        work()
        if grouped:
            checkpoint.database.commit_group()

    def record() -> object:
        return checkpoint.database.sql.execute(
            "SELECT record FROM requests WHERE key = 'k1'"
        ).fetchone()[0]

    write(lambda: checkpoint.requests.record_done("k1", 10, "first"))
    write(lambda: checkpoint.requests.mark_sent("k1"))
    assert record() == "first"
    write(lambda: checkpoint.requests.record_done("k1", 0, "second"))
    assert record() == "second"
    write(lambda: checkpoint.requests.record_done("k1", 0))
    assert record() is None


def test_held_writes_are_seen_by_every_read_in_the_group(tmp_path: Path) -> None:
    """A read inside the group sees the writes held so far, in the order they were made:
    a request sent twice and answered is counted valued, with both attempts."""
    checkpoint = filled(tmp_path)
    checkpoint.database.begin_group()
    checkpoint.requests.mark_sent("k1")
    checkpoint.requests.record_retry("k1", "503")  # not held: the held send is applied first
    checkpoint.requests.mark_sent("k1")
    checkpoint.requests.record_answer("k1", b'{"id":"val_x"}')
    assert checkpoint.requests.answered() == [("k1", '{"id":"val_x"}', None)]
    checkpoint.requests.record_done("k1", 10)
    assert checkpoint.counts().valued_rows == 2
    assert [p.key for p in checkpoint.requests.pending()] == ["k2", "k3"]
    checkpoint.database.commit_group()
    found = checkpoint.database.sql.execute(
        "SELECT state, attempts, last_error FROM requests WHERE key = 'k1'"
    ).fetchone()
    assert found == ("done", 2, None)


def test_an_uncommitted_group_loses_the_answer_and_its_reading_together(tmp_path: Path) -> None:
    """A kill before the group's commit loses the answer with its reading (the request is
    sent again with its key, answered free); after the commit both are on disk."""
    checkpoint = filled(tmp_path)
    checkpoint.database.begin_group()
    checkpoint.requests.mark_sent("k1")
    checkpoint.requests.record_answer("k1", b'{"id":"val_1"}')
    checkpoint.requests.record_done("k1", 10)
    checkpoint.database.commit_group()
    checkpoint.database.begin_group()
    checkpoint.requests.mark_sent("k2")
    checkpoint.requests.record_answer("k2", b'{"id":"val_2"}')
    checkpoint.requests.record_done("k2", 10)
    checkpoint.database.close()  # killed before this group's commit
    reopened = Checkpoint(Database.open(tmp_path))
    states = dict(reopened.database.sql.execute("SELECT key, state FROM requests").fetchall())
    assert states == {"k1": "done", "k2": "pending", "k3": "pending"}
    assert reopened.requests.answered() == []


def test_the_mode_is_read_from_the_database_once(tmp_path: Path) -> None:
    """The DIR's mode, read on every answer, is kept in memory once read or written; a
    rolled-back transaction forgets it, and `forget_requests` unsets it."""
    checkpoint = filled(tmp_path)
    checkpoint.set("mode", "live")
    statements: list[str] = []
    checkpoint.database._connection.set_trace_callback(statements.append)
    assert checkpoint.get("mode") == "live"
    checkpoint.database._connection.set_trace_callback(None)
    assert statements == []

    def switch_then_fail() -> None:
        with checkpoint.database.transaction():
            checkpoint.set("mode", "test")
            raise RuntimeError

    with pytest.raises(RuntimeError):
        switch_then_fail()
    assert checkpoint.get("mode") == "live"
    checkpoint.forget_requests()
    assert checkpoint.get("mode") is None


def test_answer_values_count_the_rows_that_ask(tmp_path: Path) -> None:
    """Distinct values at the answers' JSON paths, with the rows asking for each; answers
    that are not JSON, and requests not valued, are left out."""
    checkpoint = filled(tmp_path)
    answers = {
        "k1": b'{"model": {"version": "v1"}, "valuation": {"indexedTo": "2026-09"}}',
        "k2": b'{"model": {"version": "v2"}, "valuation": {}}',
        "k3": b"<html>not json</html>",
    }
    for key, body in answers.items():
        checkpoint.requests.record_answer(key, body)
        checkpoint.requests.record_done(key, 10)
    found = checkpoint.answer_values("$.model.version", "$.valuation.indexedTo")
    assert sorted(found, key=str) == [("v1", "2026-09", 2), ("v2", None, 1)]


@pytest.mark.parametrize(
    ("version", "tables", "columns", "indexes"),
    [
        (
            "4",
            ("streets", "street_rows", "street_passthrough"),
            ("postcode", "state"),
            {"streets_by_state", "street_rows_by_postcode"},
        ),
        ("5", ("book_rows",), ("row_number", "identity", "fingerprint", "plan"), set()),
    ],
    ids=["4: the street tables", "5: the book's plan"],
)
def test_an_older_checkpoint_gains_the_tables_of_its_next_version_empty(
    tmp_path: Path,
    version: str,
    tables: tuple[str, ...],
    columns: tuple[str, ...],
    indexes: set[str],
) -> None:
    """A checkpoint of schema 4 (no street tables) or 5 (no `book_rows`, the `--book`
    plan) opens as the current version with its run untouched and the tables it lacked
    beside it, empty; a batchval that reads only its version would refuse it."""
    old = filled(tmp_path)
    old.database.sql.executescript("".join(f"DROP TABLE {table};" for table in tables))
    old.set("schema_version", version)
    before = _row_figures(old)
    old.database.close()
    checkpoint = Checkpoint(Database.open(tmp_path))
    assert checkpoint.get("schema_version") == SCHEMA_VERSION == "9"
    assert _row_figures(checkpoint) == before
    for table in tables:
        assert checkpoint.database.sql.execute(f"SELECT COUNT(*) FROM {table}").fetchone() == (0,)
    found = checkpoint.database.sql.execute(f"PRAGMA table_info({tables[0]})").fetchall()
    assert [column[1] for column in found][: len(columns)] == list(columns)
    named = {row[0] for row in checkpoint.database.sql.execute("SELECT name FROM sqlite_master")}
    assert indexes <= named


def test_version_8_checkpoint_reads_its_answers_once_into_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint of schema 8 (answers kept raw only) opens as 9: each valued request's
    answer is read once into its record (`Valuation.to_record`, or why it cannot be read),
    in statements of a few answers each; requests not valued get none."""
    monkeypatch.setattr(schema, "_RECORDS_AT_ONCE", 2)
    body = valuation_body(charge={"credits": 10, "balanceAfter": 90})
    answers = {
        "k1": json.dumps(body),
        "k2": json.dumps({**body, "id": "val_2", "location": "nowhere"}),
        "k3": "not JSON",
    }
    old = filled(tmp_path)
    more = [(n, f"k{n}", None, None, None) for n in range(6, 10)]
    old.rows.add(more, [(key, "{}") for _, key, *_ in more])
    answers.update({key: json.dumps({**body, "id": f"val_{key}"}) for _, key, *_ in more[:3]})
    for key, answer in answers.items():
        old.requests.record_answer(key, answer.encode())
        old.requests.record_done(key, 10)
    old.database.sql.executescript(
        "ALTER TABLE requests DROP COLUMN record; UPDATE meta SET value = '8'"
        " WHERE name = 'schema_version';"
    )
    old.database.close()
    checkpoint = Checkpoint(Database.open(tmp_path))
    assert checkpoint.get("schema_version") == SCHEMA_VERSION == "9"
    records = dict(checkpoint.database.sql.execute("SELECT key, record FROM requests").fetchall())
    assert Valuation.of_record(records.pop("k1")) == Valuation.from_json(body)
    assert json.loads(records.pop("k2")) == {
        "unreadable": "valuation: field 'location' has the wrong type",
        "id": "val_2",
    }
    assert json.loads(records.pop("k3"))["unreadable"].startswith("not JSON: ")
    for key in ("k6", "k7", "k8"):
        assert Valuation.of_record(records.pop(key)).id == f"val_{key}"
    assert records == {"k9": None}  # never answered


def test_refused_kinds_most_rows_first_with_the_first_detail(tmp_path: Path) -> None:
    """The refused rows by field and rule, most first, each with its first row's detail."""
    checkpoint = Checkpoint(Database.open(tmp_path))
    checkpoint.rows.add(
        [
            (1, None, "bedrooms", "out_of_range", "bedrooms 25"),
            (2, None, "propertyType", "not_in_list", "propertyType 'D'"),
            (3, "k1", None, None, None),
            (4, None, "propertyType", "not_in_list", "propertyType 'S'"),
        ],
        [("k1", '{"r":1}')],
    )
    assert checkpoint.refused_kinds() == [
        ("propertyType", "not_in_list", 2, "propertyType 'D'"),
        ("bedrooms", "out_of_range", 1, "bedrooms 25"),
    ]
    assert checkpoint.refused_kinds(limit=1) == [checkpoint.refused_kinds()[0]]


def _invocation(checkpoint: Checkpoint, calls: int | None) -> None:
    """An invocation that counted `calls`, or (None) one that never ended: killed."""
    started = checkpoint.database.invocations.record_start("2026-11-23T00:00:00+00:00")
    if calls is not None:
        checkpoint.database.invocations.record_end(
            started, ended_at="t", exit_code=0, calls=calls, rate_limited=0, credits=0, balance=None
        )


def test_never_sent_until_a_call_may_have_been_made(tmp_path: Path) -> None:
    """A DIR has never sent until a request is marked sent, an invocation counts a call,
    or an invocation did not end (a kill may lose the marks of its last group)."""
    checkpoint = filled(tmp_path)
    assert checkpoint.database.invocations.never_sent()
    _invocation(checkpoint, 0)
    assert checkpoint.database.invocations.never_sent()
    checkpoint.requests.mark_sent("k2")
    assert not checkpoint.database.invocations.never_sent()
    for calls in (None, 1):
        (tmp_path / str(calls)).mkdir()
        other = filled(tmp_path / str(calls))
        _invocation(other, calls)
        assert not other.database.invocations.never_sent()


def test_hosts_that_answered_are_kept(tmp_path: Path) -> None:
    """A host that answered is kept once, with when, across openings."""
    checkpoint = filled(tmp_path)
    assert checkpoint.database.invocations.reached_hosts(["api.example"]) == frozenset()
    checkpoint.database.invocations.note_reached("api.example", "2026-11-25T00:00:00+00:00")
    checkpoint.database.invocations.note_reached("api.example", "2026-11-26T00:00:00+00:00")
    checkpoint.database.invocations.note_reached("auth.example", "2026-11-26T00:00:00+00:00")
    checkpoint.database.close()
    reopened = Checkpoint(Database.open(tmp_path))
    assert reopened.database.invocations.reached_hosts(["other.example"]) == {
        "api.example",
        "auth.example",
    }
    assert reopened.get("reached.api.example") == "2026-11-25T00:00:00+00:00"


@pytest.mark.parametrize("state", ["answered", "done", "problem"])
def test_a_dir_with_answers_and_no_hosts_kept_reached_its_configured_hosts(
    tmp_path: Path, state: str
) -> None:
    """A DIR written before hosts were kept, holding answers, counts the hosts it is
    configured with as reached; one without answers reached nothing."""
    checkpoint = filled(tmp_path)
    checkpoint.requests.mark_sent("k1")
    assert checkpoint.database.invocations.reached_hosts(["api.example"]) == frozenset()
    checkpoint.requests.record_answer("k1", b'{"id":"val_x"}')
    if state == "done":
        checkpoint.requests.record_done("k1", 10)
    elif state == "problem":
        checkpoint.requests.record_problem("k1", {"type": "outside-coverage", "status": 422})
    assert checkpoint.database.invocations.reached_hosts(["api.example", "auth.example"]) == {
        "api.example",
        "auth.example",
    }


def test_a_read_only_checkpoint_reads_beside_its_writer_and_never_writes(tmp_path: Path) -> None:
    """`open_read_only` (a dry run's): None without a checkpoint; with one, it sees what the
    writer committed (`settled`: answered, done or problem keys), and refuses any write."""
    assert Database.open_read_only(tmp_path) is None
    writer = filled(tmp_path)
    writer.requests.mark_sent("k1")
    writer.requests.record_answer("k1", b'{"id":"val_x"}')
    writer.requests.record_done("k1", 10)
    writer.requests.record_problem("k2", {"type": "outside-coverage", "status": 422})
    writer.requests.mark_sent("k3")
    read_only = Database.open_read_only(tmp_path)
    assert read_only is not None
    reader = Checkpoint(read_only)
    try:
        assert reader.requests.settled(["k1", "k2", "k3", "unknown"]) == {"k1", "k2"}
        assert reader.requests.settled(f"k{n}" for n in range(1, 1200)) == {"k1", "k2"}
        with pytest.raises(sqlite3.OperationalError):
            reader.set("run_id", "other")
        assert reader.get("run_id") is None
    finally:
        reader.database.close()
        writer.database.close()
