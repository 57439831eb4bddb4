"""Child processes measured from outside: wall time, CPU seconds and peak RSS.

A child is reaped with `os.wait4`, which returns the CPU of that one process (user and
system), whatever else the bench runs beside it: the figure is the child's own, start-up
and interpreter included. Its peak RSS is not taken from there: Linux starts a child's
`ru_maxrss` at its parent's resident size when it forks (kept across exec), so a bench
that has grown to 600 MiB writing a book would lend that figure to every child after.
The peak is the child's own memory's high-water mark (`VmHWM` in /proc/PID/status),
read every time the child is polled (each 20 ms) until it ends.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

PYTHON = sys.executable
BATCHVAL = str(Path(sys.executable).with_name("batchval"))


@dataclasses.dataclass(frozen=True, slots=True)
class Finished:
    """How a child ended and what it used."""

    exit_code: int
    seconds: float  # wall time, from just before the fork to the reaping
    cpu_seconds: float  # user + system
    peak_rss_mib: float
    cut: bool  # stopped by the bench (time limit or on purpose), not ended by itself


class Child:
    """One measured child process; its output goes to a file (never a pipe that fills)."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        log: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self._log: IO[bytes] = log.open("wb")
        self.started = time.monotonic()
        self._process = subprocess.Popen(
            list(argv), stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=cwd
        )
        self.pid = self._process.pid
        self._peak_kib = 0
        self._cut = False
        self._result: Finished | None = None

    def poll(self) -> Finished | None:
        """The outcome if the child has ended, without waiting."""
        if self._result is None:
            self._reap(os.WNOHANG)
        return self._result

    def wait(self, timeout: float | None = None, grace: float = 60.0) -> Finished:
        """Wait for the end. Past `timeout` seconds from the start: SIGTERM (a run stops
        gently and writes its outputs), then SIGKILL after `grace` more seconds."""
        deadline = None if timeout is None else self.started + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                self.stop(signal.SIGKILL if self._cut else signal.SIGTERM)
                deadline = time.monotonic() + grace
            time.sleep(0.02)
        assert self._result is not None
        return self._result

    def stop(self, sig: signal.Signals) -> None:
        """Send `sig` to the child; the outcome then counts as cut by the bench."""
        if self._result is None:
            self._cut = True
            os.kill(self.pid, sig)

    def _reap(self, flags: int) -> None:
        self._peak_kib = max(self._peak_kib, _high_water_kib(self.pid))
        pid, status, usage = os.wait4(self.pid, flags)
        if pid == 0:
            return
        seconds = time.monotonic() - self.started
        # Reaped here, not by Popen: tell it, so that it never waits for the pid again.
        self._process.returncode = os.waitstatus_to_exitcode(status)
        self._log.close()
        self._result = Finished(
            exit_code=self._process.returncode,
            seconds=seconds,
            cpu_seconds=usage.ru_utime + usage.ru_stime,
            peak_rss_mib=self._peak_kib / 1024,
            cut=self._cut,
        )


def cpu_seconds_of(pid: int) -> float:
    """A running process's CPU so far (user + system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _high_water_kib(pid: int) -> int:
    """The process's peak resident size so far (0 once it has ended)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def run_measured(
    argv: Sequence[str],
    *,
    log: Path,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    cwd: Path | None = None,
) -> Finished:
    """Run a child to its end (or `timeout`) and measure it."""
    return Child(argv, log=log, env=env, cwd=cwd).wait(timeout)


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The bench's environment without any BATCHVAL_* setting of the caller's, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATCHVAL_")}
    env.update(extra or {})
    return env
