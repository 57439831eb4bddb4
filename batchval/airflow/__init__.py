"""batchval's Airflow provider (`pip install 'batchval[airflow]'`): `BatchvalOperator`,
`BatchvalHook` (the `batchval` connection type) and `RoundTrigger`, which the operator
defers to between rounds.

    from batchval.airflow import BatchvalOperator

The operator, the hook and the trigger are imported on first use, so that `rounds` (the exit
codes, the round's environment and timing) and `provider` (what Airflow's providers
manager reads) load without Airflow: the project's tests hold them, and Airflow reads the
provider's description without importing the operator.
"""

import typing as _typing

if _typing.TYPE_CHECKING:
    from batchval.airflow._hook import BatchvalHook
    from batchval.airflow._operator import BatchvalOperator
    from batchval.airflow._trigger import RoundTrigger

__all__ = ["BatchvalHook", "BatchvalOperator", "RoundTrigger"]


def __getattr__(name: str) -> _typing.Any:
    if name == "BatchvalOperator":
        from batchval.airflow._operator import BatchvalOperator

        return BatchvalOperator
    if name == "BatchvalHook":
        from batchval.airflow._hook import BatchvalHook

        return BatchvalHook
    if name == "RoundTrigger":
        from batchval.airflow._trigger import RoundTrigger

        return RoundTrigger
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names, `__all__`: what `dir()` and an editor's completion show."""
    return sorted(__all__)
