"""batchval/airflow/_connection.py: a batchval connection's test (`BatchvalHook.
test_connection`, `airflow connections test`) by `batchval check` against the sandbox:
live and test credentials, a `generic` connection's fields, a scope the credentials do not
have, refused credentials and fields left empty. `batchval check` runs in this process
(`support.invoke`), but once as a process, as the hook runs it (`connection.process`);
`make airflow-check` runs the same through Airflow itself."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from support import LIVE, TEST, invoke

from batchval._internal.sandbox.server import RunningSandbox
from batchval.airflow import _connection as connection
from batchval.airflow._rounds import ConnectionFields

BATCHVAL = [str(Path(sys.executable).with_name("batchval"))]
ENV = {"PATH": "/usr/bin:/bin", "BATCHVAL_BASE_URL": "http://127.0.0.1:9/not-this-one"}


def in_process(arguments: Sequence[str], env: Mapping[str, str]) -> tuple[int, str]:
    """`batchval check` in this process, with exactly `env` as its environment."""
    ran = invoke(*arguments, environ=env)
    return ran.returncode, ran.stdout + ran.stderr


def fields(served: RunningSandbox, who: Any, **extra: Any) -> ConnectionFields:
    return ConnectionFields(
        host=served.base_url,
        login=who.client_id,
        password=who.client_secret,
        extra={"auth_url": served.auth_url, **extra},
        conn_type="batchval",
    )


@pytest.mark.slow  # `batchval check` as a process, as the hook runs it: a second
def test_live_and_test_credentials_each_say_their_scope(served: RunningSandbox) -> None:
    """A live client's connection works and says its calls are charged (checked by
    batchval as a process, the hook's way); a test client's says fake figures. The
    worker's own BATCHVAL_ variables never stand in for the connection's (ENV's base URL
    would fail)."""
    live = connection.test_connection(fields(served, LIVE), ENV, connection.process(BATCHVAL))
    assert live == (True, connection.verdict(0, "ok    mode: live: ...", None)[1])
    assert "live scope (partners:read)" in live[1]
    test = connection.test_connection(fields(served, TEST, scope="test"), ENV, in_process)
    assert test[0], test
    assert "test scope (partners:test)" in test[1]


def test_a_generic_connection_of_older_forms_works(served: RunningSandbox) -> None:
    """A `generic` connection (the operator's before the type) and one whose extra Airflow
    prefixed (`extra__batchval__auth_url`) are read alike."""
    found = fields(served, LIVE)
    generic = ConnectionFields(
        host=found.host,
        login=found.login,
        password=found.password,
        extra={"extra__batchval__auth_url": served.auth_url},
        conn_type="generic",
    )
    ok, said = connection.test_connection(generic, ENV, in_process)
    assert ok, said


def test_credentials_of_the_other_scope_fail_the_test(served: RunningSandbox) -> None:
    """A connection that says `live` holding test credentials fails, naming both."""
    ok, said = connection.test_connection(fields(served, TEST, scope="live"), ENV, in_process)
    assert not ok
    assert "test scope" in said
    assert "the connection says live" in said


def test_refused_credentials_and_empty_fields_fail_saying_why(served: RunningSandbox) -> None:
    wrong = fields(served, LIVE)
    refused = ConnectionFields(wrong.host, wrong.login, "not-the-secret", wrong.extra)
    ok, said = connection.test_connection(refused, ENV, in_process)
    assert not ok
    assert "exit 77" in said
    assert "credentials refused" in said
    assert "not-the-secret" not in said
    empty = ConnectionFields(None, LIVE.client_id, None, {}, "batchval")
    assert connection.test_connection(empty, ENV, in_process) == (
        False,
        "the connection has no Base URL, Client secret, Token URL (extra auth_url)",
    )
    odd = fields(served, LIVE, scope="production")
    assert connection.test_connection(odd, ENV, in_process) == (
        False,
        "the connection's scope is 'production': give live, test or none",
    )
