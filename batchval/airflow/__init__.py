"""batchval's Airflow provider (`pip install 'batchval[airflow]'`): `BatchvalOperator`.

    from batchval.airflow import BatchvalOperator

The operator is imported on first use, so that `rounds` (the exit codes, the round's
environment and timing) and `provider` (what Airflow's providers manager reads) load
without Airflow: the project's tests hold them, and Airflow reads the provider's
description without importing the operator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from batchval.airflow.operator import BatchvalOperator

__all__ = ["BatchvalOperator"]


def __getattr__(name: str) -> Any:
    if name == "BatchvalOperator":
        from batchval.airflow.operator import BatchvalOperator

        return BatchvalOperator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
