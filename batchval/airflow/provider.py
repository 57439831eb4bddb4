"""batchval as an Airflow provider: what `airflow providers list` shows, found through the
entry point `apache_airflow_provider` of `pyproject.toml` (Airflow checks it against its
`provider_info.schema.json`; `package-name` must be the distribution's own name)."""

from __future__ import annotations

from typing import Any

from batchval import __version__


def provider_info() -> dict[str, Any]:
    """The provider's description, read by Airflow's providers manager at start."""
    return {
        "package-name": "batchval",
        "name": "batchval",
        "description": (
            "Bulk valuations through the Partner Valuation API as Airflow tasks: "
            "``BatchvalOperator`` runs one batchval command to completion, deferring "
            "through daily limits, never paying twice.\n"
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
                "python-modules": ["batchval.airflow.operator"],
            }
        ],
        "triggers": [
            {
                "integration-name": "batchval",
                "python-modules": ["batchval.airflow.trigger"],
            }
        ],
    }
