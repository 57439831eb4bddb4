"""What the figures were measured on: CPU, cores, memory, Python, library versions, the
commit, and how busy the machine was (other processes share its cores)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path

LIBRARIES = (
    "batchval",
    "httpx",
    "httpcore",
    "anyio",
    "sniffio",
    "polars",
    "pyarrow",
    "starlette",
    "uvicorn",
    "structlog",
    "tenacity",
)


@dataclasses.dataclass(frozen=True, slots=True)
class Machine:
    cpu: str
    cores: int
    memory_gib: float
    system: str
    python: str
    versions: dict[str, str]
    commit: str
    date: str

    @classmethod
    def describe(cls, root: Path) -> Machine:
        return cls(
            cpu=_cpu_model(),
            cores=os.cpu_count() or 0,
            memory_gib=_memory_gib(),
            system=f"{platform.system()} {platform.release()}",
            python=platform.python_version(),
            versions={name: _version(name) for name in LIBRARIES},
            commit=_commit(root),
            date=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        )


def load_average() -> float:
    """The 1-minute load average: above the core count, other work shared the cores."""
    return os.getloadavg()[0]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return float("nan")


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _commit(root: Path) -> str:
    done = subprocess.run(
        ["git", "describe", "--always", "--dirty"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown"
