"""Azure Blob Storage's side of the object-store seam (`store/objects`): a place's URL in
the forms Azure's tools write it, and the account, credentials and endpoint read the way
they read them. Plain data, no client: `ObjectStore.from_url` builds obstore's store from it,
and the settings ask it which texts are secrets (`secrets`).

    az://container/prefix                                      (fsspec's, adlfs's)
    abfs://container/prefix, abfss://container/prefix          (the same, Hadoop's scheme)
    abfss://container@account.dfs.core.windows.net/prefix     (as Azure's tools write it)

An `abfs(s)://` URL names an ADLS Gen2 (hierarchical namespace) account, but the run is kept
through the Blob API, which such an account serves too: the `dfs` host becomes its `blob`
twin. The account, credentials and endpoint, each from the mapping given (the process's
environment over the config's `storage` section):

    AZURE_STORAGE_ACCOUNT_NAME (or the Azure CLI's AZURE_STORAGE_ACCOUNT)   the account
    AZURE_STORAGE_ACCOUNT_KEY (or the Azure CLI's AZURE_STORAGE_KEY)         its key
    AZURE_STORAGE_SAS_TOKEN                                      a SAS token (query string)
    AZURE_STORAGE_CONNECTION_STRING                   all of it in one (`AccountName=...;
                                                     AccountKey=...;BlobEndpoint=...`)
    AZURE_STORAGE_ENDPOINT                            the Blob endpoint (an emulator's)

A connection string beside any of the others is refused (ValueError, naming both): one of
them would be silently ignored. With no key and no SAS token, obstore's own credential
chain applies (a service principal's or workload identity's variables, a managed identity).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from collections.abc import Mapping
from typing import Final
from urllib.parse import parse_qsl, unquote, urlsplit

SCHEMES: Final = ("az", "abfs", "abfss")

ACCOUNT_NAME: Final = "AZURE_STORAGE_ACCOUNT_NAME"
ACCOUNT_KEY: Final = "AZURE_STORAGE_ACCOUNT_KEY"
SAS_TOKEN: Final = "AZURE_STORAGE_SAS_TOKEN"
CONNECTION_STRING: Final = "AZURE_STORAGE_CONNECTION_STRING"
ENDPOINT: Final = "AZURE_STORAGE_ENDPOINT"
# The Azure CLI's own names, read when batchval's (object_store's) are not set.
CLI_ACCOUNT_NAME: Final = "AZURE_STORAGE_ACCOUNT"
CLI_ACCOUNT_KEY: Final = "AZURE_STORAGE_KEY"

# Each setting a connection string may not stand beside, with its config key.
_SEPARATE: Final = (
    (ACCOUNT_NAME, "account_name"),
    (CLI_ACCOUNT_NAME, "account_name"),
    (ACCOUNT_KEY, "account_key"),
    (CLI_ACCOUNT_KEY, "account_key"),
    (SAS_TOKEN, "sas_token"),
    (ENDPOINT, "endpoint"),
)
# `UseDevelopmentStorage=true`: the emulator's published development account, on its
# default port (Microsoft documents this key; it guards nothing).
_DEVELOPMENT: Final = {
    "accountname": "devstoreaccount1",
    "accountkey": (
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
    ),
    "blobendpoint": "http://127.0.0.1:10000/devstoreaccount1",
}


@dataclasses.dataclass(frozen=True, slots=True)
class Location:
    """Where a URL points: its container and path (the prefix, as written), and the
    account and Blob endpoint its host names (an `abfss://container@account.dfs...` URL)."""

    scheme: str
    netloc: str  # as written: `container`, or `container@account.dfs.core.windows.net`
    container: str
    path: str
    account: str = ""
    endpoint: str = ""

    def name(self, prefix: str) -> str:
        """The URL as its user writes it, with `prefix` as its path."""
        return f"{self.scheme}://{self.netloc}/{prefix}"


@dataclasses.dataclass(frozen=True, slots=True)
class Credentials:
    """The account, its credentials and the Blob endpoint, as read (empty: not given)."""

    account: str = ""
    key: str = dataclasses.field(default="", repr=False)
    sas_token: str = dataclasses.field(default="", repr=False)
    endpoint: str = ""


def location(url: str) -> Location:
    """The container and path of an Azure URL; ValueError when it names no container."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise ValueError(f"not an Azure URL ({', '.join(f'{s}://' for s in SCHEMES)})")
    if "@" in parts.netloc:
        container, _, host = parts.netloc.rpartition("@")
        account = host.partition(".")[0]
        if not container or "." not in host or not account:
            raise ValueError(
                "an abfss:// URL is abfss://container@account.dfs.core.windows.net/path"
            )
        blob = host.replace(".dfs.", ".blob.", 1)
        return Location(
            parts.scheme, parts.netloc, unquote(container), parts.path, account, f"https://{blob}"
        )
    if not parts.netloc:
        raise ValueError(f"an {parts.scheme}:// URL names no container")
    return Location(parts.scheme, parts.netloc, unquote(parts.netloc), parts.path)


def connection_string(text: str) -> dict[str, str]:
    """The fields of a connection string (`Name=value;...`), by lower-case name; a value
    keeps its own `=` (a key's padding, a SAS token's fields). ValueError for a part that
    is no field."""
    fields: dict[str, str] = {}
    for part in text.strip().split(";"):
        if not part.strip():
            continue
        name, equals, value = part.partition("=")
        if not equals or not name.strip():
            raise ValueError("the connection string has a part that is not Name=value")
        fields[name.strip().lower()] = value.strip()
    if fields.get("usedevelopmentstorage", "").lower() == "true":
        fields = {**_DEVELOPMENT, **fields}
    return fields


def credentials(env: Mapping[str, str]) -> Credentials:
    """The credentials `env` gives; ValueError naming both when a connection string
    stands beside a separate setting, or for a connection string that does not parse."""
    text = env.get(CONNECTION_STRING, "")
    if not text:
        return Credentials(
            account=env.get(ACCOUNT_NAME) or env.get(CLI_ACCOUNT_NAME) or "",
            key=env.get(ACCOUNT_KEY) or env.get(CLI_ACCOUNT_KEY) or "",
            sas_token=env.get(SAS_TOKEN, "").removeprefix("?"),
            endpoint=env.get(ENDPOINT, ""),
        )
    beside = [(variable, key) for variable, key in _SEPARATE if env.get(variable)]
    if beside:
        variable, key = beside[0]
        raise ValueError(
            f"storage.connection_string ({CONNECTION_STRING}) and storage.{key} ({variable}) "
            "are both set: give the connection string alone, or the separate settings alone"
        )
    fields = connection_string(text)
    account = fields.get("accountname", "")
    endpoint = fields.get("blobendpoint", "")
    if not endpoint and account:
        protocol = fields.get("defaultendpointsprotocol", "https")
        suffix = fields.get("endpointsuffix", "core.windows.net")
        endpoint = f"{protocol}://{account}.blob.{suffix}"
    return Credentials(
        account=account,
        key=fields.get("accountkey", ""),
        sas_token=fields.get("sharedaccesssignature", "").removeprefix("?"),
        endpoint=endpoint,
    )


# An account key is 64 bytes, written in base64 (88 characters).
KEY_BYTES = 64


def key_fault(key: str) -> str | None:
    """What is wrong with an account key, in words that never show it, or None: not
    base64, or not an account key's 64 bytes (a key cut short when it was copied)."""
    try:
        decoded = base64.b64decode(key, validate=True)
    except (binascii.Error, ValueError):
        return f"is not base64 ({len(key)} characters; a key is {KEY_BYTES * 4 // 3 + 2})"
    if len(decoded) != KEY_BYTES:
        return f"is {len(decoded)} bytes, not a key's {KEY_BYTES}: cut short when copied?"
    return None


def key_setting(env: Mapping[str, str]) -> str:
    """Where `credentials` read the account key from, to name it."""
    if env.get(CONNECTION_STRING):
        return f"the connection string's AccountKey ({CONNECTION_STRING})"
    return ACCOUNT_KEY if env.get(ACCOUNT_KEY) else CLI_ACCOUNT_KEY


def secrets(env: Mapping[str, str]) -> list[str]:
    """Every text of `env`'s Azure settings that is a secret, for the redactor: the
    account key, the SAS token and its signature (as sent, and decoded), the connection
    string and each secret inside it. A connection string that does not parse is masked
    whole (and refused when a store is made of it)."""
    found = [env[name] for name in (ACCOUNT_KEY, CLI_ACCOUNT_KEY, SAS_TOKEN) if env.get(name)]
    text = env.get(CONNECTION_STRING, "")
    if text:
        found.append(text)
        try:
            fields = connection_string(text)
        except ValueError:
            fields = {}
        found += [fields[n] for n in ("accountkey", "sharedaccesssignature") if fields.get(n)]
    for token in [t for t in found if "sig=" in t]:
        signature = dict(parse_qsl(token.removeprefix("?"))).get("sig", "")
        found += [signature] if signature else []  # decoded: the redactor masks its encodings
    return list(dict.fromkeys(found))
