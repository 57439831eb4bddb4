"""One verdict for each fault of a run's store (issue 36, part 3; the table is in
docs/how-to/object-storage.md): each row reproduced with `run --out s3://...` against a real
SeaweedFS on loopback (in this process, the `batchval` fixture; the run met mid-way by the
fault a process of its own), through tests/s3_proxy.py where the fault is one a
real server will not make on demand, asserting the exit code, what the message names,
the sandbox's ledger, and that no temporary directory outlives the invocation."""

from __future__ import annotations

import base64
import subprocess
import time
from email.message import Message
from pathlib import Path

import pytest
from objects_server import S3Server, bucket_request
from s3_proxy import REGION_EXPECTED, Fault, Switch, always, proxy
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
from batchval._internal.store.lease import LEASE
from batchval._internal.store.objects import ObjectStore
from batchval.airflow import _rounds as rounds

# End to end: the CLI against the sandbox and SeaweedFS (`make test-fast` leaves it out).
pytestmark = pytest.mark.slow


class Machine:
    """One invocation's machine: its own temporary folder (which must be empty after each
    invocation) and state folder (where a log its URL cannot take is kept)."""

    def __init__(self, tmp_path: Path, served: RunningSandbox, s3: S3Server) -> None:
        self.temp = tmp_path / "temp"
        self.state = tmp_path / "state"
        self.temp.mkdir()
        self.env = {
            **env_for(served),
            **s3.env(),
            "TMPDIR": str(self.temp),
            "XDG_STATE_HOME": str(self.state),
            **SHORT_LEASE,
        }

    def through(self, endpoint: str) -> dict[str, str]:
        return {**self.env, "AWS_ENDPOINT_URL": endpoint}

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [BATCHVAL, *args],
            env=env or self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def left_nothing(self) -> None:
        assert list(self.temp.iterdir()) == [], "a temporary directory outlived its invocation"


@pytest.fixture
def machine(tmp_path: Path, served: RunningSandbox, s3_server: S3Server) -> Machine:
    return Machine(tmp_path, served, s3_server)


def _valuations(served: RunningSandbox) -> int:
    return len(served.sandbox.ledger.valuations_created(LIVE.client_id))


def _wait_for_valuations(served: RunningSandbox, running: subprocess.Popen[str], n: int) -> None:
    wait_until(lambda: _valuations(served) >= n, 60, f"{n} valuations", process=running)


def _resumed_paying_once(
    batchval: InProcess, served: RunningSandbox, machine: Machine, source: Path, url: str, rows: int
) -> str:
    """The stopped run left nothing in the temporary folder and charged nothing twice;
    the same command again, from a blank machine, completes, every row valued, nothing
    charged twice, nothing left behind again: what it printed."""
    machine.left_nothing()
    assert served.sandbox.ledger.keys_charged_twice() == []
    again = batchval("run", str(source), "--out", url, env=machine.env)
    assert again.returncode == 0, again.stderr
    assert served.sandbox.ledger.keys_charged_twice() == []
    assert _valuations(served) == rows
    machine.left_nothing()
    return again.stdout


def test_a_bucket_missing_at_the_start_is_64_naming_the_bucket(
    served: RunningSandbox, machine: Machine, tmp_path: Path, batchval: InProcess
) -> None:
    source = portfolio(tmp_path / "book.csv", 5)
    done = batchval("run", str(source), "--out", "s3://no-such-bucket-here/run", env=machine.env)
    assert done.returncode == 64, done.stderr
    assert "the bucket 'no-such-bucket-here' does not exist" in done.stderr
    assert _valuations(served) == 0
    machine.left_nothing()


def test_a_bucket_deleted_mid_run_is_64_saying_the_runs_memory_is_gone_and_keeps_the_log(
    served: RunningSandbox,
    s3_server: S3Server,
    machine: Machine,
    tmp_path: Path,
    batchval: InProcess,
) -> None:
    """The bucket deleted under a run (SeaweedFS deletes one that holds objects) takes the
    run's memory with it: 64 `store_missing` naming the bucket and saying that the same command
    would start a new run, never that it resumes once the bucket is back (a bucket made
    again is empty), nor a defect (70); the run's log, which the bucket cannot take, kept
    where the line says. The bucket made again, the same command begins a new run (its
    first line says so) and pays nothing twice (the same UTC day: replays)."""
    served.sandbox.set_faults(Faults(latency_ms=100))
    assert bucket_request(s3_server, "PUT", "verdict-deleted") == 200
    url = "s3://verdict-deleted/run"
    source = portfolio(tmp_path / "book.csv", 120)
    running = machine.start("run", str(source), "--out", url, "--concurrency", "2")
    _wait_for_valuations(served, running, 10)
    assert bucket_request(s3_server, "DELETE", "verdict-deleted") == 204
    out, err = running.communicate(timeout=180)
    assert running.returncode == 64, err
    assert (
        "store_missing: the run's memory is gone: the bucket 'verdict-deleted' was deleted" in err
    )
    assert "The same command would start a new run there, from nothing" in err
    assert "once it is back" not in err
    assert "resumes" not in err
    assert "internal_error" not in err + out
    kept = [line for line in err.splitlines() if "the run's log is kept in" in line]
    assert len(kept) == 1, err
    log = Path(kept[0].rsplit("kept in ", 1)[1].split(", not at")[0])
    assert log.parent == machine.state / "batchval"
    assert "verdict-deleted" in log.read_text()
    assert oct(log.stat().st_mode & 0o777) == "0o600"

    assert bucket_request(s3_server, "PUT", "verdict-deleted") == 200
    again = _resumed_paying_once(batchval, served, machine, source, url, 120)
    assert again.splitlines()[0].endswith("(live mode, new run): complete")  # from nothing


def test_a_bucket_of_another_region_is_64_naming_the_region(
    served: RunningSandbox,
    s3_server: S3Server,
    machine: Machine,
    tmp_path: Path,
    batchval: InProcess,
) -> None:
    """A 400 AuthorizationHeaderMalformed: a configuration to fix (64), never an outage a
    scheduler retries for ever (75)."""
    source = portfolio(tmp_path / "book.csv", 5)
    with proxy(s3_server, always(Fault.REPLY_400_REGION)) as (endpoint, _):
        done = batchval(
            "run", str(source), "--out", s3_server.url("region"), env=machine.through(endpoint)
        )
    assert done.returncode == 64, done.stderr
    assert f"another region than 'us-east-1' (it expects '{REGION_EXPECTED}')" in done.stderr
    assert "AWS_REGION" in done.stderr
    assert _valuations(served) == 0
    machine.left_nothing()


@pytest.mark.parametrize(
    ("fault", "named"),
    [
        (Fault.REPLY_301, f"(HTTP 301 PermanentRedirect to s3.{REGION_EXPECTED}.amazonaws.com)"),
        (Fault.REPLY_307, "(HTTP 307 TemporaryRedirect to http://127.0.0.1:"),
    ],
)
def test_a_redirect_from_the_store_is_64_named_as_a_redirect(
    served: RunningSandbox,
    s3_server: S3Server,
    machine: Machine,
    tmp_path: Path,
    fault: Fault,
    named: str,
    batchval: InProcess,
) -> None:
    """A 301 PermanentRedirect (no Location) or a 307 TemporaryRedirect (a Location, which
    the store's client follows for a read and is refused there, without credentials): 64
    named as the redirect, with where it leads, never "credentials refused" (77's words)
    nor an outage (75); for `run`, which writes first, and `status`, which only reads."""
    source = portfolio(tmp_path / "book.csv", 5)
    url = s3_server.url("redirected")
    with proxy(s3_server, always(fault)) as (endpoint, _):
        done = batchval("run", str(source), "--out", url, env=machine.through(endpoint))
        read = batchval("status", url, env=machine.through(endpoint))
    for ended in (done, read):
        assert ended.returncode == 64, ended.stderr
        assert f"refused: {url} at {endpoint}: " in ended.stderr
        assert f"the store answered a redirect {named}" in ended.stderr
        assert "the endpoint or region is wrong (the region set is 'us-east-1')" in ended.stderr
        assert "credentials refused" not in ended.stderr
    assert _valuations(served) == 0
    machine.left_nothing()


@pytest.mark.parametrize(
    ("prefix", "named"),
    [
        ("runs/../other", "the segment '..'"),
        ("runs/./one", "the segment '.'"),
        ("runs//one", "an empty segment ('//')"),
    ],
)
def test_a_prefix_with_a_dot_or_empty_segment_is_64_naming_it(
    served: RunningSandbox, s3_server: S3Server, machine: Machine, tmp_path: Path,
    prefix: str, named: str, batchval: InProcess,
) -> None:  # fmt: skip
    source = portfolio(tmp_path / "book.csv", 5)
    done = batchval("run", str(source), "--out", s3_server.url(prefix), env=machine.env)
    assert done.returncode == 64, done.stderr
    assert f"the prefix '{prefix}' has {named}" in done.stderr
    assert "no HTTP status" not in done.stderr
    assert _valuations(served) == 0
    machine.left_nothing()


# The store's client gives up on a request after 3 s, not 30 (a test seam of store/objects).
_SHORT_TIMEOUTS = "connect_timeout=1s,timeout=3s,retry_timeout=3"


def _puts(method: str, path: str, headers: Message) -> bool:
    return method == "PUT"


def test_a_store_that_refuses_writes_mid_run_is_64_with_the_summary_and_the_lease_let_go(
    served: RunningSandbox,
    s3_server: S3Server,
    machine: Machine,
    tmp_path: Path,
    batchval: InProcess,
) -> None:
    """Every PUT answered 403 from a moment on (a bucket policy turned read-only): no call
    once a commit cannot be kept, 64 naming the write refused, the summary printed, the
    lease let go (deleted: the release itself is a write). Writes allowed again, the
    same command finishes the run, paying nothing twice."""
    served.sandbox.set_faults(Faults(latency_ms=100))
    url = s3_server.url("read-only")
    source = portfolio(tmp_path / "book.csv", 120)
    store = ObjectStore.from_url(url, s3_server.env())
    switch = Switch(Fault.REPLY_403, _puts)
    with proxy(s3_server, switch) as (endpoint, _):
        running = machine.start(
            "run", str(source), "--out", url, "--concurrency", "2", env=machine.through(endpoint)
        )
        _wait_for_valuations(served, running, 10)
        switch.on.set()
        out, err = running.communicate(timeout=180)
    assert running.returncode == 64, err
    assert "store_credentials: the store refuses what the run must write" in err
    assert "refuses this write (credentials refused (HTTP 403 AccessDenied))" in err
    assert "stopped: store_credentials" in out  # the summary, printed
    assert "exit 64" in out
    assert store.get(LEASE) is None  # let go
    assert _valuations(served) < 120

    again = _resumed_paying_once(batchval, served, machine, source, url, 120)
    assert again.splitlines()[0].endswith("(live mode, resumed): complete")


def test_a_store_that_stops_answering_is_75_and_no_call_leaves_past_the_margin(
    served: RunningSandbox,
    s3_server: S3Server,
    machine: Machine,
    tmp_path: Path,
    batchval: InProcess,
) -> None:
    """Every request to the store left unanswered from a moment on: no valuation is sent
    once the lease's margin is reached (its last renewal, at most a third of a lease
    before the stall, plus the lease less its margin, a third of it); 75
    `store_unavailable` naming the store. The store back, the same command finishes the
    run, paying nothing twice. (The lease is SHORT_LEASE's, and the client's timeouts 3 s
    (BATCHVAL_STORE_OPTIONS), not 30 s: what is asserted holds for any lease and timeout.)"""
    served.sandbox.set_faults(Faults(latency_ms=100))
    url = s3_server.url("stalled-store")
    source = portfolio(tmp_path / "book.csv", 600)
    switch = Switch(Fault.STALL, lambda method, path, headers: True)
    lease = float(SHORT_LEASE["BATCHVAL_LEASE_SECONDS"])
    with proxy(s3_server, switch) as (endpoint, _):
        env = {**machine.through(endpoint), "BATCHVAL_STORE_OPTIONS": _SHORT_TIMEOUTS}
        running = machine.start("run", str(source), "--out", url, "--concurrency", "2", env=env)
        _wait_for_valuations(served, running, 10)
        switch.on.set()
        stalled = time.monotonic()
        _, err = running.communicate(timeout=300)
    assert running.returncode == 75, err
    assert "store_unavailable: the store does not answer" in err
    assert url in err
    sent = [
        r.monotonic
        for r in served.sandbox.ledger.requests
        if r.method == "POST" and r.path.endswith("/valuations")
    ]
    assert max(sent) < stalled + lease - lease / 3 + 1.0  # the margin is a third
    assert len(sent) < 600

    again = _resumed_paying_once(batchval, served, machine, source, url, 600)
    assert again.splitlines()[0].endswith("(live mode, resumed): complete")


def test_a_lease_deleted_under_a_live_holder_is_75_dir_locked_naming_it(
    served: RunningSandbox,
    s3_server: S3Server,
    machine: Machine,
    tmp_path: Path,
    batchval: InProcess,
) -> None:
    """`state/LEASE` deleted while its holder sends (HEAD written within a lease): a second
    invocation watches it as a held lease, sees the holder write it again, and stops with
    75 `dir_locked` naming that holder, having sent nothing; the holder finishes alone."""
    served.sandbox.set_faults(Faults(latency_ms=100))
    url = s3_server.url("lease-deleted")
    source = portfolio(tmp_path / "book.csv", 300)
    store = ObjectStore.from_url(url, s3_server.env())
    first = machine.start("run", str(source), "--out", url, "--concurrency", "2")
    _wait_for_valuations(served, first, 10)
    store.delete(LEASE)
    second = batchval("run", str(source), "--out", url, env=machine.env)
    assert second.returncode == 75, second.stderr
    assert "dir_locked" in second.stderr
    assert f":{first.pid}:" in second.stderr  # the holder: host:pid:tag
    assert "its lease written again" in second.stderr
    _, err = first.communicate(timeout=180)
    assert first.returncode == 0, err
    assert served.sandbox.ledger.keys_charged_twice() == []
    assert _valuations(served) == 300
    machine.left_nothing()


def _faults(server: StoreServer) -> list[tuple[str, str, dict[str, str], str]]:
    """(what, URL, the store's variables, the reason code) of each fault a person fixes:
    a bucket or container that does not exist, a wrong key, and, on Azure, a key cut
    short when copied (on S3 a secret cut short is only a wrong one)."""
    url, env = server.url("fault"), server.env()
    scheme, rest = url.split("://", 1)
    missing = f"{scheme}://no-such-bucket/{rest.split('/', 1)[1]}"
    if "AZURE_STORAGE_ACCOUNT_KEY" in env:
        key = env["AZURE_STORAGE_ACCOUNT_KEY"]
        wrong = {**env, "AZURE_STORAGE_ACCOUNT_KEY": base64.b64encode(b"WrongKey" * 8).decode()}
        cut = {**env, "AZURE_STORAGE_ACCOUNT_KEY": key[:-3]}
        return [
            ("missing", missing, env, "store_missing"),
            ("wrong key", url, wrong, "store_credentials"),
            ("cut key", url, cut, "store_key_malformed"),
        ]
    wrong = {**env, "AWS_SECRET_ACCESS_KEY": env["AWS_SECRET_ACCESS_KEY"][:-3] + "xyz"}
    return [
        ("missing", missing, env, "store_missing"),
        ("wrong key", url, wrong, "store_credentials"),
    ]


def test_each_store_fault_is_told_by_its_reason_and_named_in_the_headline(
    served: RunningSandbox, store_server: StoreServer, tmp_path: Path, batchval: InProcess
) -> None:
    """A run at a missing bucket or container, with a wrong key, with a key cut short:
    64, its reason code first on the stop line, and the Airflow operator's headline made
    from that line names the cause, the storage connection and the bucket, never "command
    line or config". The API's address is a closed port: a run that called it before
    looking at the store would stop for the API, not with the store's reason."""
    source = portfolio(tmp_path / "loans.csv", 3)
    nowhere = {
        "BATCHVAL_BASE_URL": "http://127.0.0.1:9/partners/v1",
        "BATCHVAL_AUTH_URL": "http://127.0.0.1:9/oauth/token",
    }
    for what, url, store_env, reason in _faults(store_server):
        env = {**env_for(served), **nowhere, **store_env}
        done = batchval("run", str(source), "--out", url, env=env)
        assert done.returncode == 64, (what, done.stderr)
        line = next(x for x in done.stderr.splitlines() if x.startswith("batchval: "))
        assert line.startswith(f"batchval: {reason}: "), (what, line)
        headline = rounds.person_verdict(
            64, line, out_dir=url, url=True, status_read=False, conn_id="api",
            storage_conn_id="batchval_storage",
        )  # fmt: skip
        assert rounds.STORE_CAUSES[reason] in headline, headline
        assert "(connection 'batchval_storage')" in headline
        assert "command line or config" not in headline
        bucket = url.split("://", 1)[1].split("/", 1)[0]
        assert bucket in headline, headline
        for secret in store_server.secrets:
            assert secret not in done.stderr
