"""A read that has not ended is no reason to ignore a signal (issue 54, part 3): `watched`
runs the read in a thread of its own and honours a noted signal while it goes on."""

from __future__ import annotations

import threading

import pytest

from batchval._internal.outcome import RunRefusedError, StopReason
from batchval._internal.sending import batches


def test_a_signal_during_a_read_that_never_ends_is_honoured() -> None:
    """The read blocks until the test lets it go; the signal noted meanwhile ends the wait
    with the `signal` refusal (75), the read still blocked and left behind."""
    release, begun = threading.Event(), threading.Event()
    noted: list[str] = []

    def read() -> str:
        begun.set()
        release.wait()
        return "batch"

    def interrupted() -> str | None:
        if begun.is_set():
            noted.append("SIGTERM")  # noted once the read is surely under way
        return noted[0] if noted else None

    try:
        with pytest.raises(RunRefusedError) as stopped:
            batches.watched(read, interrupted, "run")
        assert stopped.value.reason is StopReason.SIGNAL
        assert "interrupted by SIGTERM while reading the input" in str(stopped.value)
        assert not release.is_set()
        assert batches.left_behind()  # the console script ends the process at once
    finally:
        release.set()


def test_a_read_gives_its_value_or_raises_its_error() -> None:
    assert batches.watched(lambda: 42, lambda: None, "run") == 42

    def fails() -> int:
        raise ValueError("the input changed")

    with pytest.raises(ValueError, match="the input changed"):
        batches.watched(fails, lambda: None, "run")
