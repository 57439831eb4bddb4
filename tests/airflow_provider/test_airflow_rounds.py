"""batchval/airflow/_rounds.py: the operator's rules without Airflow (exit codes, the round's
command and environment, the run id, the next round's time, no execution_timeout)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import sys
import uuid
from typing import Any

import pytest
from azure_server import AzureServer

from batchval._internal.outcome import ExitCode
from batchval._internal.store import azure
from batchval._internal.store.objects import ObjectStore
from batchval.airflow import _rounds as rounds
from batchval.airflow._rounds import ConnectionFields, Next

NOW = dt.datetime(2026, 11, 25, 23, 58, tzinfo=dt.UTC)
FIVE_MINUTES = dt.timedelta(minutes=5)
STORAGE = ConnectionFields(
    host=None,
    login="AKIDEXAMPLE",
    password="storage-secret",
    extra={"region_name": "eu-west-2", "endpoint_url": "http://127.0.0.1:8333"},
)
API = ConnectionFields(
    host="https://api.example/partners/v1",
    login="client",
    password="api-secret",
    extra={"auth_url": "https://auth.example"},
)


@pytest.mark.parametrize(
    ("code", "step"),
    [
        (0, Next.SUCCEED),
        (75, Next.DEFER),
        (1, Next.FAIL_FOR_A_PERSON),
        (64, Next.FAIL_FOR_A_PERSON),
        (65, Next.FAIL_FOR_A_PERSON),
        (70, Next.FAIL_FOR_A_PERSON),
        (77, Next.FAIL_FOR_A_PERSON),
        (-9, Next.FAIL),
        (2, Next.FAIL),
        (137, Next.FAIL),
    ],
)
def test_each_exit_code_has_one_next_step(code: int, step: Next) -> None:
    """0 succeeds, 75 defers, a code a person must act on fails with no retry, anything
    else (a killed process) is an ordinary failure for `retries`."""
    assert rounds.next_step(code) is step


def test_every_exit_code_of_batchval_has_a_step_of_its_own() -> None:
    """No exit code of batchval's falls to the ordinary failure a retry would repeat."""
    assert {code: rounds.next_step(code) for code in ExitCode} == {
        ExitCode.COMPLETE: Next.SUCCEED,
        ExitCode.RESUMABLE: Next.DEFER,
        **{code: Next.FAIL_FOR_A_PERSON for code in rounds.PERSON_MUST_ACT},
    }


@pytest.mark.parametrize(
    ("configured", "environ", "command"),
    [
        (None, {}, [sys.executable, "-m", "batchval"]),
        (None, {"BATCHVAL_BIN": "/opt/bv/bin/batchval"}, ["/opt/bv/bin/batchval"]),
        ("/srv/batchval", {"BATCHVAL_BIN": "/opt/bv/bin/batchval"}, ["/srv/batchval"]),
    ],
)
def test_the_batchval_of_the_environment_unless_one_is_configured(
    configured: str | None, environ: dict[str, str], command: list[str]
) -> None:
    """The parameter, else BATCHVAL_BIN, else the batchval installed beside the
    interpreter running the task."""
    assert rounds.batchval_command(configured, environ) == command


@pytest.mark.parametrize(
    ("arguments", "out_dir", "needed"),
    [
        (["run", "/data/book.csv", "--out", "/runs/a"], "/runs/a", False),
        (["run", "/data/book.csv", "--out", "file:///runs/a"], "file:///runs/a", False),
        (["run", "/data/book.csv", "--out", "s3://b/p"], "s3://b/p", True),
        (["run", "s3://b/book.csv", "--out", "/runs/a"], "/runs/a", True),
        (["report", "az://c/p"], "az://c/p", True),
    ],
)
def test_storage_credentials_only_when_a_url_is_touched(
    arguments: list[str], out_dir: str, needed: bool
) -> None:
    assert rounds.needs_storage(arguments, out_dir) is needed


def test_a_storage_connection_becomes_aws_variables() -> None:
    """login, password and the extra's region and endpoint, as AWS's own tools read them."""
    assert rounds.storage_environment(STORAGE) == {
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "storage-secret",
        "AWS_REGION": "eu-west-2",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:8333",
    }
    bare = ConnectionFields(host=None, login=None, password=None, extra={})
    assert rounds.storage_environment(bare) == {}  # the worker's own identity, then


def test_the_round_s_environment_carries_the_secrets_and_a_fresh_temp() -> None:
    """The secrets go in the environment; the worker's own AWS_* give way to the
    connection's; temporary files go to the round's working directory."""
    inherited = {
        "PATH": "/usr/bin",
        "AWS_PROFILE": "worker",
        "AWS_ENDPOINT_URL": "http://elsewhere",
        "TMPDIR": "/var/tmp",
    }
    env = rounds.round_environment(inherited, "/tmp/round-1", api=API, storage=STORAGE)
    assert env["PATH"] == "/usr/bin"
    assert "AWS_PROFILE" not in env
    assert env["AWS_ENDPOINT_URL"] == "http://127.0.0.1:8333"
    assert env["AWS_SECRET_ACCESS_KEY"] == "storage-secret"
    assert env["BATCHVAL_CLIENT_SECRET"] == "api-secret"
    assert env["BATCHVAL_AUTH_URL"] == "https://auth.example"
    assert env["TMPDIR"] == env["TMP"] == env["TEMP"] == "/tmp/round-1"
    assert inherited["TMPDIR"] == "/var/tmp"  # the worker's own is left alone


def test_the_api_s_token_url_is_read_from_either_form_of_the_extra_or_refused() -> None:
    """The token URL under its own name or as older Airflow prefixed it; a connection
    without one fails the round naming the field, never handing batchval "None"."""
    older = dataclasses.replace(API, extra={"extra__batchval__auth_url": "https://auth.old"})
    assert rounds.api_environment(older)["BATCHVAL_AUTH_URL"] == "https://auth.old"
    with pytest.raises(ValueError, match="no Token URL"):
        rounds.api_environment(dataclasses.replace(API, extra={}))


def test_without_a_storage_connection_the_worker_s_aws_variables_stay() -> None:
    env = rounds.round_environment({"AWS_PROFILE": "worker"}, "/tmp/r")
    assert env["BATCHVAL_OUTLIVE_PARENT"] == "0"  # a round dies with its task
    assert env["AWS_PROFILE"] == "worker"
    assert "BATCHVAL_CLIENT_SECRET" not in env


def test_a_storage_connection_without_keys_keeps_the_worker_s_identity() -> None:
    """No keys in the connection: the worker's role stays, the region and endpoint are added."""
    inherited = {"AWS_ROLE_ARN": "arn:aws:iam::1:role/w", "AWS_WEB_IDENTITY_TOKEN_FILE": "/t"}
    keyless = ConnectionFields(host=None, login=None, password=None, extra={"region_name": "r"})
    env = rounds.round_environment(inherited, "/tmp/r", storage=keyless)
    assert env["AWS_ROLE_ARN"] == "arn:aws:iam::1:role/w"
    assert env["AWS_WEB_IDENTITY_TOKEN_FILE"] == "/t"
    assert env["AWS_REGION"] == "r"


@pytest.mark.parametrize(
    "url", ["az://c/p", "abfs://c/p", "abfss://c/p", "abfss://c@acct.dfs.core.windows.net/p"]
)
def test_every_azure_form_is_a_url(url: str) -> None:
    """Each form batchval takes for Azure reads the storage connection."""
    assert rounds.needs_storage(["status", url], url)


KEY = "a2V5LW9mLXRoZS1hY2NvdW50"  # base64, as Azure shows an account key
EMULATOR = "http://127.0.0.1:10000/devstoreaccount1"
REAL = "https://lenderdata.blob.core.windows.net"


def _wasb(
    login: str | None = None,
    password: str | None = None,
    host: str | None = None,
    **extra: str,
) -> ConnectionFields:
    return ConnectionFields(host, login, password, extra, conn_type="wasb")


@pytest.mark.parametrize(
    ("connection", "env"),
    [
        (  # login and password: the account and its key; host: the account URL
            _wasb("lenderdata", KEY, REAL),
            {
                "AZURE_STORAGE_ACCOUNT_NAME": "lenderdata",
                "AZURE_STORAGE_ACCOUNT_KEY": KEY,
                "AZURE_STORAGE_ENDPOINT": REAL,
            },
        ),
        (  # an emulator's account URL names its account in its path
            _wasb(password=KEY, host=EMULATOR + "/"),
            {
                "AZURE_STORAGE_ACCOUNT_NAME": "devstoreaccount1",
                "AZURE_STORAGE_ACCOUNT_KEY": KEY,
                "AZURE_STORAGE_ENDPOINT": EMULATOR,
            },
        ),
        (  # a host without a scheme is https, and names the account
            _wasb(host="lenderdata.blob.core.windows.net", account_key=KEY),
            {
                "AZURE_STORAGE_ACCOUNT_NAME": "lenderdata",
                "AZURE_STORAGE_ACCOUNT_KEY": KEY,
                "AZURE_STORAGE_ENDPOINT": REAL,
            },
        ),
        (  # a host with no dot is no URL (the WasbHook's reading too)
            _wasb("lenderdata", KEY, "some-tenant-id"),
            {"AZURE_STORAGE_ACCOUNT_NAME": "lenderdata", "AZURE_STORAGE_ACCOUNT_KEY": KEY},
        ),
        (  # the connection form's own field for the key, the older prefixed name too
            _wasb("lenderdata", **{"extra__wasb__shared_access_key": KEY}),
            {"AZURE_STORAGE_ACCOUNT_NAME": "lenderdata", "AZURE_STORAGE_ACCOUNT_KEY": KEY},
        ),
        (  # a SAS token wins over the password, as in the WasbHook
            _wasb("lenderdata", "ignored", sas_token="?sv=2021&sig=c2ln"),
            {
                "AZURE_STORAGE_ACCOUNT_NAME": "lenderdata",
                "AZURE_STORAGE_SAS_TOKEN": "?sv=2021&sig=c2ln",
            },
        ),
        (  # a SAS token given as the account URL that carries it
            _wasb(sas_token=f"{REAL}/?sv=2021&sig=c2ln"),
            {
                "AZURE_STORAGE_ACCOUNT_NAME": "lenderdata",
                "AZURE_STORAGE_SAS_TOKEN": "sv=2021&sig=c2ln",
                "AZURE_STORAGE_ENDPOINT": REAL,
            },
        ),
        (  # a connection string alone
            _wasb(connection_string=f"AccountName=a;AccountKey={KEY}"),
            {"AZURE_STORAGE_CONNECTION_STRING": f"AccountName=a;AccountKey={KEY}"},
        ),
        (  # a service principal: login and password are its id and secret
            _wasb("app-id", "app-secret", REAL, tenant_id="tenant"),
            {
                "AZURE_CLIENT_ID": "app-id",
                "AZURE_CLIENT_SECRET": "app-secret",
                "AZURE_TENANT_ID": "tenant",
                "AZURE_STORAGE_ACCOUNT_NAME": "lenderdata",
                "AZURE_STORAGE_ENDPOINT": REAL,
            },
        ),
        (  # no credential: the account alone, for the worker's own identity
            _wasb("lenderdata", extra__wasb__sas_token=""),
            {"AZURE_STORAGE_ACCOUNT_NAME": "lenderdata"},
        ),
    ],
)
def test_a_wasb_connection_becomes_azure_variables(
    connection: ConnectionFields, env: dict[str, str]
) -> None:
    """Each field of Azure's connection type where batchval reads it (store/azure.py), in
    the WasbHook's own order, and nothing of AWS's."""
    assert rounds.storage_environment(connection) == env


def test_the_azure_forms_and_variables_are_batchval_s_own() -> None:
    """rounds names Azure's URL forms and variables as store/azure.py does (it does not
    import it: batchval/airflow/ runs batchval as a process)."""
    assert {f"{scheme}://" for scheme in azure.SCHEMES} <= set(rounds.URL_SCHEMES)
    assert (
        rounds.AZURE_ACCOUNT_NAME,
        rounds.AZURE_ACCOUNT_KEY,
        rounds.AZURE_SAS_TOKEN,
        rounds.AZURE_CONNECTION_STRING,
        rounds.AZURE_ENDPOINT,
    ) == (
        azure.ACCOUNT_NAME,
        azure.ACCOUNT_KEY,
        azure.SAS_TOKEN,
        azure.CONNECTION_STRING,
        azure.ENDPOINT,
    )


def test_the_wasb_variables_are_read_by_batchval_as_given() -> None:
    """The account, key and endpoint the mapping gives are the ones batchval's Azure store
    reads from them."""
    found = azure.credentials(rounds.storage_environment(_wasb(password=KEY, host=EMULATOR)))
    assert (found.account, found.key, found.endpoint) == ("devstoreaccount1", KEY, EMULATOR)


@pytest.mark.parametrize(
    ("connection", "named"),
    [
        (_wasb("lenderdata", connection_string="AccountName=a"), "login (the account name)"),
        (_wasb(password=KEY, connection_string="AccountName=a"), "password (the account key)"),
        (_wasb(host=REAL, connection_string="AccountName=a"), "host (the account URL)"),
        (_wasb(connection_string="AccountName=a", sas_token="sig=x"), "extra 'sas_token'"),
        (
            _wasb(**{"extra__wasb__connection_string": "AccountName=a", "account_key": KEY}),
            "extra 'account_key'",
        ),
    ],
)
def test_a_connection_string_beside_a_separate_field_is_refused_naming_both(
    connection: ConnectionFields, named: str
) -> None:
    """As batchval refuses a connection string beside a separate setting (64): one of them
    would be silently ignored. Refused before batchval runs, naming the connection's two
    fields, and no secret."""
    with pytest.raises(rounds.StorageConnectionError) as caught:
        rounds.round_environment({}, "/tmp/r", storage=connection)
    said = str(caught.value)
    assert said.startswith(f"its extra 'connection_string' and its {named} are both set")
    assert "AccountName=a" not in said
    assert KEY not in said
    verdict = rounds.connection_verdict("batchval_azure", caught.value)
    assert verdict.startswith(
        "the storage connection 'batchval_azure' cannot be used (command line or config, "
        "as batchval's 64): a person must act; its extra 'connection_string' and its "
    )


def test_a_wasb_connection_with_a_credential_replaces_the_worker_s_azure_variables() -> None:
    """The worker's own connection string, key or identity never mixes with the
    connection's key (a connection string beside it would be a 64); AWS_* stay."""
    inherited = {
        "AZURE_STORAGE_CONNECTION_STRING": "AccountName=worker;AccountKey=d29ya2Vy",
        "AZURE_CLIENT_ID": "worker-identity",
        "AWS_PROFILE": "worker",
    }
    env = rounds.round_environment(inherited, "/tmp/r", storage=_wasb("lenderdata", KEY))
    assert not {name for name in env if name.startswith("AZURE_")} - {
        "AZURE_STORAGE_ACCOUNT_NAME",
        "AZURE_STORAGE_ACCOUNT_KEY",
    }
    assert env["AZURE_STORAGE_ACCOUNT_KEY"] == KEY
    assert env["AWS_PROFILE"] == "worker"


def test_a_wasb_connection_without_a_credential_keeps_the_worker_s_identity() -> None:
    """A managed or workload identity of the worker's stays; the account and endpoint of
    the connection are added."""
    inherited = {"AZURE_CLIENT_ID": "managed", "AZURE_FEDERATED_TOKEN_FILE": "/t"}
    env = rounds.round_environment(inherited, "/tmp/r", storage=_wasb(host=REAL))
    assert env["AZURE_CLIENT_ID"] == "managed"
    assert env["AZURE_FEDERATED_TOKEN_FILE"] == "/t"
    assert env["AZURE_STORAGE_ACCOUNT_NAME"] == "lenderdata"
    assert env["AZURE_STORAGE_ENDPOINT"] == REAL


def test_an_aws_connection_leaves_the_worker_s_azure_variables() -> None:
    env = rounds.round_environment({"AZURE_CLIENT_ID": "w"}, "/tmp/r", storage=STORAGE)
    assert env["AZURE_CLIENT_ID"] == "w"
    assert env["AWS_SECRET_ACCESS_KEY"] == "storage-secret"


@pytest.mark.slow
@pytest.mark.parametrize("form", ["key", "connection string", "sas token"])
def test_each_form_of_a_wasb_connection_reaches_azurite(azurite: AzureServer, form: str) -> None:
    """The round's environment from a wasb connection opens the run's place on Azurite:
    the probe (create-only and compare-and-swap writes) passes."""
    connection = {
        "key": _wasb(azurite.account, azurite.key, azurite.endpoint),
        "connection string": _wasb(connection_string=azurite.connection_string()),
        "sas token": _wasb(azurite.account, host=azurite.endpoint, sas_token=azurite.sas_token()),
    }[form]
    env = rounds.round_environment({}, "/tmp/r", storage=connection)
    ObjectStore.from_url(azurite.url(f"t/{uuid.uuid4().hex}"), env).probe()


@pytest.mark.parametrize(
    ("arguments", "run_id", "held"),
    [
        (["run", "in.csv", "--out", "s3://b/p"], None, ["run", "in.csv", "--out", "s3://b/p"]),
        (
            ["run", "in.csv", "--out", "s3://b/p"],
            "2026-11-25-ab",
            ["run", "in.csv", "--out", "s3://b/p", "--run-id", "2026-11-25-ab"],
        ),
        (
            ["run", "in.csv", "--run-id", "mine"],
            "2026-11-25-ab",
            ["run", "in.csv", "--run-id", "mine"],
        ),
        (["run", "in.csv", "--run-id=mine"], "2026-11-25-ab", ["run", "in.csv", "--run-id=mine"]),
        (["report", "s3://b/p"], "2026-11-25-ab", ["report", "s3://b/p"]),
    ],
)
def test_from_the_second_round_a_run_keeps_its_own_id(
    arguments: list[str], run_id: str | None, held: list[str]
) -> None:
    """`run` is given the run's own id once known, unless it names one itself."""
    assert rounds.with_run_id(arguments, run_id) == held


@pytest.mark.parametrize(
    ("stop", "offset", "at"),
    [
        # A daily limit: midnight UTC, a second after.
        ({"not_before": "2026-11-26T00:00:00+00:00"}, 0, dt.datetime(2026, 11, 26, 0, 0, 1)),
        # No time given (an outage, a signal, another holder): the configured wait.
        ({"reason": "store_unavailable"}, 0, dt.datetime(2026, 11, 26, 0, 3)),
        (None, 0, dt.datetime(2026, 11, 26, 0, 3)),
        # A time already past: at once.
        ({"not_before": "2026-11-25T12:00:00+00:00"}, 0, dt.datetime(2026, 11, 25, 23, 58, 1)),
        # batchval's clock moved a day ahead (the test seam): Airflow waits on the real one.
        (
            {"not_before": "2026-11-27T00:00:00+00:00"},
            86_400,
            dt.datetime(2026, 11, 26, 0, 0, 1),
        ),
    ],
)
def test_the_next_round_starts_at_the_run_s_own_time(
    stop: dict[str, Any] | None, offset: float, at: dt.datetime
) -> None:
    found = rounds.next_round_at(stop, NOW, FIVE_MINUTES, offset)
    assert found == at.replace(tzinfo=dt.UTC)


def test_the_clock_offset_is_read_from_the_environment() -> None:
    assert rounds.clock_offset({}) == 0
    assert rounds.clock_offset({"BATCHVAL_CLOCK_OFFSET_SECONDS": "-120.5"}) == -120.5


def test_an_execution_timeout_is_refused_with_the_reason() -> None:
    """execution_timeout counts every deferral: refused, and the message says what to use."""
    rounds.refuse_execution_timeout(None)
    with pytest.raises(ValueError, match="every deferral included") as refused:
        rounds.refuse_execution_timeout(dt.timedelta(hours=6))
    assert "max_rounds" in str(refused.value)
    assert "late_after" in str(refused.value)
    assert "default_args" in str(refused.value)  # and what becomes of an inherited one


def test_an_inherited_execution_timeout_is_replaced_with_one_warning() -> None:
    """One from default_args or [core] is not refused: replaced by none, said once."""
    assert rounds.inherited_execution_timeout(None, "default_args") is None
    warning = rounds.inherited_execution_timeout(dt.timedelta(hours=2), "default_args")
    assert warning is not None
    assert "from default_args (2:00:00) is replaced by none" in warning
    assert "max_rounds" in warning


@pytest.mark.parametrize(
    ("event", "kwargs", "resumed"),
    [
        # The triggerer: the deferral's kwargs and the event.
        (
            {"batchval_round": 3, "batchval_run_id": "day-2026-11-25"},
            (3, "day-2026-11-25"),
            (3, "day-2026-11-25"),
        ),
        # `airflow dags test`: the event alone.
        (
            {"batchval_round": 2, "batchval_run_id": "day-2026-11-25"},
            (None, None),
            (2, "day-2026-11-25"),
        ),
        # The run's id not known yet when it deferred (refused before it began, say).
        ({"batchval_round": 4, "batchval_run_id": None}, (None, None), (4, None)),
        # An older batchval's deferral (DateTimeTrigger's bare moment): the second round.
        ("2026-11-26T00:00:01+00:00", (None, None), (2, None)),
        (None, (5, "r"), (5, "r")),
    ],
)
def test_a_resumed_task_finds_its_round_and_run_whichever_path_airflow_took(
    event: object, kwargs: tuple[int | None, str | None], resumed: tuple[int, str | None]
) -> None:
    assert rounds.resumed_round(event, *kwargs) == resumed


def test_the_event_carries_the_round_the_run_and_the_moment_as_json() -> None:
    """What the trigger yields goes through Airflow's serialiser: plain JSON values."""
    event = rounds.round_event(2, "day-2026-11-25", NOW)
    assert json.loads(json.dumps(event)) == event
    assert rounds.resumed_round(event, None, None) == (2, "day-2026-11-25")
    assert event["moment"] == "2026-11-25T23:58:00+00:00"


STATUS: dict[str, Any] = {
    "status": "complete",
    "exit_code": 0,
    "run_id": "day-2026-11-25",
    "mode": "live",
    "rows": {"total": 50, "valued": 48, "problems": 2, "pending": 0, "duplicates": 0},
    "problems_by_type": {"floor-area-required": 2},
    "credits_charged": {"this_invocation": 180, "total": 480},
    "calls": {"this_invocation": 18, "total": 48},
    "rate_limited": {"this_invocation": 1, "total": 3},
    "invocations": 2,
    "stop": None,
    "started_at": "2026-11-26T00:00:02+00:00",
    "finished_at": "2026-11-26T00:00:09+00:00",
    "seconds": 7.1,
    "portfolio": {"loans": 50},
}


def test_the_xcom_names_the_last_invocation_s_figures_as_such() -> None:
    """What the round that ran last did, apart from the run's totals; the place named."""
    result = rounds.task_result(["run", "in.csv", "--out", "s3://b/r"], "s3://b/r", STATUS, 2)
    assert result["last_invocation"] == {
        "calls": 18,
        "credits": 180,
        "rate_limited": 1,
        "started_at": "2026-11-26T00:00:02+00:00",
        "finished_at": "2026-11-26T00:00:09+00:00",
        "seconds": 7.1,
    }
    assert result["run_totals"] == {"calls": 48, "credits": 480, "invocations": 2}
    assert result["place"] == "s3://b/r"
    assert result["task_rounds"] == 2
    assert result["rows"] == STATUS["rows"]
    assert "portfolio" not in result
    assert json.loads(json.dumps(result)) == result


def test_the_report_task_s_xcom_is_the_report_s_place() -> None:
    assert rounds.task_result(["report", "s3://b/r/"], "s3://b/r/", STATUS, 1) == {
        "place": "s3://b/r/",
        "report": "s3://b/r/report.html",
    }


def test_the_asset_event_s_extra_holds_the_run_s_figures() -> None:
    assert rounds.asset_extra("s3://b/r", STATUS) == {
        "run_id": "day-2026-11-25",
        "place": "s3://b/r",
        "rows_valued": 48,
        "problems": 2,
        "credits": 480,
        "mode": "live",
    }
    night = {**STATUS, "book": {"rows": {"valued": 15, "carried": 25, "deferred": 10}}}
    assert rounds.asset_extra("s3://b/n", night) == {
        **rounds.asset_extra("s3://b/n", STATUS),
        "rows_carried": 25,
        "rows_deferred": 10,
    }
    assert rounds.asset_uri("s3://b/r") == "s3://b/r"
    assert rounds.asset_uri("/data/runs/a") == "file:///data/runs/a"


@pytest.mark.parametrize(
    ("line", "parts"),
    [
        (
            "batchval: daily_limit: the daily limit (5000) is reached",
            ("daily_limit", "the daily limit (5000) is reached"),
        ),
        (
            "batchval: refused: s3://b/r: credentials refused (HTTP 403)",
            ("refused", "s3://b/r: credentials refused (HTTP 403)"),
        ),
        ("batchval: no such file: in.csv", ("", "no such file: in.csv")),
        (None, ("", "")),
    ],
)
def test_the_stop_line_is_read_as_its_reason_and_detail(
    line: str | None, parts: tuple[str, str]
) -> None:
    assert rounds.stop_parts(line) == parts


def _verdict(code: int, line: str | None, *, url: bool = True, read: bool = False) -> str:
    return rounds.person_verdict(
        code,
        line,
        out_dir="s3://b/r",
        url=url,
        status_read=read,
        conn_id="batchval_default",
        storage_conn_id="batchval_storage",
    )


def test_a_refused_store_credential_is_named_as_one_and_no_file_is_pointed_at() -> None:
    """A wrong S3 key (batchval's `store_credentials`, 64) names the storage connection,
    not the command line; nothing was read at the place, so no file of it is named."""
    line = (
        "batchval: store_credentials: s3://b/r: credentials refused (HTTP 403 InvalidAccessKeyId)"
    )
    said = _verdict(64, line)
    assert said.startswith(
        "batchval exited 64 (the object store refused its credentials "
        "(connection 'batchval_storage')): a person must act"
    )
    assert "InvalidAccessKeyId" in said
    assert "command line or config" not in said
    assert "summary.json" not in said
    assert "batchval.log" not in said
    assert "no run could be read at s3://b/r" in said


@pytest.mark.parametrize(
    ("line", "cause"),
    [
        (
            "batchval: store_missing: az://nightly/r: get 'state/HEAD': the container "
            "'nightly' does not exist",
            "the object store has no such bucket or container",
        ),
        (
            "batchval: store_key_malformed: az://nightly/r: the storage account key "
            "(AZURE_STORAGE_ACCOUNT_KEY) is not base64 (87 characters; a key is 88)",
            "the object store's account key is malformed",
        ),
        (  # the words alone never decide: a `refused` that says "credentials refused"
            "batchval: refused: s3://b/r: unknown option(s): credentials refused",
            "command line or config",
        ),
    ],
)
def test_a_store_s_refusal_is_told_by_its_reason_code(line: str, cause: str) -> None:
    said = _verdict(64, line)
    assert said.startswith(f"batchval exited 64 ({cause}")
    assert line.removeprefix("batchval: ") in said  # the store and bucket, as batchval named them


def test_a_refused_api_credential_names_the_api_s_connection() -> None:
    said = _verdict(77, "batchval: credentials_refused: the token endpoint said 401", read=True)
    assert "(the API refused its credentials (connection 'batchval_default'))" in said
    assert "`batchval status s3://b/r` says where the run stands" in said


def test_another_stop_a_person_must_act_on_keeps_its_meaning() -> None:
    said = _verdict(65, "batchval: input_unusable: in.csv: no postcode column", url=False)
    assert said.startswith("batchval exited 65 (input): a person must act; batchval said: ")
    assert _verdict(64, None, url=False).startswith("batchval exited 64 (command line or config)")


def test_the_package_loads_without_airflow() -> None:
    """`batchval.airflow` imports Airflow only when the operator is asked for."""
    import batchval.airflow

    assert "airflow" not in sys.modules
    with pytest.raises(ModuleNotFoundError, match="airflow"):
        batchval.airflow.BatchvalOperator  # noqa: B018
    with pytest.raises(AttributeError):
        batchval.airflow.Nothing  # noqa: B018
