"""Resume at scale: a 1,000,000-row run stopped with 99 % of its requests answered,
started again with the same command: how long until its first new call reaches the API.

The checkpoint is built in bulk as batchval's own run would have left it: the schema
from `Checkpoint`, the book read, validated and keyed by batchval's reader, 99 % of the
requests `done` with a stored answer and the rest pending, the meta a run records (run
id, input and settings fingerprints, the API's identity, the mode) and one earlier
invocation that ended with exit 75. The resumed run must find nothing to re-read: the
bench checks that its log holds no ingest event, or says so.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import signal
import sqlite3
import time
from collections.abc import Mapping
from pathlib import Path

from api_bodies import valuation_body

from batchval._internal.api import record_of_text
from batchval._internal.input import open_input
from batchval._internal.place.names import LOG_NAME
from batchval._internal.runs.command import file_fingerprint
from batchval._internal.sending.keys import idempotency_key
from batchval._internal.settings import load_settings
from batchval._internal.store import records
from batchval._internal.store.checkpoint import CHECKPOINT_NAME, Checkpoint
from batchval._internal.store.database import Database
from bench.processes import BATCHVAL, Child
from bench.served import NO_DAILY_LIMIT, ServedSandbox

RUN_ID = "bench-resume"
# A stored answer, as the sandbox gives it, and its record as settling keeps it (neither is
# read on the way to the first call; the outputs written at the end of a run read the
# records).
_ANSWER = json.dumps(
    valuation_body(
        "val_" + "0" * 26,
        valued_at="2026-11-22T00:00:00.000Z",
        quality="partial",
        model_version="2024-11-04T09:30:00Z",
        echo={"floorAreaSource": "bedrooms", "bedrooms": 3},
        charge={"credits": 10, "balanceAfter": 5},
    ),
    separators=(",", ":"),
)
_RECORD = record_of_text(_ANSWER)


@dataclasses.dataclass(frozen=True, slots=True)
class ResumeRun:
    rows: int
    done: int
    build_seconds: float
    checkpoint_mib: float
    first_call_seconds: float  # from the process's start; NaN if none came
    reingested: bool  # the run read the book again: the checkpoint was not taken as built
    exit_code: int


def build_checkpoint(
    out: Path, book: Path, env: Mapping[str, str], rows: int, done_share: float
) -> int:
    """The checkpoint of an interrupted run over `book` (`rows` rows, each its own
    request); returns the requests done.

    The rows go in through a connection of the bench's own: one transaction, a large
    cache, no fsync. `Checkpoint.rows.add` (a transaction per batch, synchronous=FULL)
    would spend most of a minute here, which the ingest figure measures already.
    """
    out.mkdir(parents=True, exist_ok=True)
    settings = load_settings(None, env)
    assert settings.api is not None
    source = open_input(book, settings.input)
    Database.open(out).close()  # the schema, as batchval writes it
    last_done = int(rows * done_share)
    db = sqlite3.connect(out / CHECKPOINT_NAME, isolation_level=None)
    db.execute("PRAGMA journal_mode=DELETE")  # one write of the pages, not WAL then copy
    db.execute("PRAGMA synchronous=OFF")
    db.execute("PRAGMA cache_size=-1048576")  # 1 GiB
    # Indexes built once at the end (Database.open creates them) rather than grown.
    db.execute("DROP INDEX rows_by_key")
    db.execute("DROP INDEX requests_by_state")
    db.execute("DROP INDEX requests_tally")
    db.execute("BEGIN")
    for batch in source.batches():
        items: list[tuple[int, str | None, str | None, str | None, str | None]] = []
        requests: list[tuple[str, str, str, str | None, int | None, str | None]] = []
        for number, request, field, rule, detail in batch.checked.select(
            "row_number", "request_json", "field", "rule", "detail"
        ).iter_rows():
            key = None if request is None else idempotency_key(RUN_ID, request)
            if key is not None and number <= last_done:
                requests.append((key, request, "done", _ANSWER, 10, _RECORD))
            elif key is not None:
                requests.append((key, request, "pending", None, None, None))
            items.append((number, key, field, rule, detail))
        db.executemany("INSERT INTO rows VALUES (?, ?, ?, ?, ?)", items)
        passthrough = batch.passthrough
        schema = records.schema_text(passthrough.schema)
        db.execute("INSERT OR REPLACE INTO meta VALUES ('passthrough_schema', ?)", (schema,))
        if passthrough.num_columns and items:
            db.execute(
                "INSERT INTO passthrough (first_row, rows, batch) VALUES (?, ?, ?)",
                (items[0][0], len(items), records.batch_bytes([r[0] for r in items], passthrough)),
            )
        db.executemany(  # as Checkpoint.rows.add: each request counts the rows asking
            "INSERT INTO requests (key, request, state, answer, credits, record, attempts,"
            " row_count) VALUES (?, ?, ?, ?, ?, ?, 1, 1)"
            " ON CONFLICT (key) DO UPDATE SET row_count = row_count + 1",
            requests,
        )
    db.execute("COMMIT")
    db.close()
    checkpoint = Checkpoint(Database.open(out))  # WAL again, and the indexes
    try:
        checkpoint.rows.finish()
        checkpoint.set("run_id", RUN_ID)
        checkpoint.set("input_fingerprint", file_fingerprint(book))
        checkpoint.set("settings_fingerprint", settings.fingerprint())
        # As Runner._api_identity: the API's address and the account, never the secret.
        identity = f"{settings.api.base_url}\n{settings.api.client_id}"
        checkpoint.set("api_identity", hashlib.sha256(identity.encode()).hexdigest())
        checkpoint.set("mode", "live")
        now = dt.datetime.now(dt.UTC).isoformat()
        invocation = checkpoint.database.invocations.record_start(now)
        done = checkpoint.counts().requests_done
        checkpoint.database.invocations.record_end(
            invocation,
            ended_at=now,
            exit_code=75,
            calls=done,
            rate_limited=0,
            credits=10 * done,
            balance=1_000_000 - 10 * done,
        )
    finally:
        checkpoint.database.close()
    return done


def resume_run(work: Path, book: Path, rows: int, timeout: float = 120.0) -> ResumeRun:
    out = work / "resume"
    with ServedSandbox(["--no-rate-limit", *NO_DAILY_LIMIT], work / "resume.sandbox.log") as api:
        env = api.client_env()
        started = time.monotonic()
        done = build_checkpoint(out, book, env, rows, 0.99)
        build_seconds = time.monotonic() - started
        size = (out / CHECKPOINT_NAME).stat().st_size / 2**20
        child = Child(
            [BATCHVAL, "run", str(book), "--out", str(out)], log=work / "resume.log", env=env
        )
        first = api.first_call_after(child, timeout)
        # Only the start is measured: no need to wait for 10,000 calls and the outputs.
        child.stop(signal.SIGKILL)
        finished = child.wait()
    log = out / LOG_NAME
    reingested = log.is_file() and "valuations.ingest.batch" in log.read_text(errors="replace")
    return ResumeRun(
        rows=rows,
        done=done,
        build_seconds=build_seconds,
        checkpoint_mib=size,
        first_call_seconds=first,
        reingested=reingested,
        exit_code=finished.exit_code,
    )
