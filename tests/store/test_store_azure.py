"""batchval/_internal/store/objects.py at an Azure URL against Azurite (tests/azure_server.py), and
behind the test proxy that drops conditional headers; store/azure.py's URL forms,
connection strings and secrets."""

from __future__ import annotations

import base64
import io
import re
import threading
import uuid
from collections.abc import Callable

import pytest
from azure_server import AzureServer, container_request
from s3_proxy import Fault, always, proxy

from batchval._internal.outcome import ExitCode
from batchval._internal.redaction import Redactor
from batchval._internal.settings import StorageSettings
from batchval._internal.store import azure
from batchval._internal.store.objects import (
    BucketMissingError,
    CredentialsRefusedError,
    KeyMalformedError,
    ObjectStore,
    ObjectStoreRefusedError,
)

FAST = {"connect_timeout": "1s", "timeout": "5s", "max_retries": "2", "retry_timeout": "3"}


@pytest.fixture
def prefix() -> str:
    return f"t/{uuid.uuid4().hex}"


@pytest.fixture
def store(azurite: AzureServer, prefix: str) -> ObjectStore:
    return ObjectStore.from_url(azurite.url(prefix), azurite.env())


def _race(writers: int, write: Callable[[int], bool]) -> list[int]:
    barrier = threading.Barrier(writers)
    won: list[int] = []

    def writer(i: int) -> None:
        barrier.wait(10)
        if write(i):
            won.append(i)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return won


@pytest.mark.slow
def test_every_operation_a_run_uses(store: ObjectStore) -> None:
    """create-only, compare-and-swap, get, read_into, copy on the server, list, age,
    delete and the probe, each as the run relies on it."""
    store.probe()
    assert store.create("lock", b"first") is True
    assert store.create("lock", b"first") is False  # even with the same bytes
    found = store.get("lock")
    assert found is not None
    assert store.replace("lock", b"second", found[1]) is True
    assert store.replace("lock", b"third", found[1]) is False
    assert store.replace("gone", b"x", found[1]) is False  # Azurite: 412, Azure: 404
    store.copy("lock", "copied")
    out = io.BytesIO()
    assert store.read_into("copied", out) == len(b"second")
    assert out.getvalue() == b"second"
    assert store.list() == ["copied", "lock"]
    age = store.age("lock")
    assert age is not None
    assert 0 <= age < 60
    store.delete("lock")
    store.delete("lock")  # nothing to remove is no error
    assert store.get("lock") is None
    assert store.list() == ["copied"]


@pytest.mark.slow
def test_a_large_object_is_created_once_and_swapped_once(store: ObjectStore) -> None:
    """12 MiB (a run's base, past obstore's block size): one create and one replace win."""
    data = bytes(range(256)) * (12 << 12)
    assert store.create("base", data) is True
    assert store.create("base", data[::-1]) is False
    found = store.get("base")
    assert found is not None
    assert found[0] == data
    assert store.replace("base", data[::-1], found[1]) is True
    assert store.replace("base", data, found[1]) is False


@pytest.mark.slow
def test_sixteen_writers_one_wins_each_race(store: ObjectStore) -> None:
    won = _race(16, lambda i: store.create("contested", f"writer {i}".encode()))
    assert len(won) == 1
    found = store.get("contested")
    assert found is not None
    won = _race(16, lambda i: store.replace("contested", f"again {i}".encode(), found[1]))
    assert len(won) == 1


@pytest.mark.slow
def test_the_url_forms_reach_one_container(azurite: AzureServer, prefix: str) -> None:
    """az://, abfs:// and abfss:// (with and without the account's host) name one place."""
    ObjectStore.from_url(azurite.url(prefix), azurite.env()).put("k", b"one")
    host = f"{azurite.account}.dfs.core.windows.net"
    for url in (
        f"abfs://{azurite.container}/{prefix}",
        f"abfss://{azurite.container}/{prefix}/",
        f"abfss://{azurite.container}@{host}/{prefix}",
    ):
        found = ObjectStore.from_url(url, azurite.env()).get("k")
        assert found is not None, url
        assert found[0] == b"one"


@pytest.mark.slow
def test_a_connection_string_and_a_sas_token_each_reach_the_store(
    azurite: AzureServer, prefix: str
) -> None:
    """A connection string alone (account, key and endpoint in one), and a SAS token with
    the account and endpoint, each probe and write."""
    by_string = {azure.CONNECTION_STRING: azurite.connection_string()}
    ObjectStore.from_url(azurite.url(prefix), by_string).probe()
    sas = {**azurite.env(), azure.SAS_TOKEN: "?" + azurite.sas_token()}
    del sas[azure.ACCOUNT_KEY]
    by_sas = ObjectStore.from_url(azurite.url(prefix), sas)
    by_sas.probe()
    assert by_sas.create("k", b"x") is True


@pytest.mark.slow
def test_wrong_key_is_refused_and_never_shown(azurite: AzureServer, prefix: str) -> None:
    wrong = base64.b64encode(b"WrongKey" * 8).decode()  # 64 bytes: not the account's
    env = {**azurite.env(), azure.ACCOUNT_KEY: wrong}
    store = ObjectStore.from_url(azurite.url(prefix), env, FAST)
    with pytest.raises(CredentialsRefusedError) as caught:
        store.probe()
    assert caught.value.exit_code == ExitCode.USAGE
    assert "403" in str(caught.value)
    assert wrong not in str(caught.value)
    assert azurite.key not in str(caught.value)


@pytest.mark.parametrize("cut", [1, 4, 10])
def test_a_key_cut_short_is_named_malformed_before_any_request(
    azurite: AzureServer, prefix: str, cut: int
) -> None:
    """A key copied short (by a character, or by a whole base64 group, which still
    decodes) is named malformed by the setting that holds it, never shown, before any
    request (the store would only say `GenericError`)."""
    short = azurite.key[:-cut]
    for name, env in (
        (azure.ACCOUNT_KEY, {**azurite.env(), azure.ACCOUNT_KEY: short}),
        (
            azure.CLI_ACCOUNT_KEY,
            {
                **{k: v for k, v in azurite.env().items() if k != azure.ACCOUNT_KEY},
                azure.CLI_ACCOUNT_KEY: short,
            },
        ),
    ):
        with pytest.raises(KeyMalformedError) as caught:
            ObjectStore.from_url(azurite.url(prefix), env, FAST)
        said = str(caught.value)
        assert caught.value.exit_code == ExitCode.USAGE
        assert f"the storage account key ({name})" in said
        assert short not in said
        assert azurite.key not in said


@pytest.mark.slow
def test_no_such_container_is_refused_naming_it(azurite: AzureServer) -> None:
    """A container that does not exist is 64 naming it (not created on first write), and
    one deleted under a store is missing, not an outage."""
    store = ObjectStore.from_url("az://no-such-container/p", azurite.env(), FAST)
    with pytest.raises(BucketMissingError, match="the container 'no-such-container'") as caught:
        store.probe()
    assert caught.value.word == "container"
    assert container_request(azurite, "PUT", "short-lived") == 201
    store = ObjectStore.from_url("az://short-lived/p", azurite.env(), FAST)
    store.put("k", b"x")
    assert container_request(azurite, "DELETE", "short-lived") == 202
    with pytest.raises(BucketMissingError):
        store.get("k")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fault", "said"), [(Fault.STRIP, "If-None-Match"), (Fault.STRIP_IF_MATCH, "If-Match")]
)
def test_probe_refuses_a_store_that_drops_conditional_headers(
    azurite: AzureServer, prefix: str, fault: Fault, said: str
) -> None:
    """The proxy drops the condition and signs the request again (SharedKey signs it): the
    write lands unconditionally, and the probe refuses the store (64), naming it."""
    with proxy(azurite, always(fault)) as (endpoint, seen):
        env = {**azurite.env(), azure.ENDPOINT: f"{endpoint}/{azurite.account}"}
        store = ObjectStore.from_url(azurite.url(prefix), env, FAST)
        with pytest.raises(ObjectStoreRefusedError, match=said) as caught:
            store.probe()
    assert endpoint.removeprefix("http://") in str(caught.value)
    assert any(f is fault for _, _, f in seen)


@pytest.mark.slow
def test_the_proxy_keeps_sharedkey_signatures_valid(azurite: AzureServer, prefix: str) -> None:
    """Forwarded as it came, a request's SharedKey signature still holds."""
    with proxy(azurite, always(Fault.FORWARD)) as (endpoint, _):
        env = {**azurite.env(), azure.ENDPOINT: f"{endpoint}/{azurite.account}"}
        ObjectStore.from_url(azurite.url(prefix), env, FAST).probe()


# -- without a server ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "container", "path", "account", "endpoint"),
    [
        ("az://runs/nightly", "runs", "/nightly", "", ""),
        ("abfs://runs/a/b/", "runs", "/a/b/", "", ""),
        (
            "abfss://runs@lender.dfs.core.windows.net/a",
            "runs",
            "/a",
            "lender",
            "https://lender.blob.core.windows.net",
        ),
    ],
)
def test_the_url_forms(url: str, container: str, path: str, account: str, endpoint: str) -> None:
    found = azure.location(url)
    assert (found.container, found.path, found.account, found.endpoint) == (
        container,
        path,
        account,
        endpoint,
    )


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({azure.ACCOUNT_KEY: "a2V5"}, "no storage account"),
        (
            {azure.CONNECTION_STRING: "AccountName=a;AccountKey=a2V5", azure.ACCOUNT_KEY: "a2V5"},
            "storage.connection_string (AZURE_STORAGE_CONNECTION_STRING) and "
            "storage.account_key (AZURE_STORAGE_ACCOUNT_KEY) are both set",
        ),
        (
            {azure.CONNECTION_STRING: "AccountName=a", azure.ENDPOINT: "http://127.0.0.1:1"},
            "and storage.endpoint (AZURE_STORAGE_ENDPOINT) are both set",
        ),
        ({azure.CONNECTION_STRING: "AccountName=a;nonsense"}, "not Name=value"),
    ],
)
def test_settings_that_cannot_be_used_are_refused(env: dict[str, str], said: str) -> None:
    with pytest.raises(ObjectStoreRefusedError, match=re.escape(said)) as caught:
        ObjectStore.from_url("az://runs/p", env)
    assert caught.value.exit_code == ExitCode.USAGE
    assert "a2V5" not in str(caught.value)


def test_the_urls_account_must_be_the_settings() -> None:
    env = {azure.ACCOUNT_NAME: "other"}
    with pytest.raises(ObjectStoreRefusedError, match="names the account 'lender'"):
        ObjectStore.from_url("abfss://runs@lender.dfs.core.windows.net/p", env)


def test_an_unknown_scheme_lists_the_forms_accepted() -> None:
    with pytest.raises(ObjectStoreRefusedError) as caught:
        ObjectStore.from_url("gs://bucket/p", {})
    for form in ("s3://bucket/prefix", "az://container/prefix", "abfss://container@account"):
        assert form in str(caught.value)


def test_a_connection_string_is_read_as_the_portal_writes_it() -> None:
    text = (
        "DefaultEndpointsProtocol=https;AccountName=lender;AccountKey=c2VjcmV0+/key==;"
        "EndpointSuffix=core.windows.net"
    )
    found = azure.credentials({azure.CONNECTION_STRING: text})
    assert (found.account, found.key, found.endpoint) == (
        "lender",
        "c2VjcmV0+/key==",
        "https://lender.blob.core.windows.net",
    )
    emulator = azure.credentials({azure.CONNECTION_STRING: "UseDevelopmentStorage=true"})
    assert emulator.account == "devstoreaccount1"
    assert emulator.endpoint == "http://127.0.0.1:10000/devstoreaccount1"


def test_every_azure_secret_is_masked_in_every_form() -> None:
    """The key, the SAS token, its signature alone (as sent and decoded), the connection
    string and the key inside it are the redactor's, from the config or the environment."""
    sas = "sv=2021-08-06&ss=b&srt=sco&sp=rw&se=2030-01-01T00%3A00%3A00Z&sig=ab%2Bcd%2Fef%3D"
    key = "c2VjcmV0+/key=="
    settings = StorageSettings({azure.SAS_TOKEN: sas})
    env = {azure.CONNECTION_STRING: f"AccountName=lender;AccountKey={key}"}
    redactor = Redactor(settings.secrets(env))
    text = f"{sas} | {key} | sig=ab+cd/ef= | ab%2Bcd%2Fef%3D | {key.replace('+', '%2B')}"
    scrubbed = redactor.scrub(text)
    for secret in (sas, key, "ab+cd/ef=", "ab%2Bcd%2Fef%3D", "c2VjcmV0%2B"):
        assert secret not in scrubbed, secret
