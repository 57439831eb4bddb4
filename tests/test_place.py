"""A run's place (`engine/place`): a URL keeps the run's memory and outputs, taken by one
process at a time, each invocation working in an empty directory of its own."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from memory_objects import MemoryObjects

from batchval.engine.place import is_url, opened
from batchval.outcome import RunRefusedError, StopReason
from batchval.store.checkpoint import Checkpoint


def test_a_path_is_the_dir_itself(tmp_path: Path) -> None:
    assert not is_url(str(tmp_path))
    assert is_url("s3://bucket/runs/nightly")
    with opened(str(tmp_path)) as place:
        assert place.local == tmp_path
        assert place.url is None
        assert place.publish() == []


def test_each_invocation_restores_the_run_and_publishes_its_outputs() -> None:
    objects = MemoryObjects()
    with opened("s3://b/run", objects, lease_seconds=0.6) as place:
        assert list(place.local.iterdir()) == []  # an empty disk, as a moved task finds
        checkpoint = Checkpoint.open(place.local)
        place.keep(checkpoint)
        checkpoint.set("run_id", "backfill-1")
        checkpoint.close()
        (place.local / "results.parquet").write_bytes(b"PAR1 fake")
        first = place.local
    assert not first.exists()  # nothing left behind on the machine
    assert objects.objects["results.parquet"] == b"PAR1 fake"
    assert "checkpoint.sqlite" not in objects.objects  # the memory is kept as its log
    with opened("s3://b/run", objects, lease_seconds=0.6) as place:
        again = Checkpoint.open(place.local)
        assert again.get("run_id") == "backfill-1"
        again.close()


def test_a_second_process_on_the_run_stops_with_75_and_sends_nothing() -> None:
    objects = MemoryObjects()
    held = threading.Event()
    done = threading.Event()

    def first() -> None:
        with opened("s3://b/run", objects, lease_seconds=0.6):
            held.set()
            done.wait(5)

    holder = threading.Thread(target=first)
    holder.start()
    assert held.wait(5)
    with (
        pytest.raises(RunRefusedError) as refused,
        opened("s3://b/run", objects, lease_seconds=0.6),
    ):
        pass
    assert refused.value.reason is StopReason.DIR_LOCKED
    done.set()
    holder.join()
