"""`make airflow-check`: the example DAGs run for real by `airflow dags test`, against a
sandbox served on loopback, in Airflow's own virtual environment (never the project's).

- batchval[airflow] is installed there (not from the checkout: Airflow works away from
  it) and Airflow lists it as a provider; every package of that environment is still at
  the version examples/airflow/constraints.txt pins.

- batchval_nightly succeeds: the run completes and its report is written.
- batchval_backfill stops at a small daily limit (exit 75 with `not_before` = midnight
  UTC), defers, and completes once the sandbox's clock has passed midnight: the sandbox
  and batchval are both put two minutes before a midnight (their clocks move together), and
  the operator waits for the real moment that midnight falls on. Three times: into a local
  DIR, and twice as a moved task: input and run at `s3://` URLs on a SeaweedFS server, then
  at `az://` URLs on Azurite (tests/objects_server.py, tests/azure_server.py: each started
  on loopback), the storage credentials from an Airflow connection (`aws`; `wasb` with a
  connection string), every round in a fresh working directory: nothing charged twice, one
  run id across the rounds, every row valued, the results read back at the URL by polars,
  and no secret of the store's (raw, URL-encoded, JSON-escaped) in any task-log line, any
  file under Airflow's home or any object at the store. On Azure, the provider's own
  WasbHook, given the same connection, finds the results where the run left them.
- A run a person must fix (refused credentials, 77) fails at once, with no retry; so does a
  `wasb` storage connection giving a connection string beside a login, before batchval runs.
- `airflow connections test` (enabled) on `batchval` connections with live-scope and
  test-scope credentials, on test credentials said to be live and on refused credentials:
  each works or fails as it should, saying the scope or why; a `generic` connection, which
  Airflow cannot test (no hook for the type), passes BatchvalHook's own test.
- batchval_nightly_book: two nights at `s3://` places, then two at `az://` places on
  Azurite, the store's connection named by the DAG's `storage_conn_id` param (the DAG
  file unchanged); the second night carries the book forward.
- batchval_sharded (when `batchval split` exists) values a book in two shards, each
  with its own account's connection, pool and DIR.
Prints one line per check and exits 1 if any failed.

The DAGs run the batchval installed into Airflow's environment with `batchval[airflow]`
(the operator's own default, `python -m batchval` beside Airflow's interpreter); this
script, run by the project's interpreter, serves the sandbox and the S3 server.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from batchval._internal.store.objects import ObjectStore

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from azure_server import AzureServer, azurite_binary  # noqa: E402  (the tests' servers)
from azure_server import running as azurite_running  # noqa: E402
from objects_server import S3Server, running, weed_binary  # noqa: E402
from secrets_scan import scan  # noqa: E402
from verifytypes import type_completeness, unknown_exports  # noqa: E402

AIRFLOW = (
    Path(os.environ.get("AIRFLOW_VENV", ROOT / ".airflow-venv")) / "bin" / "airflow"
).absolute()
BATCHVAL = ROOT / ".venv" / "bin" / "batchval"
SAMPLE = ROOT / "sample_inputs" / "portfolio.csv"
# The sandbox's built-in logins (docs/how-to/sandbox-in-tests.md).
LIVE = ("sandbox-live", "sandbox-live-secret")
# How far before a midnight the backfill check starts both clocks.
MIDNIGHT_MARGIN_SECONDS = 120
TEST = ("sandbox-test", "sandbox-test-secret")
DEFAULT_CONN = "AIRFLOW_CONN_BATCHVAL_DEFAULT"
STORAGE_CONN = "AIRFLOW_CONN_BATCHVAL_STORAGE"
BACKFILL_ROWS = 50
# The operator's log lines: one a round (its working directory), one a round's end (its run).
ROUND_DIR = re.compile(r"round (\d+): .* in a fresh working directory (\S+)")
ROUND_RUN = re.compile(r"batchval exited (\d+) \(round (\d+) of at most \d+\), run (\S+)")
Check = Callable[..., None]
# A daily-limit stop's warning event, as the task log shows it: at Airflow's warning level.
WARNING_EVENT = re.compile(r"(?i)\bwarn(ing)?\b.*\brun\.stopping: |\brun\.stopping \(")
BACKFILL_OUTPUT: list[str] = []
NIGHTLY_ROWS, NIGHTLY_BUDGET = 40, 25


@contextlib.contextmanager
def sandbox(*options: str) -> Iterator[dict[str, Any]]:
    """`batchval sandbox` on a free loopback port; yields its JSON line."""
    process = subprocess.Popen(
        [str(BATCHVAL), "sandbox", "--host", "127.0.0.1", "--port", "0", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        yield json.loads(process.stdout.readline())
    finally:
        process.terminate()
        process.wait(timeout=30)


def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        found: dict[str, Any] = json.loads(answer.read())
    return found


def ledger(served: dict[str, Any]) -> dict[str, Any]:
    with urllib.request.urlopen(served["auth_url"] + "/_sandbox/ledger", timeout=10) as answer:
        found: dict[str, Any] = json.loads(answer.read())
    return found


def connection(served: dict[str, Any], client: str, secret: str) -> str:
    return json.dumps(
        {
            "conn_type": "generic",
            "host": served["base_url"],
            "login": client,
            "password": secret,
            "extra": {"auth_url": served["auth_url"]},
        }
    )


def storage_connection(s3: S3Server) -> str:
    """An `aws`-style connection to the S3 server: the operator hands it to batchval as
    AWS_* variables in its environment."""
    return json.dumps(
        {
            "conn_type": "aws",
            "login": s3.access_key_id,
            "password": s3.secret_access_key,
            "extra": {"region_name": s3.region, "endpoint_url": s3.endpoint},
        }
    )


@dataclasses.dataclass(frozen=True)
class Place:
    """An object store a moved task runs at: its name, its URLs, the variables that open it
    here, the Airflow storage connection the operator reads, and what must never leak."""

    name: str
    url: Callable[[str], str]
    env: dict[str, str]
    connection: str
    secrets: list[str]
    # OpenLineage's namespace for the store's datasets (its dataset naming spec).
    namespace: str


def s3_place(s3: S3Server) -> Place:
    namespace = f"s3://{s3.bucket}"
    return Place("S3", s3.url, s3.env(), storage_connection(s3), s3.secrets, namespace)


def azure_place(azurite: AzureServer) -> Place:
    """Azurite through a `wasb` connection holding a connection string, as the Azure portal
    shows one (its account key inside): the operator hands it to batchval as
    AZURE_STORAGE_CONNECTION_STRING."""
    connection = json.dumps(
        {"conn_type": "wasb", "extra": {"connection_string": azurite.connection_string()}}
    )
    namespace = f"wasbs://{azurite.container}@{azurite.account}.dfs.core.windows.net"
    return Place("Azure", azurite.url, azurite.env(), connection, azurite.secrets, namespace)


def rows(path: Path, count: int) -> Path:
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()[: count + 1]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# A backfill whose wait after a stop that gives no time (a signal) is seconds, not the
# example's 5 minutes: the SIGTERM check's own DAG, beside copies of the examples.
SIGTERM_DAG = """
import datetime as dt
from airflow.sdk import DAG, Param
from batchval.airflow import BatchvalOperator

with DAG(
    dag_id="batchval_sigterm_check",
    schedule=None,
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    params={"input": Param("", type="string"), "out_dir": Param("", type="string")},
    default_args={"execution_timeout": dt.timedelta(hours=1)},  # replaced, with a warning
):
    BatchvalOperator(
        task_id="backfill",
        arguments=["run", "{{ params.input }}", "--out", "{{ params.out_dir }}"],
        out_dir="{{ params.out_dir }}",
        conn_id="batchval_default",
        wait_when_no_time_given=dt.timedelta(seconds=5),
    )
"""


def dags_folder(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for dag in (ROOT / "examples" / "airflow").glob("batchval_*.py"):
        (folder / dag.name).write_text(dag.read_text(encoding="utf-8"), encoding="utf-8")
    (folder / "batchval_sigterm_check.py").write_text(SIGTERM_DAG, encoding="utf-8")
    return folder


class Airflow:
    def __init__(self, home: Path) -> None:
        self.env = {
            # Nothing of this shell's: the API's and the store's settings come from connections.
            **{
                k: v
                for k, v in os.environ.items()
                if not k.startswith(("BATCHVAL_", "AIRFLOW", "AWS_", "AZURE_"))
            },
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder(home.parent / "dags")),
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            "PYTHONWARNINGS": "ignore",
        }
        # Airflow works from its home, away from the checkout: batchval must come from
        # Airflow's own site-packages, as on a worker that never saw the checkout.
        self.cwd = home.parent
        self("db", "migrate")

    def __call__(self, *args: str, env: dict[str, str] | None = None) -> str:
        done = self._ran([str(AIRFLOW), *args], env, timeout=900)
        return done.stdout + done.stderr

    def _ran(
        self, argv: list[str], env: dict[str, str] | None, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        """`argv` run in Airflow's home with its environment (and `env`), its output kept."""
        return subprocess.run(
            argv,
            env={**self.env, **(env or {})},
            cwd=self.cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def pins_moved(self) -> list[str]:
        """The packages of Airflow's environment that are not at the version
        examples/airflow/constraints.txt pins (batchval's own wheel aside)."""
        frozen = self.python(
            "import importlib.metadata as m; "
            "print(';'.join(f\"{d.metadata['Name']}=={d.version}\" for d in m.distributions()))"
        )
        installed = {
            _canonical(name): version
            for name, _, version in (pin.partition("==") for pin in frozen.split(";"))
        }
        return sorted(
            f"{name} {installed[name]} (pinned {version})"
            for name, version in CONSTRAINED.items()
            if name in installed and installed[name] != version
        )

    def python(self, code: str, env: dict[str, str] | None = None) -> str:
        """What `code` prints, run by Airflow's interpreter (its last line, else stderr's)."""
        done = self._ran([str(AIRFLOW.parent / "python"), "-c", code], env, timeout=120)
        return (done.stdout.strip().splitlines() or [done.stderr.strip()])[-1]

    def installed(self) -> tuple[str, str]:
        """Where Airflow's interpreter finds batchval and what it was installed from (its
        direct_url.json), and the providers Airflow lists."""
        code = (
            "import batchval.airflow as a, importlib.metadata as m; print(a.__file__); "
            "print(m.distribution('batchval').read_text('direct_url.json'))"
        )
        done = self._ran([str(AIRFLOW.parent / "python"), "-c", code], None, timeout=120)
        return done.stdout.strip(), self("providers", "list")

    def public_types(self, work: Path) -> tuple[str, set[str], dict[str, list[str]], float]:
        """pyright's `--verifytypes` over batchval as Airflow's environment holds it (the
        installed wheel, and Airflow itself: `--verifytypes` reads the packages of the
        `python` on PATH): where it found the package, the exported names of unknown type,
        each of its errors by symbol, and the completeness score."""
        report = type_completeness(AIRFLOW.parent / "python", work)
        symbols = report["symbols"]
        errors = {
            s["name"]: [d["message"] for d in s["diagnostics"] if d["severity"] == "error"]
            for s in symbols
            if any(d["severity"] == "error" for d in s["diagnostics"])
        }
        typed_at, score = str(report["pyTypedPath"]), float(report["completenessScore"])
        return typed_at, unknown_exports(report), errors, score

    def wasb_hook_finds(self, place: Place, container: str, blob: str) -> str:
        """What apache-airflow-providers-microsoft-azure's own WasbHook says of `blob`,
        given `place`'s storage connection: a `wasb` connection it reads as batchval does."""
        return self.python(
            "from airflow.providers.microsoft.azure.hooks.wasb import WasbHook; "
            "print(WasbHook(wasb_conn_id='batchval_storage').check_for_blob("
            f"{container!r}, {blob!r}))",
            env={STORAGE_CONN: place.connection},
        )

    def dags_test(self, dag_id: str, conf: dict[str, Any], env: dict[str, str]) -> tuple[str, str]:
        """Run one DagRun; returns its final state and the whole output."""
        output = self("dags", "test", dag_id, "-c", json.dumps(conf), env=env)
        states = [
            line for line in output.splitlines() if "state=" in line and "DagRun Finished" in line
        ]
        state = states[-1].split("state=")[1].split(",")[0].strip() if states else "unknown"
        return state, output


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# What examples/airflow/constraints.txt pins: name -> version.
CONSTRAINED = {
    _canonical(name): version
    for name, _, version in (
        line.strip().partition("==")
        for line in (ROOT / "examples" / "airflow" / "constraints.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )
}


def summary(out: Path) -> dict[str, Any]:
    path = out / "summary.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def BATCHVAL_HAS_SPLIT() -> bool:  # noqa: N802
    done = subprocess.run([str(BATCHVAL), "split", "--help"], capture_output=True, check=False)
    return done.returncode == 0


def sharded(airflow: Airflow, work: Path, check: Any) -> None:
    """Two shards, two accounts (the sandbox's live and test logins), two pools."""
    for account in (0, 1):
        airflow("pools", "set", f"batchval_account_{account}", "1", "one run per API account")
    with sandbox("--no-rate-limit") as served:
        env = {
            "AIRFLOW_CONN_BATCHVAL_ACCOUNT_0": connection(
                served, "sandbox-live", "sandbox-live-secret"
            ),
            "AIRFLOW_CONN_BATCHVAL_ACCOUNT_1": connection(
                served, "sandbox-test", "sandbox-test-secret"
            ),
        }
        out = work / "sharded"
        # Three shards of 60 rows by loan id: none empty; an empty one would get no task.
        conf = {"input": str(rows(work / "sharded.csv", 60)), "out_root": str(out), "shards": 3}
        state, output = airflow.dags_test("batchval_sharded", conf, env)
        shards = [summary(out / f"shard-{n}") for n in (0, 1, 2)]
        valued = [s.get("rows", {}).get("valued") for s in shards]
        modes = [s.get("mode") for s in shards]
        check(
            "sharded DAG values every row once, shards spread over two accounts",
            state == "success"
            and sum(v or 0 for v in valued) == 60
            and all(valued)
            and sorted(str(mode) for mode in modes) == ["live", "live", "test"],
            f"state {state}, rows valued per shard {valued}, modes {modes}",
        )
        if state != "success":
            print(output[-4000:])


def backfill(airflow: Airflow, work: Path, check: Check, place: Place | None = None) -> None:
    """The backfill DAG across a midnight at a daily limit of 30 calls for 50 rows: into a
    local DIR, or at URLs on `place`'s store (input and run), as a moved task."""
    where = place.name.lower() if place else "local"
    source = rows(work / f"backfill-{where}.csv", BACKFILL_ROWS)
    with sandbox("--no-rate-limit", "--daily-limit", "30") as served:
        env = {DEFAULT_CONN: connection(served, "sandbox-live", "sandbox-live-secret")}
        if place is None:
            out, given = work / "backfill", str(source)
            conf = {"input": given, "out_dir": str(out)}
        else:
            store = ObjectStore.from_url(place.url("books"), place.env)
            store.put("backfill.csv", source.read_bytes())
            conf = {"input": place.url("books/backfill.csv"), "out_dir": place.url("runs/backfill")}
            env[STORAGE_CONN] = place.connection
        now = dt.datetime.now(dt.UTC)
        midnight = (now + dt.timedelta(days=2)).replace(hour=0, minute=0, second=0, microsecond=0)
        # Two minutes before it: `airflow dags test` takes tens of seconds to start the
        # task on a loaded machine, and a first run after midnight meets no limit
        # until the next day (a run on the session's busy machine timed out so).
        shifted = midnight - dt.timedelta(seconds=MIDNIGHT_MARGIN_SECONDS)
        post(served["auth_url"] + "/_sandbox/clock", {"set": shifted.isoformat()})
        env["BATCHVAL_CLOCK_OFFSET_SECONDS"] = str(
            (shifted - dt.datetime.now(dt.UTC)).total_seconds()
        )
        began = time.monotonic()
        state, output = airflow.dags_test("batchval_backfill", conf, env)
        took = time.monotonic() - began
        BACKFILL_OUTPUT.extend(output.splitlines())
        charged = ledger(served)
    stops = output.count("batchval exited 75 (round")
    if place is None:
        got = summary(out)
        check(
            "backfill DAG stops at the daily limit and completes after midnight UTC",
            state == "success"
            and stops >= 1
            and got.get("rows", {}).get("valued") == BACKFILL_ROWS
            and got.get("invocations", 0) >= 2,
            f"state {state}, {stops} daily-limit stop(s), {got.get('invocations')} invocations, "
            f"{got.get('rows')}, {took:.0f} s",
        )
        twice = charged.get("keys_charged_twice", [])
        check("nothing charged twice", not twice, f"{len(twice)} key(s) charged twice")
        if state != "success":
            print(output[-4000:])
        return
    at_url = ObjectStore.from_url(conf["out_dir"], place.env)
    found = at_url.get("summary.json")
    got = json.loads(found[0]) if found else {}
    results = at_url.get("results.parquet")
    numbers = (
        sorted(pl.read_parquet(io.BytesIO(results[0]))["row_number"].to_list()) if results else []
    )
    workdirs = [directory for _, directory in ROUND_DIR.findall(output)]
    run_ids = {run for _, _, run in ROUND_RUN.findall(output)}
    twice = charged.get("keys_charged_twice", [])
    check(
        f"backfill DAG as a moved task on {place.name}: two rounds or more across midnight, "
        "each in a fresh working directory, one run id",
        state == "success"
        and stops >= 1
        and got.get("invocations", 0) >= 2
        and len(workdirs) == len(set(workdirs)) >= 2
        and not any(Path(directory).exists() for directory in workdirs)
        and len(run_ids) == 1
        and "None" not in run_ids,
        f"state {state}, {stops} daily-limit stop(s), {got.get('invocations')} invocations, "
        f"{len(set(workdirs))} working directories (all removed: "
        f"{not any(Path(d).exists() for d in workdirs)}), run ids {sorted(run_ids)}, {took:.0f} s",
    )
    hits = scan(
        place.secrets,
        paths=[airflow.cwd / "home", airflow.cwd / "dags", source],
        texts=output.splitlines(),
        objects=[place.url("")],
        env=place.env,
    )
    check(
        f"moved task on {place.name}: no storage secret in any task-log line, file or object",
        not hits,
        f"{len(output.splitlines())} log lines, the files under Airflow's home and every "
        f"object at {place.url('')} scanned"
        + "".join(f"; found in {hit.where} ({hit.form})" for hit in hits[:5]),
    )
    check(
        f"moved task on {place.name}: every row valued, nothing charged twice, results at the URL",
        got.get("rows", {}).get("valued") == BACKFILL_ROWS
        and got.get("exit_code") == 0
        and charged.get("valuations_created") == BACKFILL_ROWS
        and not twice
        and numbers == list(range(1, BACKFILL_ROWS + 1)),
        f"{got.get('rows')}, {charged.get('valuations_created')} valuations created, "
        f"{len(twice)} key(s) charged twice, {len(numbers)} rows in results.parquet at the URL",
    )
    if state != "success":
        print(output[-4000:])


def refused_connection(airflow: Airflow, work: Path, check: Check, place: Place) -> None:
    """A `wasb` connection holding a connection string and a login besides: the task fails
    before batchval runs, naming both fields, and shows no secret."""
    given = json.loads(place.connection)
    given["login"] = "someaccount"
    env = {
        DEFAULT_CONN: connection(
            {"base_url": "http://127.0.0.1:9/partners/v1", "auth_url": "http://127.0.0.1:9"},
            *LIVE,
        ),
        STORAGE_CONN: json.dumps(given),
    }
    conf = {"input": place.url("books/backfill.csv"), "out_dir": place.url("runs/refused")}
    state, output = airflow.dags_test("batchval_backfill", conf, env)
    said = "its extra 'connection_string' and its login (the account name) are both set"
    check(
        "a wasb connection giving a connection string beside a login fails the task, naming both, "
        "before batchval runs",
        state == "failed"
        and said in output
        and "cannot be used" in output
        and not ROUND_DIR.search(output)
        and not scan(place.secrets, texts=output.splitlines()),
        f"state {state}, named both: {said in output}, rounds run {len(ROUND_DIR.findall(output))}",
    )
    if state != "failed" or said not in output:
        print(output[-3000:])


def connections_tested(airflow: Airflow, served: dict[str, Any], check: Check) -> None:
    """`airflow connections test` (enabled: Airflow 3 disables it by default) on batchval
    connections: live-scope and test-scope credentials, a `generic` connection of the
    operator's older form, test credentials on a connection that says live, and refused
    credentials. The hook answers by `batchval check`, installed in Airflow's environment."""

    def batchval_connection(client: str, secret: str, **extra: str) -> str:
        return json.dumps(
            {
                "conn_type": "batchval",
                "host": served["base_url"],
                "login": client,
                "password": secret,
                "extra": {"auth_url": served["auth_url"], **extra},
            }
        )

    given = {
        "AIRFLOW__CORE__TEST_CONNECTION": "Enabled",
        "AIRFLOW_CONN_BATCHVAL_LIVE": batchval_connection(*LIVE, scope="live"),
        "AIRFLOW_CONN_BATCHVAL_TEST": batchval_connection(*TEST, scope="test"),
        "AIRFLOW_CONN_BATCHVAL_GENERIC": connection(served, *LIVE),
        "AIRFLOW_CONN_BATCHVAL_MISLABELLED": batchval_connection(*TEST, scope="live"),
        "AIRFLOW_CONN_BATCHVAL_REFUSED": batchval_connection(LIVE[0], "wrong-secret"),
    }
    expected = {
        "batchval_live": (True, "live scope (partners:read)"),
        "batchval_test": (True, "test scope (partners:test)"),
        "batchval_mislabelled": (False, "but the connection says live"),
        "batchval_refused": (False, "credentials refused"),
    }
    for conn_id, (works, said) in expected.items():
        output = airflow("connections", "test", conn_id, env=given)
        passed = "Connection success!" in output
        if works:  # Airflow prints the message of a failure only: the hook's own says it
            output += airflow.python(
                "from batchval.airflow import BatchvalHook; "
                f"print(BatchvalHook({conn_id!r}).test_connection())",
                env=given,
            )
        check(
            f"airflow connections test {conn_id}: {'works' if works else 'fails'}, saying why",
            passed == works and said in output and "wrong-secret" not in output,
            output.strip().splitlines()[-1][:300] if output.strip() else "no output",
        )
    # Airflow tests a connection through its type's hook, and `generic` has none: the
    # command fails whatever the fields. BatchvalHook reads a generic one all the same, and
    # its own test (as docs/how-to/airflow.md shows it) passes.
    output = airflow("connections", "test", "batchval_generic", env=given)
    tested = airflow.python(
        "from batchval.airflow import BatchvalHook; "
        "print(BatchvalHook('batchval_generic').test_connection())",
        env=given,
    )
    check(
        "a generic connection: Airflow has no hook to test it with, BatchvalHook's test works",
        "Connection success!" not in output
        and tested.startswith("(True, ")
        and "live scope (partners:read)" in tested,
        tested[-300:],
    )


def sigterm(airflow: Airflow, work: Path, check: Check) -> None:
    """A SIGTERM to batchval in round 1 under `airflow dags test`: batchval stops (75, no
    time given), the task defers, and round 2 runs with the run's own --run-id (the inline
    trigger hands the task its event alone, which carries the round and the run)."""
    source = rows(work / "sigterm.csv", 60)
    out = work / "sigterm"
    with sandbox("--rate", "2", "--burst", "2") as served:
        env = {DEFAULT_CONN: connection(served, "sandbox-live", "sandbox-live-secret")}
        conf = {"input": str(source), "out_dir": str(out)}
        process = subprocess.Popen(
            [str(AIRFLOW), "dags", "test", "batchval_sigterm_check", "-c", json.dumps(conf)],
            env={**airflow.env, **env},
            cwd=airflow.cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        signalled = _signal_batchval(str(out), process)
        output, _ = process.communicate(timeout=900)
        charged = ledger(served)
    rounds = ROUND_DIR.findall(output)
    numbers = [int(number) for number, _ in rounds]
    second = [line for line in output.splitlines() if ROUND_DIR.search(line) and "round 2:" in line]
    run_ids = {run for _, _, run in ROUND_RUN.findall(output)}
    got = summary(out)
    check(
        "SIGTERM in round 1 under `airflow dags test`: round 2 runs with the same --run-id",
        signalled
        and "batchval exited 75 (round 1 " in output
        and numbers[:2] == [1, 2]
        and bool(second)
        and len(run_ids) == 1
        and any(f"--run-id {run}" in second[0] for run in run_ids)
        and got.get("exit_code") == 0
        and not charged.get("keys_charged_twice"),
        f"signalled {signalled}, rounds {numbers}, run ids {sorted(run_ids)}, "
        f"round 2: {second[0].split('round 2: ')[1][:160] if second else 'none'}",
    )
    replaced = "execution_timeout: the one from default_args (1:00:00) is replaced" in output
    check("an execution_timeout from default_args is replaced, with a warning", replaced)
    if not (numbers[:2] == [1, 2] and replaced):
        print(output[-4000:])


def _signal_batchval(out: str, task: subprocess.Popen[str]) -> bool:
    """SIGTERM to the batchval process of `out`'s round 1 once it has sent for a while."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and task.poll() is None:
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                line = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "-m batchval run" in line and out in line and (Path(out) / "batchval.log").exists():
                time.sleep(3)  # some calls made, more to make at 2 a second
                os.kill(int(proc.name), signal.SIGTERM)
                return True
        time.sleep(0.2)
    return False


def lineage_transport(path: Path) -> dict[str, str]:
    """The OpenLineage provider's file transport: each event a JSON line in `path`."""
    transport = {"type": "file", "log_file_path": str(path), "append": True}
    return {
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "batchval-check",
    }


def lineage_event(path: Path, task: str, kind: str = "COMPLETE") -> dict[str, Any]:
    """The last `kind` event of the task named `task` (`dag.task`) in the transport's file."""
    found: dict[str, Any] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            if event.get("eventType") == kind and event["job"]["name"] == task:
                found = event
    return found


def datasets(event: dict[str, Any], side: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["namespace"], d["name"]): d for d in event.get(side) or ()}


def lineage_matches(
    event: dict[str, Any],
    inputs: list[tuple[str, str]],
    outputs: dict[tuple[str, str], Path | bytes],
    summary: dict[str, Any],
) -> str:
    """What is wrong with a COMPLETE event's lineage, or "" when nothing is: each of `inputs`
    among its inputs; each of `outputs` among its outputs, with a schema facet of the
    file's columns and output statistics of its rows and bytes (the file, read here: a
    local path, or its bytes fetched from the store); batchval's run facet as summary.json."""
    if not event:
        return "no COMPLETE event in the transport's file"
    read, written = datasets(event, "inputs"), datasets(event, "outputs")
    missing = [name for name in inputs if name not in read]
    missing += [name for name in outputs if name not in written]
    if missing:
        return f"missing {missing}; inputs {sorted(read)}, outputs {sorted(written)}"
    for name, file in outputs.items():
        data = file.read_bytes() if isinstance(file, Path) else file
        table = pq.read_table(io.BytesIO(data))
        facets, statistics = written[name].get("facets") or {}, written[name].get("outputFacets")
        fields = [field["name"] for field in (facets.get("schema") or {}).get("fields") or ()]
        counted = (statistics or {}).get("outputStatistics") or {}
        if fields != table.schema.names:
            return f"{name}: schema fields {fields[:5]}... not the file's {table.schema.names[:5]}"
        if (counted.get("rowCount"), counted.get("size")) != (table.num_rows, len(data)):
            return f"{name}: statistics {counted} not {table.num_rows} rows, {len(data)} bytes"
    facet = event["run"]["facets"].get("batchval") or {}
    expected = {
        "runId": summary.get("run_id"),
        "exitCode": summary.get("exit_code"),
        "creditsTotal": (summary.get("credits_charged") or {}).get("total"),
        "rowsValued": (summary.get("rows") or {}).get("valued"),
    }
    if {key: facet.get(key) for key in expected} != expected:
        return f"batchval run facet {facet} does not say {expected}"
    return ""


def nightly_book(airflow: Airflow, work: Path, check: Check, place: Place) -> None:
    """The nightly-book DAG for two nights at `place`'s URLs (SeaweedFS's `s3://`, or
    Azurite's `az://` through a `wasb` connection the DAG's `storage_conn_id` param names,
    the DAG file unchanged): the first values what its budget allows and defers the rest,
    the second carries the book forward; the asset event's `extra` read by the DAG
    scheduled on it."""
    store = ObjectStore.from_url(place.url("books"), place.env)
    store.put("loans.csv", rows(work / f"loans-{place.name}.csv", NIGHTLY_ROWS).read_bytes())
    conf = {
        "input": place.url("books/loans.csv"),
        "book": place.url("valuations/book.parquet"),
        "out_root": place.url("valuations/nights"),
        "row_id": "loan_id",
        "max_calls": NIGHTLY_BUDGET,
        "storage_conn_id": "batchval_store_param",
    }
    nights = []
    events = work / f"lineage-{place.name}.jsonl"
    # The DAG runs with --live, which takes batchval's sandbox only when it rehearses.
    with sandbox("--no-rate-limit", "--rehearsal") as served:
        env = {
            DEFAULT_CONN: connection(served, "sandbox-live", "sandbox-live-secret"),
            "AIRFLOW_CONN_BATCHVAL_STORE_PARAM": place.connection,
            **lineage_transport(events),
        }
        for day in ("2026-11-25", "2026-11-26"):
            output = airflow(
                "dags", "test", "batchval_nightly_book", day, "-c", json.dumps(conf), env=env
            )
            finished = [line for line in output.splitlines() if "DagRun Finished" in line]
            state = finished[-1].split("state=")[1].split(",")[0] if finished else "unknown"
            found = ObjectStore.from_url(place.url(f"valuations/nights/{day}"), place.env)
            got = found.get("summary.json")
            nights.append((state, json.loads(got[0]) if got else {}, found.get("report.html")))
            if state != "success":
                print(output[-4000:])
        charged = ledger(served)
        after = airflow("dags", "test", "batchval_after_the_night", env=env)
    books = [(night.get("book") or {}).get("rows") or {} for _, night, _ in nights]
    scheme = place.url("x").split(":")[0]
    check(
        f"nightly-book DAG, two nights at {scheme}:// places ({place.name}, its connection "
        "from a param): the second carries the book forward",
        all(state == "success" and night.get("exit_code") == 0 for state, night, _ in nights)
        and all(report is not None for _, _, report in nights)
        and (books[1].get("carried") or 0) > 0
        and not charged.get("keys_charged_twice"),
        f"states {[state for state, _, _ in nights]}, book rows by night {books}",
    )
    extra = re.search(r"the night's asset event: (\{.*\})", after)
    read = json.loads(extra.group(1)) if extra else {}
    check(
        f"the asset event's extra says what the night did ({place.name}), read by the DAG "
        "scheduled on it",
        read.get("place") == place.url("valuations/nights/2026-11-26")
        and read.get("mode") == "rehearsal"
        and isinstance(read.get("rows_valued"), int)
        and not any(secret in after for secret in place.secrets),
        f"extra {read or 'not found'}",
    )
    if not read:
        print(after[-3000:])
    night = ObjectStore.from_url(place.url("valuations/nights/2026-11-26"), place.env)
    key = "valuations/nights/2026-11-26/"
    book = (place.namespace, "valuations/book.parquet")
    outputs: dict[tuple[str, str], Path | bytes] = {
        (place.namespace, key + name): (night.get(name) or (b"",))[0]
        for name in ("results.parquet", "problems.parquet", "picks.parquet")
    }
    event = lineage_event(events, "batchval_nightly_book.revalue_book")
    wrong = lineage_matches(
        event, [(place.namespace, "books/loans.csv"), book], outputs, nights[1][1]
    )
    if not wrong and book not in datasets(event, "outputs"):
        wrong = f"the book {book} is not among the outputs"
    check(
        f"OpenLineage events of the second night ({place.name}): the input, the book and the "
        f"outputs named in {place.namespace}, with their schema and statistics",
        not wrong,
        wrong or f"{len(datasets(event, 'outputs'))} outputs, run {event['run']['runId']}",
    )


def main() -> int:
    failures = 0

    def check(name: str, ok: bool, detail: str = "") -> None:
        nonlocal failures
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)

    with tempfile.TemporaryDirectory(prefix="batchval-airflow-") as scratch:
        work = Path(scratch)
        started = time.monotonic()
        airflow = Airflow(work / "home")
        airflow("pools", "set", "batchval_default", "1", "one batchval run per API account")
        found, providers = airflow.installed()
        module, _, origin = found.partition("\n")
        check(
            "batchval is installed as airflow.md says (the `make dist` wheel, with its airflow "
            "extra) in Airflow's environment and listed as a provider",
            module.startswith(str(AIRFLOW.parent.parent))
            and not module.startswith(str(ROOT / "batchval"))
            and re.search(r"/dist/batchval-[^/]+\.whl", origin) is not None
            and any(line.startswith("batchval ") for line in providers.splitlines()),
            f"batchval.airflow from {module or 'nowhere'}, installed from {origin.strip()}",
        )

        typed_at, unknown, errors, score = airflow.public_types(work)
        check(
            "pyright --verifytypes over the installed batchval, Airflow present: every public "
            "name's type known but BatchvalOperator's metaclass, which is Airflow's "
            "BaseOperator's (unknown to --verifytypes for any class derived from it)",
            typed_at.startswith(str(AIRFLOW.parent.parent))
            and unknown == {"batchval.airflow.BatchvalOperator"}
            and errors
            == {"batchval.airflow._operator.BatchvalOperator": ["Type of metaclass unknown"]},
            f"completeness {score:.1%}, from {typed_at}; unknown {sorted(unknown)}; {errors}",
        )

        moved = airflow.pins_moved()
        check(
            "batchval's extra, installed under the constraints, leaves every pin where it was",
            moved == [],
            ", ".join(moved[:5]) or f"{len(CONSTRAINED)} packages at their pins",
        )

        with sandbox("--no-rate-limit") as served:
            events = work / "lineage-nightly.jsonl"
            env = {
                DEFAULT_CONN: connection(served, "sandbox-live", "sandbox-live-secret"),
                **lineage_transport(events),
            }
            source = rows(work / "nightly.csv", 40)
            conf = {"input": str(source), "out_root": str(work / "nightly")}
            state, output = airflow.dags_test("batchval_nightly", conf, env)
            runs = list((work / "nightly").glob("*"))
            got = summary(runs[0]) if runs else {}
            check(
                "nightly DAG succeeds",
                state == "success"
                and got.get("exit_code") == 0
                and (runs[0] / "report.html").is_file(),
                f"state {state}, batchval exit {got.get('exit_code')}, rows {got.get('rows')}",
            )
            if state != "success":
                print(output[-4000:])
            out = runs[0] if runs else work / "nightly" / "none"
            value = "batchval_nightly.value_portfolio"
            wrong = lineage_matches(
                lineage_event(events, value),
                [("file", str(source))],
                {("file", str(out / n)): out / n for n in ("results.parquet", "problems.parquet")},
                got,
            )
            on_start = datasets(lineage_event(events, value, "START"), "outputs")
            if not wrong and ("file", str(out / "results.parquet")) not in on_start:
                wrong = f"the START event names no results.parquet: {sorted(on_start)}"
            report = lineage_event(events, "batchval_nightly.report")
            if not wrong and list(datasets(report, "outputs")) != [
                ("file", str(out / "report.html"))
            ]:
                wrong = f"the report's outputs are {sorted(datasets(report, 'outputs'))}"
            check(
                "OpenLineage events (the provider's file transport): the input and outputs "
                "named as the spec says (local: `file`, the path), with their schema, rows and "
                "bytes, and batchval's run facet; the report's page its only output",
                not wrong,
                wrong or f"{len(datasets(lineage_event(events, value), 'outputs'))} outputs",
            )
            connections_tested(airflow, served, check)

            env = {DEFAULT_CONN: connection(served, "sandbox-live", "wrong-secret")}
            conf = {"input": str(rows(work / "refused.csv", 5)), "out_root": str(work / "refused")}
            state, output = airflow.dags_test("batchval_nightly", conf, env)
            tries = output.count("batchval exited 77 (round")
            check(
                "refused credentials (77) fail at once, no retry",
                state == "failed" and tries == 1,
                f"state {state}, batchval ran {tries} time(s)",
            )

        backfill(airflow, work, check)
        weed = weed_binary()
        if weed is None:
            check("backfill DAG as a moved task on S3", False, "no `weed` (make .venv/.installed)")
        else:
            (work / "s3").mkdir()
            with running(work / "s3", weed) as s3:
                backfill(airflow, work, check, s3_place(s3))
        azurite = azurite_binary()
        if azurite is None:
            check(
                "backfill DAG as a moved task on Azure",
                False,
                "no `azurite-blob` (make .venv/.installed installs Azurite with npm)",
            )
        else:
            (work / "azure").mkdir()
            with azurite_running(work / "azure", azurite) as served_by:
                place = azure_place(served_by)
                backfill(airflow, work, check, place)
                found = airflow.wasb_hook_finds(
                    place, served_by.container, "runs/backfill/results.parquet"
                )
                check(
                    "the provider's WasbHook, given the same wasb connection, finds the results",
                    found == "True",
                    f"WasbHook.check_for_blob said {found[-300:]!r}",
                )
                refused_connection(airflow, work, check, place)
        warned = [line for line in BACKFILL_OUTPUT if WARNING_EVENT.search(line)]
        check(
            "a warning event of batchval is a warning-level task-log line, without its JSON",
            bool(warned) and not any('"event"' in line for line in warned),
            (warned[0].strip()[:200] if warned else "no warning-level run.stopping line"),
        )

        sigterm(airflow, work, check)
        if weed is not None:
            (work / "s3-book").mkdir()
            with running(work / "s3-book", weed) as s3:
                nightly_book(airflow, work, check, s3_place(s3))
        if azurite is not None:
            (work / "azure-book").mkdir()
            with azurite_running(work / "azure-book", azurite) as served_by:
                nightly_book(airflow, work, check, azure_place(served_by))

        if BATCHVAL_HAS_SPLIT():
            sharded(airflow, work, check)
        else:
            check("sharded DAG", False, "batchval has no split command")
        print(f"airflow-check: {failures} failed, {time.monotonic() - started:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
