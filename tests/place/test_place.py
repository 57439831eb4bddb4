"""A run's place (`place/place`): a URL keeps the run's memory and outputs, taken by one
process at a time, each invocation working in an empty directory of its own; one `Place`
for every command, which names itself in messages."""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

import pytest
from memory_objects import MemoryObjects
from objects_server import S3Server
from support import InProcess

from batchval._internal.outcome import RunRefusedError, SettingsError, StopReason
from batchval._internal.place.place import (
    Place,
    is_url,
    lease_seconds,
    local_path,
    opened,
    taken,
    viewed,
    written,
)
from batchval._internal.store.database import Database
from batchval._internal.store.lease import DURATION
from batchval._internal.store.objects import ObjectStore


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
        database = Database.open(place.local)
        place.keep(database)
        database.set("run_id", "backfill-1")
        database.close()
        (place.local / "results.parquet").write_bytes(b"PAR1 fake")
        first = place.local
    assert not first.exists()  # nothing left behind on the machine
    assert objects.objects["results.parquet"] == b"PAR1 fake"
    assert "checkpoint.sqlite" not in objects.objects  # the memory is kept as its log
    with opened("s3://b/run", objects, lease_seconds=0.6) as place:
        again = Database.open(place.local)
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


# --- the one place object, whatever the command (issue 38) -----------------------------


@pytest.mark.parametrize("opening", ["taken", "viewed", "written"])
@pytest.mark.parametrize("shown", ["{dir}", "{dir}/", "file://{dir}"])
def test_a_local_place_is_the_dir_itself_however_it_is_opened(
    tmp_path: Path, opening: str, shown: str
) -> None:
    """A DIR (a path, with a final `/`, or a `file://` URL) is worked in as it is, named
    as its user gave it, its path left as it is in messages, and neither published nor
    removed."""
    given = shown.format(dir=tmp_path)
    opener = {"taken": taken, "viewed": viewed, "written": written}[opening]
    with opener(given, {}) as place:
        assert (place.local, place.url, place.objects, place.held) == (tmp_path, None, None, ())
        (place.local / "results.csv").write_text("a\n", encoding="utf-8")
        assert place.publish() == []
    assert place.name == given.rstrip("/")
    assert place.where(tmp_path / "results.csv") == str(tmp_path / "results.csv")
    said = f"{tmp_path} holds no finished batchval run, without a summary"
    assert place.named(said) == said  # a local DIR's path is its own name
    assert (tmp_path / "results.csv").is_file()


def test_a_place_names_itself_in_a_refusal_met_within(tmp_path: Path) -> None:
    """`naming`: a refusal or a settings error about the local directory names the place
    as its user gave it, with its reason kept."""
    place = Place(tmp_path / "copy", "s3://b/runs/night", given="s3://b/runs/night/")
    assert place.name == "s3://b/runs/night"
    with pytest.raises(RunRefusedError) as refused, place.naming():
        raise RunRefusedError(StopReason.REFUSED, f"{tmp_path / 'copy'} has no results.parquet")
    assert refused.value.reason is StopReason.REFUSED
    assert refused.value.detail == "s3://b/runs/night has no results.parquet"
    with pytest.raises(SettingsError) as wrong, place.naming():
        raise SettingsError(f"{tmp_path / 'copy'}/config.yaml: no such key")
    assert str(wrong.value) == "s3://b/runs/night/config.yaml: no such key"
    assert place.where(tmp_path / "copy" / "report.html") == "s3://b/runs/night/report.html"


def test_outputs_the_url_could_not_take_are_said_and_never_exit_0(tmp_path: Path) -> None:
    place = Place(tmp_path, "s3://b/run", given="s3://b/run")
    assert place.left(75) == (75, [])
    place.unpublished = RunRefusedError(StopReason.STORE_UNAVAILABLE, "s3://b/run: timed out")
    place.log_kept = tmp_path / "kept.log"
    code, said = place.left(0)
    assert code == 75
    assert said == [
        "store_unavailable: s3://b/run: timed out (the outputs are not at s3://b/run)",
        f"the run's log is kept in {tmp_path / 'kept.log'}, not at its URL",
    ]


@pytest.mark.slow
def test_a_place_at_an_s3_url_opens_publishes_and_cleans_up(s3_server: S3Server) -> None:
    """At a URL each way of opening works in a directory of its own, removed at the end:
    `written` publishes what the command wrote (and says what the URL held), `taken`
    copies the outputs in and publishes what changed, `viewed` publishes nothing."""
    url, env = s3_server.url(f"place-{uuid.uuid4().hex[:8]}"), s3_server.env()
    store = ObjectStore.from_url(url, env)
    store.put("old.txt", b"before")
    with written(url + "/", env) as place:
        assert (place.url, place.name, place.held) == (url, url, ("old.txt",))
        assert list(place.local.iterdir()) == []
        (place.local / "shards.json").write_bytes(b"{}")
        first = place.local
    assert not first.exists()
    assert _held(store, "shards.json") == b"{}"
    with taken(url, env, outputs=True) as place:
        assert (place.local / "shards.json").read_bytes() == b"{}"  # the outputs copied in
        database = Database.open(place.local)
        place.keep(database)
        database.set("run_id", "night-1")
        database.close()
        (place.local / "report.html").write_bytes(b"<html>")
        assert place.where(place.local / "report.html") == f"{url}/report.html"
        assert place.named(f"wrote {place.local}/report.html") == f"wrote {url}/report.html"
        second = place.local
    assert not second.exists()
    assert _held(store, "report.html") == b"<html>"
    with viewed(url, env) as place:
        assert place.objects is not None
        assert place.keeper is None  # the run never taken
        assert (place.local / "report.html").read_bytes() == b"<html>"
        held = Database.open_existing(place.local)
        assert held is not None
        assert held.get("run_id") == "night-1"
        held.close()
        (place.local / "results.csv").write_bytes(b"a\n")
        third = place.local
    assert not third.exists()
    assert _held(store, "results.csv") is None


@pytest.mark.slow
def test_a_written_place_whose_command_fails_publishes_nothing(s3_server: S3Server) -> None:
    url, env = s3_server.url(f"place-{uuid.uuid4().hex[:8]}"), s3_server.env()
    used: list[Path] = []

    def failing() -> None:
        with written(url, env) as place:
            used.append(place.local)
            (place.local / "shard-1-of-2.parquet").write_bytes(b"PAR1")
            raise RuntimeError("the command failed")

    with pytest.raises(RuntimeError):
        failing()
    assert not used[0].exists()
    assert ObjectStore.from_url(url, env).list("") == []


def _held(store: ObjectStore, key: str) -> bytes | None:
    found = store.get(key)
    return None if found is None else found[0]
