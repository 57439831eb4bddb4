"""BatchvalOperator: one `batchval` command as an Airflow task, its exit code mapped to
Airflow's habits (the README's "Airflow" section is the contract):

- 0: success; the run's summary (`batchval status DIR --json`) is the task's XCom.
- 75 (incomplete but resumable): the task defers, without holding a worker slot, until
  the run's own `stop.not_before` (midnight UTC after a daily limit, or the end of a
  `Retry-After`), or `wait_when_no_time_given` seconds when the run gave none (an
  outage, a signal, another run holding DIR), then runs the same command again: a
  re-run resumes, never pays twice. After `max_rounds` rounds it fails, to be looked at.
- 64, 65, 70, 77 (a person must act: the call, the input, a defect, the account): the
  task fails at once with no retry, since retrying cannot help and only burns retries.
- anything else (killed by the OS, say): an ordinary failure, retried by the task's
  `retries`.

Credentials come from an Airflow connection (`conn_id`): host = the API's base URL,
login = client id, password = client secret, extra `{"auth_url": ...}`. They reach the
command through its environment only, never its arguments or the log.

This file needs Airflow, which the project keeps out of its own dependencies: it lives
beside the DAGs (`make airflow-check` runs them in Airflow's own virtual environment).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.providers.standard.triggers.temporal import DateTimeTrigger
from airflow.sdk import BaseHook, BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

# The project's own environment, by absolute path: an Airflow worker's PATH never has it.
PROJECT = Path(__file__).resolve().parents[2]
BATCHVAL = os.environ.get("BATCHVAL_BIN", str(PROJECT / ".venv" / "bin" / "batchval"))
RESUMABLE = 75
PERSON_MUST_ACT = {
    1: "verify found differences",
    64: "command line or config",
    65: "input",
    70: "internal error",
    77: "account",
}
# How long batchval may take to stop gently after SIGTERM (in-flight calls finish, the
# outputs are written): its shutdown grace is 5 s; writing a large DIR takes longer.
STOP_GRACE_SECONDS = 120


class BatchvalOperator(BaseOperator):
    """Run `batchval ARGUMENTS` (whose run directory is `out_dir`) to completion."""

    template_fields: Sequence[str] = ("arguments", "out_dir")

    def __init__(
        self,
        *,
        arguments: list[str],
        out_dir: str,
        conn_id: str | None = None,
        max_rounds: int = 30,
        wait_when_no_time_given: int = 300,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.arguments = arguments
        self.out_dir = out_dir
        self.conn_id = conn_id
        self.max_rounds = max_rounds
        self.wait_when_no_time_given = wait_when_no_time_given
        self._process: subprocess.Popen[str] | None = None

    def execute(self, context: Any) -> dict[str, Any]:
        return self._round(1)

    def resume(self, context: Any, event: Any = None, round_number: int = 1) -> dict[str, Any]:
        """Called back by the trigger once the run's own not-before time has passed."""
        return self._round(round_number)

    def _round(self, number: int) -> dict[str, Any]:
        code = self._batchval(*self.arguments)
        self.log.info("batchval exited %s (round %s of at most %s)", code, number, self.max_rounds)
        if code == 0:
            return self._status()
        if code in PERSON_MUST_ACT:
            raise AirflowFailException(
                f"batchval exited {code} ({PERSON_MUST_ACT[code]}): a person must act; "
                f"see {self.out_dir}/summary.json and batchval.log"
            )
        if code != RESUMABLE:
            raise AirflowException(f"batchval exited {code}")
        if number >= self.max_rounds:
            raise AirflowFailException(f"still incomplete after {number} rounds of batchval")
        moment = self._not_before()
        self.log.info("incomplete but resumable: running it again at %s", moment.isoformat())
        self.defer(
            trigger=DateTimeTrigger(moment=moment),
            method_name="resume",
            kwargs={"round_number": number + 1},
        )
        raise AssertionError("defer() does not return")  # pragma: no cover

    def _not_before(self) -> dt.datetime:
        """When the run says to come back (its stop's not_before), on this machine's clock."""
        now = dt.datetime.now(dt.UTC)
        stop = self._status().get("stop") or {}
        if not stop.get("not_before"):
            return now + dt.timedelta(seconds=self.wait_when_no_time_given)
        moment = dt.datetime.fromisoformat(stop["not_before"])
        # A test seam of batchval's: a run whose clock is moved (BATCHVAL_CLOCK_OFFSET_SECONDS)
        # gives its times on that clock; Airflow waits on the real one.
        moment -= dt.timedelta(seconds=float(os.environ.get("BATCHVAL_CLOCK_OFFSET_SECONDS", 0)))
        return max(moment, now) + dt.timedelta(seconds=1)

    def _status(self) -> dict[str, Any]:
        done = subprocess.run(
            [BATCHVAL, "status", self.out_dir, "--json"],
            capture_output=True,
            text=True,
            check=False,
        )
        try:
            found: dict[str, Any] = json.loads(done.stdout)
        except ValueError:
            return {}
        return found

    def _batchval(self, *arguments: str) -> int:
        env = dict(os.environ)
        if self.conn_id is not None:
            connection = BaseHook.get_connection(self.conn_id)
            extra = connection.extra_dejson
            env.update(
                BATCHVAL_BASE_URL=str(connection.host),
                BATCHVAL_AUTH_URL=str(extra["auth_url"]),
                BATCHVAL_CLIENT_ID=str(connection.login),
                BATCHVAL_CLIENT_SECRET=str(connection.password),
            )
        self.log.info("running %s %s", BATCHVAL, " ".join(arguments))
        # Its own session, so that Airflow's kill reaches batchval only through on_kill:
        # SIGTERM, then time to finish in-flight calls and write the outputs (exit 75).
        with subprocess.Popen(
            [BATCHVAL, *arguments],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        ) as process:
            self._process = process
            assert process.stdout is not None
            # The summary (stdout) and the one-line stop reason (stderr) go to the task log.
            for line in process.stdout:
                self.log.info("%s", line.rstrip("\n"))
            code = process.wait()
        self._process = None
        return code

    def on_kill(self) -> None:
        """Airflow stops the task: batchval is asked to stop gently, and waited for."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()  # the checkpoint keeps what was done: the next run resumes
