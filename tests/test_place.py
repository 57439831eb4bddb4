"""A run's place (`engine/place`): a URL keeps the run's memory and outputs, taken by one
process at a time, each invocation working in an empty directory of its own."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from memory_objects import MemoryObjects
from support import InProcess

from batchval.engine.place import is_url, lease_seconds, local_path, opened
from batchval.outcome import RunRefusedError, StopReason
from batchval.store.checkpoint import Checkpoint
from batchval.store.lease import DURATION


def test_a_path_is_the_dir_itself(tmp_path: Path) -> None:
    assert not is_url(str(tmp_path))
    assert is_url("s3://bucket/runs/nightly")
    with opened(str(tmp_path)) as place:
        assert place.local == tmp_path
        assert place.url is None
        assert place.publish() == []


def test_a_run_s_lease_holds_what_the_environment_says() -> None:
    """BATCHVAL_LEASE_SECONDS (a test seam) shortens the lease; unset, DURATION; a value
    that is not seconds above 1 is refused with 64."""
    assert lease_seconds({}) == DURATION == 30.0
    assert lease_seconds({"BATCHVAL_LEASE_SECONDS": " 8 "}) == 8.0
    for wrong in ("soon", "0", "-3", "1", "nan"):
        with pytest.raises(RunRefusedError) as caught:
            lease_seconds({"BATCHVAL_LEASE_SECONDS": wrong})
        assert caught.value.reason is StopReason.REFUSED
        assert "BATCHVAL_LEASE_SECONDS must be seconds above 1" in str(caught.value)


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


@pytest.mark.parametrize(
    ("place", "url"),
    [
        ("s3://bucket/run", True),
        ("gs://bucket/run", True),  # a URL, which the store refuses (64): never a dir `gs:`
        ("az://container/run", True),
        ("runs/night-1", False),
        ("/srv/runs/night-1", False),
        ("file:///srv/runs/night-1", False),
    ],
)
def test_a_place_is_a_url_by_its_scheme_and_file_is_a_local_path(place: str, url: bool) -> None:
    assert is_url(place) is url
    if place.startswith("file://"):
        assert local_path(place) == Path("/srv/runs/night-1")


@pytest.mark.slow
def test_a_url_of_a_store_batchval_does_not_offer_is_refused_with_64(
    tmp_path: Path, batchval: InProcess
) -> None:
    """`run --out gs://...`: refused before anything is read, no directory `gs:` made."""
    source = tmp_path / "book.csv"
    source.write_text("postcode,property_type,bedrooms\nSW1A 2AA,flat,2\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATCHVAL_")}
    done = batchval("run", str(source), "--out", "gs://bucket/run", env=os.environ, cwd=tmp_path)
    assert done.returncode == 64, done.stderr
    assert "no object store for gs:// URLs" in done.stderr
    assert not (tmp_path / "gs:").exists()
    local = batchval("run", str(source), "--out", f"file://{tmp_path / 'run'}", env=env)
    assert local.returncode == 0, local.stderr
    assert (tmp_path / "run" / "results.parquet").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("command", ["run", "streets"])
def test_a_dry_run_at_a_url_is_refused_with_64(
    tmp_path: Path, command: str, batchval: InProcess
) -> None:
    """A dry run keeps nothing: at a URL it is refused before the store is asked."""
    source = tmp_path / "book.csv"
    source.write_text("postcode,property_type,bedrooms\nSW1A 2AA,flat,2\n", encoding="utf-8")
    done = batchval(command, str(source), "--out", "s3://bucket/run", "--dry-run", env={})
    assert done.returncode == 64, done.stderr
    assert "--dry-run sends nothing and keeps nothing" in done.stderr
