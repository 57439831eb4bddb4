"""batchval as an Airflow provider: what `airflow providers list` shows, found through the
entry point `apache_airflow_provider` of `pyproject.toml` (Airflow checks it against its
`provider_info.schema.json`; `package-name` must be the distribution's own name)."""

from __future__ import annotations

from typing import Any

from batchval import __version__

# The `batchval` connection type: its form, declared (Airflow 3 reads it without importing
# the hook). Host, login and password are relabelled; the token URL and the scope the
# credentials should have are the extra's fields.
CONNECTION_TYPE: dict[str, Any] = {
    "connection-type": "batchval",
    "hook-class-name": "batchval.airflow._hook.BatchvalHook",
    "hook-name": "batchval (Partner Valuation API)",
    "conn-fields": {
        "auth_url": {
            "label": "Token URL",
            "description": "The API's token URL, without /oauth2/token",
            "schema": {"type": ["string", "null"]},
        },
        "scope": {
            "label": "Scope",
            "description": (
                "The scope the credentials must have: live (charged) or test (fake figures, "
                "never charged); the connection's test fails on the other. Empty: either"
            ),
            "schema": {"type": ["string", "null"], "enum": ["live", "test", None]},
        },
    },
    "ui-field-behaviour": {
        "hidden-fields": ["schema", "port"],
        "relabeling": {"host": "Base URL", "login": "Client ID", "password": "Client secret"},
        "placeholders": {
            "host": "https://api.example.com/partners/v1",
            "login": "your client id",
            "password": "your client secret",
            "auth_url": "https://auth.example.com",
            "scope": "live",
        },
    },
}


def provider_info() -> dict[str, Any]:
    """The provider's description, read by Airflow's providers manager at start."""
    return {
        "package-name": "batchval",
        "name": "batchval",
        "description": (
            "Bulk valuations through the Partner Valuation API as Airflow tasks: "
            "``BatchvalOperator`` runs one batchval command to completion, deferring "
            "through daily limits, never paying twice; ``BatchvalHook`` is the API's "
            "connection, tested by ``batchval check``.\n"
        ),
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "batchval",
                "tags": ["service"],
            }
        ],
        "operators": [
            {
                "integration-name": "batchval",
                "python-modules": ["batchval.airflow._operator"],
            }
        ],
        "hooks": [
            {
                "integration-name": "batchval",
                "python-modules": ["batchval.airflow._hook"],
            }
        ],
        "connection-types": [CONNECTION_TYPE],
        "triggers": [
            {
                "integration-name": "batchval",
                "python-modules": ["batchval.airflow._trigger"],
            }
        ],
    }
