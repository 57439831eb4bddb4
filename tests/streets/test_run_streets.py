"""The street analysis job on the worker pool, against the served sandbox."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from support import LIVE, POOR, TEST, client_for

from batchval._internal.api import Credentials
from batchval._internal.api.client import Answer
from batchval._internal.outcome import StopReason
from batchval._internal.sandbox.server import RunningSandbox
from batchval._internal.sending.job import Gate
from batchval._internal.sending.pool import PoolSettings, PoolStats, WorkerPool
from batchval._internal.sending.ratecontrol import RateController
from batchval._internal.sending.retry import RetryPolicy
from batchval._internal.sending.stop import Stop
from batchval._internal.store.database import Database
from batchval._internal.store.streets import StreetStore
from batchval._internal.streets.job import StreetApi, StreetJob

pytestmark = [pytest.mark.anyio, pytest.mark.dates]

FAST = RetryPolicy(max_attempts=6, backoff_initial=0.01, backoff_max=0.05, in_progress_wait=0.05)


def store_with(tmp_path: Path, postcodes: list[str | None]) -> StreetStore:
    """One row per postcode (None: a refused one)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    store = StreetStore(Database.open(tmp_path))
    store.restart_ingest()
    rows = [
        (n, p, None if p else "postcode", None if p else "required", None if p else "missing")
        for n, p in enumerate(postcodes, 1)
    ]
    store.add_rows(rows, None)
    store.finish_ingest()
    return store


async def read_all(
    served: RunningSandbox,
    store: StreetStore,
    credentials: Credentials = LIVE,
    answering: dict[str, str] | None = None,
    max_credits: int | None = None,
    **settings: Any,
) -> tuple[PoolStats, Stop]:
    """Read every pending postcode; `answering` sends some postcodes' reads for others."""
    stop = Stop()
    clock = served.sandbox.clock
    async with client_for(served, credentials) as client:
        api: StreetApi = client if answering is None else Misrouted(client, answering)
        pool = WorkerPool(
            job=StreetJob(api, store, now=clock.now),
            settings=PoolSettings(concurrency=3, policy=FAST, shutdown_grace_seconds=2, **settings),
            controller=RateController(initial_rate=50),
            stop=stop,
            max_credits=max_credits,
            now=clock.now,
        )
        stats = await pool.run()
    return stats, stop


class Misrouted:
    """A proxy that answers some postcodes with another postcode's street analysis."""

    def __init__(self, api: StreetApi, answering: dict[str, str]) -> None:
        self._api, self._answering = api, answering

    async def read_street_analysis(self, postcode: str, *, gate: Gate | None = None) -> Answer:
        return await self._api.read_street_analysis(
            self._answering.get(postcode, postcode), gate=gate
        )


def street_charges(served: RunningSandbox) -> list[str]:
    return [c.resource for c in served.sandbox.ledger.charges if c.kind == "street-analysis"]


async def test_each_postcode_read_once_and_kept_raw(served: RunningSandbox, tmp_path: Path) -> None:
    """Each distinct postcode is read and charged once; the raw answer and the charge are
    kept; a second pass sends nothing."""
    store = store_with(tmp_path, ["SW1A 2AA", "M1 1AE", "SW1A 2AA", None])
    stats, stop = await read_all(served, store)
    assert stop.reason is None
    assert sorted(street_charges(served)) == ["M1 1AE", "SW1A 2AA"]
    charged = served.sandbox.ledger.credits_charged()
    assert stats.credits == charged == store.counts().credits > 0
    reads = {r.postcode: r for r in store.reads()}
    assert json.loads(reads["SW1A 2AA"].answer)["postcode"] == "SW1A 2AA"
    assert reads["SW1A 2AA"].rows == 2
    assert store.largest_charge == charged // 2
    calls = len(served.sandbox.ledger.requests)
    stats, _ = await read_all(served, store)
    assert stats.calls == 0
    assert len(served.sandbox.ledger.requests) == calls


async def test_not_found_is_the_postcode_problem(served: RunningSandbox, tmp_path: Path) -> None:
    """The sandbox holds nothing for unit ZZ: 404 not-found, a problem naming its rows."""
    store = store_with(tmp_path, ["SW1A 2ZZ", "M1 1AE", "SW1A 2ZZ"])
    stats, stop = await read_all(served, store)
    assert stop.reason is None
    assert stats.problems == 1
    problems = [row for batch in store.problem_rows() for row in batch]
    assert [p.row_number for p in problems] == [1, 3]
    assert json.loads(problems[0].problem or "{}")["type"] == "not-found"


async def test_a_repeat_in_another_dir_is_free_and_its_window_is_not_extended(
    served: RunningSandbox, tmp_path: Path
) -> None:
    """A read the API gives free (no charge) keeps the window its answer began with
    (`generatedAt`), so a later run never takes it for fresh past the API's 30 days."""
    first = store_with(tmp_path / "a", ["SW1A 2AA"])
    await read_all(served, first)
    served.sandbox.clock.advance(10 * 86400)
    second = store_with(tmp_path / "b", ["SW1A 2AA"])
    stats, _ = await read_all(served, second)
    assert stats.credits == 0
    row = second.database.sql.execute("SELECT charged, read_at, fresh_from FROM streets").fetchone()
    assert row[0] == 0
    assert dt.datetime.fromisoformat(row[2]) < dt.datetime.fromisoformat(row[1])
    assert second.expire(served.sandbox.clock.now() + dt.timedelta(days=21)) == 1


async def test_insufficient_credits_stops(served: RunningSandbox, tmp_path: Path) -> None:
    """An account that cannot pay for a read stops the job with its reason."""
    store = store_with(tmp_path, ["SW1A 2AA", "M1 1AE"])
    _, stop = await read_all(served, store, POOR)
    assert stop.reason is StopReason.INSUFFICIENT_CREDITS
    assert len(street_charges(served)) == 1
    assert store.counts().requests_pending == 1


async def test_max_credits_counts_the_assumed_price(served: RunningSandbox, tmp_path: Path) -> None:
    """--max-credits below one read's assumed price sends nothing."""
    store = store_with(tmp_path, ["SW1A 2AA"])
    stats, stop = await read_all(served, store, max_credits=19)
    assert stop.reason is StopReason.MAX_CREDITS
    assert stats.calls == 0


async def test_stored_answer_is_read_after_a_crash(served: RunningSandbox, tmp_path: Path) -> None:
    """An answer stored but never read is read at the next start, never asked again."""
    store = store_with(tmp_path, ["SW1A 2AA"])
    async with client_for(served, TEST) as api:
        answer = await api.read_street_analysis("SW1A 2AA")
    store.queue.mark_sent("SW1A 2AA")
    store.queue.record_answer("SW1A 2AA", answer.body)
    job = StreetJob(api, store, now=served.sandbox.clock.now)
    assert job.settle_stored() == 0
    assert store.counts().requests_done == 1
    assert store.get("mode") == "test"


async def test_an_answer_for_another_postcode_is_unrecognised(
    served: RunningSandbox, tmp_path: Path
) -> None:
    """A read answered with another postcode's figures is never recorded as the asked
    one's nor blamed on its rows: the run stops after its limit, the charged bytes kept."""
    store = store_with(tmp_path, ["M1 1AE", "SW1A 2AA"])
    stats, stop = await read_all(
        served, store, answering={"SW1A 2AA": "LS6 2AB"}, unrecognised_limit=2
    )
    assert stop.reason in (StopReason.UNRECOGNISED_ANSWERS, StopReason.WRONG_ADDRESS)
    assert stats.unrecognised >= 2
    assert [r.postcode for r in store.reads()] == ["M1 1AE"]
    assert [row for batch in store.problem_rows() for row in batch] == []
    assert store.counts().requests_pending == 1
    stray = json.loads(store.stray("SW1A 2AA") or "{}")
    assert stray["postcode"] == "LS6 2AB"
    assert store.credits_total == served.sandbox.ledger.credits_charged()


async def test_a_test_answer_never_replaces_a_paid_live_read(
    served: RunningSandbox, tmp_path: Path
) -> None:
    """Past its window, a live read asked again with test credentials keeps its answer:
    the test answer stops the run (mode_mixed) and is never stored over it."""
    store = store_with(tmp_path, ["SW1A 2AA"])
    await read_all(served, store)
    paid = [r.answer for r in store.reads()]
    store.expire(served.sandbox.clock.now() + dt.timedelta(days=31))
    _, stop = await read_all(served, store, TEST)
    assert stop.reason is StopReason.MODE_MIXED
    assert [r.answer for r in store.reads()] == paid
    assert paid != []
