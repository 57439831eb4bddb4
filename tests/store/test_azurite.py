"""What a run's place on Azure Blob Storage rests on, asked of obstore's own Azure store
against Azurite (tests/azure_server.py), with batchval out of the way: create-only writes
(If-None-Match: *) and compare-and-swap (If-Match: <etag>) are honoured, for a small object
and for one past obstore's block size, and how each goes on the wire (through the test
proxy): a conditional write is one Put Blob carrying its condition, whatever its size (obstore
never splits one into blocks); a plain write past the block size goes in blocks (Put Block,
then Put Block List), which is how a run's large outputs are published."""

from __future__ import annotations

import os
import uuid
from email.message import Message

import obstore
import pytest
from azure_server import AzureServer
from obstore.exceptions import AlreadyExistsError, PreconditionError
from obstore.store import AzureStore
from s3_proxy import Fault, proxy

# A real emulator started for the worker (node: about 2 s): `make test-fast` leaves it out.
pytestmark = pytest.mark.slow

# Past obstore's block size (5 MiB): a plain write of it is uploaded in blocks.
LARGE = 12 << 20


def _store(azurite: AzureServer, endpoint: str | None = None) -> AzureStore:
    return AzureStore(
        azurite.container,
        prefix=f"t/{uuid.uuid4().hex}",
        account_name=azurite.account,
        account_key=azurite.key,
        endpoint=endpoint or azurite.endpoint,
        client_options={"allow_http": True, "timeout": "60s"},
        retry_config={"max_retries": 0},
    )


@pytest.mark.parametrize("size", [100, LARGE])
def test_create_only_and_compare_and_swap_are_honoured(azurite: AzureServer, size: int) -> None:
    """A second create of one key and a replace with a stale ETag are refused, at any size;
    a replace with the current ETag lands; the object holds what the winner wrote."""
    store = _store(azurite)
    data = os.urandom(size)
    obstore.put(store, "k", data, mode="create")
    with pytest.raises(AlreadyExistsError):
        obstore.put(store, "k", b"second", mode="create")
    stale = obstore.get(store, "k").meta["e_tag"]
    assert stale is not None
    obstore.put(store, "k", data[::-1], mode={"e_tag": stale})
    with pytest.raises(PreconditionError):
        obstore.put(store, "k", b"fourth", mode={"e_tag": stale})
    assert bytes(obstore.get(store, "k").bytes()) == data[::-1]


def test_a_replace_of_a_missing_blob_is_refused(azurite: AzureServer) -> None:
    """If-Match on no blob: Azurite answers 412 (Azure itself may answer 404); either way
    nothing is written."""
    store = _store(azurite)
    obstore.put(store, "k", b"x", mode="create")
    etag = obstore.head(store, "k")["e_tag"]
    assert etag is not None
    with pytest.raises((PreconditionError, FileNotFoundError)):
        obstore.put(store, "other", b"y", mode={"e_tag": etag})
    with pytest.raises(FileNotFoundError):
        obstore.get(store, "other")


def test_on_the_wire_conditions_travel_on_one_put_blob_and_large_plain_writes_in_blocks(
    azurite: AzureServer,
) -> None:
    """Each conditional write of 12 MiB is one Put Blob with its header; a plain write of
    12 MiB is Put Blocks then a Put Block List, with no condition."""
    seen: list[tuple[str, str, str | None, str | None]] = []

    def record(method: str, path: str, headers: Message) -> Fault:
        seen.append((method, path, headers.get("If-None-Match"), headers.get("If-Match")))
        return Fault.FORWARD

    with proxy(azurite, record) as (endpoint, _):
        store = _store(azurite, f"{endpoint}/{azurite.account}")
        obstore.put(store, "conditional", os.urandom(LARGE), mode="create")
        etag = obstore.head(store, "conditional")["e_tag"]
        assert etag is not None
        obstore.put(store, "conditional", os.urandom(LARGE), mode={"e_tag": etag})
        obstore.put(store, "plain", os.urandom(LARGE))
    puts = [(path.partition("?")[2], inm, im) for method, path, inm, im in seen if method == "PUT"]
    assert puts[:2] == [("", "*", None), ("", None, etag)]
    plain = [query for query, _, _ in puts[2:]]
    assert len(plain) >= 3, plain  # three blocks or more, then the list
    assert all("comp=block" in query and "blocklist" not in query for query in plain[:-1])
    assert "comp=blocklist" in plain[-1]
    assert all(inm is None and im is None for _, inm, im in puts[2:])
