"""One round of batchval under Airflow, without Airflow: which batchval runs, with what
environment, what its exit code asks of the task, and when the next round may start.

The operator (`batchval.airflow._operator`) is the thin Airflow side; everything here is
plain data and functions, so the project's own tests (which have no Airflow) hold it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import ipaddress
import sys
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from batchval._internal.outcome import ExitCode

# A configured batchval, by path, for a worker whose batchval is not the one installed
# beside Airflow (the operator's `batchval_bin` parameter wins over it).
BIN_VARIABLE = "BATCHVAL_BIN"
# The schemes of a place kept on object storage (docs/how-to/object-storage.md; Azure's as
# store/azure.py takes them): a `gs://` one batchval refuses itself (64), naming the forms.
URL_SCHEMES = ("s3://", "gs://", "az://", "abfs://", "abfss://")
# A test seam of batchval's (a run whose clock is moved gives its times on that clock).
CLOCK_OFFSET_VARIABLE = "BATCHVAL_CLOCK_OFFSET_SECONDS"


class Next(enum.Enum):
    """What the task does after a round of batchval, by its exit code."""

    SUCCEED = "succeed"  # 0: the run is complete
    DEFER = "defer"  # 75: resumable; wait for the run's own time, then the same command
    FAIL_FOR_A_PERSON = "fail_for_a_person"  # 1, 64, 65, 70, 77: no retry can help
    FAIL = "fail"  # anything else (a killed process): an ordinary failure, retried


# Why a person must act, by the code that says so (docs/reference/exit-codes.md).
PERSON_MUST_ACT: Mapping[int, str] = {
    ExitCode.DIFFERENCES: "verify found differences",
    ExitCode.USAGE: "command line or config",
    ExitCode.INPUT: "input",
    ExitCode.INTERNAL: "internal error",
    ExitCode.ACCOUNT: "account",
}


def next_step(code: int) -> Next:
    """The one mapping from batchval's exit code to the task's next step."""
    if code == ExitCode.COMPLETE:
        return Next.SUCCEED
    if code == ExitCode.RESUMABLE:
        return Next.DEFER
    if code in PERSON_MUST_ACT:
        return Next.FAIL_FOR_A_PERSON
    return Next.FAIL


def batchval_command(configured: str | None, environ: Mapping[str, str]) -> list[str]:
    """The batchval a round runs: the one configured (the operator's parameter, else
    BATCHVAL_BIN), else the one installed beside the interpreter running the task
    (`python -m batchval`), which is the environment `batchval[airflow]` went into."""
    chosen = configured or environ.get(BIN_VARIABLE)
    if chosen:
        return [chosen]
    return [sys.executable, "-m", "batchval"]


def is_url(place: str) -> bool:
    """`place` is on object storage (a local path, or `file://`, is not)."""
    return place.startswith(URL_SCHEMES)


def needs_storage(arguments: Sequence[str], out_dir: str) -> bool:
    """The round touches object storage: its place or any argument (an INPUT) is a URL."""
    return is_url(out_dir) or any(is_url(argument) for argument in arguments)


@dataclasses.dataclass(frozen=True, slots=True)
class ConnectionFields:
    """The fields of an Airflow connection that a round reads (no Airflow type needed)."""

    host: str | None
    login: str | None
    password: str | None
    extra: Mapping[str, Any]
    conn_type: str | None = None


class StorageConnectionError(ValueError):
    """A storage connection batchval cannot use as it stands (a person fixes it, as for
    batchval's own 64): its message names the connection's fields at fault."""


def api_environment(connection: ConnectionFields) -> dict[str, str]:
    """The API's settings from a connection, a `batchval` one or a `generic` one alike:
    host = base URL, login = client id, password = client secret, extra `auth_url` (the
    form's field, which older Airflow kept as `extra__batchval__auth_url`)."""
    auth_url = extra_field(connection, "auth_url")
    if not auth_url:  # never "None" as a URL: the round fails saying which field is empty
        raise ValueError("the API's connection has no Token URL (its extra's auth_url)")
    return {
        "BATCHVAL_BASE_URL": str(connection.host),
        "BATCHVAL_AUTH_URL": str(auth_url),
        "BATCHVAL_CLIENT_ID": str(connection.login),
        "BATCHVAL_CLIENT_SECRET": str(connection.password),
    }


def extra_field(connection: ConnectionFields, name: str) -> Any:
    """A field of the connection's extra, by its own name or as Airflow's older forms
    prefixed it (`extra__batchval__<name>`); None when it has neither."""
    extra = connection.extra
    return extra.get(name, extra.get(f"extra__batchval__{name}"))


# Azure's connection type, from apache-airflow-providers-microsoft-azure (its WasbHook).
WASB = "wasb"
# The variables batchval reads Azure's settings from (store/azure.py, which this package,
# running batchval as a process, does not import;
# tests/airflow_provider/test_airflow_rounds.py holds the two equal).
AZURE_ACCOUNT_NAME = "AZURE_STORAGE_ACCOUNT_NAME"
AZURE_ACCOUNT_KEY = "AZURE_STORAGE_ACCOUNT_KEY"
AZURE_SAS_TOKEN = "AZURE_STORAGE_SAS_TOKEN"
AZURE_CONNECTION_STRING = "AZURE_STORAGE_CONNECTION_STRING"
AZURE_ENDPOINT = "AZURE_STORAGE_ENDPOINT"
# The variables that carry a credential of the connection's own: given any, the worker's
# own variables of that cloud (`AWS_*`, `AZURE_*`) give way to the connection's.
_CREDENTIALS = frozenset(
    {
        "AWS_ACCESS_KEY_ID",
        AZURE_ACCOUNT_KEY,
        AZURE_SAS_TOKEN,
        AZURE_CONNECTION_STRING,
        "AZURE_CLIENT_SECRET",
    }
)


def storage_environment(connection: ConnectionFields) -> dict[str, str]:
    """The object store's credentials from a storage connection: a `wasb` one's as Azure's
    tools read them (`azure_environment`), any other as an `aws` one's."""
    if connection.conn_type == WASB:
        return azure_environment(connection)
    return aws_environment(connection)


def aws_environment(connection: ConnectionFields) -> dict[str, str]:
    """An `aws`-style connection's credentials, as AWS's own tools read them: login =
    access key id, password = secret access key, extra `region_name`, `endpoint_url` (an
    S3-compatible server) and `aws_session_token`."""
    env = {
        "AWS_ACCESS_KEY_ID": str(connection.login or ""),
        "AWS_SECRET_ACCESS_KEY": str(connection.password or ""),
    }
    extra = connection.extra
    for key, variable in (
        ("region_name", "AWS_REGION"),
        ("endpoint_url", "AWS_ENDPOINT_URL"),
        ("aws_session_token", "AWS_SESSION_TOKEN"),
    ):
        if extra.get(key):
            env[variable] = str(extra[key])
    return {name: value for name, value in env.items() if value}


def _wasb_extra(extra: Mapping[str, Any], name: str) -> str:
    """An extra field as the provider's WasbHook reads it: by its name, else by its older
    `extra__wasb__` name; an empty value is none."""
    value = extra[name] if name in extra else extra.get(f"extra__wasb__{name}")
    return str(value) if value else ""


def _account_url(host: str) -> tuple[str, str]:
    """A `wasb` connection's host (its account URL, `https://` when it names no scheme) as
    (Blob endpoint, account): the account is the host's first label, or an emulator's
    first path segment (`http://127.0.0.1:10000/devstoreaccount1`). A host with no dot is
    no URL (the WasbHook reads it so too): ("", "")."""
    url = host if "://" in host else f"https://{host}"
    parts = urlsplit(url)
    if "." not in parts.netloc:
        return "", ""
    try:
        ipaddress.ip_address(parts.hostname or "")
    except ValueError:
        account = (parts.hostname or "").partition(".")[0]
    else:
        account = parts.path.strip("/").partition("/")[0]
    return url.rstrip("/"), account


def azure_environment(connection: ConnectionFields) -> dict[str, str]:
    """A `wasb` connection's credentials as batchval reads Azure's (store/azure.py), field
    by field as the provider's WasbHook reads them, in its order:

    - extra `connection_string`: all in one; beside any other field it is refused, naming
      both (the WasbHook would ignore the other, batchval refuses such settings with 64);
    - extra `tenant_id`: a service principal, login = its client id, password = its
      secret (`AZURE_CLIENT_ID`, `AZURE_TENANT_ID`, `AZURE_CLIENT_SECRET`), the account
      from the host;
    - otherwise login = the account name, and its credential: extra `shared_access_key`,
      else extra `sas_token` (a whole account URL with its token too), else the password,
      else extra `account_key` (the account key); with none, the worker's own identity.

    The host, the account URL (`https://account.blob.core.windows.net`, an emulator's), is
    the Blob endpoint, and names the account when the login does not."""
    extra = connection.extra
    login, password = connection.login or "", connection.password or ""
    host = connection.host or ""
    text = _wasb_extra(extra, "connection_string")
    if text:
        beside = [
            field
            for field, value in (
                ("login (the account name)", login),
                ("password (the account key)", password),
                ("host (the account URL)", host),
                *((f"extra {name!r}", _wasb_extra(extra, name)) for name in _WASB_BESIDE),
            )
            if value
        ]
        if beside:
            raise StorageConnectionError(
                f"its extra 'connection_string' and its {beside[0]} are both set: give the "
                "connection string alone, or the separate fields alone (as batchval's "
                f"{AZURE_CONNECTION_STRING} beside a separate setting is refused, 64)"
            )
        return {AZURE_CONNECTION_STRING: text}
    endpoint, account = _account_url(host) if host else ("", "")
    tenant = _wasb_extra(extra, "tenant_id")
    if tenant:
        env = {"AZURE_TENANT_ID": tenant, "AZURE_CLIENT_ID": login}
        env.update(AZURE_CLIENT_SECRET=password)
    else:
        account = login or account
        env = {}
        sas = _wasb_extra(extra, "sas_token")
        if sas.startswith("https"):  # an account URL with its token
            url = urlsplit(sas)
            endpoint, sas = f"{url.scheme}://{url.netloc}{url.path}".rstrip("/"), url.query
            account = account or url.netloc.partition(".")[0]
        key = _wasb_extra(extra, "shared_access_key")
        if key or not sas:
            env[AZURE_ACCOUNT_KEY] = key or password or _wasb_extra(extra, "account_key")
        else:
            env[AZURE_SAS_TOKEN] = sas
    env.update({AZURE_ACCOUNT_NAME: account, AZURE_ENDPOINT: endpoint})
    return {name: value for name, value in env.items() if value}


# The extra fields of a `wasb` connection that stand for a separate setting.
_WASB_BESIDE = ("shared_access_key", "sas_token", "account_key", "tenant_id")


def round_environment(
    inherited: Mapping[str, str],
    workdir: str,
    api: ConnectionFields | None = None,
    storage: ConnectionFields | None = None,
) -> dict[str, str]:
    """The whole environment of one round's process, the only way secrets reach it (never
    its arguments, never the log). Its temporary files go to the round's own working
    directory, removed after the round, and it dies with the task's process whatever
    kills it (`BATCHVAL_OUTLIVE_PARENT=0`). A storage connection with a credential (keys, a
    SAS token, a connection string, a client secret) replaces the worker's own variables
    of its cloud (`AWS_*`, or `AZURE_*` for a `wasb` one), so that a profile, role,
    endpoint or connection string of the worker's never mixes with the connection's; one
    without (the worker's own identity: an instance role, a pod's web or workload
    identity, a managed identity) only adds its region or account and its endpoint.
    StorageConnectionError for a storage connection that cannot be used."""
    env = dict(inherited)
    env.update(TMPDIR=workdir, TMP=workdir, TEMP=workdir)
    # A round runs in a session of its own, yet dies with the task (`runs/parent`).
    env["BATCHVAL_OUTLIVE_PARENT"] = "0"
    if api is not None:
        env.update(api_environment(api))
    if storage is not None:
        given = storage_environment(storage)
        if _CREDENTIALS & given.keys():
            cloud = "AZURE_" if storage.conn_type == WASB else "AWS_"
            env = {name: value for name, value in env.items() if not name.startswith(cloud)}
        env.update(given)
    return env


def with_run_id(arguments: Sequence[str], run_id: str | None) -> list[str]:
    """A `run` command held to the run's own id from its second round on: the same id the
    run's memory keeps (so batchval sees no change), and, were that memory ever lost, the
    same idempotency keys again rather than a new day's. A command that names its own
    `--run-id`, or is not `run`, is left as it is."""
    command = list(arguments)
    if not run_id or not command or command[0] != "run":
        return command
    if any(arg == "--run-id" or arg.startswith("--run-id=") for arg in command):
        return command
    return [*command, "--run-id", run_id]


def next_round_at(
    stop: Mapping[str, Any] | None,
    now: dt.datetime,
    wait_when_no_time_given: dt.timedelta,
    clock_offset_seconds: float = 0.0,
) -> dt.datetime:
    """When the next round may start, on this machine's clock: the run's own
    `stop.not_before` (midnight UTC after a daily limit, the end of a Retry-After), or
    `wait_when_no_time_given` from now when the run gave none (an outage, a signal,
    another holder). A run whose clock batchval was told to move (the test seam) gives
    its times on that clock; Airflow waits on the real one."""
    moment = (stop or {}).get("not_before")
    if not moment:
        return now + wait_when_no_time_given
    at = dt.datetime.fromisoformat(str(moment)) - dt.timedelta(seconds=clock_offset_seconds)
    return max(at, now) + dt.timedelta(seconds=1)


def clock_offset(environ: Mapping[str, str]) -> float:
    return float(environ.get(CLOCK_OFFSET_VARIABLE) or 0)


# --- what a deferral carries to the next round --------------------------------------------

# The event's keys. The real triggerer hands the resumed task the deferral's own kwargs
# and the event; `airflow dags test` (Airflow 3.3's inline trigger) hands it the event
# alone, so the round's number and the run's id travel in both.
EVENT_ROUND = "batchval_round"
EVENT_RUN_ID = "batchval_run_id"


def round_event(number: int, run_id: str | None, moment: dt.datetime) -> dict[str, Any]:
    """The trigger's event: the next round's number, the run's id and the moment waited
    for (JSON-safe, as Airflow stores it)."""
    return {EVENT_ROUND: number, EVENT_RUN_ID: run_id, "moment": moment.isoformat()}


def resumed_round(
    event: object, round_number: int | None, run_id: str | None
) -> tuple[int, str | None]:
    """The round a resumed task runs and the run's id: the deferral's kwargs when Airflow
    gave them, else the trigger's event. A resume is never the first round: with neither
    (a deferral made by an older batchval), it is the second, and the run's id comes from
    its memory."""
    carried: Mapping[str, Any] = event if isinstance(event, Mapping) else {}
    number = round_number if round_number is not None else carried.get(EVENT_ROUND)
    found = run_id if run_id is not None else carried.get(EVENT_RUN_ID)
    return (int(number) if number is not None else 2), (str(found) if found else None)


# --- what the task says it did ---------------------------------------------------------------

# What a reader of the XCom finds of the run's last invocation, from its status.
_LAST_INVOCATION = (
    ("calls", "calls", "this_invocation"),
    ("credits", "credits_charged", "this_invocation"),
    ("rate_limited", "rate_limited", "this_invocation"),
)
_RUN_TOTALS = (
    ("calls", "calls", "total"),
    ("credits", "credits_charged", "total"),
)


def task_result(
    arguments: Sequence[str], out_dir: str, status: Mapping[str, Any], rounds: int
) -> dict[str, Any]:
    """The task's XCom: for `report`, the report's place; for any other command, what the
    run at `out_dir` is and what its last invocation (the round that ran last) did, named
    as such, beside the run's totals. Figures only: no secret is in a status."""
    if arguments and arguments[0] == "report":
        return {"place": out_dir, "report": f"{out_dir.rstrip('/')}/report.html"}

    def picked(keys: tuple[tuple[str, str, str], ...]) -> dict[str, Any]:
        return {name: (status.get(section) or {}).get(part) for name, section, part in keys}

    return {
        "place": out_dir,
        "run_id": status.get("run_id"),
        "status": status.get("status"),
        "exit_code": status.get("exit_code"),
        "mode": status.get("mode"),
        "rows": status.get("rows"),
        "problems_by_type": status.get("problems_by_type"),
        "stop": status.get("stop"),
        "last_invocation": {
            **picked(_LAST_INVOCATION),
            "started_at": status.get("started_at"),
            "finished_at": status.get("finished_at"),
            "seconds": status.get("seconds"),
        },
        "run_totals": {**picked(_RUN_TOTALS), "invocations": status.get("invocations")},
        "task_rounds": rounds,
    }


def asset_uri(out_dir: str) -> str:
    """The run's place as an asset's URI (for an AssetAlias's event): a URL as it is, a
    local DIR as a `file://` URI."""
    if is_url(out_dir) or out_dir.startswith("file://"):
        return out_dir
    return "file://" + out_dir


def asset_extra(out_dir: str, status: Mapping[str, Any]) -> dict[str, Any]:
    """An asset event's `extra` after the final round: the run's id, place, rows valued,
    problem rows, credits and mode, JSON-safe (figures and names only, no secret); a
    `--book` night adds the rows it carried from the book and left for a later night."""
    rows = status.get("rows") or {}
    credits = status.get("credits_charged") or {}
    extra = {
        "run_id": status.get("run_id"),
        "place": out_dir,
        "rows_valued": rows.get("valued"),
        "problems": rows.get("problems"),
        "credits": credits.get("total"),
        "mode": status.get("mode"),
    }
    book = (status.get("book") or {}).get("rows")
    if isinstance(book, Mapping):
        extra.update(rows_carried=book.get("carried"), rows_deferred=book.get("deferred"))
    return extra


# --- a verdict a person can act on -------------------------------------------------------------


def stop_parts(stop_line: str | None) -> tuple[str, str]:
    """batchval's one-line stop (`batchval: <reason>: <detail>`) as (reason, detail)."""
    text = (stop_line or "").removeprefix("batchval: ").strip()
    reason, _, detail = text.partition(": ")
    if not detail or " " in reason:  # not a reason word: the line is all detail
        return "", text
    return reason, detail


# The object store's refusals, by batchval's reason code (docs/reference/exit-codes.md):
# what the headline says in place of "command line or config".
STORE_CAUSES: Mapping[str, str] = {
    "store_missing": "the object store has no such bucket or container",
    "store_credentials": "the object store refused its credentials",
    "store_key_malformed": "the object store's account key is malformed",
}


def person_verdict(
    code: int,
    stop_line: str | None,
    *,
    out_dir: str,
    url: bool,
    status_read: bool,
    conn_id: str | None,
    storage_conn_id: str | None,
) -> str:
    """Why a person must act, in words they act on: a refused credential named as the API's,
    an object store's refusal by its cause (`STORE_CAUSES`, by batchval's reason code) and
    connection, batchval's own stop line (which names the bucket or container), and where
    the run stands. It names no file: a run refused before it started wrote none."""
    reason, _ = stop_parts(stop_line)
    what = PERSON_MUST_ACT.get(code, "")
    if code == ExitCode.ACCOUNT and reason == "credentials_refused":
        what = "the API refused its credentials" + (
            f" (connection {conn_id!r})" if conn_id else " (the worker's BATCHVAL_* settings)"
        )
    elif reason in STORE_CAUSES:  # by batchval's reason code, never by its words
        what = STORE_CAUSES[reason] + (
            f" (connection {storage_conn_id!r})"
            if storage_conn_id
            else " (the worker's own AWS_* or AZURE_* identity)"
        )
    said = f"; batchval said: {stop_line.strip()}" if stop_line else ""
    where = (
        f"; `batchval status {out_dir}` says where the run stands"
        if status_read
        else f"; no run could be read at {out_dir}"
    )
    return f"batchval exited {code} ({what}): a person must act{said}{where}"


def connection_verdict(storage_conn_id: str | None, error: StorageConnectionError) -> str:
    """Why a person must act on a storage connection batchval was not run with: named,
    with the fields at fault (`azure_environment`), as batchval's 64 would be."""
    return (
        f"the storage connection {storage_conn_id!r} cannot be used (command line or "
        f"config, as batchval's 64): a person must act; {error}; batchval was not run"
    )


# --- execution_timeout ------------------------------------------------------------------------

EXECUTION_TIMEOUT_REFUSED = (
    "BatchvalOperator takes no execution_timeout: Airflow counts it over the task's whole "
    "life, every deferral included, so a backfill that waits for midnight day after day "
    "would be failed by it mid-run. Bound the rounds with max_rounds and a late wake-up "
    "with late_after (each deferral's own timeout) instead. One from the DAG's default_args "
    "or Airflow's [core] default_task_execution_timeout is replaced by none, with a warning"
)


EXECUTION_TIMEOUT_REPLACED = (
    "BatchvalOperator runs with no execution_timeout: the one from {given} ({value}) is "
    "replaced by none for this task, since Airflow counts it over the task's whole life, every "
    "deferral included, and a backfill that waits for midnight day after day would be failed "
    "by it mid-run. Bound the rounds with max_rounds and a late wake-up with late_after"
)


def refuse_execution_timeout(value: object) -> None:
    """An execution_timeout given to the operator itself is refused at once (the DAG does
    not load), rather than warned of: it would fail a healthy multi-day run on its last
    day."""
    if value is not None:
        raise ValueError(EXECUTION_TIMEOUT_REFUSED)


def inherited_execution_timeout(value: object, given: str) -> str | None:
    """An execution_timeout the task did not ask for (`given`: the DAG's `default_args`, or
    Airflow's `[core] default_task_execution_timeout`) is replaced by none: the one warning
    to log, or None when there was none."""
    if value is None:
        return None
    return EXECUTION_TIMEOUT_REPLACED.format(given=given, value=value)
