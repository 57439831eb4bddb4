"""The recovery path of `run` (`valuations/recovery`): a paid answer that could not be read is
read back by id (free) on the next run, and its rows move from problems to results,
charged once; a read that is refused or still unreadable leaves the problem as it was."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from api_bodies import VALUATION_ID, valuation_body
from hostile import HostileProxy, Rules, serve_proxy
from support import LIVE, InProcess, env_for, outputs, portfolio, settle_sent

from batchval._internal import logs
from batchval._internal.api import Valuation
from batchval._internal.api.client import Answer
from batchval._internal.sandbox.server import RunningSandbox
from batchval._internal.sending.job import Gate
from batchval._internal.store.checkpoint import Checkpoint
from batchval._internal.store.database import Database
from batchval._internal.valuations.recovery import RecoveryJob, recoverable

READ = "/valuations/"


@pytest.fixture
def proxy(served: RunningSandbox) -> Iterator[HostileProxy]:
    """A proxy in front of the sandbox that makes every paid answer unreadable."""
    with serve_proxy(served.auth_url, Rules(break_share=1.0)) as running:
        yield running


def via(proxy: HostileProxy, served: RunningSandbox) -> dict[str, str]:
    return env_for(served, LIVE, BATCHVAL_BASE_URL=proxy.base_url, BATCHVAL_AUTH_URL=proxy.url)


def calls(served: RunningSandbox, method: str, path: str) -> int:
    return sum(1 for r in served.sandbox.ledger.requests if r.method == method and path in r.path)


def first_run(
    batchval: InProcess, proxy: HostileProxy, served: RunningSandbox, tmp_path: Path, rows: int
) -> Path:
    """A run whose every paid answer came back unreadable: each an unreadable-answer."""
    source = portfolio(tmp_path / "in.csv", rows)
    out = tmp_path / "out"
    done = batchval("run", str(source), "--out", str(out), env=via(proxy, served))
    assert done.returncode == 0, done.stderr
    _, problems, _ = outputs(out)
    assert problems["type"].to_list() == ["unreadable-answer"] * rows
    assert sorted(problems["valuation_id"].to_list()) == sorted(proxy.broken)
    return source


@pytest.mark.slow
def test_an_unreadable_paid_answer_is_read_back_on_the_next_run(
    proxy: HostileProxy, served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """The next run reads each unreadable valuation back by id (GET, no POST): its rows end
    in the results with the id the API first gave, charged once."""
    source = first_run(batchval, proxy, served, tmp_path, rows=3)
    posts, charged = len(proxy.posted), served.sandbox.ledger.credits_charged(LIVE.client_id)
    assert charged == 30
    proxy.rules.off()
    out = tmp_path / "out"
    again = batchval("run", str(source), "--out", str(out), env=via(proxy, served))
    assert again.returncode == 0, again.stderr
    results, problems, summary = outputs(out)
    assert problems.height == 0
    assert sorted(results["valuation_id"].to_list()) == sorted(proxy.broken)
    assert results["estimate"].null_count() == 0
    assert len(proxy.posted) == posts  # no new POST
    assert calls(served, "GET", READ) == 3
    assert served.sandbox.ledger.credits_charged(LIVE.client_id) == charged
    assert int(results["credits_charged"].sum()) == charged  # carried, not lost
    assert summary["credits_charged"] == {"this_invocation": 0, "total": 30}
    # A third run has nothing to read back and sends nothing.
    third = batchval("run", str(source), "--out", str(out), env=via(proxy, served))
    assert third.returncode == 0, third.stderr
    assert calls(served, "GET", READ) == 3


@pytest.mark.slow
def test_a_valuation_the_api_does_not_know_stays_a_problem(
    proxy: HostileProxy, served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A read answered not-found leaves the row the unreadable-answer problem it was."""
    source = first_run(batchval, proxy, served, tmp_path, rows=1)
    out = tmp_path / "out"
    unknown = "val_" + "0" * 26
    with sqlite3.connect(out / "checkpoint.sqlite") as db:
        db.execute(
            "UPDATE requests SET problem = json_set(problem, '$.valuation_id', ?)", (unknown,)
        )
    proxy.rules.off()
    posts = len(proxy.posted)
    again = batchval("run", str(source), "--out", str(out), env=via(proxy, served))
    assert again.returncode == 0, again.stderr
    results, problems, _ = outputs(out)
    assert results.height == 0
    assert problems["type"].to_list() == ["unreadable-answer"]
    assert problems["valuation_id"].to_list() == [unknown]
    assert calls(served, "GET", READ + unknown) == 1
    assert len(proxy.posted) == posts


# --- the job alone, on a checkpoint ----------------------------------------------------


REQUEST = '{"bedrooms":2,"postcode":"SW1A 2AA","propertyType":"terraced","reference":"CASE-1"}'


def valuation(**changes: Any) -> dict[str, Any]:
    """A valuation as the API writes one (docs/api.md, Valuation)."""
    echo = {"floorAreaSqm": 80.0, "floorAreaSource": "bedrooms", "bedrooms": 2}
    body = valuation_body(VALUATION_ID, indexed_to=None, echo=echo, reference="CASE-1")
    return {**body, **changes}


def echoing(**changes: Any) -> dict[str, Any]:
    """A valuation whose `input` echo differs from the request sent."""
    body = valuation()
    return {**body, "input": {**body["input"], **changes}}


def answer(body: dict[str, Any]) -> Answer:
    return Answer(200, json.dumps(body).encode(), body)


class NoApi:
    async def read_valuation(self, valuation_id: str, *, gate: Gate | None = None) -> Answer:
        raise AssertionError("the job's settle is driven by hand here")


@pytest.fixture
def checkpoint(tmp_path: Path) -> Iterator[Checkpoint]:
    """A checkpoint with one request whose paid answer (10 credits) was unreadable."""
    held = Checkpoint(Database.open(tmp_path))
    held.rows.add([(1, "key-1", None, None, None)], [("key-1", REQUEST)])
    paid = valuation(valuation={"estimate": "a lot"}, charge={"credits": 10, "balanceAfter": 90})
    held.requests.record_answer("key-1", json.dumps(paid).encode())
    assert settle_sent(held, "key-1", paid).problem is not None
    yield held
    held.database.close()


def settled_states(checkpoint: Checkpoint) -> Sequence[int]:
    counts = checkpoint.counts()
    return counts.requests_done, counts.requests_problem, counts.credits


@pytest.mark.parametrize(
    "body",
    [
        valuation(valuation={"estimate": "still words"}),
        valuation(id="val_" + "b" * 26),
        valuation(mode="test"),
        echoing(postcode="M1 1AE"),
        echoing(propertyType="flat"),
        echoing(bedrooms=3),
        valuation(reference="CASE-2"),
    ],
    ids=[
        "still-unreadable",
        "another-id",
        "another-mode",
        "another-postcode",
        "another-type",
        "other-bedrooms",
        "another-reference",
    ],
)
def test_a_read_that_cannot_stand_for_the_answer_leaves_the_problem(
    checkpoint: Checkpoint, body: dict[str, Any]
) -> None:
    """Unreadable again, another valuation, another mode, or an `input` echo (or
    reference) other than the request sent: the request stays a problem, and it is logged."""
    checkpoint.set("mode", "live")
    [item] = recoverable(checkpoint)
    with logs.capture() as logged:
        settled = RecoveryJob(NoApi(), checkpoint, [item]).settle(item, answer(body))
    assert settled.problem is not None
    assert [e["event"] for e in logged] == ["valuations.recovery.unusable"]
    assert logged[0]["valuation_id"] == VALUATION_ID
    assert settled_states(checkpoint) == (0, 1, 0)
    assert [r.key for r in recoverable(checkpoint)] == [VALUATION_ID]


def test_a_readable_read_settles_the_request_with_its_first_charge(
    checkpoint: Checkpoint,
) -> None:
    """The read answer is stored and the request is done with the 10 credits first charged;
    the job reports no new credits (the first invocation counted them)."""
    [item] = recoverable(checkpoint)
    assert (item.key, item.request_key) == (VALUATION_ID, "key-1")
    settled = RecoveryJob(NoApi(), checkpoint, [item]).settle(item, answer(valuation()))
    assert (settled.problem, settled.credits) == (None, 0)
    assert settled_states(checkpoint) == (1, 0, 10)
    assert recoverable(checkpoint) == []
    [[row]] = list(checkpoint.valued_rows())
    assert (row.row_number, row.credits) == (1, 10)
    assert json.loads(row.answer)["valuation"]["estimate"] == 250000
    # Read once, here: the record the results are written from is the read answer's.
    assert row.record is not None
    assert Valuation.of_record(row.record) == Valuation.from_json(json.loads(row.answer))


@pytest.mark.slow
def test_a_complete_run_still_reports_refused_credentials_met_while_reading_back(
    proxy: HostileProxy, served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """Every row has its result or problem, but the read-back met refused credentials:
    the run exits 77 with its reason, not 0, and the problems stay as they were."""
    source = first_run(batchval, proxy, served, tmp_path, rows=2)
    proxy.rules.off()
    out = tmp_path / "out"
    refused = {**via(proxy, served), "BATCHVAL_CLIENT_SECRET": "not-the-secret"}
    again = batchval("run", str(source), "--out", str(out), env=refused)
    assert again.returncode == 77, again.stderr
    assert "credentials_refused" in again.stderr
    _, problems, summary = outputs(out)
    assert problems["type"].to_list() == ["unreadable-answer"] * 2
    assert summary["stop"]["reason"] == "credentials_refused"
    status = batchval("status", str(out), env=refused)
    assert status.returncode == 77, status.stdout


def test_an_echo_spelled_otherwise_still_settles_the_request(checkpoint: Checkpoint) -> None:
    """The postcode's space and case are the API's to choose, and 80 is 80.0: an echo of
    the same request in other spellings settles it."""
    [item] = recoverable(checkpoint)
    body = echoing(postcode="sw1a2aa", bedrooms=2.0)
    settled = RecoveryJob(NoApi(), checkpoint, [item]).settle(item, answer(body))
    assert settled.problem is None
    assert recoverable(checkpoint) == []
