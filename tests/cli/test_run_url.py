"""`run --out s3://bucket/prefix`: the run's memory and outputs kept on a real
S3-compatible server (SeaweedFS on loopback), each invocation from an empty directory of
its own, as a moved Airflow task or a new pod finds its disk (issue 23). The tests that take
`store_server` run again at an `az://container/prefix` place on Azurite (issue 40)."""

from __future__ import annotations

import functools
import io
import json
import random
import signal
import subprocess
from pathlib import Path

import polars as pl
import pytest
from objects_server import S3Server
from s3_proxy import Fault, always, proxy
from support import (
    BATCHVAL,
    LIVE,
    SHORT_LEASE,
    InProcess,
    StoreServer,
    env_for,
    portfolio,
    wait_until,
)

from batchval._internal.sandbox.config import Faults
from batchval._internal.sandbox.server import RunningSandbox
from batchval._internal.store.objects import ObjectStore

# End to end: the CLI against the sandbox, in this process (the `batchval` fixture) but for
# the holders killed, stalled or met by a second run (`make test-fast` leaves it out).
pytestmark = pytest.mark.slow

DAY = 86_400


def _env(served: RunningSandbox, s3: StoreServer, offset: float = 0) -> dict[str, str]:
    """The sandbox's, the store's, and a lease of SHORT_LEASE's seconds."""
    return {
        **env_for(served, BATCHVAL_CLOCK_OFFSET_SECONDS=str(offset)),
        **s3.env(),
        **SHORT_LEASE,
    }


def _read(store: ObjectStore, name: str) -> bytes:
    found = store.get(name)
    assert found is not None, f"{name} is not at the URL"
    return found[0]


def test_a_backfill_across_days_on_blank_machines_pays_once(
    served: RunningSandbox, store_server: StoreServer, tmp_path: Path, batchval: InProcess
) -> None:
    """300 rows at a daily limit of 100: one invocation a UTC day, each from an empty
    directory of its own; every row valued, each request charged once, one run id across
    the days (as `status URL --json` reads it, the Airflow operator's view), the results
    at the URL for polars to read."""
    served.sandbox.account(LIVE.client_id).daily_limit = 100
    url = store_server.url("backfill-1")
    source = portfolio(tmp_path / "book.csv", 300)
    store = ObjectStore.from_url(url, store_server.env())
    codes, run_ids = [], []
    for day in range(4):
        if day:
            served.sandbox.clock.advance(DAY)
        work = tmp_path / f"machine-{day}"
        work.mkdir()
        done = batchval(
            "run", str(source), "--out", url, env=_env(served, store_server, day * DAY), cwd=work
        )
        codes.append(done.returncode)
        assert list(work.iterdir()) == [], "nothing is left on the machine's disk"
        status = batchval(
            "status", url, "--json", env=_env(served, store_server, day * DAY), cwd=work
        )
        run_ids.append(json.loads(status.stdout)["run_id"])
        if done.returncode == 0:
            break
        assert done.returncode == 75, done.stderr
        assert "daily_limit" in done.stderr
    assert codes == [75, 75, 0]
    assert len(set(run_ids)) == 1, run_ids
    ledger = served.sandbox.ledger
    assert ledger.keys_charged_twice() == []
    assert len(ledger.valuations_created(LIVE.client_id)) == 300
    results = pl.read_parquet(io.BytesIO(_read(store, "results.parquet")))
    assert sorted(results["row_number"].to_list()) == list(range(1, 301))
    summary = json.loads(_read(store, "summary.json"))
    assert summary["exit_code"] == 0
    assert summary["invocations"] == 3
    assert int(results["credits_charged"].sum()) == ledger.credits_charged(LIVE.client_id)


@pytest.mark.parametrize(
    ("change", "code", "said"),
    [
        ({"AWS_ENDPOINT_URL": "http://127.0.0.1:9"}, 75, "store_unavailable"),
        ({"AWS_SECRET_ACCESS_KEY": "not-the-secret-at-all"}, 64, "store_credentials"),
    ],
    ids=["a store that does not answer", "wrong credentials"],
)
def test_a_store_out_of_reach_stops_the_run_before_a_call_and_no_secret_is_printed(
    served: RunningSandbox,
    s3_server: S3Server,
    tmp_path: Path,
    batchval: InProcess,
    change: dict[str, str],
    code: int,
    said: str,
) -> None:
    """A store that does not answer is 75 `store_unavailable`, one that refuses the
    credentials 64: either way nothing is sent, and neither secret is printed."""
    env = {**_env(served, s3_server), **change}
    done = batchval(
        "run", str(portfolio(tmp_path / "book.csv", 5)), "--out", s3_server.url("x"), env=env
    )
    assert done.returncode == code, done.stderr
    assert said in done.stderr
    assert served.sandbox.ledger.valuations_created(LIVE.client_id) == []
    for secret in (s3_server.secret_access_key, "not-the-secret-at-all"):
        assert secret not in done.stderr + done.stdout


def test_two_runs_on_one_url_one_spends_the_other_exits_75(
    served: RunningSandbox, store_server: StoreServer, tmp_path: Path, batchval: InProcess
) -> None:
    """Two machines start the same run: the second finds the first's lease renewed and
    stops with dir_locked within seconds, having sent nothing; the first finishes alone.
    `status URL` meanwhile says it is running."""
    served.sandbox.set_faults(Faults(latency_ms=100))
    url = store_server.url("twice")
    source = portfolio(tmp_path / "book.csv", 400)
    env = _env(served, store_server)
    first = subprocess.Popen(
        [BATCHVAL, "run", str(source), "--out", url, "--concurrency", "2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    store = ObjectStore.from_url(url, store_server.env())
    ledger = served.sandbox.ledger
    wait_until(
        lambda: ledger.valuations_created(LIVE.client_id), 60, "a first valuation", process=first
    )
    assert store.get("state/LEASE") is not None
    # A reader sees the run at work (its lease renewed), and does not disturb it.
    looked = batchval("status", url, "--json", env=env)
    assert looked.returncode == 75, looked.stderr
    assert json.loads(looked.stdout)["status"] == "running"
    second = batchval("run", str(source), "--out", url, env=env)
    assert second.returncode == 75, second.stderr
    assert "dir_locked" in second.stderr
    assert "renewing its lease" in second.stderr  # seen alive, not waited out
    _, err = first.communicate(timeout=180)
    assert first.returncode == 0, err
    ledger = served.sandbox.ledger
    assert ledger.keys_charged_twice() == []
    assert len(ledger.valuations_created(LIVE.client_id)) == 400


def test_a_stalled_holder_wakes_to_a_taken_run_and_stops_without_writing(
    served: RunningSandbox, store_server: StoreServer, tmp_path: Path, batchval: InProcess
) -> None:
    """SIGSTOP past the lease, another machine takes the run and finishes it, SIGCONT: the
    first sends nothing more, publishes nothing over the new holder's outputs and exits
    75; nothing is paid twice, nothing paid is lost."""
    served.sandbox.set_faults(Faults(latency_ms=100))
    url = store_server.url("stalled")
    source = portfolio(tmp_path / "book.csv", 120)
    env = _env(served, store_server)
    ledger = served.sandbox.ledger
    first = subprocess.Popen(
        [BATCHVAL, "run", str(source), "--out", url, "--concurrency", "2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(
        lambda: len(ledger.valuations_created(LIVE.client_id)) >= 10,
        60,
        "ten valuations before the stall",
        process=first,
    )
    first.send_signal(signal.SIGSTOP)
    try:
        second = batchval("run", str(source), "--out", url, env=env)
    finally:
        first.send_signal(signal.SIGCONT)
    assert second.returncode == 0, second.stderr  # took the run after one unchanged lease
    store = ObjectStore.from_url(url, store_server.env())
    published = _read(store, "results.parquet")
    _, err = first.communicate(timeout=120)
    assert first.returncode == 75, err
    assert "dir_locked" in err
    assert _read(store, "results.parquet") == published  # nothing over the new holder's
    assert ledger.keys_charged_twice() == []
    results = pl.read_parquet(io.BytesIO(published))
    assert sorted(results["row_number"].to_list()) == list(range(1, 121))
    charged = {c.resource for c in ledger.valuations_created(LIVE.client_id)}
    assert charged <= set(results["valuation_id"].to_list())  # no paid answer lost


def test_an_input_at_a_url_is_read_by_a_blank_machine(
    served: RunningSandbox, store_server: StoreServer, tmp_path: Path, batchval: InProcess
) -> None:
    """INPUT as an s3:// URL, into a local DIR: read, valued, and named by its URL in the
    summary and the manifest; a missing object is input_unusable (65)."""
    source = portfolio(tmp_path / "book.csv", 12)
    store = ObjectStore.from_url(store_server.url("inputs"), store_server.env())
    store.put("book.csv", source.read_bytes())
    env = _env(served, store_server)
    out = tmp_path / "out"
    done = batchval("run", store_server.url("inputs/book.csv"), "--out", str(out), env=env)
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["input"] == store_server.url("inputs/book.csv")
    assert summary["rows"]["valued"] == 12
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["input"]["path"] == store_server.url("inputs/book.csv")
    missing = batchval("run", store_server.url("inputs/none.csv"), "--out", str(out), env=env)
    assert missing.returncode == 65, missing.stderr
    assert "no such object" in missing.stderr


def test_streets_check_and_split_read_an_input_at_a_url(
    served: RunningSandbox, store_server: StoreServer, tmp_path: Path, batchval: InProcess
) -> None:
    """Every command that reads an INPUT takes an s3:// URL for it, and names it by it."""
    source = portfolio(tmp_path / "book.csv", 12)
    url = store_server.url("inputs-2/book.csv")
    ObjectStore.from_url(store_server.url("inputs-2"), store_server.env()).put(
        "book.csv", source.read_bytes()
    )
    env = _env(served, store_server)
    streets = batchval("streets", url, "--out", str(tmp_path / "streets"), env=env)
    assert streets.returncode == 0, streets.stderr
    summary = json.loads((tmp_path / "streets" / "summary.json").read_text())
    assert summary["input"] == url
    check = batchval("check", url, env=env)
    assert check.returncode == 0, check.stderr + check.stdout
    assert "12 row" in check.stdout
    split = batchval("split", url, "--shards", "2", "--out", str(tmp_path / "shards"), env=env)
    assert split.returncode == 0, split.stderr
    assert json.loads((tmp_path / "shards" / "shards.json").read_text())["input"] == url
    missing = batchval("check", store_server.url("inputs-2/none.csv"), env=env)
    assert missing.returncode == 65, missing.stdout + missing.stderr


def test_split_writes_its_shards_at_a_url_and_each_shard_runs_from_there(
    served: RunningSandbox, store_server: StoreServer, tmp_path: Path, batchval: InProcess
) -> None:
    """`split --out s3://...` publishes the shards and shards.json at the URL (a blank
    worker runs a shard by its URL); another split into another number is refused there,
    naming the URL."""
    url = store_server.url("shards")
    env = _env(served, store_server)
    source = portfolio(tmp_path / "book.csv", 30)
    done = batchval("split", str(source), "--shards", "3", "--out", url, env=env)
    assert done.returncode == 0, done.stderr
    store = ObjectStore.from_url(url, store_server.env())
    names = sorted(key for key in store.list("") if "/" not in key)
    assert names == [
        "shard-00000-of-00003.parquet",
        "shard-00001-of-00003.parquet",
        "shard-00002-of-00003.parquet",
        "shards.json",
    ]
    rows = 0
    for n in range(3):
        out = tmp_path / f"run-{n}"
        shard = f"{url}/shard-{n:05d}-of-00003.parquet"
        ran = batchval("run", shard, "--out", str(out), env=env)
        assert ran.returncode == 0, ran.stderr
        rows += json.loads((out / "summary.json").read_text())["rows"]["valued"]
    assert rows == 30
    other = batchval("split", str(source), "--shards", "2", "--out", url, env=env)
    assert other.returncode == 64, other.stderr
    assert f"{url} holds the shards of a split into 3" in other.stderr
    assert "batchval-out-" not in other.stderr


def test_status_and_report_read_a_run_at_its_url(
    served: RunningSandbox, store_server: StoreServer, tmp_path: Path, batchval: InProcess
) -> None:
    """`status URL --json` says where the run stands (Airflow's XCom), and `report URL`
    publishes report.html beside the run's outputs."""
    url = store_server.url("looked-at")
    env = _env(served, store_server)
    done = batchval("run", str(portfolio(tmp_path / "book.csv", 8)), "--out", url, env=env)
    assert done.returncode == 0, done.stderr
    status = batchval("status", url, "--json", env=env)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["rows"]["valued"] == 8
    report = batchval("report", url, env=env)
    assert report.returncode == 0, report.stderr
    assert f"wrote {url}" in report.stdout
    page = _read(ObjectStore.from_url(url, store_server.env()), "report.html")
    assert b"<html" in page
    nothing = batchval("status", store_server.url("no-run-here"), env=env)
    assert nothing.returncode == 64


def test_verify_and_export_work_on_a_run_at_its_url(
    served: RunningSandbox, store_server: StoreServer, tmp_path: Path, batchval: InProcess
) -> None:
    """`verify URL` reads every valuation back (taking the run, as a run does) and
    publishes verify.parquet at the URL;
    `export URL` writes its files beside the run's outputs there (or into a local --out),
    naming the URL, never the directory it read the run into."""
    url = store_server.url("verified")
    env = _env(served, store_server)
    done = batchval("run", str(portfolio(tmp_path / "book.csv", 8)), "--out", url, env=env)
    assert done.returncode == 0, done.stderr
    store = ObjectStore.from_url(url, store_server.env())
    store.put("book.parquet", b"another night's book, beside the run")
    with proxy(store_server, always(Fault.FORWARD)) as (endpoint, seen):
        verify = batchval("verify", url, env={**env, **store_server.env(endpoint)})
    assert verify.returncode == 0, verify.stderr
    written = {path.rpartition("/")[2] for method, path, _ in seen if method == "PUT"}
    assert "verify.parquet" in written
    # What it copied in and left as it was is never written back (it could be stale).
    assert not written & {"book.parquet", "results.parquet", "summary.json"}
    assert "verify: 8 of 8 valuation(s) read back" in verify.stdout
    assert "all agree" in verify.stdout
    checked = pl.read_parquet(io.BytesIO(_read(store, "verify.parquet")))
    assert checked.height == 0  # its rows are the differences
    assert served.sandbox.ledger.keys_charged_twice() == []

    exported = batchval("export", url, "--format", "csv", env=env)
    assert exported.returncode == 0, exported.stderr
    assert f"{url}/results.csv: 8 rows" in exported.stdout
    assert "batchval-view-" not in exported.stdout
    # every field quoted: polars reads each as text unless told its type
    results = pl.read_csv(
        io.BytesIO(_read(store, "results.csv")), schema_overrides={"row_number": pl.Int64}
    )
    assert sorted(results["row_number"].to_list()) == list(range(1, 9))
    local = batchval("export", url, "--format", "xlsx", "--out", str(tmp_path / "x"), env=env)
    assert local.returncode == 0, local.stderr
    assert (tmp_path / "x" / "results.xlsx").is_file()
    assert store.get("results.xlsx") is None

    nothing = batchval("export", store_server.url("no-run-here"), "--format", "csv", env=env)
    assert nothing.returncode == 64, nothing.stderr
    assert "batchval-view-" not in nothing.stderr
    assert store_server.url("no-run-here").rstrip("/") in nothing.stderr


def test_kills_at_random_moments_then_blank_machines_resume_paying_once(
    served: RunningSandbox, s3_server: S3Server, tmp_path: Path, batchval: InProcess
) -> None:
    """SIGKILL twice while sending (a kill loses the commits not yet shipped), each
    time resumed from an empty directory: every row valued, no key charged twice, every
    paid valuation in the results."""
    served.sandbox.set_faults(Faults(latency_ms=50))
    url = s3_server.url("killed")
    source = portfolio(tmp_path / "book.csv", 150)
    env = _env(served, s3_server)
    ledger = served.sandbox.ledger
    rng = random.Random(2026)

    def valued_or_ended(target: int, running: subprocess.Popen[bytes]) -> bool:
        # The run may end before its kill: then the kill is a no-op.
        return (
            len(ledger.valuations_created(LIVE.client_id)) >= target or running.poll() is not None
        )

    for _ in range(2):  # each resume waits out the killed holder's lease (SHORT_LEASE)
        running = subprocess.Popen(
            [BATCHVAL, "run", str(source), "--out", url, "--concurrency", "3"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        target = len(ledger.valuations_created(LIVE.client_id)) + rng.randint(5, 30)
        wait_until(
            functools.partial(valued_or_ended, target, running),
            60,
            f"{target} valuations or the run's end",
        )
        running.kill()
        running.wait(timeout=30)
    # The last holder was killed: its lease is waited out (one lease), then the run ends.
    done = batchval("run", str(source), "--out", url, env=env)
    assert done.returncode == 0, done.stderr
    assert ledger.keys_charged_twice() == []
    store = ObjectStore.from_url(url, s3_server.env())
    results = pl.read_parquet(io.BytesIO(_read(store, "results.parquet")))
    assert sorted(results["row_number"].to_list()) == list(range(1, 151))
    charged = {c.resource for c in ledger.valuations_created(LIVE.client_id)}
    assert charged <= set(results["valuation_id"].to_list())
    assert int(results["credits_charged"].sum()) == ledger.credits_charged(LIVE.client_id)


def test_streets_keeps_its_run_at_a_url(
    served: RunningSandbox, s3_server: S3Server, tmp_path: Path, batchval: InProcess
) -> None:
    """`streets --out s3://...`: its reads kept at the URL, so an invocation from another
    empty directory finds every postcode read and pays nothing again."""
    url = s3_server.url("streets-1")
    source = portfolio(tmp_path / "book.csv", 12)
    env = _env(served, s3_server)
    first = batchval("streets", str(source), "--out", url, env=env)
    assert first.returncode == 0, first.stderr
    charged = served.sandbox.ledger.credits_charged(LIVE.client_id)
    assert charged > 0
    again = batchval("streets", str(source), "--out", url, env=env)
    assert again.returncode == 0, again.stderr
    assert served.sandbox.ledger.credits_charged(LIVE.client_id) == charged
    store = ObjectStore.from_url(url, s3_server.env())
    assert json.loads(_read(store, "summary.json"))["postcodes"]["read_this_invocation"] == 0


def test_a_refusal_at_a_url_names_the_url_not_the_copy(
    served: RunningSandbox, store_server: StoreServer, tmp_path: Path, batchval: InProcess
) -> None:
    """A run refused at a URL (another run id than the one kept there) says the URL, never
    the temporary directory this invocation copied the run into."""
    url = store_server.url("refused")
    source = portfolio(tmp_path / "book.csv", 3)
    env = _env(served, store_server)
    first = batchval("run", str(source), "--out", url, "--run-id", "first", env=env)
    assert first.returncode == 0, first.stderr
    again = batchval("run", str(source), "--out", url, "--run-id", "second", env=env)
    assert again.returncode == 64, again.stderr
    assert f"{url} holds run 'first'" in again.stderr
    assert "batchval-place-" not in again.stderr


def test_every_invocation_keeps_its_events_at_the_url(
    served: RunningSandbox, store_server: StoreServer, tmp_path: Path, batchval: InProcess
) -> None:
    """Two invocations at one URL, the first killed with kill -9 once its log is at the
    URL: each keeps its events in an object of its own under `logs/`, the killed one's
    up to its last upload, the second's to its end; neither writes over the other."""
    served.sandbox.set_faults(Faults(latency_ms=200))
    url = store_server.url("logged")
    source = portfolio(tmp_path / "book.csv", 60)
    env = _env(served, store_server)
    store = ObjectStore.from_url(url, store_server.env())
    with subprocess.Popen(
        [BATCHVAL, "run", str(source), "--out", url, "--concurrency", "1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as running:
        wait_until(lambda: store.list("logs"), 60, "the log at the URL while it runs",
                   process=running)  # fmt: skip
        wait_until(lambda: len(served.sandbox.ledger.charges) >= 3, 60, "three valuations")
        running.kill()
    done = batchval("run", str(source), "--out", url, env=env)
    assert done.returncode == 0, done.stderr
    first, second = store.list("logs")
    killed = [json.loads(line) for line in _read(store, first).splitlines()]
    finished = [json.loads(line) for line in _read(store, second).splitlines()]
    # Each its own invocation's, in order, the killed one's read from the URL alone.
    assert max(e["timestamp"] for e in killed) < min(e["timestamp"] for e in finished)
    for events in (killed, finished):
        assert "valuations.ingest.batch" in {e["event"] for e in events}
    said = batchval("status", url, env=env)
    assert f"logs: 2 invocation(s) under {url.rstrip('/')}/logs/" in said.stdout
