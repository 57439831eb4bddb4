"""A run's place and its book on a real S3-compatible server (SeaweedFS on loopback), with
a proxy in front for what a real server will not do on demand: a store that ignores
conditional writes (refused, 64) and another night replacing the book while this one
writes it (`book_changed`, 75, then merged by the same command)."""

from __future__ import annotations

import io
from email.message import Message
from pathlib import Path

import polars as pl
import pytest
from objects_server import S3Server
from s3_proxy import Fault, always, conditional, proxy
from support import LIVE, InProcess, StoreServer, env_for, portfolio, url_env

from batchval._internal.sandbox.server import RunningSandbox
from batchval._internal.store.objects import ObjectStore

# End to end: the CLI in this process against the sandbox (`make test-fast` leaves it out).
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("where", ["out", "book"])
def test_a_store_that_ignores_conditional_writes_is_refused_with_64(
    served: RunningSandbox,
    store_server: StoreServer,
    tmp_path: Path,
    where: str,
    batchval: InProcess,
) -> None:
    """Behind a proxy that drops If-None-Match and If-Match, the store would let two
    machines both spend (or both write a book): refused before any call, naming it."""
    source = portfolio(tmp_path / "book.csv", 5)
    url = store_server.url(f"ignores-{where}")
    with proxy(store_server, always(Fault.STRIP)) as (endpoint, seen):
        place = ["--out", url] if where == "out" else ["--out", str(tmp_path / "run")]
        book = ["--book", f"{url}/book.parquet"] if where == "book" else []
        done = batchval(
            "run", str(source), *place, *book, env=url_env(served, store_server, endpoint)
        )
    assert done.returncode == 64, done.stderr
    assert "refused" in done.stderr
    assert "ignores create-only writes" in done.stderr
    assert any(fault is Fault.STRIP for *_, fault in seen)
    assert served.sandbox.ledger.valuations_created(LIVE.client_id) == []


def test_a_book_replaced_by_another_night_meanwhile_is_75_then_merged(
    served: RunningSandbox, s3_server: S3Server, tmp_path: Path, batchval: InProcess
) -> None:
    """Night B writes the book between night A's reading it and A's compare-and-swap: A
    stops with book_changed (75) and replaces nothing; the same command again sends
    nothing and merges A's valuations into the book B wrote; nothing is charged twice."""
    url = s3_server.url("book-race")
    store = ObjectStore.from_url(url, s3_server.env())
    env = url_env(served, s3_server)
    night_a = portfolio(tmp_path / "a.csv", 6)
    night_b = tmp_path / "b.csv"
    night_b.write_text(night_a.read_text().replace("LN-", "LB-").replace("terraced", "detached"))
    # Night B, on a book of its own, to have its book's bytes ready.
    options = ["--row-id", "loan_id"]
    done = batchval(
        "run", str(night_b), "--out", str(tmp_path / "b"), "--book", f"{url}/b.parquet",
        *options, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = store.get("b.parquet")
    assert found is not None

    def night_b_writes_first(method: str, path: str, headers: Message) -> Fault:
        book_put = method == "PUT" and path.endswith("/book.parquet") and conditional(headers)
        if book_put and store.get("book.parquet") is None:
            store.put("book.parquet", found[0])
        return Fault.FORWARD

    command = ["run", str(night_a), "--out", str(tmp_path / "a"), "--book", f"{url}/book.parquet"]
    with proxy(s3_server, night_b_writes_first) as (endpoint, _):
        lost = batchval(*command, *options, env=url_env(served, s3_server, endpoint))
    assert lost.returncode == 75, lost.stderr
    assert "book_changed" in lost.stderr
    calls = len(served.sandbox.ledger.valuations_created(LIVE.client_id))
    assert calls == 12
    book = pl.read_parquet(io.BytesIO(store.get("book.parquet")[0]))  # type: ignore[index]
    assert book["identity"].str.starts_with("LB-").all()  # B's, as B wrote it

    again = batchval(*command, *options, env=env)
    assert again.returncode == 0, again.stderr
    assert len(served.sandbox.ledger.valuations_created(LIVE.client_id)) == calls
    assert served.sandbox.ledger.keys_charged_twice() == []
    book = pl.read_parquet(io.BytesIO(store.get("book.parquet")[0]))  # type: ignore[index]
    assert sorted(book["identity"].to_list()) == sorted(
        [f"LN-{n:05d}" for n in range(6)] + [f"LB-{n:05d}" for n in range(6)]
    )


def test_the_store_can_be_configured_in_the_config_and_its_secret_never_shows(
    served: RunningSandbox, s3_server: S3Server, tmp_path: Path, batchval: InProcess
) -> None:
    """No AWS_* variable set: the config's storage section gives the endpoint and the
    credentials; the secret is in no output, log line or object the run writes."""
    config = tmp_path / "storage.yaml"
    config.write_text(
        "storage:\n"
        f"  endpoint: {s3_server.endpoint}\n"
        f"  region: {s3_server.region}\n"
        f"  access_key_id: {s3_server.access_key_id}\n"
        f"  secret_access_key: {s3_server.secret_access_key}\n",
        encoding="utf-8",
    )
    url = s3_server.url("configured")
    source = portfolio(tmp_path / "book.csv", 5)
    env = {k: v for k, v in env_for(served).items() if not k.startswith("AWS_")}
    done = batchval("run", str(source), "--out", url, "--config", str(config), env=env)
    assert done.returncode == 0, done.stderr
    store = ObjectStore.from_url(url, s3_server.env())
    secret = s3_server.secret_access_key.encode()
    names = [key for key in store.list("") if "/" not in key]
    assert {"results.parquet", "manifest.json", "batchval.log"} <= set(names)
    for name in names:
        found = store.get(name)
        assert found is not None
        assert secret not in found[0], name
    assert s3_server.secret_access_key not in done.stdout + done.stderr
    # Without the config, the same URL has no credentials: refused, not sent.
    bare = batchval("run", str(source), "--out", s3_server.url("bare"), env=env)
    assert bare.returncode in (64, 75), bare.stderr
