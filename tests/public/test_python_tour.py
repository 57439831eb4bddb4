"""The tour of batchval from Python (issue 58): examples/python/tour.py, a script, and
tour.ipynb, its steps as a notebook's cells, each run as a user would (the script as a
process, the notebook in a Jupyter kernel whose event loop runs while a cell does), each
against a sandbox of its own and using only the public modules."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
TOUR = ROOT / "examples" / "python"
PUBLIC = {"batchval", "batchval.exceptions", "batchval.testing", "batchval.airflow"}
# What the tour prints, a line a step, in order.
STEPS = [
    "a frame in and out: 12 homes valued",
    "one property, no folder: ",
    "a process pool's typed error: RunError 65",
    "two calls on one folder: the second raised FolderInUse",
    "awaited in a running loop: ",
    "cancelled: every answer so far kept",
    "then resumed: ",
    "my own structlog events: still mine",
    "nothing paid twice",
]

pytestmark = pytest.mark.slow  # a sandbox, processes and a kernel: seconds


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("BATCHVAL_")}


def _said(lines: list[str]) -> None:
    assert len(lines) == len(STEPS), lines
    for line, step in zip(lines, STEPS, strict=True):
        assert line.startswith(step), (line, step)


def test_the_tour_uses_only_the_public_modules() -> None:
    """Every import of batchval in the script is of a public module."""
    tree = ast.parse((TOUR / "tour.py").read_text(encoding="utf-8"))
    imported = {
        *(a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names),
        *(n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module),
    }
    assert {name for name in imported if name.startswith("batchval")} <= PUBLIC
    assert {"batchval", "batchval.exceptions", "batchval.testing"} <= imported


def test_the_script_runs_as_a_user_runs_it() -> None:
    done = subprocess.run(
        [sys.executable, str(TOUR / "tour.py")],
        env=_clean_env(),
        cwd=TOUR,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    _said(done.stdout.splitlines())


def test_the_notebook_runs_in_a_jupyter_kernel() -> None:
    notebook: Any = nbformat.read(TOUR / "tour.ipynb", as_version=4)  # type: ignore[no-untyped-call]
    assert all(not cell.get("outputs") for cell in notebook.cells)  # kept without outputs
    client = NotebookClient(
        notebook, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(TOUR)}}
    )
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(_clean_env())  # the kernel inherits this environment
    try:
        client.execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    printed = [
        output.get("text", "")
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.get("name") == "stdout"
    ]
    _said("".join(printed).splitlines())
