"""The desktop programs some tests open batchval's outputs in: headless Chromium (the report)
and LibreOffice Calc (the CSV export), from Debian's packages, which `make test` installs
(`make browser`, `make calc`) and `make test-fast` does not.

A test gets one only as a fixture (`chromium`, `calc`, in conftest), and conftest marks every
test that asks for one `slow`: `make test-fast` then runs none of them, whoever writes the
next one. A program that is missing fails the test, never skips it: the promise is what the
program shows.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import openpyxl
import pytest

# As the machine notes advise: no first-run work and no background connections, which
# a closed network refuses by the dozen.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
]

Chromium = Callable[..., subprocess.CompletedProcess[str]]
Calc = Callable[[Path, Path], openpyxl.Workbook]

# The fixtures that hand a test one of these programs (conftest marks their tests slow).
FIXTURES = frozenset({"chromium", "calc"})


def open_in_chromium(page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """`page` opened by headless Chromium with a profile of its own and `extra` switches."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.fail("chromium is missing: `make browser` (run by `make test`) installs it")
    return subprocess.run(
        [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def console_messages(stderr: str) -> list[str]:
    """The lines of Chromium's log that a page's console wrote."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def open_in_calc(csv_file: Path, out: Path) -> openpyxl.Workbook:
    """`csv_file` as LibreOffice Calc imports it (its defaults, as a person opening the
    file gets), saved as xlsx by Calc itself and read with openpyxl."""
    soffice = shutil.which("soffice")
    if soffice is None:
        pytest.fail("LibreOffice is missing: `make calc` (run by `make test`) installs it")
    home = out / "home"  # a profile of its own, so that runs share nothing
    home.mkdir(parents=True)
    done = subprocess.run(
        [soffice, "--headless", "--calc", "--convert-to", "xlsx", "--outdir", str(out),
         csv_file.name],
        cwd=csv_file.parent,
        env={**os.environ, "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )  # fmt: skip
    converted = out / csv_file.with_suffix(".xlsx").name
    assert done.returncode == 0, done.stdout + done.stderr
    assert converted.is_file(), done.stdout + done.stderr
    return openpyxl.load_workbook(converted)
