"""One spender per run across machines (`store/lease`), on a clock the test moves: a live
holder keeps the run, a dead one loses it after one lease, a stalled one stops itself."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from memory_objects import MemoryObjects

from batchval._internal.store.lease import (
    LEASE,
    Lease,
    LeaseHeldError,
    LeaseKeeper,
    LeaseLostError,
    LeaseState,
    live_holder,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.on_sleep: Callable[[], None] = lambda: None

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.on_sleep()


def _lease(objects: MemoryObjects, clock: Clock, name: str) -> Lease:
    return Lease(objects, holder=name, duration=30, margin=10, clock=clock, sleep=clock.sleep)


def test_the_first_taker_holds_the_run() -> None:
    objects, clock = MemoryObjects(), Clock()
    assert _lease(objects, clock, "a").take() == 1
    assert LeaseState.of(objects.objects[LEASE]).holder == "a"


def test_a_live_holder_keeps_the_run_and_the_taker_stops_within_seconds() -> None:
    objects, clock = MemoryObjects(), Clock()
    holder = _lease(objects, clock, "a")
    holder.take()
    started = clock.now

    def renew_when_due() -> None:
        if holder.renew_due():
            holder.renew()

    clock.on_sleep = renew_when_due
    with pytest.raises(LeaseHeldError, match="another batchval run holds this run"):
        _lease(objects, clock, "b").take()
    assert clock.now - started <= 11  # a renewal comes every third of the lease
    assert LeaseState.of(objects.objects[LEASE]).holder == "a"


def test_a_dead_holder_loses_the_run_after_one_lease() -> None:
    objects, clock = MemoryObjects(), Clock()
    _lease(objects, clock, "a").take()  # then killed: never renews
    started = clock.now
    assert _lease(objects, clock, "b").take() == 2
    assert clock.now - started >= 30


def test_a_released_run_is_taken_at_once() -> None:
    objects, clock = MemoryObjects(), Clock()
    first = _lease(objects, clock, "a")
    first.take()
    first.release()
    started = clock.now
    assert _lease(objects, clock, "b").take() == 2
    assert clock.now == started


def test_a_stalled_holder_sends_nothing_and_stops_itself() -> None:
    """SIGSTOP past its lease: it may not send on waking, and its renewal fails."""
    objects, clock = MemoryObjects(), Clock()
    stalled = _lease(objects, clock, "a")
    stalled.take()
    assert stalled.may_send()
    clock.now += 21  # within the lease, but in its margin: no call
    assert not stalled.may_send()
    assert _lease(objects, clock, "b").take() == 2  # watched it unchanged for a lease
    with pytest.raises(LeaseLostError):
        stalled.renew()
    assert not stalled.may_send()
    assert LeaseState.of(objects.objects[LEASE]).holder == "b"


def test_renewing_keeps_the_run_sendable() -> None:
    objects, clock = MemoryObjects(), Clock()
    holder = _lease(objects, clock, "a")
    holder.take()
    for _ in range(10):
        clock.now += 10
        assert holder.renew_due()
        holder.renew()
        assert holder.may_send()
    assert LeaseState.of(objects.objects[LEASE]).renewal == 10


def test_a_keeper_renews_in_the_background_and_lets_go_at_the_end() -> None:
    """The keeper's thread renews whatever the run is doing; a taker meanwhile stops at
    once; closed, it releases the run to the next taker without a wait."""
    objects = MemoryObjects()
    lease = Lease(objects, holder="a", duration=2.0, margin=0.5)
    lease.take()
    keeper = LeaseKeeper(lease, every=0.02)
    # The behaviour: real time past one lease (a renewal due every 1.5 s, made every 0.02 s:
    # a loaded machine still renews in time), with the keeper's own thread renewing it
    # meanwhile (a fake clock would stop that thread's timing being what is tested).
    time.sleep(2.5)
    assert keeper.holds()
    with pytest.raises(LeaseHeldError):
        Lease(objects, holder="b", duration=2.0, margin=0.5).take()
    keeper.close()
    assert not keeper.holds()
    assert LeaseState.of(objects.objects[LEASE]).released
    slept: list[float] = []  # a released lease is taken at once: no wait for it to run out
    assert Lease(objects, holder="c", duration=2.0, margin=0.5, sleep=slept.append).take() == 2
    assert slept == []


def test_a_reader_sees_a_live_holder_and_no_dead_or_released_one() -> None:
    """`status` of a run at a URL: none, let go, or unchanged for a renewal's interval is
    nobody at work; a renewal seen while watching is the holder, named. The reader never
    changes the lease."""
    objects, clock = MemoryObjects(), Clock()

    def watch(objects: MemoryObjects) -> str | None:
        return live_holder(objects, clock=clock, sleep=clock.sleep)

    assert watch(objects) is None
    holder = _lease(objects, clock, "a")
    holder.take()
    started = clock.now
    assert watch(objects) is None  # never renewed: killed
    assert clock.now - started <= 12
    holder.take()  # let it be held afresh by a live holder

    def renew_when_due() -> None:
        if holder.renew_due():
            holder.renew()

    clock.on_sleep = renew_when_due
    kept = objects.objects[LEASE]
    assert watch(objects) == "a"
    assert LeaseState.of(objects.objects[LEASE]).holder == "a"
    assert LeaseState.of(objects.objects[LEASE]).epoch == LeaseState.of(kept).epoch
    holder.release()
    assert watch(objects) is None


def _written(seconds: float | None) -> Callable[[], float | None]:
    return lambda: seconds


def test_a_missing_lease_of_a_run_written_just_now_is_watched_as_held() -> None:
    """The lease deleted under a live holder, whose HEAD was written within a lease: the
    taker watches, the holder's renewal writes the lease again (create-only: the run is
    surely still its own), and the taker stops naming it; the holder keeps the run."""
    objects, clock = MemoryObjects(), Clock()
    holder = _lease(objects, clock, "a")
    holder.take()
    del objects.objects[LEASE]
    taker = Lease(
        objects, holder="b", duration=30, margin=10, clock=clock, sleep=clock.sleep,
        written=_written(3.0),
    )  # fmt: skip
    started = clock.now

    def renew_when_due() -> None:
        if holder.renew_due():
            holder.renew()

    clock.on_sleep = renew_when_due
    with pytest.raises(LeaseHeldError, match=r"\(a, its lease written again"):
        taker.take()
    assert clock.now - started <= 11  # seen at the holder's first renewal
    assert holder.may_send()
    assert LeaseState.of(objects.objects[LEASE]).holder == "a"


def test_a_missing_lease_nobody_writes_again_is_taken_after_one_lease() -> None:
    objects, clock = MemoryObjects(), Clock()
    taker = Lease(
        objects, holder="b", duration=30, margin=10, clock=clock, sleep=clock.sleep,
        written=_written(3.0),
    )  # fmt: skip
    started = clock.now
    assert taker.take() == 1
    assert clock.now - started >= 30


def test_a_missing_lease_of_a_run_written_long_ago_is_taken_at_once() -> None:
    objects, clock = MemoryObjects(), Clock()
    for written in (None, 31.0):
        objects.objects.pop(LEASE, None)
        taker = Lease(
            objects, holder="b", duration=30, margin=10, clock=clock, sleep=clock.sleep,
            written=_written(written),
        )  # fmt: skip
        started = clock.now
        assert taker.take() == 1
        assert clock.now == started


def test_a_holder_past_its_margin_does_not_write_a_missing_lease_again() -> None:
    """Past its margin a taker may have had the run: its renewal then loses."""
    objects, clock = MemoryObjects(), Clock()
    holder = _lease(objects, clock, "a")
    holder.take()
    del objects.objects[LEASE]
    clock.now += 21
    with pytest.raises(LeaseLostError):
        holder.renew()
    assert LEASE not in objects.objects


class _RefusedError(Exception):
    pass


class _RefusingWrites(MemoryObjects):
    def replace(self, key: str, data: bytes, etag: str) -> bool:
        raise _RefusedError(key)


def test_a_store_that_refuses_writes_has_its_lease_deleted_at_the_end() -> None:
    """Writes turned off under the run (403 on PUT): the release cannot be written, so the
    lease, surely still this holder's, is deleted; past its margin it is left alone."""
    objects, clock = _RefusingWrites(), Clock()
    holder = _lease(objects, clock, "a")
    holder.take()
    holder.release(refused=(_RefusedError,))
    assert LEASE not in objects.objects
    late = _lease(objects, clock, "b")
    objects.objects.clear()
    late.take()
    clock.now += 21
    with pytest.raises(_RefusedError):
        late.release(refused=(_RefusedError,))
    assert LEASE in objects.objects


def test_a_holder_asked_whether_its_lease_is_taken_as_its_renewal_finds_it_taken() -> None:
    """The keeper's thread may find the lease taken (and let go of it) while the sending
    thread reads the lease object for `taken`: the answer is the read's, never a crash (a
    stalled holder woke to exit 70 on Azurite before)."""
    objects, clock = MemoryObjects(), Clock()
    holder = _lease(objects, clock, "a")
    holder.take()
    clock.now += 31
    _lease(objects, clock, "b").take()
    read = objects.get

    def get_while_the_renewal_fails(key: str) -> tuple[bytes, str] | None:
        found = read(key)
        with pytest.raises(LeaseLostError):
            holder.renew()  # as the keeper's thread would, between check and use
        return found

    objects.get = get_while_the_renewal_fails  # type: ignore[method-assign]
    assert holder.taken() is True
