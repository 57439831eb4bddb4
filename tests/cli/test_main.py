"""`python -m batchval` is the console script, for callers that know only an interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_python_m_batchval_runs_the_command_line_with_its_exit_codes(tmp_path: Path) -> None:
    """The module runs the same command line as the `batchval` script, exit codes included
    (a DIR that holds no run is the caller's mistake: 64)."""
    helped = subprocess.run(
        [sys.executable, "-m", "batchval", "--help"], capture_output=True, text=True, check=False
    )
    assert helped.returncode == 0
    assert helped.stdout.startswith("Usage: batchval ")
    done = subprocess.run(
        [sys.executable, "-m", "batchval", "status", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 64
    assert "holds no batchval run" in done.stderr
