"""The run's memory at an `s3://` URL over many rounds and after damage (issue 36), on a
real S3-compatible server (SeaweedFS on loopback): resumes with nothing to do write no
base and leave the bucket no larger; a HEAD overwritten with garbage, or naming a
generation that is gone, stops `status` and `run` with 64 and the repair, and after the
repair the run resumes without paying again."""

from __future__ import annotations

import json
import re
from email.message import Message
from pathlib import Path

import pytest
from objects_server import S3Server
from s3_proxy import Fault, proxy
from support import LIVE, InProcess, portfolio, url_env

from batchval._internal.sandbox.server import RunningSandbox
from batchval._internal.store.objects import ObjectStore

# End to end: the CLI (in this process: the `batchval` fixture) against the sandbox and
# SeaweedFS (`make test-fast` leaves it out).
pytestmark = pytest.mark.slow


def _held(store: ObjectStore) -> tuple[int, int]:
    """The objects under `state/`, and the bytes under the URL."""
    keys = store.list("")
    size = 0
    for key in keys:
        found = store.get(key)
        size += 0 if found is None else len(found[0])
    return sum(k.startswith("state/") for k in keys), size


def _head(store: ObjectStore) -> dict[str, object]:
    found = store.get("state/HEAD")
    assert found is not None
    parsed: dict[str, object] = json.loads(found[0])
    return parsed


def _repair(message: str) -> bytes:
    """The HEAD the message says to write (docs/how-to/object-storage.md's repair)."""
    found = re.search(r"write (\{.*?\}) to (s3://\S+/state/HEAD)", message)
    assert found, message
    return json.dumps(json.loads(found.group(1))).encode()


def test_resumes_with_nothing_to_do_write_no_base_and_the_bucket_does_not_grow(
    served: RunningSandbox, s3_server: S3Server, tmp_path: Path, batchval: InProcess
) -> None:
    """A run, then the same command five times with nothing left to send: no resume
    uploads a base (each goes on in HEAD's generation, rewriting its log's one object),
    the objects under state/ after the fifth are no more than after the first resume (the
    run's, and at most that one object), the bytes under the URL at most 1.25 times the
    first resume's, and no call is made."""
    url = s3_server.url("idle")
    source = portfolio(tmp_path / "book.csv", 40)
    done = batchval("run", str(source), "--out", url, env=url_env(served, s3_server))
    assert done.returncode == 0, done.stderr
    ledger = served.sandbox.ledger
    calls = len(ledger.valuations_created(LIVE.client_id))
    store = ObjectStore.from_url(url, s3_server.env())
    uploaded: list[str] = []

    def watch(method: str, path: str, headers: Message) -> Fault:
        if method == "PUT" and path.endswith("/base.sqlite"):
            uploaded.append("copied" if "x-amz-copy-source" in headers else "uploaded")
        return Fault.FORWARD

    held = [_held(store)]  # after the run, then after each resume
    with proxy(s3_server, watch) as (endpoint, _):
        for _ in range(5):
            again = batchval(
                "run", str(source), "--out", url, env=url_env(served, s3_server, endpoint)
            )
            assert again.returncode == 0, again.stderr
            held.append(_held(store))
    assert "uploaded" not in uploaded  # no base written by a resume
    assert uploaded.count("copied") <= 1  # the first's, if it took on a log of many objects
    assert held[-1][0] <= held[1][0], held  # no more objects than after the first resume
    assert held[-1][0] <= held[0][0] + 1, held  # the run's, and at most the log's one object
    assert held[-1][1] <= 1.25 * held[1][1], held  # bytes: at most 1.25 times the first's
    assert len(ledger.valuations_created(LIVE.client_id)) == calls
    generations = {k.split("/")[1] for k in store.list("state/") if k.count("/") == 2}
    assert len(generations) == 2  # the current one and the one before it


@pytest.mark.parametrize("damage", ["garbage", "missing"])
def test_a_damaged_head_is_64_and_the_documented_repair_resumes_without_paying(
    served: RunningSandbox, s3_server: S3Server, tmp_path: Path, damage: str, batchval: InProcess
) -> None:
    """HEAD overwritten with garbage, or naming a generation that is gone: `status` and
    `run` end 64 naming the object and the repair (never 70, never a fall back); once HEAD
    is written as the message says, the same command resumes and nothing is paid again."""
    url = s3_server.url(f"damaged-{damage}")
    source = portfolio(tmp_path / "book.csv", 20)
    env = url_env(served, s3_server)
    first = batchval("run", str(source), "--out", url, env=env)
    assert first.returncode == 0, first.stderr
    # A resume with nothing to send: the run's generation is the one before HEAD's now.
    again = batchval("run", str(source), "--out", url, env=env)
    assert again.returncode == 0, again.stderr
    store = ObjectStore.from_url(url, s3_server.env())
    ledger = served.sandbox.ledger
    charged = ledger.credits_charged(LIVE.client_id)
    if damage == "garbage":
        store.put("state/HEAD", b"\xff\xfe\x00<html>not a HEAD</html>")
        named = "state/HEAD is not the run's HEAD"
    else:
        gone = str(_head(store)["generation"])
        for key in store.list(f"state/{gone}"):
            store.delete(key)
        named = f"state/{gone}/base.sqlite is not there"
    for argv in (["status", url], ["run", str(source), "--out", url]):
        stopped = batchval(*argv, env=env)
        assert stopped.returncode == 64, stopped.stderr
        assert named in stopped.stderr
        assert "Repair a run's memory" in stopped.stderr
        assert "Traceback" not in stopped.stderr
    assert ledger.credits_charged(LIVE.client_id) == charged
    store.put("state/HEAD", _repair(stopped.stderr))
    repaired = batchval("run", str(source), "--out", url, env=env)
    assert repaired.returncode == 0, repaired.stderr
    assert ledger.credits_charged(LIVE.client_id) == charged
    assert ledger.keys_charged_twice() == []
    assert len(ledger.valuations_created(LIVE.client_id)) == 20
    summary = json.loads(store.get("summary.json")[0])  # type: ignore[index]
    assert summary["rows"]["valued"] == 20
