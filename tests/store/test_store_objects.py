"""batchval/_internal/store/objects.py against a real S3-compatible server (SeaweedFS's `weed mini`
on 127.0.0.1, tests/objects_server.py), and against a proxy in front of it that makes the
faults a real server will not make on demand (tests/s3_proxy.py)."""

from __future__ import annotations

import socket
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from objects_server import S3Server, bucket_request
from s3_proxy import REGION_EXPECTED, Fault, always, conditional, only_first, proxy

from batchval._internal.outcome import ExitCode
from batchval._internal.store.failures import Failure
from batchval._internal.store.objects import (
    BucketMissingError,
    ObjectStore,
    ObjectStoreError,
    ObjectStoreRefusedError,
    ObjectStoreUnavailableError,
)

# A real S3-compatible server started for the worker (about 4 s with its stop) and
# races that wait on its locks: `make test-fast` leaves them out.
pytestmark = pytest.mark.slow

# A dead store must be called dead in seconds: short timeouts and few retries.
FAST = {"connect_timeout": "1s", "timeout": "3s", "max_retries": "2", "retry_timeout": "3"}


@pytest.fixture
def prefix() -> str:
    return f"t/{uuid.uuid4().hex}"


@pytest.fixture
def store(s3_server: S3Server, prefix: str) -> ObjectStore:
    return ObjectStore.from_url(s3_server.url(prefix), s3_server.env())


def _through(s3_server: S3Server, endpoint: str, prefix: str, **options: str) -> ObjectStore:
    env = {**s3_server.env(), "AWS_ENDPOINT_URL": endpoint}
    return ObjectStore.from_url(s3_server.url(prefix), env, {**FAST, **options})


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- the real server ---------------------------------------------------------------------


def test_round_trip(store: ObjectStore) -> None:
    assert store.get("a/one") is None
    etag = store.put("a/one", b"1")
    assert store.get("a/one") == (b"1", etag)
    store.put("a/two", b"2")
    store.put("ab/three", b"3")
    assert store.list() == ["a/one", "a/two", "ab/three"]
    assert store.list("a") == ["a/one", "a/two"]  # a folder, not a string prefix
    new_etag = store.put("a/one", b"one")
    assert new_etag != etag
    assert store.get("a/one") == (b"one", new_etag)
    store.delete("a/one")
    store.delete("a/one")  # nothing to remove is no error
    assert store.get("a/one") is None
    assert store.list("a") == ["a/two"]


def test_read_into_streams_an_object_to_a_file(store: ObjectStore, tmp_path: Path) -> None:
    """An object larger than a chunk is written to the file whole and in order; a missing
    one is None and writes nothing."""
    data = bytes(range(256)) * (20 << 12)  # 20 MiB: three chunks of at least 8 MiB
    store.put("big", data)
    with (tmp_path / "big").open("wb") as out:
        assert store.read_into("big", out) == len(data)
    assert (tmp_path / "big").read_bytes() == data
    with (tmp_path / "none").open("wb") as out:
        assert store.read_into("none", out) is None
    assert (tmp_path / "none").read_bytes() == b""


def test_a_prefix_is_a_store_of_its_own(s3_server: S3Server, prefix: str) -> None:
    outer = ObjectStore.from_url(s3_server.url(prefix), s3_server.env())
    inner = ObjectStore.from_url(s3_server.url(f"{prefix}/run-1"), s3_server.env())
    inner.put("state", b"x")
    assert outer.list() == ["run-1/state"]
    assert outer.get("run-1/state") == inner.get("state")


def test_create_only_twice(store: ObjectStore) -> None:
    assert store.create("lock", b"first") is True
    assert store.create("lock", b"second") is False
    assert store.create("lock", b"first") is False  # even with the same bytes
    stored = store.get("lock")
    assert stored is not None
    assert stored[0] == b"first"


def test_replace_with_a_fresh_and_a_stale_etag(store: ObjectStore) -> None:
    store.create("pointer", b"v1")
    stored = store.get("pointer")
    assert stored is not None
    v1 = stored[1]
    assert store.replace("pointer", b"v2", v1) is True
    assert store.replace("pointer", b"v3", v1) is False
    stored = store.get("pointer")
    assert stored is not None
    assert stored[0] == b"v2"
    assert store.replace("pointer", b"v3", stored[1]) is True
    assert store.replace("gone", b"x", v1) is False  # no object: no version to replace


def _race(writers: int, write: Callable[[int], bool]) -> list[int]:
    """`writers` threads call `write(i)` at once; the indexes whose write won."""
    barrier = threading.Barrier(writers)
    won: list[int] = []
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        try:
            barrier.wait(10)
            if write(i):
                won.append(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    return won


def test_sixteen_writers_create_one_key_one_wins(store: ObjectStore) -> None:
    won = _race(16, lambda i: store.create("contested", f"writer {i}".encode()))
    assert len(won) == 1
    assert store.get("contested") is not None
    assert store.get("contested")[0] == f"writer {won[0]}".encode()  # type: ignore[index]


def test_sixteen_writers_replace_one_version_one_wins(store: ObjectStore) -> None:
    store.create("pointer", b"start")
    stored = store.get("pointer")
    assert stored is not None
    won = _race(16, lambda i: store.replace("pointer", f"writer {i}".encode(), stored[1]))
    assert len(won) == 1
    assert store.get("pointer")[0] == f"writer {won[0]}".encode()  # type: ignore[index]


def test_probe_passes_and_leaves_nothing(store: ObjectStore) -> None:
    store.probe()
    assert store.list() == []


def test_wrong_secret_is_refused_and_never_shown(s3_server: S3Server, prefix: str) -> None:
    wrong = "not-the-secret-" + uuid.uuid4().hex
    env = {**s3_server.env(), "AWS_SECRET_ACCESS_KEY": wrong}
    store = ObjectStore.from_url(s3_server.url(prefix), env, FAST)
    for call in (store.probe, lambda: store.get("x"), lambda: store.create("x", b"1")):
        with pytest.raises(ObjectStoreRefusedError) as caught:
            call()
        assert "credentials refused" in str(caught.value)
        assert caught.value.exit_code == ExitCode.USAGE
        shown = "".join(traceback.format_exception(caught.value)) + repr(caught.value)
        assert wrong not in shown
        assert s3_server.access_key_id not in shown
        assert caught.value.__cause__ is None
        assert caught.value.__context__ is None


def test_no_such_bucket_is_refused_naming_the_bucket(s3_server: S3Server) -> None:
    """NoSuchBucket, on a write or a read: refused (64), the bucket named as missing."""
    store = ObjectStore.from_url("s3://no-such-bucket/x", s3_server.env(), FAST)
    for call in (store.probe, lambda: store.get("k"), lambda: store.list("")):
        with pytest.raises(BucketMissingError, match="the bucket 'no-such-bucket' does not") as e:
            call()
        assert e.value.bucket == "no-such-bucket"
        assert e.value.exit_code == ExitCode.USAGE


def test_a_bucket_deleted_under_a_store_is_missing_not_an_outage(s3_server: S3Server) -> None:
    """A real deletion (SeaweedFS deletes a bucket that holds objects): the next write is
    BucketMissingError at once, with no read-back and no retry."""
    assert bucket_request(s3_server, "PUT", "deleted-soon") == 200
    store = ObjectStore.from_url("s3://deleted-soon/run", s3_server.env(), FAST)
    store.probe()
    assert store.create("k", b"1") is True
    assert bucket_request(s3_server, "DELETE", "deleted-soon") == 204
    started = time.monotonic()
    with pytest.raises(BucketMissingError, match="'deleted-soon'"):
        store.create("other", b"2")
    assert time.monotonic() - started < 2


def test_a_bucket_of_another_region_is_refused_naming_the_region(
    s3_server: S3Server, prefix: str
) -> None:
    """A 400 AuthorizationHeaderMalformed: refused (64) at once, never an outage (75)
    retried for ever, naming the region configured and the one the store expects."""
    with proxy(s3_server, always(Fault.REPLY_400_REGION)) as (endpoint, seen):
        store = _through(s3_server, endpoint, prefix)
        calls: list[Callable[[], object]] = [store.probe, lambda: store.get("k")]
        for call in calls:
            with pytest.raises(ObjectStoreRefusedError) as caught:
                call()
            assert f"another region than 'us-east-1' (it expects '{REGION_EXPECTED}')" in str(
                caught.value
            )
            assert "AWS_REGION" in str(caught.value)
            assert caught.value.exit_code == ExitCode.USAGE
    # Neither read back nor retried: the probe's one PUT (and its clean-up), one GET.
    methods = [method for method, _, _ in seen]
    assert (methods.count("PUT"), methods.count("GET")) == (1, 1)


@pytest.mark.parametrize(
    ("fault", "named"),
    [
        (Fault.REPLY_301, f"(HTTP 301 PermanentRedirect to s3.{REGION_EXPECTED}.amazonaws.com)"),
        (Fault.REPLY_307, "(HTTP 307 TemporaryRedirect to http://127.0.0.1:"),
    ],
)
def test_a_redirect_is_refused_naming_the_redirect_and_where_it_leads(
    s3_server: S3Server, prefix: str, fault: Fault, named: str
) -> None:
    """A 301 PermanentRedirect without a Location (obstore gives no status) or a 307 with
    one (obstore follows it for a read, without credentials, and the store there refuses
    it: 403): named as the redirect it is, with where it leads, refused (64) at once, never
    credentials refused nor an outage (75) retried for ever. Each costs one GET more,
    signed and not followed, to read the redirect."""
    with proxy(s3_server, always(fault)) as (endpoint, seen):
        store = _through(s3_server, endpoint, prefix)
        calls: list[Callable[[], object]] = [
            store.probe,
            lambda: store.get("k"),
            lambda: store.list("a"),
            lambda: store.put("k", b"1"),
        ]
        for call in calls:
            with pytest.raises(ObjectStoreRefusedError) as caught:
                call()
            said = str(caught.value)
            assert f"the store answered a redirect {named}" in said
            assert "the endpoint or region is wrong (the region set is 'us-east-1')" in said
            assert "AWS_REGION" in said
            assert "credentials refused" not in said
            assert "X-Amz-Signature" not in said
            assert caught.value.exit_code == ExitCode.USAGE
    # Neither read back nor retried: the probe's PUT and its clean-up, the GET, the list
    # and the put, each once, each call with one signed GET more, not followed (and the
    # clean-up's, whose failure the probe leaves unsaid, when its redirect is bare).
    methods = [method for method, path, _ in seen if "X-Amz-Signature" not in path]
    assert methods == ["PUT", "POST", "GET", "GET", "PUT"]
    assert sum("X-Amz-Signature" in path for _, path, _ in seen) in (4, 5)


def test_a_redirect_is_named_from_its_status_alone() -> None:
    """Any 3xx obstore reports (a write's, which it does not follow), S3's or Azure's: a
    redirect, final (no read-back, no retry), never credentials refused nor an outage."""
    for text in (
        "Error performing PUT http://h/b/k - Server returned non-2xx status code: 307 "
        "Temporary Redirect: ",
        "Error performing PUT http://h/c/k - Server returned non-2xx status code: 301 "
        "Moved Permanently: ",
        "Received redirect without LOCATION, this normally indicates an incorrectly "
        "configured region",
    ):
        failure = Failure.of(Exception(text))
        assert failure.kind == "redirect"
        assert failure.final


def test_a_write_the_store_refuses_is_named_as_refused(s3_server: S3Server, prefix: str) -> None:
    """403 on PUT (a bucket policy turned read-only): the write refused, named, 64; reads
    still answer."""
    only_puts = lambda m, p, h: Fault.REPLY_403 if m == "PUT" else Fault.FORWARD  # noqa: E731
    store_of(s3_server, prefix).put("k", b"1")
    with proxy(s3_server, only_puts) as (endpoint, _):
        store = _through(s3_server, endpoint, prefix)
        for call in (lambda: store.put("a", b"1"), lambda: store.create("b", b"1")):
            with pytest.raises(ObjectStoreRefusedError, match="refuses this write") as caught:
                call()
            assert "HTTP 403 AccessDenied" in str(caught.value)
        assert store.get("k") is not None


def test_age_is_read_on_the_stores_own_clock(store: ObjectStore) -> None:
    """Seconds since a key was written, by the store's clock; None for no key; the scratch
    object it wrote is gone."""
    assert store.age("a/none") is None
    store.put("a/k", b"1")
    age = store.age("a/k")
    assert age is not None
    assert 0 <= age < 5
    assert store.list("") == ["a/k"]


def test_a_dead_endpoint_is_an_outage_within_seconds(s3_server: S3Server, prefix: str) -> None:
    env = {**s3_server.env(), "AWS_ENDPOINT_URL": f"http://127.0.0.1:{_closed_port()}"}
    store = ObjectStore.from_url(s3_server.url(prefix), env, FAST)
    for call in (store.probe, lambda: store.get("x"), lambda: store.put("x", b"1")):
        started = time.monotonic()
        with pytest.raises(ObjectStoreUnavailableError, match="connection refused") as caught:
            call()
        assert time.monotonic() - started < 8
        assert caught.value.exit_code == ExitCode.RESUMABLE


# -- faults, through the proxy -----------------------------------------------------------


def test_probe_refuses_a_store_that_drops_conditional_headers(
    s3_server: S3Server, prefix: str
) -> None:
    with proxy(s3_server, always(Fault.STRIP)) as (endpoint, seen):
        store = _through(s3_server, endpoint, prefix)
        with pytest.raises(ObjectStoreRefusedError, match="If-None-Match") as caught:
            store.probe()
    assert endpoint.removeprefix("http://") in str(caught.value)  # names the store
    assert caught.value.exit_code == ExitCode.USAGE
    assert any(fault is Fault.STRIP for _, _, fault in seen)


def test_probe_refuses_a_store_that_drops_if_match(s3_server: S3Server, prefix: str) -> None:
    with proxy(s3_server, always(Fault.STRIP_IF_MATCH)) as (endpoint, _):
        store = _through(s3_server, endpoint, prefix)
        with pytest.raises(ObjectStoreRefusedError, match="If-Match"):
            store.probe()


def test_the_proxy_itself_keeps_signatures_valid(s3_server: S3Server, prefix: str) -> None:
    with proxy(s3_server, always(Fault.FORWARD)) as (endpoint, _):
        _through(s3_server, endpoint, prefix).probe()


def test_a_create_that_landed_but_got_a_503_is_read_back_as_won(
    s3_server: S3Server, prefix: str
) -> None:
    when = only_first(Fault.LAND_THEN_503, lambda m, p, h: conditional(h))
    with proxy(s3_server, when) as (endpoint, seen):
        store = _through(s3_server, endpoint, prefix)
        assert store.create("k", b"ours") is True
        assert store.create("k", b"ours") is False  # and a later create sees it
    assert [(m, f) for m, _, f in seen][:2] == [
        ("PUT", Fault.LAND_THEN_503),
        ("GET", Fault.FORWARD),
    ]


def test_a_replace_that_landed_but_got_a_503_is_read_back_as_won(
    s3_server: S3Server, prefix: str
) -> None:
    when = only_first(Fault.LAND_THEN_503, lambda m, p, h: "If-Match" in h)
    with proxy(s3_server, when) as (endpoint, seen):
        store = _through(s3_server, endpoint, prefix)
        store.create("k", b"v1")
        v1 = store.get("k")
        assert v1 is not None
        assert store.replace("k", b"v2", v1[1]) is True
        assert store.replace("k", b"v3", v1[1]) is False
    puts = [f for m, _, f in seen if m == "PUT"]
    assert puts == [Fault.FORWARD, Fault.LAND_THEN_503, Fault.FORWARD]


def test_a_503_before_landing_is_read_back_then_written_again(
    s3_server: S3Server, prefix: str
) -> None:
    when = only_first(Fault.REPLY_503, lambda m, p, h: conditional(h))
    with proxy(s3_server, when) as (endpoint, seen):
        store = _through(s3_server, endpoint, prefix)
        assert store.create("k", b"ours") is True
    assert [m for m, _, _ in seen] == ["PUT", "GET", "PUT"]
    assert store_of(s3_server, prefix).get("k") is not None


def test_a_stalled_write_longer_than_the_retry_window_is_read_back_then_written_again(
    s3_server: S3Server, prefix: str
) -> None:
    """One create-only PUT never answered, its timeout (3 s) past the retry window (1 s):
    the window counts from that failure, so the read-back (nothing landed) is followed by
    a write that lands, not by an outage (a stalled upload once stopped a run)."""
    when = only_first(Fault.STALL, lambda m, p, h: conditional(h))
    with proxy(s3_server, when) as (endpoint, seen):
        store = _through(s3_server, endpoint, prefix, timeout="3s", retry_timeout="1")
        assert store.create("k", b"ours") is True
    assert [f for m, _, f in seen if m == "PUT"] == [Fault.STALL, Fault.FORWARD]
    assert store_of(s3_server, prefix).get("k") is not None


def test_a_conflict_409_is_retried(s3_server: S3Server, prefix: str) -> None:
    when = only_first(Fault.REPLY_409, lambda m, p, h: conditional(h))
    with proxy(s3_server, when) as (endpoint, seen):
        store = _through(s3_server, endpoint, prefix)
        assert store.create("k", b"ours") is True
    assert [f for m, _, f in seen if m == "PUT"] == [Fault.REPLY_409, Fault.FORWARD]


def test_a_lost_answer_on_a_lost_race_is_a_loss(s3_server: S3Server, prefix: str) -> None:
    """Another writer's object is there when ours meets a 503: read back, not ours: False."""
    store_of(s3_server, prefix).create("k", b"theirs")
    with proxy(s3_server, always(Fault.REPLY_503)) as (endpoint, _):
        # Every request 503s, the read-back too: the outcome stays unknown, an outage.
        store = _through(s3_server, endpoint, prefix, max_retries="1", retry_timeout="2")
        with pytest.raises(ObjectStoreUnavailableError, match="503"):
            store.create("k", b"ours")
    only_puts = lambda m, p, h: Fault.REPLY_503 if m == "PUT" else Fault.FORWARD  # noqa: E731
    with proxy(s3_server, only_puts) as (endpoint, _):
        store = _through(s3_server, endpoint, prefix)
        assert store.create("k", b"ours") is False


def test_a_store_that_never_answers_is_an_outage(s3_server: S3Server, prefix: str) -> None:
    with proxy(s3_server, always(Fault.STALL)) as (endpoint, _):
        store = _through(
            s3_server, endpoint, prefix, timeout="1s", max_retries="1", retry_timeout="2"
        )
        started = time.monotonic()
        with pytest.raises(ObjectStoreUnavailableError, match="timed out"):
            store.create("k", b"x")
        assert time.monotonic() - started < 15


def store_of(s3_server: S3Server, prefix: str) -> ObjectStore:
    return ObjectStore.from_url(s3_server.url(prefix), s3_server.env())


# -- the server fixture itself -----------------------------------------------------------


def _listening(pid: int) -> set[tuple[str, int]]:
    """The TCP addresses process `pid` listens on (from /proc: its sockets' inodes)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = str(fd.readlink()) if fd.is_symlink() else ""
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                address, port = fields[1].split(":")
                ip = ".".join(str(int(address[i : i + 2], 16)) for i in (6, 4, 2, 0))
                found.add((ip if len(address) == 8 else address, int(port, 16)))
    return found


def test_the_server_listens_on_loopback_and_its_own_ports_only(s3_server: S3Server) -> None:
    listening = _listening(s3_server.pid)
    assert {ip for ip, _ in listening} == {"127.0.0.1"}
    assert {port for _, port in listening} == set(s3_server.ports.values())


# -- other URLs and options --------------------------------------------------------------


def test_memory_store_honours_both_conditions() -> None:
    store = ObjectStore.from_url("memory://", {})
    store.probe()
    assert store.create("k", b"1")
    assert not store.create("k", b"2")


def test_a_local_folder_has_no_compare_and_swap(tmp_path: Path) -> None:
    for url in (str(tmp_path / "plain"), (tmp_path / "as-url").as_uri()):
        store = ObjectStore.from_url(url, {})
        assert store.create("a/k", b"1") is True
        assert store.create("a/k", b"2") is False
        assert store.list() == ["a/k"]
        with pytest.raises(ObjectStoreRefusedError, match="does not support"):
            store.probe()


@pytest.mark.parametrize(
    ("url", "options", "match"),
    [
        ("gs://bucket/x", {}, "no object store for gs://"),
        ("s3:///x", {}, "names no bucket"),
        ("s3://b/x", {"colour": "blue"}, "unknown option"),
        ("s3://b/x", {"timeout": "soon"}, "not a number"),
        ("s3://b/runs/../other", {}, "has the segment '..'"),
        ("s3://b/runs/./one", {}, "has the segment '.'"),
        ("s3://b/runs//one", {}, r"has an empty segment \('//'\)"),
        ("s3://b//runs", {}, r"has an empty segment \('//'\)"),
        ("s3://b/..", {}, "has the segment '..'"),
    ],
)
def test_a_url_or_option_that_cannot_be_used_is_refused(
    url: str, options: dict[str, str], match: str
) -> None:
    with pytest.raises(ObjectStoreRefusedError, match=match) as caught:
        ObjectStore.from_url(url, {}, options)
    assert isinstance(caught.value, ObjectStoreError)


def test_the_environment_s_store_options_are_the_store_s() -> None:
    """BATCHVAL_STORE_OPTIONS (a test seam) sets the options a config may set, checked as
    they are: an unknown one refused naming it, a value not a number refused."""
    variable = "BATCHVAL_STORE_OPTIONS"
    store = ObjectStore.from_url("memory://", {variable: "timeout=3s, retry_timeout=2.5"})
    assert store._retry_timeout == 2.5
    assert ObjectStore.from_url("memory://", {})._retry_timeout == 20.0
    with pytest.raises(ObjectStoreRefusedError, match=r"unknown option\(s\): colour"):
        ObjectStore.from_url("s3://b/x", {variable: "timeout=3s,colour=blue"})
    with pytest.raises(ObjectStoreRefusedError, match="not a number"):
        ObjectStore.from_url("s3://b/x", {variable: "max_retries=some"})
    # Options given by the caller are the store's, whatever the environment says.
    given = ObjectStore.from_url("memory://", {variable: "colour=blue"}, {"retry_timeout": "1"})
    assert given._retry_timeout == 1.0


@pytest.mark.parametrize("url", ["s3://b", "s3://b/", "s3://b/runs/one/", "s3://b/a.b/..c"])
def test_a_prefix_without_dot_segments_is_kept(url: str) -> None:
    """One `/` at an end is no segment; a segment that only holds dots among others is a name."""
    assert ObjectStore.from_url(url, {}).name.startswith("s3://b/")


def test_the_name_shows_the_endpoint_without_user_information() -> None:
    env = {
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "very-secret",
        "AWS_ENDPOINT_URL": "http://user:pass@127.0.0.1:9/",
    }
    store = ObjectStore.from_url("s3://bucket/runs/one", env)
    assert store.name == "s3://bucket/runs/one at http://127.0.0.1:9/"
    assert "very-secret" not in repr(store)
