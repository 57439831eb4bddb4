"""batchval's Airflow provider (`pip install 'batchval[airflow]'`): `BatchvalOperator`,
`BatchvalHook` (the `batchval` connection type) and `RoundTrigger`, which the operator
defers to between rounds.

    from batchval.airflow import BatchvalOperator

The operator, the hook and the trigger are imported on first use, so that `rounds` (the exit
codes, the round's environment and timing) and `provider` (what Airflow's providers
manager reads) load without Airflow: the project's tests hold them, and Airflow reads the
provider's description without importing the operator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from batchval.airflow.hook import BatchvalHook
    from batchval.airflow.operator import BatchvalOperator
    from batchval.airflow.trigger import RoundTrigger

__all__ = ["BatchvalHook", "BatchvalOperator", "RoundTrigger"]


def __getattr__(name: str) -> Any:
    if name == "BatchvalOperator":
        from batchval.airflow.operator import BatchvalOperator

        return BatchvalOperator
    if name == "BatchvalHook":
        from batchval.airflow.hook import BatchvalHook

        return BatchvalHook
    if name == "RoundTrigger":
        from batchval.airflow.trigger import RoundTrigger

        return RoundTrigger
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names, `__all__`: what `dir()` and an editor's completion show."""
    return sorted(__all__)
