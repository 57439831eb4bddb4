"""BatchvalHook: the `batchval` connection type (the Partner Valuation API's base URL,
token URL, client id and secret, and the scope the credentials should have), which
`airflow connections test` and the UI's Test button check by `batchval check`
(`connection`). It reads a `generic` connection with the same fields too (the operator's
before the type existed: `batchval_{ACCOUNT}` connections keep working).

The form's fields and placeholders are declared in the provider's description
(`provider.provider_info`), which Airflow 3 reads without importing this module.
"""

from __future__ import annotations

import os
from typing import Any

from airflow.sdk import BaseHook

from batchval.airflow import _connection as connection
from batchval.airflow import _rounds as rounds


class BatchvalHook(BaseHook):
    """The API's connection, as batchval's environment (`environment`), and its test."""

    conn_name_attr = "batchval_conn_id"
    default_conn_name = "batchval_default"
    conn_type = "batchval"
    hook_name = "batchval"

    def __init__(
        self, batchval_conn_id: str = default_conn_name, batchval_bin: str | None = None
    ) -> None:
        super().__init__()
        self.batchval_conn_id = batchval_conn_id
        self.batchval_bin = batchval_bin

    def get_conn(self) -> rounds.ConnectionFields:
        """The connection's fields, whatever its type (`batchval` or `generic`)."""
        return connection_fields(self.batchval_conn_id)

    def environment(self) -> dict[str, str]:
        """The variables batchval reads the API's settings from."""
        return rounds.api_environment(self.get_conn())

    def test_connection(self) -> tuple[bool, str]:
        """Whether the connection works (a token fetched, the API read with it), and its
        scope, by `batchval check`."""
        command = rounds.batchval_command(self.batchval_bin, os.environ)
        return connection.test_connection(self.get_conn(), os.environ, connection.process(command))


def connection_fields(conn_id: str) -> rounds.ConnectionFields:
    """The fields a round reads of Airflow's connection `conn_id`, of any type (the API's,
    the object store's)."""
    found: Any = BaseHook.get_connection(conn_id)
    return rounds.ConnectionFields(
        host=found.host,
        login=found.login,
        password=found.password,
        extra=found.extra_dejson,
        conn_type=found.conn_type,
    )
