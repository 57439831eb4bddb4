"""BatchvalOperator: one batchval command as an Airflow task, run to completion round by
round (docs/how-to/airflow.md is the contract; `rounds` holds the rules):

- 0: success; the run's status (`batchval status OUT --json`) is the task's XCom.
- 75 (incomplete but resumable): the task defers, holding no worker slot, until the
  run's own `stop.not_before` (midnight UTC after a daily limit, the end of a
  Retry-After), or `wait_when_no_time_given` when the run gave none (an outage, a
  signal, another holder), then runs the same command again, which resumes and never
  pays twice. After `max_rounds` rounds it fails, to be looked at.
- 1, 64, 65, 70, 77 (a person must act): the task fails at once, with no retry.
- anything else (killed by the OS, say): an ordinary failure, retried by `retries`.

A round may run on any worker: after a deferral Airflow resumes the task on whichever
worker takes it, or in a new pod. So each round runs in a fresh temporary working
directory, removed after it, and nothing passes from one round to the next through a
disk: only the round's number and the run's id, in the deferral's own kwargs. With
`out_dir` an `s3://` URL the run's memory, its lease and its outputs live at the URL
and any worker resumes the run; a local `out_dir` suits one machine only.

No `execution_timeout`: Airflow counts it over the task's whole life, every deferral
included, so it would fail a backfill that waits for midnight day after day; the
operator refuses one (`rounds.refuse_execution_timeout`). Each wait is bounded by its
deferral's own timeout instead (the wait plus `late_after`).

Secrets reach batchval through its environment only, never its arguments or the log:
the API's from `conn_id` (host = base URL, login = client id, password = client secret,
extra `{"auth_url": ...}`), the object store's from `storage_conn_id` (an `aws`-style
connection: login = access key id, password = secret access key, extra
`{"region_name": ..., "endpoint_url": ...}`), read only when the round touches a URL.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from typing import Any

from airflow.providers.standard.triggers.temporal import DateTimeTrigger
from airflow.sdk import BaseOperator

from batchval.airflow import rounds
from batchval.airflow.rounds import Next

# Where Airflow 3.3 keeps them; the earlier 3.x kept them in core (a fallback never run
# by `make airflow-check`, which installs 3.3).
try:
    from airflow.sdk import BaseHook
except ImportError:  # pragma: no cover
    from airflow.hooks.base import BaseHook
try:
    from airflow.sdk.exceptions import AirflowException, AirflowFailException
except ImportError:  # pragma: no cover
    from airflow.exceptions import AirflowException, AirflowFailException

# How long batchval may take to stop gently after SIGTERM (in-flight calls finish, the
# outputs are written, at a URL too): its shutdown grace is 5 s; a large DIR takes longer.
STOP_GRACE_SECONDS = 120


class BatchvalOperator(BaseOperator):
    """Run `batchval ARGUMENTS` (whose run's place is `out_dir`) to completion."""

    template_fields: Sequence[str] = ("arguments", "out_dir")

    def __init__(
        self,
        *,
        arguments: list[str],
        out_dir: str,
        conn_id: str | None = None,
        storage_conn_id: str | None = None,
        batchval_bin: str | None = None,
        max_rounds: int = 30,
        wait_when_no_time_given: dt.timedelta = dt.timedelta(minutes=5),
        late_after: dt.timedelta = dt.timedelta(hours=1),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        # Given here, by the DAG's default_args or by Airflow's config: refused all the same.
        rounds.refuse_execution_timeout(self.execution_timeout)
        self.arguments = arguments
        self.out_dir = out_dir
        self.conn_id = conn_id
        self.storage_conn_id = storage_conn_id
        self.batchval_bin = batchval_bin
        self.max_rounds = max_rounds
        self.wait_when_no_time_given = wait_when_no_time_given
        self.late_after = late_after
        self._process: subprocess.Popen[str] | None = None

    def execute(self, context: Any) -> dict[str, Any]:
        return self._round(1, None)

    def resume(
        self,
        context: Any,
        event: Any = None,
        round_number: int = 1,
        run_id: str | None = None,
    ) -> dict[str, Any]:
        """Called back by the trigger once the run's own not-before time has passed,
        perhaps on another worker: only the kwargs of the deferral came along."""
        return self._round(round_number, run_id)

    def _round(self, number: int, run_id: str | None) -> dict[str, Any]:
        command = rounds.batchval_command(self.batchval_bin, os.environ)
        arguments = rounds.with_run_id(self.arguments, run_id)
        # A fresh working directory a round, as a moved task finds its disk; removed after.
        with tempfile.TemporaryDirectory(prefix="batchval-round-") as workdir:
            env = self._environment(workdir)
            self.log.info(
                "round %s: %s in a fresh working directory %s",
                number,
                " ".join([*command, *arguments]),
                workdir,
            )
            code = self._batchval([*command, *arguments], env, workdir)
            step = rounds.next_step(code)
            status = self._status(command, env, workdir) if step is not Next.FAIL else {}
        found = status.get("run_id")
        self.log.info(
            "batchval exited %s (round %s of at most %s), run %s",
            code,
            number,
            self.max_rounds,
            found,
        )
        if run_id and found and found != run_id:
            raise AirflowFailException(
                f"the run at {self.out_dir} is now run {found!r}, not {run_id!r}: its memory "
                "was lost or replaced between rounds; stopped so that nothing is paid twice"
            )
        if step is Next.SUCCEED:
            return status
        if step is Next.FAIL_FOR_A_PERSON:
            raise AirflowFailException(
                f"batchval exited {code} ({rounds.PERSON_MUST_ACT[code]}): a person must act; "
                f"see {self.out_dir}/summary.json and batchval.log"
            )
        if step is Next.FAIL:
            raise AirflowException(f"batchval exited {code}")
        if number >= self.max_rounds:
            raise AirflowFailException(f"still incomplete after {number} rounds of batchval")
        now = dt.datetime.now(dt.UTC)
        moment = rounds.next_round_at(
            status.get("stop"),
            now,
            self.wait_when_no_time_given,
            rounds.clock_offset(os.environ),
        )
        self.log.info("incomplete but resumable: running it again at %s", moment.isoformat())
        self.defer(
            trigger=DateTimeTrigger(moment=moment),
            method_name="resume",
            kwargs={"round_number": number + 1, "run_id": found or run_id},
            timeout=moment - now + self.late_after,
        )
        raise AssertionError("defer() does not return")  # pragma: no cover

    def _environment(self, workdir: str) -> dict[str, str]:
        api = self._connection_fields(self.conn_id)
        storage = None
        if rounds.needs_storage(self.arguments, self.out_dir):
            storage = self._connection_fields(self.storage_conn_id)
        return rounds.round_environment(os.environ, workdir, api=api, storage=storage)

    @staticmethod
    def _connection_fields(conn_id: str | None) -> rounds.ConnectionFields | None:
        if conn_id is None:
            return None
        connection = BaseHook.get_connection(conn_id)
        return rounds.ConnectionFields(
            host=connection.host,
            login=connection.login,
            password=connection.password,
            extra=connection.extra_dejson,
        )

    def _status(self, command: list[str], env: dict[str, str], workdir: str) -> dict[str, Any]:
        """The run's status read from its place (`status URL` restores it into the round's
        working directory): never from anything an earlier round left on a disk."""
        done = subprocess.run(
            [*command, "status", self.out_dir, "--json"],
            env=env,
            cwd=workdir,
            capture_output=True,
            text=True,
            check=False,
        )
        try:
            found: dict[str, Any] = json.loads(done.stdout)
        except ValueError:
            return {}
        return found

    def _batchval(self, command: list[str], env: dict[str, str], workdir: str) -> int:
        # Its own session, so that Airflow's kill reaches batchval only through on_kill:
        # SIGTERM, then time to finish in-flight calls and write the outputs (exit 75).
        with subprocess.Popen(
            command,
            env=env,
            cwd=workdir,
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
            process.kill()  # the run's memory keeps what was done: the next round resumes
