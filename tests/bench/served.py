"""The sandbox served in its own process (`batchval sandbox --port 0 ...`), as the API
would be: the client under test never shares a process, an interpreter lock or an
event loop with it.

A fresh sandbox for every measurement (a fresh account, bucket and ledger). Its ready
line gives the URLs; its ledger (`GET /_sandbox/ledger`, batchval/_internal/sandbox/controls.py)
is the referee of every count the bench prints.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import httpx

from bench.processes import BATCHVAL, Child, clean_env, cpu_seconds_of

LIVE_ID = "sandbox-live"
LIVE_SECRET = "sandbox-live-secret"
# Far above any run of the bench: the API's own 5,000 a day would end the 10,000-row runs.
NO_DAILY_LIMIT = ["--daily-limit", "10000000"]


@dataclasses.dataclass(frozen=True, slots=True)
class Ledger:
    """The parts of the sandbox's ledger the bench reads."""

    requests: int
    by_status: dict[int, int]
    early: int  # calls that came before a Retry-After the account was given
    short_term_429_at: list[dt.datetime]  # when each short-term Retry-After was given
    keys_charged_twice: int

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Ledger:
        return cls(
            requests=int(data["requests"]),
            by_status={int(k): int(v) for k, v in data["requests_by_status"].items()},
            early=len(data["early_requests"]),
            short_term_429_at=sorted(
                dt.datetime.fromisoformat(d["issued_at"])
                for d in data["retry_after_given"]
                if d["code"] is None
            ),
            keys_charged_twice=len(data["keys_charged_twice"]),
        )

    def count(self, status: int) -> int:
        return self.by_status.get(status, 0)


class ServedSandbox:
    """`with ServedSandbox([...options]) as api:` a sandbox listening on a free port."""

    def __init__(self, options: Sequence[str], log: Path) -> None:
        self.options = list(options)
        self._log_path = log
        self._log: IO[bytes] | None = None
        self._process: subprocess.Popen[str] | None = None
        self.base_url = self.auth_url = ""
        self._http = httpx.Client(timeout=10)

    def __enter__(self) -> ServedSandbox:
        self._log = self._log_path.open("wb")
        argv = [BATCHVAL, "sandbox", "--host", "127.0.0.1", "--port", "0", *self.options]
        self._process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=self._log, text=True, env=clean_env()
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline()  # printed once listening
        if not line:
            self._stop()
            raise RuntimeError(f"the sandbox did not start; see {self._log_path}")
        ready = json.loads(line)
        self.base_url, self.auth_url = ready["base_url"], ready["auth_url"]
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop()

    def _stop(self) -> None:
        self._http.close()
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            if self._process.stdout is not None:
                self._process.stdout.close()
        if self._log is not None:
            self._log.close()

    def client_env(self) -> dict[str, str]:
        """`batchval run` pointed at this sandbox with the live-like credentials."""
        return clean_env(
            {
                "BATCHVAL_BASE_URL": self.base_url,
                "BATCHVAL_AUTH_URL": self.auth_url,
                "BATCHVAL_CLIENT_ID": LIVE_ID,
                "BATCHVAL_CLIENT_SECRET": LIVE_SECRET,
            }
        )

    def cpu_seconds(self) -> float:
        """The sandbox process's CPU so far (user + system), to tell a saturated server
        from a slow client."""
        assert self._process is not None
        return cpu_seconds_of(self._process.pid)

    def ledger_json(self) -> dict[str, Any]:
        found: dict[str, Any] = self._http.get(f"{self.auth_url}/_sandbox/ledger").json()
        return found

    def ledger(self) -> Ledger:
        return Ledger.from_json(self.ledger_json())

    def next_day(self, daily_limit: int) -> None:
        """The sandbox's clock a day on (a new UTC day for the daily limit), and the live
        account's daily limit set to `daily_limit`."""
        clock = f"{self.auth_url}/_sandbox/clock"
        self._http.post(clock, json={"advance_seconds": 86_400}).raise_for_status()
        self._http.post(
            f"{self.auth_url}/_sandbox/accounts/{LIVE_ID}", json={"daily_limit": daily_limit}
        ).raise_for_status()

    def first_call_after(self, child: Child, timeout: float, seen: int = 0) -> float:
        """Seconds from `child`'s start to the first request this sandbox saw past the
        `seen` it had already (NaN if none came before the child ended or `timeout`
        passed)."""
        while child.poll() is None and time.monotonic() - child.started < timeout:
            if self.ledger_json()["requests"] > seen:
                return time.monotonic() - child.started
            time.sleep(0.01)
        return math.nan

    def first_request_seen(self, since: float, timeout: float, every: float = 0.01) -> float:
        """Poll the ledger until it holds a request; the monotonic time it was first seen
        (to within `every`), or NaN after `timeout` seconds from `since`."""
        while time.monotonic() - since < timeout:
            if self.ledger_json()["requests"]:
                return time.monotonic()
            time.sleep(every)
        return float("nan")
