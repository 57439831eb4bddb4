"""The public modules' types as a type checker sees them (issue 58): pyright's
`--verifytypes` over the package, as a library's users meet it. Every symbol the public
modules export has a known type, but the Airflow provider's three classes: Airflow is not
installed here, so their base classes are unknown. In Airflow's own environment
(`make airflow-check`) the hook and the trigger are known too, and the operator's metaclass
alone is not: Airflow's `BaseOperator`'s, unknown to `--verifytypes` for any class derived
from it."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from verifytypes import type_completeness, unknown_exports

ROOT = Path(__file__).resolve().parents[2]
# Airflow's subclasses: their base class and metaclass, Airflow's, are unknown to pyright.
AIRFLOW_CLASSES = {
    "batchval.airflow.BatchvalHook",
    "batchval.airflow.BatchvalOperator",
    "batchval.airflow.RoundTrigger",
}

pytestmark = pytest.mark.slow  # node and pyright start in a few seconds


def test_every_public_symbol_has_a_known_type(tmp_path: Path) -> None:
    """pyright reads the package as installed (a copy: the editable install's import hook
    is not a path it follows) and finds every exported symbol's type known but Airflow's
    subclasses', and no module public that is not one of the faces."""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "batchval", site / "batchval", ignore=shutil.ignore_patterns("*.pyc"))
    report = type_completeness(Path(sys.executable), tmp_path, site)
    assert report["pyTypedPath"] is not None  # the check can see the package
    modules = {module["name"] for module in report["modules"]}
    assert modules == {
        "batchval",
        "batchval.__main__",
        "batchval.airflow",
        "batchval.api",
        "batchval.exceptions",
        "batchval.testing",
    }
    assert sum(symbol["isExported"] for symbol in report["symbols"]) > 50
    assert unknown_exports(report) == AIRFLOW_CLASSES, report["completenessScore"]
