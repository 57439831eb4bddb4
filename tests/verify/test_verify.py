"""`batchval verify DIR` in this process (the `batchval` fixture) against the served
sandbox: every valuation read back by id (free), compared with results.parquet; exit 0 when
all agree, 1 on a difference (written to verify.parquet), 75/64 when the API cannot answer
or DIR cannot be verified."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from hostile import closed_port_url, refuses
from support import LIVE, TEST, InProcess, Ran, assert_no_secrets, env_for, portfolio

from batchval._internal.sandbox.app import API_PREFIX
from batchval._internal.sandbox.config import Faults
from batchval._internal.sandbox.server import RunningSandbox
from batchval._internal.store.checkpoint import Checkpoint
from batchval._internal.store.database import Database
from batchval._internal.store.lock import RunLock

# End to end: the CLI in this process against the sandbox (`make test-fast` leaves it out).
pytestmark = [pytest.mark.slow, pytest.mark.dates]

READS = "/valuations/"


def valued(
    batchval: InProcess, served: RunningSandbox, tmp_path: Path, rows: int = 6, *extra: str
) -> Path:
    """A complete live run of a small portfolio (two rows share a request)."""
    source = portfolio(tmp_path / "in.csv", rows, duplicates=2)
    out = tmp_path / "out"
    done = batchval("run", str(source), "--out", str(out), *extra, env=env_for(served))
    assert done.returncode == 0, done.stderr
    return out


def verify(batchval: InProcess, out: Path, env: dict[str, str], *extra: str) -> Ran:
    return batchval("verify", str(out), *extra, env=env)


def requests_since(served: RunningSandbox, start: int) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in served.sandbox.ledger.requests[start:]]


def edit(out: Path, column: str, row: int, change: Any) -> str:
    """Rewrite one value of results.parquet (0-based row), as a person with pyarrow might;
    returns that row's valuation id."""
    path = out / "results.parquet"
    table = pq.read_table(path)
    values = table.column(column).to_pylist()
    values[row] = change(values[row])
    at = table.schema.get_field_index(column)
    field = table.schema.field(column)
    pq.write_table(table.set_column(at, field, pa.array(values, field.type)), path)
    return str(table.column("valuation_id")[row].as_py())


def test_an_untouched_run_agrees_and_costs_nothing(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """Every distinct valuation is read once by GET, nothing is charged, exit 0, and
    verify.parquet is written empty."""
    out = valued(batchval, served, tmp_path)
    results = pl.read_parquet(out / "results.parquet")
    charged, start = served.sandbox.ledger.credits_charged(), len(served.sandbox.ledger.requests)
    done = verify(batchval, out, env_for(served))
    assert done.returncode == 0, done.stderr
    distinct = results["valuation_id"].n_unique()
    assert distinct < results.height  # the shared request: one read for two rows
    assert f"{distinct} of {distinct} valuation(s) read back" in done.stdout
    assert "all agree" in done.stdout
    assert "0 credits" in done.stdout
    sent = requests_since(served, start)
    assert len(sent) == distinct
    assert {method for method, _ in sent} == {"GET"}
    assert {path.rsplit("/", 1)[-1] for _, path in sent} == set(results["valuation_id"])
    assert served.sandbox.ledger.credits_charged() == charged
    assert pl.read_parquet(out / "verify.parquet").height == 0
    assert_no_secrets(served, out, done.stdout, done.stderr)


def test_a_test_mode_run_verifies_with_test_credentials(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """Test-mode valuations read back with the test credentials agree (mode `test`)."""
    source = portfolio(tmp_path / "in.csv", 3)
    out = tmp_path / "out"
    done = batchval("run", str(source), "--out", str(out), env=env_for(served, TEST))
    assert done.returncode == 0, done.stderr
    assert set(pl.read_parquet(out / "results.parquet")["mode"]) == {"test"}
    checked = verify(batchval, out, env_for(served, TEST))
    assert checked.returncode == 0, checked.stderr
    assert "3 of 3 valuation(s) read back" in checked.stdout


def test_an_edited_estimate_is_a_difference(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """One estimate changed in results.parquet: exit 1, the valuation and `estimate` named
    on the terminal, and that one row in verify.parquet with both values."""
    out = valued(batchval, served, tmp_path)
    before = pl.read_parquet(out / "results.parquet")
    edited = edit(out, "estimate", 2, lambda estimate: estimate + 1000)
    done = verify(batchval, out, env_for(served))
    assert done.returncode == 1, done.stderr
    assert "1 difference(s) in 1 valuation(s)" in done.stdout
    assert f"{edited} (row 3) estimate:" in done.stdout
    assert f"{edited} estimate" in done.stderr
    found = pl.read_parquet(out / "verify.parquet")
    assert found.to_dicts() == [
        {
            "valuation_id": edited,
            "row_numbers": [3],
            "field": "estimate",
            "api_value": str(before["estimate"][2]),
            "our_value": str(before["estimate"][2] + 1000),
            "detail": found["detail"][0],
        }
    ]


def test_429s_are_waited_out_and_read_again(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A storm of 429s with Retry-After: the reads pause and go on, and all agree."""
    out = valued(batchval, served, tmp_path, 12)
    start = len(served.sandbox.ledger.requests)
    served.sandbox.set_faults(Faults(rate_limit_storm_share=0.5, storm_retry_after_seconds=1))
    done = verify(batchval, out, env_for(served))
    assert done.returncode == 0, done.stderr
    statuses = [r.status for r in served.sandbox.ledger.requests[start:]]
    assert 429 in statuses, "no storm struck: the test proves nothing"
    distinct = pl.read_parquet(out / "results.parquet")["valuation_id"].n_unique()
    assert statuses.count(200) == distinct  # each read once it got through


def test_a_valuation_the_api_does_not_know_is_a_difference(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A valuation id the API answers `not-found`: exit 1, a `valuation_id` difference."""
    out = valued(batchval, served, tmp_path)
    unknown = "val_" + "0" * 26
    edit(out, "valuation_id", 0, lambda _: unknown)
    done = verify(batchval, out, env_for(served))
    assert done.returncode == 1, done.stderr
    found = pl.read_parquet(out / "verify.parquet")
    assert found.select("valuation_id", "row_numbers", "field").to_dicts() == [
        {"valuation_id": unknown, "row_numbers": [1], "field": "valuation_id"}
    ]
    assert "not-found" in found["detail"][0]


def test_a_commentary_run_is_compared_member_by_member(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """With commentary and rebuild cost, an untouched run agrees; an edited nested member
    is named by its dotted path."""
    out = valued(batchval, served, tmp_path, 4, "--include", "commentary,rebuildCost")
    agreed = verify(batchval, out, env_for(served))
    assert agreed.returncode == 0, agreed.stderr

    def reword(commentary: dict[str, Any]) -> dict[str, Any]:
        return {**commentary, "summary": "A fine home."}

    edited = edit(out, "commentary", 1, reword)
    done = verify(batchval, out, env_for(served))
    assert done.returncode == 1, done.stderr
    found = pl.read_parquet(out / "verify.parquet")
    assert found.select("valuation_id", "field", "our_value").to_dicts() == [
        {"valuation_id": edited, "field": "commentary.summary", "our_value": "A fine home."}
    ]


def test_an_unreachable_api_exits_75(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """Nothing listens: api_unavailable (75) after run.outage_seconds, and no verify.parquet
    (an incomplete comparison is not written)."""
    out = valued(batchval, served, tmp_path, 2)
    closed = closed_port_url()
    env = env_for(served, BATCHVAL_BASE_URL=closed + API_PREFIX, BATCHVAL_AUTH_URL=closed)
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"run": {"outage_seconds": 3}}), encoding="utf-8")
    done = verify(batchval, out, env, "--config", str(config))
    assert refuses(closed), "something listened at the closed port: the test proves nothing"
    assert done.returncode == 75, done.stderr
    assert "batchval: api_unavailable: " in done.stderr
    assert not (out / "verify.parquet").exists()


def test_a_dir_of_the_embedded_sandbox_is_refused(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """The embedded sandbox forgot its valuations: 64, saying so, with no call made."""
    source = portfolio(tmp_path / "in.csv", 2)
    out = tmp_path / "out"
    embedded = {k: v for k, v in env_for(served).items() if not k.startswith("BATCHVAL_")}
    assert batchval("run", str(source), "--out", str(out), env=embedded).returncode == 0
    start = len(served.sandbox.ledger.requests)
    done = verify(batchval, out, env_for(served))
    assert done.returncode == 64, done.stderr
    assert "batchval: refused: " in done.stderr
    assert "embedded sandbox" in done.stderr
    assert requests_since(served, start) == []


@pytest.mark.parametrize(
    ("setup", "code", "words"),
    [
        ("no-results", 64, "has no results.parquet"),
        ("not-results", 64, "cannot be read as batchval's results"),
        ("locked", 75, "dir_locked"),
    ],
)
def test_a_dir_that_cannot_be_verified(
    served: RunningSandbox, tmp_path: Path, setup: str, code: int, words: str, batchval: InProcess
) -> None:
    """No results.parquet, or one that is not batchval's: 64; a run holding DIR: 75
    `dir_locked`; one line each, nothing written."""
    out = valued(batchval, served, tmp_path, 2)
    if setup == "no-results":
        (out / "results.parquet").unlink()
        done = verify(batchval, out, env_for(served))
    elif setup == "not-results":
        pq.write_table(pa.table({"x": [1]}), out / "results.parquet")
        done = verify(batchval, out, env_for(served))
    else:
        with RunLock(out):
            done = verify(batchval, out, env_for(served))
    assert done.returncode == code, done.stderr
    assert words in done.stderr
    assert done.stderr.count("batchval: ") == 1
    assert not (out / "verify.parquet").exists()


def test_verify_uses_the_live_credentials_it_is_given(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """Another account cannot read these valuations: each one is a not-found difference,
    never an agreement."""
    out = valued(batchval, served, tmp_path, 2)
    done = verify(batchval, out, env_for(served, TEST))
    assert done.returncode == 1, done.stderr
    found = pl.read_parquet(out / "verify.parquet")
    assert set(found["field"]) == {"valuation_id"}
    assert found.height == pl.read_parquet(out / "results.parquet")["valuation_id"].n_unique()
    assert LIVE.client_secret not in done.stdout + done.stderr


def test_a_stopped_verify_leaves_no_earlier_verify_parquet(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """An earlier verify's clean verify.parquet is removed when a verify starts: one that
    then stops (refused credentials, 77) leaves no file that reads as a clean comparison."""
    out = valued(batchval, served, tmp_path, 2)
    assert verify(batchval, out, env_for(served)).returncode == 0
    assert (out / "verify.parquet").is_file()
    done = verify(batchval, out, env_for(served, BATCHVAL_CLIENT_SECRET="not-the-secret"))
    assert done.returncode == 77, done.stderr
    assert not (out / "verify.parquet").exists()


def test_a_run_that_rewrites_the_results_removes_verify_parquet(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """`run` again on a verified DIR rewrites results.parquet: the verify.parquet that
    compared the old file goes with it."""
    out = valued(batchval, served, tmp_path, 2)
    assert verify(batchval, out, env_for(served)).returncode == 0
    assert (out / "verify.parquet").is_file()
    again = batchval("run", str(tmp_path / "in.csv"), "--out", str(out), env=env_for(served))
    assert again.returncode == 0, again.stderr
    assert (out / "results.parquet").is_file()
    assert not (out / "verify.parquet").exists()


def _verified_holding(
    batchval: InProcess, served: RunningSandbox, tmp_path: Path, name: str, until: dt.datetime
) -> tuple[Path, int, Ran]:
    """A DIR of two valuations whose checkpoint holds `name` (a wait an earlier invocation
    was given) until `until`, verified: the DIR, the sandbox's requests before, the result."""
    out = valued(batchval, served, tmp_path, 2)
    checkpoint = Checkpoint(Database.open(out))
    checkpoint.set(name, until.isoformat())
    checkpoint.database.close()
    start = len(served.sandbox.ledger.requests)
    return out, start, verify(batchval, out, env_for(served))


def test_a_stored_daily_limit_holds_verify_back(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """DIR's checkpoint holds a daily limit's not_before still to come: verify exits 75
    `daily_limit`, reads nothing and writes no verify.parquet."""
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=3)
    out, start, done = _verified_holding(batchval, served, tmp_path, "not_before", later)
    assert done.returncode == 75, done.stderr
    assert "batchval: daily_limit: " in done.stderr
    assert requests_since(served, start) == []
    assert not (out / "verify.parquet").exists()


def test_a_kept_retry_after_is_waited_out_before_the_first_read(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A Retry-After an earlier invocation was given (pause_until in the checkpoint) is
    waited out before verify's first read, which then reads and agrees."""
    until = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=3)
    _, start, done = _verified_holding(batchval, served, tmp_path, "pause_until", until)
    assert done.returncode == 0, done.stderr
    reads = served.sandbox.ledger.requests[start:]
    assert len(reads) == 2
    # By the sandbox's own clock (real time here), not by how long verify took: under
    # load its start-up alone could use up the pause (the test failed that way).
    assert all(r.at >= until for r in reads), [r.at for r in reads]


def test_progress_events_name_the_job(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """`run.progress` events in batchval.log carry `job`: a verify's say `verify`, never
    to be read as a run's `valuation`."""
    out = valued(batchval, served, tmp_path, 6)
    served.sandbox.set_faults(Faults(latency_ms=150))
    config = tmp_path / "slow.yaml"
    config.write_text(yaml.safe_dump({"run": {"progress_seconds": 0.1}}), encoding="utf-8")
    log = out / "batchval.log"
    before = len(log.read_text(encoding="utf-8").splitlines())
    done = verify(batchval, out, env_for(served), "--config", str(config), "--concurrency", "1")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()[before:]]
    progress = [e for e in events if e.get("event") == "run.progress"]
    assert progress, "no progress event was logged: the test proves nothing"
    assert {e.get("job") for e in progress} == {"verify"}
