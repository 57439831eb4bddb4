"""BatchvalOperator: one batchval command as an Airflow task, run to completion round by
round (docs/how-to/airflow.md is the contract; `rounds` holds the rules):

- 0: success; the task's XCom says what the run is and what its last invocation did
  (`rounds.task_result`; for `report`, the report's place), and each outlet asset's event
  carries the run's figures in its `extra` (`rounds.asset_extra`).
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
disk: only the round's number and the run's id, in the deferral's own kwargs and in its
trigger's event (`trigger.RoundTrigger`: `airflow dags test` hands back the event alone). With
`out_dir` an `s3://` or `az://` URL the run's memory, its lease and its outputs live at the URL
and any worker resumes the run; a local `out_dir` suits one machine only.

No `execution_timeout`: Airflow counts it over the task's whole life, every deferral
included, so it would fail a backfill that waits for midnight day after day; the
operator refuses one given to the task (`rounds.refuse_execution_timeout`) and replaces
one inherited from `default_args` or `[core]` by none, with a warning. Each wait is
bounded by its deferral's own timeout instead (the wait plus `late_after`).

batchval's log events (JSON lines off a terminal) reach the task log one line each, at
their own level, without a second timestamp (`tasklog`).

Secrets reach batchval through its environment only, never its arguments or the log:
the API's from `conn_id` (`hook.BatchvalHook`: a `batchval` connection, or a `generic` one
with host = base URL, login = client id, password = client secret, extra
`{"auth_url": ...}`), the object store's from `storage_conn_id`, read only when the
round touches a URL: an `aws`-style connection (login = access key id, password = secret
access key, extra `{"region_name": ..., "endpoint_url": ...}`), or Azure's `wasb` one
(login = account name, password = account key, host = account URL, extra `sas_token` or
`connection_string`: `rounds.azure_environment`).
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

from airflow.sdk import Asset, AssetAlias, BaseOperator

from batchval.airflow import _lineage as lineage
from batchval.airflow import _rounds as rounds
from batchval.airflow import _tasklog as tasklog
from batchval.airflow._hook import BatchvalHook, connection_fields
from batchval.airflow._rounds import Next
from batchval.airflow._trigger import RoundTrigger

# Where Airflow 3.3 keeps them; the earlier 3.x kept them in core (a fallback never run
# by `make airflow-check`, which installs 3.3).
try:
    from airflow.sdk.exceptions import AirflowException, AirflowFailException
except ImportError:  # pragma: no cover
    from airflow.exceptions import AirflowException, AirflowFailException
# Airflow's `[core] default_task_execution_timeout`, as its operators take it by default.
try:
    from airflow.sdk.definitions._internal.abstractoperator import (
        DEFAULT_TASK_EXECUTION_TIMEOUT,
    )
except ImportError:  # pragma: no cover
    DEFAULT_TASK_EXECUTION_TIMEOUT = None

# How long batchval may take to stop gently after SIGTERM (in-flight calls finish, the
# outputs are written, at a URL too): its shutdown grace is 5 s; a large DIR takes longer.
STOP_GRACE_SECONDS = 120


class BatchvalOperator(BaseOperator):
    """Run `batchval ARGUMENTS` (whose run's place is `out_dir`) to completion."""

    # The connection ids too: a DAG can choose its account and its store by a param
    # (`"{{ params.storage_conn_id }}"`).
    template_fields: Sequence[str] = ("arguments", "out_dir", "conn_id", "storage_conn_id")

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
        # Airflow fills a parameter from `default_args` only when the __init__ it wraps names
        # it: this one does not, so an execution_timeout here was given to the task itself
        # (refused), while `default_args` (merged, the DAG's included) holds an inherited one.
        # A mapped task's partial() merges default_args in before this runs: there the two
        # cannot be told apart, and both are replaced with the warning.
        given = kwargs.pop("execution_timeout", None)
        defaults = kwargs.get("default_args") or {}
        if getattr(self, "_BaseOperator__from_mapped", False):
            inherited, where = given, "the mapped task's partial() or default_args"
        else:
            rounds.refuse_execution_timeout(given)
            inherited, where = defaults.get("execution_timeout"), "default_args"
            if "execution_timeout" not in defaults:
                inherited = DEFAULT_TASK_EXECUTION_TIMEOUT
                where = "Airflow's [core] default_task_execution_timeout"
        super().__init__(execution_timeout=None, **kwargs)
        warning = rounds.inherited_execution_timeout(inherited, where)
        if warning is not None:
            self.log.warning("%s", warning)
        self.arguments = arguments
        self.out_dir = out_dir
        self.conn_id = conn_id
        self.storage_conn_id = storage_conn_id
        self.batchval_bin = batchval_bin
        self.max_rounds = max_rounds
        self.wait_when_no_time_given = wait_when_no_time_given
        self.late_after = late_after
        self._process: subprocess.Popen[str] | None = None
        # What the last round showed (its status, exit code, number), for the lineage.
        self._seen: tuple[dict[str, Any], int, int] | None = None

    def execute(self, context: Any) -> dict[str, Any]:
        return self._round(context, 1, None)

    def resume(
        self,
        context: Any,
        event: Any = None,
        round_number: int | None = None,
        run_id: str | None = None,
    ) -> dict[str, Any]:
        """Called back by the trigger once the run's own not-before time has passed,
        perhaps on another worker. The triggerer hands back the deferral's kwargs and the
        event; `airflow dags test` the event alone: the round and the run's id are in both."""
        number, run = rounds.resumed_round(event, round_number, run_id)
        return self._round(context, number, run)

    def _round(self, context: Any, number: int, run_id: str | None) -> dict[str, Any]:
        command = rounds.batchval_command(self.batchval_bin, os.environ)
        arguments = rounds.with_run_id(self.arguments, run_id)
        # A fresh working directory a round, as a moved task finds its disk; removed after.
        with tempfile.TemporaryDirectory(prefix="batchval-round-") as workdir:
            try:
                env = self._environment(workdir)
            except rounds.StorageConnectionError as exc:
                raise AirflowFailException(
                    rounds.connection_verdict(self.storage_conn_id, exc)
                ) from None
            self.log.info(
                "round %s: %s in a fresh working directory %s",
                number,
                " ".join([*command, *arguments]),
                workdir,
            )
            code, stop_line = self._batchval([*command, *arguments], env, workdir)
            step = rounds.next_step(code)
            status = self._status(command, env, workdir) if step is not Next.FAIL else {}
        self._seen = (status, code, number)
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
            self._mark_outlets(context, status)
            return rounds.task_result(self.arguments, self.out_dir, status, number)
        if step is Next.FAIL_FOR_A_PERSON:
            raise AirflowFailException(
                rounds.person_verdict(
                    code,
                    stop_line,
                    out_dir=self.out_dir,
                    url=rounds.needs_storage(self.arguments, self.out_dir),
                    status_read=bool(status),
                    conn_id=self.conn_id,
                    storage_conn_id=self.storage_conn_id,
                )
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
        carried = found or run_id
        self.defer(
            trigger=RoundTrigger(moment, round_number=number + 1, run_id=carried),
            method_name="resume",
            kwargs={"round_number": number + 1, "run_id": carried},
            timeout=moment - now + self.late_after,
        )
        raise AssertionError("defer() does not return")  # pragma: no cover

    def _mark_outlets(self, context: Any, status: dict[str, Any]) -> None:
        """The final round's asset events: each outlet's `extra` says what the run did
        (`rounds.asset_extra`); an AssetAlias gets an event for the run's place."""
        if not self.outlets or not status:
            return
        extra = rounds.asset_extra(self.out_dir, status)
        events = context["outlet_events"]
        for outlet in self.outlets:
            if isinstance(outlet, AssetAlias):
                events[outlet].add(Asset(uri=rounds.asset_uri(self.out_dir)), extra=extra)
            elif isinstance(outlet, Asset):
                events[outlet].extra.update(extra)

    def _environment(self, workdir: str) -> dict[str, str]:
        api = None if self.conn_id is None else BatchvalHook(self.conn_id).get_conn()
        return rounds.round_environment(os.environ, workdir, api=api, storage=self._storage())

    def _storage(self) -> Any:
        if self.storage_conn_id is None or not rounds.needs_storage(self.arguments, self.out_dir):
            return None
        return connection_fields(self.storage_conn_id)

    # --- OpenLineage (the provider calls these when it is installed: `lineage`) ------------

    def get_openlineage_facets_on_start(self) -> Any:
        return lineage.operator_lineage(self._lineage(with_round=False))

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        return lineage.operator_lineage(self._lineage(with_round=True))

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        return lineage.operator_lineage(self._lineage(with_round=True))

    def _lineage(self, *, with_round: bool) -> lineage.Lineage:
        """The task's datasets, named with the account its storage connection gives (no
        secret leaves: only the names are read from the environment), and what the last
        round showed."""
        try:
            environ = rounds.round_environment(os.environ, "", storage=self._storage())
        except rounds.StorageConnectionError:
            environ = dict(os.environ)
        status, code, number = self._seen if with_round and self._seen else ({}, None, None)
        return lineage.lineage_of(
            self.arguments, self.out_dir, environ, status=status, exit_code=code, rounds=number
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

    def _batchval(
        self, command: list[str], env: dict[str, str], workdir: str
    ) -> tuple[int, str | None]:
        """Run one round of batchval: its exit code and its one-line stop, if it said one.
        Its own session, so that Airflow's kill reaches batchval only through on_kill:
        SIGTERM, then time to finish in-flight calls and write the outputs (exit 75)."""
        stop_line = None
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
            # Each event a line at its own level; the summary and the stop line as they are.
            for raw in process.stdout:
                line = tasklog.read_line(raw)
                self.log.log(line.level, "%s", line.text)
                if line.is_stop:
                    stop_line = line.text
            code = process.wait()
        self._process = None
        return code, stop_line

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
