"""pyright's `--verifytypes` over batchval, as a library's users meet it: run by the suite
(tests/public/test_public_types.py, this environment) and by `make airflow-check`
(examples/airflow/check.py, Airflow's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def type_completeness(python: Path, cwd: Path, site: Path | None = None) -> dict[str, Any]:
    """pyright's `typeCompleteness` report of the package `batchval` as the interpreter
    `python` finds it (with `site` first on its path, when given). `--verifytypes` reads
    the packages of the `python` on PATH (it ignores --pythonpath), so `python`'s folder
    goes first on PATH; external types it cannot know are left out (`--ignoreexternal`)."""
    command = [sys.executable, "-m", "pyright", "--verifytypes", "batchval", "--ignoreexternal"]
    command += ["--outputjson"]
    env = {**os.environ, "PATH": os.pathsep.join((str(python.parent), os.environ["PATH"]))}
    env.pop("PYTHONPATH", None)
    if site is not None:
        env["PYTHONPATH"] = str(site)
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    report: dict[str, Any] = json.loads(done.stdout)["typeCompleteness"]
    return report


def unknown_exports(report: dict[str, Any]) -> set[str]:
    """The exported names whose type pyright does not know."""
    return {s["name"] for s in report["symbols"] if s["isExported"] and not s["isTypeKnown"]}
