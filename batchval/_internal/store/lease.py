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
  epoch, and it publishes no output (`place/place`); what it still commits goes to its
  own generation of the run's memory, which the new holder's `HEAD` no longer names
  (`store/replica`).
- A lease released by a holder that ended is taken at once.
- A lease object that is missing (deleted by hand, or let go by a holder whose writes the
  store refused) while the run's memory was written within one `DURATION` (`written`,
  `HEAD`'s age by the store's own clock) may belong to a live holder: it is watched as a
  held lease, and a live holder, whose renewal finds it gone while the run is surely still
  its own, writes it again (create-only), so that the taker stops naming it.
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
from typing import TYPE_CHECKING

from batchval._internal.outcome import BatchvalError
from batchval._internal.store.replica import REPAIR, StateObjectError

if TYPE_CHECKING:
    from batchval._internal.store.objects import Objects

LEASE = "state/LEASE"
DURATION = 30.0  # seconds a renewal holds the run
MARGIN = 10.0  # no call is sent in a renewal's last seconds


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
        objects: Objects,
        *,
        holder: str | None = None,
        duration: float = DURATION,
        margin: float = MARGIN,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        written: Callable[[], float | None] = lambda: None,
    ) -> None:
        """`written`: seconds since the run's memory at the URL was last written, by the
        store's clock (None: never, or not known)."""
        self._objects = objects
        self._written = written
        self.holder = holder or holder_name()
        self._duration, self._margin = duration, margin
        self._clock, self._sleep = clock, sleep
        self._state: LeaseState | None = None
        self._etag = ""
        self._renewed_at = float("-inf")  # before the last renewal was asked
        # A renewal found the lease missing and wrote it again: the run's memory beside it
        # may be gone too, which the database asks the URL once (`Database.hold_lost`).
        self.found_missing = False

    @property
    def duration(self) -> float:
        return self._duration

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
        if found is None and self._recently_written():
            found = self._watch_missing()  # raises when a holder writes its lease again
            asked = self._clock()
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

    def _recently_written(self) -> bool:
        age = self._written()
        return age is not None and age < self._duration

    def _watch_missing(self) -> tuple[bytes, str] | None:
        """No lease, but a run written within one `DURATION`: watched for one `DURATION`
        as a held lease would be. A lease that appears meanwhile is a live holder's
        (written again by its renewal) or another taker's: either holds the run."""
        deadline = self._clock() + self._duration
        while self._clock() < deadline:
            self._sleep(min(1.0, self._duration / 10))
            now = self._objects.get(LEASE)
            if now is not None:
                seen = LeaseState.of(now[0])
                if seen.released:
                    return now  # let go meanwhile: taken as any released lease is
                raise LeaseHeldError(
                    f"another batchval run holds this run ({seen.holder}, its lease written "
                    "again after it was found missing)"
                )
        return None

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
            # Gone (deleted by hand) while the run is surely still ours: no taker may have
            # taken it before our margin ran out, so it is written again, create-only.
            if not (
                self.may_send()
                and self._objects.get(LEASE) is None
                and self._objects.create(LEASE, state.to_bytes())
            ):
                self._state = None
                raise LeaseLostError("another process has taken this run's lease")
            self.found_missing = True
        found = self._objects.get(LEASE)
        if found is None or LeaseState.of(found[0]) != state:
            self._state = None
            raise LeaseLostError("another process has taken this run's lease")
        self._state, self._etag, self._renewed_at = state, found[1], asked

    def taken(self) -> bool:
        """Whether the lease object now names another holder or epoch (a read; False when
        it names this one, is missing, or cannot be read)."""
        # Read once: the keeper's thread sets `_state` to None when a renewal finds the
        # lease taken, which may happen while this thread reads the lease object.
        held = self._state
        if held is None:
            return False
        try:
            found = self._objects.get(LEASE)
            if found is None:
                return False
            state = LeaseState.of(found[0])
        except Exception:  # not known: the caller's other evidence stands
            return False
        return (state.holder, state.epoch) != (held.holder, held.epoch)

    def renew_due(self) -> bool:
        """A third of `DURATION` since the last renewal."""
        return self._clock() >= self._renewed_at + self._duration / 3

    def release(self, *, refused: tuple[type[BaseException], ...] = ()) -> None:
        """Let the run go (the next taker need not wait); quiet when it is no longer ours.
        A store whose writes were turned off under the run (`refused`: the errors that say
        so) may still delete: while the run is surely ours, the lease is deleted instead."""
        if self._state is None:
            return
        state = dataclasses.replace(self._state, released=True)
        try:
            self._objects.replace(LEASE, state.to_bytes(), self._etag)
        except refused:
            if not self.may_send():
                raise
            self._objects.delete(LEASE)
        finally:
            self._state = None


def live_holder(
    objects: Objects,
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
    objects: Objects,
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

    def __init__(
        self,
        lease: Lease,
        *,
        every: float = 1.0,
        refused: tuple[type[BaseException], ...] = (),
        store: str = "the run's store",
    ) -> None:
        """`refused`: the store's errors that say it refuses a write (see `Lease.release`);
        `store`: the store, as a message names it."""
        self.lease = lease
        self.store = store
        self._refused = refused
        self.lost: BaseException | None = None
        self.trouble: BaseException | None = None  # the last renewal's failure, if it failed
        # A renewal is waiting for the store's answer: one that waits past the lease's
        # margin is a store that stopped answering.
        self.renewing = False
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
            self.renewing = True
            try:
                self.lease.renew()
                self.trouble = None
            except LeaseLostError as exc:
                self.lost = exc
                return
            except Exception as exc:  # the store did not answer: `may_send` runs out meanwhile
                self.trouble = exc
            finally:
                self.renewing = False

    def stalled(self) -> bool:
        """The store has not answered: the last renewal failed, or one is still waiting for
        an answer the run can no longer wait for (the lease no longer surely held)."""
        waiting = self.renewing and not self.lease.may_send()
        failed = self.trouble is not None and not isinstance(self.trouble, self._refused)
        return self.lost is None and (failed or waiting)

    def close(self) -> None:
        """Stop renewing and let the run go (again: nothing). A store that does not answer
        is not waited for: the lease is left to lapse (the next taker waits one
        `DURATION`)."""
        if self._done.is_set():
            return
        self._done.set()
        self._thread.join(1.0 if self.stalled() else self.lease.duration)
        if self.lost is None and not self._thread.is_alive() and not self.stalled():
            self.lease.release(refused=self._refused)
