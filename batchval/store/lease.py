"""One spender per run, across machines: a lease on the run's URL (issue 23).

`state/LEASE` holds the holder's name and epoch, replaced only by compare-and-swap. The
holder renews it every third of `DURATION`; every renewal changes the object (and so its
etag). No clock is compared across machines, only durations, each on its own machine's
monotonic clock:

- A taker that finds a lease watches it for one `DURATION`: renewed meanwhile, a holder
  is alive and the taker stops (`dir_locked`, 75) within seconds; left as it was, the
  holder is gone (killed, its machine lost) and the taker replaces it, one epoch up.
- The holder sends a call only while its last renewal, counted from before that renewal
  was asked, is younger than `DURATION` less `MARGIN`. A taker replaces a lease only
  after watching it unchanged for a whole `DURATION` that began after the holder's last
  renewal was written, so a holder that stalled (SIGSTOP, a frozen VM) wakes past its
  margin: it sends no further call (`Database.hold_lost`), its next renewal finds another
  epoch, and it publishes no output (`engine/place`); what it still commits goes to its
  own generation of the run's memory, which the new holder's `HEAD` no longer names
  (`store/replica`).
- A lease released by a holder that ended is taken at once.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from typing import Protocol

from batchval.outcome import BatchvalError
from batchval.store.replica import REPAIR, StateObjectError

LEASE = "state/LEASE"
DURATION = 30.0  # seconds a renewal holds the run
MARGIN = 10.0  # no call is sent in a renewal's last seconds


class LeaseObjects(Protocol):
    def get(self, key: str) -> tuple[bytes, str] | None: ...
    def create(self, key: str, data: bytes) -> bool: ...
    def replace(self, key: str, data: bytes, etag: str) -> bool: ...


class LeaseHeldError(BatchvalError):
    """Another process, on this machine or another, holds the run."""


class LeaseLostError(BatchvalError):
    """This process no longer holds the run: it must stop, sending and writing nothing."""


@dataclasses.dataclass(frozen=True, slots=True)
class LeaseState:
    holder: str
    epoch: int
    released: bool = False
    renewal: int = 0  # changes the object at every renewal

    def to_bytes(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), sort_keys=True).encode()

    @classmethod
    def of(cls, data: bytes) -> LeaseState:
        """The lease's bytes as a lease; `StateObjectError` (64, with the repair) when they
        are not one: a lease nobody can read must stop the run, never be taken over."""
        try:
            found = json.loads(data)
            state = cls(
                str(found["holder"]),
                int(found["epoch"]),
                bool(found.get("released", False)),
                int(found.get("renewal", 0)),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            raise StateObjectError(
                LEASE,
                f"{LEASE} at the run's URL is not the run's lease: once no batchval process "
                "works on this run (a holder renews the lease every 10 s), delete it and run "
                f"the same command again; see {REPAIR}",
            ) from None
        return state


def holder_name() -> str:
    """This process, as the lease names it (for a person reading it)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Lease:
    """This process's hold on one run's URL."""

    def __init__(
        self,
        objects: LeaseObjects,
        *,
        holder: str | None = None,
        duration: float = DURATION,
        margin: float = MARGIN,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._objects = objects
        self.holder = holder or holder_name()
        self._duration, self._margin = duration, margin
        self._clock, self._sleep = clock, sleep
        self._state: LeaseState | None = None
        self._etag = ""
        self._renewed_at = float("-inf")  # before the last renewal was asked

    @property
    def epoch(self) -> int:
        if self._state is None:
            raise LeaseLostError("the run's lease is not held")
        return self._state.epoch

    def take(self) -> int:
        """Hold the run; returns the epoch. Raises `LeaseHeldError` when a live holder has
        it (found within one `DURATION`)."""
        asked = self._clock()
        found = self._objects.get(LEASE)
        if found is None:
            state = LeaseState(self.holder, 1)
            if self._objects.create(LEASE, state.to_bytes()):
                return self._held(state, asked)
            found = self._objects.get(LEASE)
            if found is None:
                raise LeaseHeldError("the run's lease was taken and let go meanwhile: try again")
        seen, etag = LeaseState.of(found[0]), found[1]
        if not seen.released:
            self._watch(seen, etag)  # raises when the holder renews
            asked = self._clock()
        state = LeaseState(self.holder, seen.epoch + 1)
        if not self._objects.replace(LEASE, state.to_bytes(), etag):
            raise LeaseHeldError("another process took the run's lease first")
        return self._held(state, asked)

    def _watch(self, seen: LeaseState, etag: str) -> None:
        changed, _ = _watched(self._objects, etag, self._duration, self._clock, self._sleep)
        if changed:
            raise LeaseHeldError(
                f"another batchval run holds this run ({seen.holder}, renewing its lease)"
            )

    def _held(self, state: LeaseState, asked: float) -> int:
        self._state, self._renewed_at = state, asked
        found = self._objects.get(LEASE)
        if found is None or LeaseState.of(found[0]) != state:
            raise LeaseLostError("the run's lease changed hands as it was taken")
        self._etag = found[1]
        return state.epoch

    def may_send(self) -> bool:
        """Whether a call may leave now: the lease surely still held for `MARGIN`."""
        return (
            self._state is not None
            and self._clock() < self._renewed_at + self._duration - self._margin
        )

    def renew(self) -> None:
        """Hold the run another `DURATION`; `LeaseLostError` when another has it now."""
        if self._state is None:
            raise LeaseLostError("the run's lease is not held")
        asked = self._clock()
        state = dataclasses.replace(self._state, renewal=self._state.renewal + 1)
        if not self._objects.replace(LEASE, state.to_bytes(), self._etag):
            self._state = None
            raise LeaseLostError("another process has taken this run's lease")
        found = self._objects.get(LEASE)
        if found is None or LeaseState.of(found[0]) != state:
            self._state = None
            raise LeaseLostError("another process has taken this run's lease")
        self._state, self._etag, self._renewed_at = state, found[1], asked

    def renew_due(self) -> bool:
        """A third of `DURATION` since the last renewal."""
        return self._clock() >= self._renewed_at + self._duration / 3

    def release(self) -> None:
        """Let the run go (the next taker need not wait); quiet when it is no longer ours."""
        if self._state is None:
            return
        state = dataclasses.replace(self._state, released=True)
        self._objects.replace(LEASE, state.to_bytes(), self._etag)
        self._state = None


def live_holder(
    objects: LeaseObjects,
    *,
    watch: float = DURATION / 3 + 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str | None:
    """The holder of the run's lease if it is at work now, for a reader (`status`) that
    neither takes nor changes the lease: None when there is none or it was let go; else it
    is watched for `watch` seconds (a holder renews every third of `DURATION`), and a lease
    left unchanged was its holder's when it was killed (None)."""
    found = objects.get(LEASE)
    if found is None or LeaseState.of(found[0]).released:
        return None
    changed, now = _watched(objects, found[1], watch, clock, sleep)
    if not changed or now is None:
        return None
    state = LeaseState.of(now[0])
    return None if state.released else state.holder


def _watched(
    objects: LeaseObjects,
    etag: str,
    seconds: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> tuple[bool, tuple[bytes, str] | None]:
    """Whether the lease left the version `etag` within `seconds` (looked at ten times,
    at most a second apart), and what it became (None: gone)."""
    deadline = clock() + seconds
    while clock() < deadline:
        sleep(min(1.0, seconds / 10))
        now = objects.get(LEASE)
        if now is None or now[1] != etag:
            return True, now
    return False, None


class LeaseKeeper:
    """Renews a held lease from a thread of its own, whatever the run is doing (a long
    ingest, the outputs): a lease left to lapse would let another process take the run."""

    def __init__(self, lease: Lease, *, every: float = 1.0) -> None:
        self.lease = lease
        self.lost: BaseException | None = None
        self.trouble: BaseException | None = None  # the last renewal's failure, if it failed
        self._every = every
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._keep, name="lease", daemon=True)
        self._thread.start()

    def holds(self) -> bool:
        """Whether a call may leave now (`Lease.may_send`, and never once lost)."""
        return self.lost is None and self.lease.may_send()

    def _keep(self) -> None:
        while not self._done.wait(self._every):
            if not self.lease.renew_due():
                continue
            try:
                self.lease.renew()
                self.trouble = None
            except LeaseLostError as exc:
                self.lost = exc
                return
            except Exception as exc:  # the store did not answer: `may_send` runs out meanwhile
                self.trouble = exc

    def close(self) -> None:
        """Stop renewing and let the run go (again: nothing)."""
        if self._done.is_set():
            return
        self._done.set()
        self._thread.join()
        if self.lost is None:
            self.lease.release()
