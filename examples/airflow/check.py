"""`make airflow-check`: the example DAGs run for real by `airflow dags test`, against a
sandbox served on loopback, in Airflow's own virtual environment (never the project's).

- batchval_nightly succeeds: the run completes and its report is written.
- batchval_backfill stops at a small daily limit (exit 75 with `not_before` = midnight
  UTC), defers, and completes once the sandbox's clock has passed midnight: the sandbox
  and batchval are both put two minutes before a midnight (their clocks move together), and
  the operator waits for the real moment that midnight falls on.
- A run a person must fix (refused credentials, 77) fails at once, with no retry.
- batchval_sharded (when `batchval split` exists) values a book in two shards, each
  with its own account's connection, pool and DIR.
Prints one line per check and exits 1 if any failed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
AIRFLOW = Path(os.environ.get("AIRFLOW_VENV", ROOT / ".airflow-venv")) / "bin" / "airflow"
BATCHVAL = ROOT / ".venv" / "bin" / "batchval"
SAMPLE = ROOT / "sample_inputs" / "portfolio.csv"
# The sandbox's built-in logins (README, The sandbox).
LIVE = ("sandbox-live", "sandbox-live-secret")
# How far before a midnight the backfill check starts both clocks.
MIDNIGHT_MARGIN_SECONDS = 120
TEST = ("sandbox-test", "sandbox-test-secret")
DEFAULT_CONN = "AIRFLOW_CONN_BATCHVAL_DEFAULT"


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


def rows(path: Path, count: int) -> Path:
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()[: count + 1]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


class Airflow:
    def __init__(self, home: Path) -> None:
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("BATCHVAL_", "AIRFLOW"))},
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "examples" / "airflow"),
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            "PYTHONWARNINGS": "ignore",
        }
        self("db", "migrate")

    def __call__(self, *args: str, env: dict[str, str] | None = None) -> str:
        done = subprocess.run(
            [str(AIRFLOW), *args],
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        return done.stdout + done.stderr

    def dags_test(self, dag_id: str, conf: dict[str, Any], env: dict[str, str]) -> tuple[str, str]:
        """Run one DagRun; returns its final state and the whole output."""
        output = self("dags", "test", dag_id, "-c", json.dumps(conf), env=env)
        states = [
            line for line in output.splitlines() if "state=" in line and "DagRun Finished" in line
        ]
        state = states[-1].split("state=")[1].split(",")[0].strip() if states else "unknown"
        return state, output


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
            and sorted(modes) == ["live", "live", "test"],
            f"state {state}, rows valued per shard {valued}, modes {modes}",
        )
        if state != "success":
            print(output[-4000:])


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

        with sandbox("--no-rate-limit") as served:
            env = {DEFAULT_CONN: connection(served, "sandbox-live", "sandbox-live-secret")}
            conf = {"input": str(rows(work / "nightly.csv", 40)), "out_root": str(work / "nightly")}
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

            env = {DEFAULT_CONN: connection(served, "sandbox-live", "wrong-secret")}
            conf = {"input": str(rows(work / "refused.csv", 5)), "out_root": str(work / "refused")}
            state, output = airflow.dags_test("batchval_nightly", conf, env)
            tries = output.count("batchval exited 77 (round")
            check(
                "refused credentials (77) fail at once, no retry",
                state == "failed" and tries == 1,
                f"state {state}, batchval ran {tries} time(s)",
            )

        with sandbox("--no-rate-limit", "--daily-limit", "30") as served:
            now = dt.datetime.now(dt.UTC)
            midnight = (now + dt.timedelta(days=2)).replace(
                hour=0, minute=0, second=0, microsecond=0
            )
            # Two minutes before it: `airflow dags test` takes tens of seconds to start the
            # task on a loaded machine, and a first run after midnight meets no limit
            # until the next day (a run on the session's busy machine timed out so).
            shifted = midnight - dt.timedelta(seconds=MIDNIGHT_MARGIN_SECONDS)
            post(served["auth_url"] + "/_sandbox/clock", {"set": shifted.isoformat()})
            offset = (shifted - dt.datetime.now(dt.UTC)).total_seconds()
            env = {
                DEFAULT_CONN: connection(served, "sandbox-live", "sandbox-live-secret"),
                "BATCHVAL_CLOCK_OFFSET_SECONDS": str(offset),
            }
            out = work / "backfill"
            conf = {"input": str(rows(work / "backfill.csv", 50)), "out_dir": str(out)}
            began = time.monotonic()
            state, output = airflow.dags_test("batchval_backfill", conf, env)
            got = summary(out)
            charged = ledger(served)
            check(
                "backfill DAG stops at the daily limit and completes after midnight UTC",
                state == "success"
                and output.count("batchval exited 75 (round") >= 1
                and got.get("rows", {}).get("valued") == 50
                and got.get("invocations", 0) >= 2,
                f"state {state}, {output.count('batchval exited 75 (round')} daily-limit stop(s), "
                f"{got.get('invocations')} invocations, {got.get('rows')}, "
                f"{time.monotonic() - began:.0f} s",
            )
            twice = charged.get("keys_charged_twice", [])
            check("nothing charged twice", not twice, f"{len(twice)} key(s) charged twice")

        if BATCHVAL_HAS_SPLIT():
            sharded(airflow, work, check)
        else:
            check("sharded DAG", False, "batchval has no split command")
        print(f"airflow-check: {failures} failed, {time.monotonic() - started:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
