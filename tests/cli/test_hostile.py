"""`batchval run` against a hostile network: wrong addresses, nothing listening, a gateway
answering HTML, answers shaped like a later API, the daily limit and signals.

Each test runs the CLI in this process (the `batchval` fixture; a process of its own where
a signal is sent) against the sandbox served in this process, most of them through
`hostile.HostileProxy`. Each one first checks that its fault really
struck (from the proxy's counts, the sandbox's ledger or the socket), so that a green
test means the fault was met and survived, then checks the outcome the contract
promises: the exit code, `summary.json`'s `stop` (reason, detail, not_before, status),
one `batchval: ` line on stderr, no row blamed for what is not the row's fault, no key
charged twice and every paid answer in the results.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml
from hostile import (
    NO_SUCH_HOST,
    Exchange,
    HostileProxy,
    Rules,
    closed_port_url,
    no_such_name,
    refuses,
    serve_proxy,
)
from support import (
    BATCHVAL,
    LIVE,
    InProcess,
    Ran,
    assert_accounted,
    assert_paid_once,
    before_midnight,
    clear_of_midnight,
    env_for,
    outputs,
    portfolio,
    run_cli,
    wait_until,
)

from batchval._internal.sandbox.app import API_PREFIX
from batchval._internal.sandbox.server import RunningSandbox
from batchval._internal.sending.keys import idempotency_key
from batchval._internal.store.database import Database

# End to end: the CLI as a process against the sandbox (`make test-fast` leaves it out).
pytestmark = pytest.mark.slow

SEED: int = int(os.environ.get("BATCHVAL_FAULT_SEED", "2026"))
"""The seed of the proxy's draws; set it to replay a failure."""

# Re-runs of a command that keeps exiting 75 before it counts as stuck.
MAX_RUNS = 6
# Seconds of nothing but failures before a run stops with api_unavailable.
OUTAGE_SECONDS = 6
# How long a process waiting for midnight may take to exit after SIGTERM. The promise is
# about 2 s; the bound is generous so that a loaded machine does not fail it.
SIGNAL_BOUND_SECONDS = 10.0


@pytest.fixture
def proxy(served: RunningSandbox) -> Iterator[HostileProxy]:
    """A hostile proxy in front of the test's sandbox, every rule off to begin with."""
    with serve_proxy(served.auth_url, seed=SEED) as running:
        yield running


def via(
    proxy: HostileProxy, served: RunningSandbox, base: str = API_PREFIX, auth: str = ""
) -> dict[str, str]:
    """The live credentials, the API at {proxy}{base} and the token at {proxy}{auth}."""
    return env_for(
        served, LIVE, BATCHVAL_BASE_URL=proxy.url + base, BATCHVAL_AUTH_URL=proxy.url + auth
    )


def run_config(tmp_path: Path, **run: object) -> list[str]:
    """`--config FILE` with these `run` settings."""
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"run": run}), encoding="utf-8")
    return ["--config", str(path)]


def stopped(
    done: Ran | subprocess.CompletedProcess[str], out: Path, code: int, *reasons: str
) -> dict[str, Any]:
    """The run stopped with `code` and one of `reasons`, in summary.json and once on stderr."""
    assert done.returncode == code, f"exit {done.returncode}:\n{done.stderr[-3000:]}"
    stop = json.loads((out / "summary.json").read_text(encoding="utf-8")).get("stop")
    assert isinstance(stop, dict), stop
    assert stop.get("reason") in reasons, stop
    assert {"reason", "detail", "not_before", "status"} <= set(stop), stop
    said = [line for line in done.stderr.splitlines() if line.startswith("batchval: ")]
    assert len(said) == 1, done.stderr[-3000:]
    return stop


def stop_line(done: Ran | subprocess.CompletedProcess[str]) -> str:
    return next(line for line in done.stderr.splitlines() if line.startswith("batchval: "))


def api_problems(out: Path) -> int:
    """Rows the API was blamed for (the test inputs are all valid, so this should be 0)."""
    path = out / "problems.parquet"
    if not path.exists():
        return 0
    return pl.read_parquet(path).filter(pl.col("stage") == "api").height


def run_until_complete(batchval: InProcess, args: list[str], env: dict[str, str]) -> list[int]:
    """Run the same command while it exits 75; the exit codes, the last one 0."""
    codes: list[int] = []
    while len(codes) < MAX_RUNS:
        done = batchval(*args, env=env)
        codes.append(done.returncode)
        if done.returncode != 75:
            break
    assert codes[-1] == 0, f"exits {codes}:\n{done.stderr[-3000:]}"
    return codes


def next_midnight(now: dt.datetime) -> dt.datetime:
    return (now + dt.timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)


def daily_limit_hits(served: RunningSandbox) -> int:
    return sum(r.code == "daily_limit" for r in served.sandbox.ledger.requests)


# --- the address is wrong: exit 64, nothing charged, no row blamed ----------------------


@dataclasses.dataclass(frozen=True)
class Misaddressed:
    base: str  # BATCHVAL_BASE_URL after the proxy's root
    wrong: str  # the path of the call that meets the fault
    status: int  # the status it is answered with
    auth: str = ""  # BATCHVAL_AUTH_URL after the proxy's root
    rules: Rules = dataclasses.field(default_factory=Rules)


MISADDRESSED = {
    # Another version's prefix: the sandbox answers 404 (a problem document, even).
    "base-v2-404": Misaddressed("/partners/v2", "/partners/v2/valuations", 404),
    # One segment too many: POST {base}/valuations meets the GET-only /valuations/{id}.
    "base-405": Misaddressed(
        API_PREFIX + "/valuations", API_PREFIX + "/valuations/valuations", 405
    ),
    "token-url-404": Misaddressed(API_PREFIX, "/nope/oauth2/token", 404, auth="/nope"),
    # A web site, not the API, at the base URL: an HTML page with 200 on every call.
    "html-site": Misaddressed(
        API_PREFIX, API_PREFIX + "/valuations", 200, rules=Rules(html_share=1.0, html_status=200)
    ),
}


@pytest.mark.parametrize("name", list(MISADDRESSED))
def test_wrong_address_exits_64(
    served: RunningSandbox, proxy: HostileProxy, tmp_path: Path, name: str, batchval: InProcess
) -> None:
    """A wrong base or token URL: exit 64 naming the URL, nothing charged, no row blamed."""
    case = MISADDRESSED[name]
    proxy.rules = case.rules
    named = proxy.url + (case.auth or case.base)
    env = via(proxy, served, case.base, case.auth)
    out = tmp_path / "out"
    source = portfolio(tmp_path / "book.csv", 5)
    done = batchval("run", str(source), "--out", str(out), env=env)
    assert any(e.path == case.wrong and e.status == case.status for e in proxy.exchanges), (
        f"the wrong address was never called: {proxy.exchanges}"
    )
    stopped(done, out, 64, "wrong_address")
    assert named in stop_line(done)
    assert api_problems(out) == 0
    assert served.sandbox.ledger.credits_charged() == 0
    assert served.sandbox.ledger.charges == []


# --- a host name that does not exist: a wrong address, unless DIR reached it before -------


def needs_no_such_name() -> None:
    if not no_such_name():
        pytest.skip(f"this resolver does not say 'no such name' for {NO_SUCH_HOST}")


@pytest.mark.parametrize(
    ("command", "setting"),
    [("run", "base"), ("run", "auth"), ("streets", "base")],
    ids=["run-base-url", "run-auth-url", "streets-base-url"],
)
def test_a_host_name_that_does_not_exist_exits_64_at_once(
    served: RunningSandbox, tmp_path: Path, command: str, setting: str, batchval: InProcess
) -> None:
    """A base or token URL whose host name does not resolve, in a DIR that never reached
    it: exit 64 within seconds naming the host, not 75 after the outage window."""
    needs_no_such_name()
    if setting == "base":
        wrong = {"BATCHVAL_BASE_URL": f"https://{NO_SUCH_HOST}{API_PREFIX}"}
    else:
        wrong = {"BATCHVAL_AUTH_URL": f"https://{NO_SUCH_HOST}"}
    out = tmp_path / "out"
    source = portfolio(tmp_path / "book.csv", 5)
    started = time.monotonic()
    done = batchval(command, str(source), "--out", str(out), env=env_for(served, **wrong))
    took = time.monotonic() - started
    stop = stopped(done, out, 64, "wrong_address")
    line = stop_line(done)
    assert f"the host name {NO_SUCH_HOST} does not resolve (no such name" in line, line
    assert f"the {setting} URL is wrong" in line, line
    assert stop["detail"] in line
    assert stop["status"] is None
    assert took < 20, took  # start-up and reading the input: no retries, no outage window
    assert json.loads((out / "summary.json").read_text())["rows"]["pending"] == 5
    assert served.sandbox.ledger.charges == []


def test_a_host_name_dir_reached_before_is_an_outage(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """The same name failing in a DIR whose checkpoint says it answered before: an outage
    of DNS (75 api_unavailable after run.outage_seconds), said as such."""
    needs_no_such_name()
    out = tmp_path / "out"
    out.mkdir()
    database = Database.open(out)
    database.invocations.note_reached(NO_SUCH_HOST, "2026-01-01T00:00:00+00:00")  # as a run does
    database.close()
    env = env_for(served, BATCHVAL_BASE_URL=f"https://{NO_SUCH_HOST}{API_PREFIX}")
    source = portfolio(tmp_path / "book.csv", 5)
    config = run_config(tmp_path, outage_seconds=OUTAGE_SECONDS)
    done = batchval("run", str(source), "--out", str(out), *config, env=env)
    stopped(done, out, 75, "api_unavailable")
    line = stop_line(done)
    assert f"the host name {NO_SUCH_HOST} does not resolve" in line, line
    assert "taken for an outage of DNS" in line, line


# --- nothing answers: exit 75 with every row pending, and why ----------------------------


@pytest.mark.parametrize("where", ["both", "base"])
def test_nothing_listening_exits_75(
    served: RunningSandbox, tmp_path: Path, where: str, batchval: InProcess
) -> None:
    """Every connection refused (the token URL's too, or the API's only):
    api_unavailable after run.outage_seconds, all rows pending, "connection refused"."""
    closed = closed_port_url()
    env = env_for(
        served,
        BATCHVAL_BASE_URL=closed + API_PREFIX,
        BATCHVAL_AUTH_URL=closed if where == "both" else served.auth_url,
    )
    out = tmp_path / "out"
    source = portfolio(tmp_path / "book.csv", 10)
    config = run_config(tmp_path, outage_seconds=OUTAGE_SECONDS)
    started = time.monotonic()
    done = batchval("run", str(source), "--out", str(out), *config, env=env)
    took = time.monotonic() - started
    assert refuses(closed), "something listened at the closed port: the test proves nothing"
    stop = stopped(done, out, 75, "api_unavailable")
    said = f"connection refused by {closed.removeprefix('http://')}"
    assert said in stop_line(done), stop_line(done)
    assert said in stop["detail"]
    results, problems, summary = outputs(out)
    assert (results.height, problems.height) == (0, 0)
    assert summary["rows"]["pending"] == 10
    # The outage window plus start-up and one last wait, not the 120 s the default gives.
    assert took < OUTAGE_SECONDS + 30, took
    assert [r for r in served.sandbox.ledger.requests if r.path != "/oauth2/token"] == []


def test_tls_spoken_to_a_plain_port_exits_75_saying_so(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """An https:// base URL at a plain HTTP port: api_unavailable, "TLS failed ... wrong
    version number", never read as a refused connection or a wrong address."""
    env = env_for(served, BATCHVAL_BASE_URL=served.base_url.replace("http://", "https://"))
    out = tmp_path / "out"
    config = run_config(tmp_path, outage_seconds=OUTAGE_SECONDS)
    source = portfolio(tmp_path / "book.csv", 3)
    done = batchval("run", str(source), "--out", str(out), *config, env=env)
    stopped(done, out, 75, "api_unavailable")
    assert "TLS failed with 127.0.0.1:" in stop_line(done), stop_line(done)
    assert "wrong version number" in stop_line(done)


# --- a gateway answers HTML: never a row's fault ------------------------------------------


def test_html_pages_from_a_gateway(
    served: RunningSandbox, proxy: HostileProxy, tmp_path: Path, batchval: InProcess
) -> None:
    """15% HTML 403s: no row blamed; 0, or 75 unrecognised_answers; then it completes."""
    # The first calls are spared: HTML on the very first calls means a wrong address.
    proxy.rules = Rules(html_share=0.15, html_status=403, html_spare_first=10)
    rows = 60
    out = tmp_path / "out"
    args = ["run", str(portfolio(tmp_path / "book.csv", rows)), "--out", str(out)]
    first = batchval(*args, env=via(proxy, served))
    assert proxy.counts["html"] > 0, f"no HTML page was served: {proxy.counts}"
    assert first.returncode in (0, 75), f"exit {first.returncode}:\n{first.stderr[-3000:]}"
    if first.returncode == 75:
        stop = stopped(first, out, 75, "unrecognised_answers")
        assert stop["status"] == 403, stop
        assert "text/html" in stop["detail"], stop
        assert "an HTML page of" in stop["detail"], stop  # named, never quoted
        assert "Forbidden" not in stop["detail"], stop
    assert api_problems(out) == 0
    proxy.rules.off()  # the gateway is fixed, or gone
    if first.returncode == 75:
        run_until_complete(batchval, args, via(proxy, served))
    assert api_problems(out) == 0
    assert_accounted(out, rows)
    assert_paid_once(served, out)


# --- a later API's answer: figures as floats, new fields ----------------------------------


# 0.2 as the brief asks (re-runs allowed). 1.0: every answer, replays too, is in the new
# shape, so only a client that accepts it completes, and it must do so at the first run.
@pytest.mark.parametrize("share", [0.2, 1.0])
def test_answers_with_floats_and_new_fields(
    served: RunningSandbox, proxy: HostileProxy, tmp_path: Path, share: float, batchval: InProcess
) -> None:
    """Paid 201s as a later API might write them: complete, integers, nothing lost."""
    proxy.rules = Rules(mutate_share=share)
    rows = 40
    out = tmp_path / "out"
    source = portfolio(tmp_path / "book.csv", rows)
    # A short outage window, so that a client that keeps refusing the answers stops soon.
    args = [
        "run",
        str(source),
        "--out",
        str(out),
        *run_config(tmp_path, outage_seconds=OUTAGE_SECONDS),
    ]
    first = batchval(*args, env=via(proxy, served))
    if share == 1.0:
        assert first.returncode == 0, f"exit {first.returncode}:\n{first.stderr[-3000:]}"
    elif first.returncode != 0:
        run_until_complete(batchval, args, via(proxy, served))
    assert proxy.counts["mutated"] > 0, f"no answer was rewritten: {proxy.counts}"
    assert api_problems(out) == 0
    assert_accounted(out, rows)
    assert_paid_once(served, out)
    results = outputs(out)[0]
    for column in ("estimate", "range_low", "range_high"):
        assert results[column].dtype.is_integer(), (column, results[column].dtype)
    estimates = dict(zip(results["valuation_id"], results["estimate"], strict=True))
    for valuation_id, estimate in proxy.mutated.items():
        assert estimates[valuation_id] == estimate, valuation_id


def test_the_body_sent_is_the_text_hashed_for_its_key(
    served: RunningSandbox, proxy: HostileProxy, tmp_path: Path, batchval: InProcess
) -> None:
    """What reaches the wire is, byte for byte, the canonical request the key was made
    from and that the checkpoint holds: nothing re-serialises it on the way."""
    out = tmp_path / "out"
    source = portfolio(tmp_path / "book.csv", 12, duplicates=3)
    (tmp_path / "with_area.csv").write_text(
        "postcode,property_type,bedrooms,floor_area_sqm,reference\n"
        'SW1A 2AA,flat,2,61.5,Caf\u00e9 \u00e0 "l\'\u00e9t\u00e9"\n'
        "M1 1AE,detached,4,140,\n",
        encoding="utf-8",
    )
    for book, where in ((source, out), (tmp_path / "with_area.csv", tmp_path / "out2")):
        done = batchval("run", str(book), "--out", str(where), env=via(proxy, served))
        assert done.returncode == 0, done.stderr[-2000:]
    stored: dict[str, bytes] = {}
    for where in (out, tmp_path / "out2"):
        run_id = json.loads((where / "summary.json").read_text())["run_id"]
        with sqlite3.connect(where / "checkpoint.sqlite") as db:
            for key, request in db.execute("SELECT key, request FROM requests"):
                assert key == idempotency_key(run_id, request)
                stored[key] = request.encode()
    assert len(proxy.posted) == len(stored) == 12 - 3 + 2  # duplicates are sent once
    for key, body in proxy.posted:
        assert key is not None
        assert body == stored[key], (key, body)
    assert any("\u00e9".encode() in body for _, body in proxy.posted)  # not \u-escaped


# --- the same command the same UTC day: answered free --------------------------------------


def test_same_day_rerun_in_a_new_dir_is_free(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """Same command, new DIR, same UTC day: same keys, replays, not one new credit."""
    ledger = served.sandbox.ledger
    rows = 20
    source = portfolio(tmp_path / "book.csv", rows)
    first, second = tmp_path / "first", tmp_path / "second"
    run_until_complete(batchval, ["run", str(source), "--out", str(first)], env_for(served))
    paid = ledger.credits_charged()
    assert paid == 10 * rows
    run_until_complete(batchval, ["run", str(source), "--out", str(second)], env_for(served))
    assert sum(r.replay for r in ledger.requests) >= rows, "the second run was never answered"
    assert ledger.credits_charged() == paid
    a, b = outputs(first)[0], outputs(second)[0]
    assert a["idempotency_key"].to_list() == b["idempotency_key"].to_list()
    assert a["valuation_id"].to_list() == b["valuation_id"].to_list()
    shutil.rmtree(first)  # the checkpoint lost too
    run_until_complete(batchval, ["run", str(source), "--out", str(first)], env_for(served))
    assert ledger.credits_charged() == paid
    assert ledger.keys_charged_twice() == []
    for out in (first, second):
        assert_accounted(out, rows)


# --- the daily limit: stop, say when, send nothing before midnight ---------------------


def test_daily_limit_stop_status_and_midnight(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """daily_limit: 75 with not_before at midnight; nothing sent before it; then complete."""
    sandbox, ledger = served.sandbox, served.sandbox.ledger
    sandbox.account(LIVE.client_id).daily_limit = 20
    rows = 30
    out = tmp_path / "out"
    args = ["run", str(portfolio(tmp_path / "book.csv", rows)), "--out", str(out)]
    # No real midnight within the day's first part: its count must not restart midway.
    moved = clear_of_midnight(served)
    day = env_for(served, BATCHVAL_CLOCK_OFFSET_SECONDS=str(moved))
    midnight = next_midnight(sandbox.clock.now())
    # The sending invocations are processes of their own: the sandbox in this one judges
    # their timing (`early_requests`), and a client sharing this interpreter reaches it
    # late on a loaded machine.
    first = run_cli(*args, env=day)
    assert daily_limit_hits(served) > 0, "the daily limit was never reached"
    stop = stopped(first, out, 75, "daily_limit")
    not_before = dt.datetime.fromisoformat(stop["not_before"])
    assert midnight <= not_before <= midnight + dt.timedelta(minutes=1), stop
    sent = len(ledger.requests)
    again = batchval(*args, env=day)
    stopped(again, out, 75, "daily_limit")
    assert len(ledger.requests) == sent, "a call went out before midnight"
    assert batchval("status", str(out), env=day).returncode == 75
    as_json = batchval("status", str(out), "--json", env=day)
    assert as_json.returncode == 75, as_json.stderr
    assert json.loads(as_json.stdout)["stop"]["reason"] == "daily_limit"
    # The day ends 6 s from now, for the sandbox and for batchval alike.
    shift = moved + before_midnight(served, 6)
    env = env_for(served, BATCHVAL_CLOCK_OFFSET_SECONDS=str(shift))
    waited = run_cli(*args, "--wait-for-midnight", env=env)
    assert waited.returncode == 0, waited.stderr[-3000:]
    late = ledger.requests[sent:]
    assert late, "nothing was sent after midnight"
    assert all(r.at >= midnight for r in late), [r.at for r in late if r.at < midnight]
    assert ledger.early_requests() == []
    assert sorted(ledger.calls_per_day(LIVE.client_id).values()) == [10, 20]
    assert api_problems(out) == 0
    assert_accounted(out, rows)
    assert_paid_once(served, out)


def test_sigterm_while_waiting_for_midnight(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """SIGTERM during --wait-for-midnight: exit 75 within seconds; midnight still kept."""
    served.sandbox.account(LIVE.client_id).daily_limit = 5
    ledger = served.sandbox.ledger
    out = tmp_path / "out"
    args = ["run", str(portfolio(tmp_path / "book.csv", 10)), "--out", str(out)]
    stdout, stderr = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with (
        stdout.open("w") as out_stream,
        stderr.open("w") as err_stream,
        subprocess.Popen(
            [BATCHVAL, *args, "--wait-for-midnight"],
            env=env_for(served),
            stdout=out_stream,
            stderr=err_stream,
            text=True,
        ) as running,
    ):
        # The calls in flight end and the run settles into its wait, which it logs.
        wait_until(
            lambda: "engine.sending.daily_limit.sleeping" in stderr.read_text(),
            60,
            "the run to sleep until midnight",
            process=running,
        )
        signalled = time.monotonic()
        running.send_signal(signal.SIGTERM)
        try:
            running.wait(timeout=SIGNAL_BOUND_SECONDS)
        except subprocess.TimeoutExpired:
            running.kill()
            running.wait()
            pytest.fail(f"still waiting {SIGNAL_BOUND_SECONDS} s after SIGTERM")
        took = time.monotonic() - signalled
    done = subprocess.CompletedProcess(
        running.args, running.returncode, stdout.read_text(), stderr.read_text()
    )
    stopped(done, out, 75, "signal", "daily_limit")
    assert took < SIGNAL_BOUND_SECONDS, took
    results, problems, summary = outputs(out)
    assert (results.height, problems.height) == (5, 0)
    assert summary["rows"]["pending"] == 5
    sent = len(ledger.requests)
    again = batchval(*args, env=env_for(served))
    stopped(again, out, 75, "daily_limit")
    assert len(ledger.requests) == sent, "a call went out before midnight"


def test_the_proxy_judges_earliness_by_what_the_client_heard() -> None:
    """A call the proxy took in after handing on a 429 (past the grace, inside the
    Retry-After) is early; one taken in before the 429 was handed on is not, however late
    the sandbox behind would see it. The pause counts from when the proxy began to hand
    the 429 on, the earliest the client can have heard it, not from when the proxy's
    thread noted it done."""
    proxy = HostileProxy("http://127.0.0.1:1")
    post = API_PREFIX + "/valuations"
    proxy.exchanges = [
        Exchange(
            "POST", post, 429, "forwarded", 10.0, answered=10.21, retry_after=2.0, answering=10.2
        ),
        Exchange("POST", post, 201, "forwarded", arrived=10.19, answered=10.5),  # on its way
        Exchange("POST", post, 201, "forwarded", arrived=10.44, answered=10.6),  # in the grace
        Exchange("POST", post, 201, "forwarded", arrived=11.0, answered=11.1),  # early
        Exchange("POST", post, 201, "forwarded", arrived=12.205, answered=12.3),  # after it
        Exchange("POST", post, 201, "forwarded", arrived=12.3, answered=12.4),  # after it
        Exchange("POST", "/oauth2/token", 200, "forwarded", arrived=11.0, answered=11.1),
    ]
    assert [(e.arrived, into) for e, into in proxy.early_requests()] == [(11.0, 0.8)]
