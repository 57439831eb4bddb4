"""The object store a run's memory can live on (issue 23): a small typed face over obstore.

    ObjectStore.from_url("s3://bucket/prefix", os.environ)   S3 or an S3-compatible server
    ObjectStore.from_url("az://container/prefix", os.environ) Azure Blob Storage (also the
        abfs:// and abfss:// forms: store/azure.py)
    ObjectStore.from_url("file:///srv/runs" or "/srv/runs")  a local folder (no CAS: probe refuses)
    ObjectStore.from_url("memory://")                          in memory, for tests

Keys are relative to the URL's prefix. Eight operations: `get` (bytes and ETag, or
None), `read_into` (an object streamed into a file), `put` (overwrite), `create`
(create-only: If-None-Match), `replace` (compare-and-swap: If-Match on an ETag), `copy`
(on the server), `list`, `delete`; and `probe`, which a run calls before trusting a store
with anything: a store that does not honour create-only and compare-and-swap is refused,
because it would let two writers both win.

Credentials and the endpoint are read the way AWS's own tools read them, from the mapping
passed in (the process's environment in production): `AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION` (or `AWS_DEFAULT_REGION`;
us-east-1 when neither is set), `AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL` (an `http://`
endpoint is accepted, for a local server). With no key in the mapping, obstore's own chain
applies (web identity, container and instance credentials). Note that obstore's S3 client
also reads the process's `AWS_*` variables itself: the mapping's values win over them, but a
variable the mapping lacks can still come from the process.

Azure's account, credentials and endpoint are read as Azure's tools read them
(store/azure.py).

Secrets never reach a message: an error is described by the operation, the key, the
store's URL and endpoint, the HTTP status and the store's error code, never by obstore's
own text (an S3 error body can echo the access key and the string signed, an Azure request
URL its SAS token), and is raised outside the handler, so no traceback carries obstore's
exception either.

Errors, beside Python's ValueError for a key that is no key:

    BatchvalError
    └── ObjectStoreError            store: the URL (and endpoint) it is about
        ├── ObjectStoreUnavailableError  the store does not answer, or answers 5xx/429/timeouts
        │                           past the retries: an outage, the run exits 75
        └── ObjectStoreRefusedError      wrong credentials, writes refused (403), another region
            │                       (a redirect), a prefix with `..`, `.` or an empty segment,
            │                       an unknown option, or a store that ignores conditional
            │                       writes: 64
            └── BucketMissingError  no such bucket (or Azure container): 64 at the start; one
                                    deleted under a run that held it took the run's memory
                                    with it (64 too, `store/database`)

A conditional write whose outcome is unknown (a timeout, a 5xx, a cut connection, a 409
ConditionalRequestConflict) may have landed. It is never simply retried: the object is read
back first. If it holds exactly our bytes, the write landed; if it holds something else (or,
for `replace`, another ETag), we lost; only if it is as it was do we write again. So
obstore's own retries are off for conditional writes (it would resend a PUT that may have
landed and read its 412 as a loss) and on, bounded, for reads and plain writes. The bytes
of a conditional write should be unique to the writer (a run id, a sequence): the read-back
cannot tell our bytes from a rival's identical ones.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import re
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, BinaryIO, Final, Protocol
from urllib.parse import unquote, urlsplit

import httpx
import obstore
import tenacity
from obstore.store import AzureStore, LocalStore, MemoryStore, S3Store

from batchval._internal.outcome import BatchvalError, ExitCode
from batchval._internal.store import azure
from batchval._internal.store.failures import CODE, Failure

if TYPE_CHECKING:
    from obstore import PutMode
    from obstore.store import AzureConfig, ClientConfig, RetryConfig, S3Config

_Store = S3Store | AzureStore | LocalStore | MemoryStore


class _MakeStore(Protocol):
    """A cloud store's constructor, all but its retry configuration given."""

    def __call__(self, *, retry_config: RetryConfig) -> _Store: ...


def _reads_and_writes(name: str, make: _MakeStore, retries: RetryConfig) -> tuple[_Store, _Store]:
    """The store `make` builds, twice: with `retries` for reads and plain writes, with
    none for conditional writes (the module's doc); a configuration obstore refuses is
    refused (64)."""
    try:
        return make(retry_config=retries), make(retry_config={"max_retries": 0})
    except Exception as exc:
        failure = Failure.of(exc)
        raise ObjectStoreRefusedError(name, f"cannot be configured: {failure.reason}") from None


DEFAULT_REGION: Final = "us-east-1"

# The options a config may set, with their defaults: obstore's client timeouts, and how long
# and how often a request that got no answer is tried again (reads, plain writes, and the
# read-back loop of a conditional write).
DEFAULT_OPTIONS: Final[Mapping[str, str]] = {
    "connect_timeout": "5s",
    "timeout": "30s",
    "max_retries": "4",
    "retry_timeout": "20",  # seconds (a conditional write's: from its first failure)
}


# A test seam, not a setting: `key=value,...` over DEFAULT_OPTIONS for every store a
# command opens (the tests shorten the 30 s timeouts of a store that stops answering).
OPTIONS_VARIABLE: Final = "BATCHVAL_STORE_OPTIONS"


def _env_options(env: Mapping[str, str]) -> dict[str, str]:
    """`OPTIONS_VARIABLE`'s options (from_url refuses an unknown one, 64)."""
    given = env.get(OPTIONS_VARIABLE, "").strip()
    pairs = [part.partition("=") for part in given.split(",") if part.strip()]
    return {name.strip(): value.strip() for name, _, value in pairs}


# `read_into` writes an object in pieces of at least this many bytes (the last may be less).
_CHUNK: Final = 8 << 20


class ObjectStoreError(BatchvalError):
    """A failure of the object store named by `store` (a URL and endpoint, no secret)."""

    exit_code: ExitCode = ExitCode.INTERNAL

    def __init__(self, store: str, detail: str) -> None:
        super().__init__(f"{store}: {detail}")
        self.store = store
        self.detail = detail


class ObjectStoreUnavailableError(ObjectStoreError):
    """The store does not answer (connection refused, timeouts, 5xx, 429): run again later."""

    exit_code = ExitCode.RESUMABLE


class ObjectStoreRefusedError(ObjectStoreError):
    """The store answers but will not do this: wrong credentials, no such bucket, a bad
    option, or no create-only or compare-and-swap writes. A person fixes the config."""

    exit_code = ExitCode.USAGE


class BucketMissingError(ObjectStoreRefusedError):
    """The URL's bucket does not exist (S3's NoSuchBucket, Azure's ContainerNotFound),
    named by `bucket`; `word` is what the store calls one ("bucket", "container")."""

    def __init__(self, store: str, detail: str, bucket: str, word: str = "bucket") -> None:
        super().__init__(store, detail)
        self.bucket = bucket
        self.word = word


class CredentialsRefusedError(ObjectStoreRefusedError):
    """The store refuses the credentials it was given (401, 403 on a read)."""


class KeyMalformedError(ObjectStoreRefusedError):
    """An account key that cannot be one (not base64, or not the key's length), named by
    the setting that holds it, never shown."""


# Where a redirect's body says to go (S3's PermanentRedirect names the endpoint): a host's
# characters only, before it is shown.
_ENDPOINT = re.compile(r"<Endpoint>([A-Za-z0-9.:-]{1,255})</Endpoint>")
# The reads obstore's client follows a redirect for (it sends no credentials to where it
# leads, so a redirect read says 403 there): a read refused is asked again unfollowed.
_FOLLOWED = ("get", "head", "list")
_WRITES = ("put", "create", "replace", "delete")
# Every form a place's URL may take, for the message that refuses another.
FORMS: Final = (
    "a local path, file:///path, s3://bucket/prefix, az://container/prefix, "
    "abfs://container/prefix, abfss://container/prefix or "
    "abfss://container@account.dfs.core.windows.net/prefix"
)


class _TryAgainError(Exception):
    """A conditional write to try again (`write_if`): its failure, for the error once
    the tries run out."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.kind)
        self.failure = failure


class _Unread:
    """The read-back itself got no answer."""


_UNREAD: Final = _Unread()


def _duration(options: Mapping[str, str], name: str) -> str:
    value = options[name]
    if not re.fullmatch(r"\d+(\.\d+)?(ms|s|m)?", value):
        raise ValueError(name)
    return value if value[-1].isalpha() else f"{value}s"


class Objects(Protocol):
    """An object store as the run's memory (`store/replica`), its lease (`store/lease`) and
    its place (`place/place`) use it: `ObjectStore` below, or the tests' one in memory.
    Those modules import it for their annotations alone, so they never load obstore."""

    def get(self, key: str) -> tuple[bytes, str] | None: ...
    def read_into(self, key: str, out: BinaryIO) -> int | None: ...
    def put(self, key: str, data: bytes) -> object: ...
    def create(self, key: str, data: bytes) -> bool: ...
    def replace(self, key: str, data: bytes, etag: str) -> bool: ...
    def write_if(self, key: str, data: bytes, etag: str | None) -> str | None: ...
    def copy(self, source: str, target: str) -> None: ...
    def list(self, prefix: str) -> list[str]: ...
    def delete(self, key: str) -> None: ...
    def age(self, key: str) -> float | None: ...
    def probe(self) -> None: ...


class ObjectStore:
    """One bucket and prefix (or folder). Thread-safe: obstore's clients are."""

    def __init__(
        self,
        name: str,
        reads: _Store,
        writes: _Store,
        *,
        max_retries: int,
        retry_timeout: float,
        bucket: str = "",
        region: str = "",
        bucket_word: str = "bucket",
    ) -> None:
        """`reads` serves every call but conditional writes, with obstore's retries;
        `writes` is the same store with none (see the module's doc). `bucket` and `region`
        (an S3 store's; an Azure store's container) are named by the errors about them."""
        self.name = name
        self.bucket, self.region, self.bucket_word = bucket, region, bucket_word
        self._reads = reads
        self._writes = writes
        self._max_retries = max_retries
        self._retry_timeout = retry_timeout

    def __repr__(self) -> str:
        return f"ObjectStore({self.name!r})"

    @classmethod
    def from_url(
        cls, url: str, env: Mapping[str, str], options: Mapping[str, str] | None = None
    ) -> ObjectStore:
        """The store at `url`: `s3://bucket/prefix`, an Azure URL (`az://container/prefix`
        and the forms of store/azure), `file:///path`, a plain path, or `memory://`.
        `options` (a config's) may set `endpoint`, `region` and the keys of
        DEFAULT_OPTIONS; an unknown option or URL is refused (64). Without `options`, those
        `env`'s BATCHVAL_STORE_OPTIONS names (a test seam)."""
        given = dict(_env_options(env) if options is None else options)
        endpoint_option = given.pop("endpoint", None)
        region_option = given.pop("region", None)
        unknown = sorted(set(given) - set(DEFAULT_OPTIONS))
        if unknown:
            raise ObjectStoreRefusedError(_public(url), f"unknown option(s): {', '.join(unknown)}")
        merged = {**DEFAULT_OPTIONS, **given}
        try:
            max_retries = int(merged["max_retries"])
            retry_timeout = float(merged["retry_timeout"])
            client: ClientConfig = {
                "connect_timeout": _duration(merged, "connect_timeout"),
                "timeout": _duration(merged, "timeout"),
            }
        except ValueError:
            raise ObjectStoreRefusedError(
                _public(url), "an option's value is not a number"
            ) from None
        retries: RetryConfig = {
            "max_retries": max_retries,
            "retry_timeout": dt.timedelta(seconds=retry_timeout),
            "backoff": {"init_backoff": dt.timedelta(milliseconds=100), "base": 2},
        }
        parts = urlsplit(url)
        if parts.scheme == "s3":
            bucket = parts.netloc
            prefix = _prefix(url, parts.path)
            if not bucket:
                raise ObjectStoreRefusedError(_public(url), "an s3:// URL names no bucket")
            endpoint = (
                endpoint_option
                or env.get("AWS_ENDPOINT_URL_S3")
                or env.get("AWS_ENDPOINT_URL")
                or None
            )
            region = (
                region_option or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
            ) or DEFAULT_REGION
            name = f"s3://{bucket}/{prefix}" + (f" at {_public(endpoint)}" if endpoint else "")
            if endpoint and endpoint.startswith("http://"):
                client["allow_http"] = True
            config: S3Config = {"region": region, "conditional_put": "etag"}
            if endpoint:
                config["endpoint"] = endpoint
            if env.get("AWS_ACCESS_KEY_ID"):
                config["access_key_id"] = env["AWS_ACCESS_KEY_ID"]
            if env.get("AWS_SECRET_ACCESS_KEY"):
                config["secret_access_key"] = env["AWS_SECRET_ACCESS_KEY"]
            if env.get("AWS_SESSION_TOKEN"):
                config["session_token"] = env["AWS_SESSION_TOKEN"]
            s3 = functools.partial(
                S3Store, bucket, prefix=prefix or None, config=config, client_options=client
            )
            return cls(
                name,
                *_reads_and_writes(name, s3, retries),
                max_retries=max_retries,
                retry_timeout=retry_timeout,
                bucket=bucket,
                region=region,
            )
        if parts.scheme in azure.SCHEMES:
            return cls._azure(
                url, env, endpoint_option, client, retries, max_retries, retry_timeout
            )
        if parts.scheme == "memory":
            memory = MemoryStore()
            return cls(url, memory, memory, max_retries=max_retries, retry_timeout=retry_timeout)
        if parts.scheme in ("file", ""):
            path = unquote(parts.path) if parts.scheme == "file" else url
            local = LocalStore(path, mkdir=True)
            return cls(
                f"file://{path}", local, local, max_retries=max_retries, retry_timeout=retry_timeout
            )
        raise ObjectStoreRefusedError(
            _public(url), f"no object store for {parts.scheme}:// URLs: a place is {FORMS}"
        )

    @classmethod
    def _azure(
        cls,
        url: str,
        env: Mapping[str, str],
        endpoint_option: str | None,
        client: ClientConfig,
        retries: RetryConfig,
        max_retries: int,
        retry_timeout: float,
    ) -> ObjectStore:
        """An Azure Blob Storage container and prefix (store/azure.py): the account named
        by the URL's host must be the one configured, when both are given."""
        try:
            where = azure.location(url)
            given = azure.credentials(env)
        except ValueError as exc:
            raise ObjectStoreRefusedError(_public(url), str(exc)) from None
        prefix = _prefix(url, where.path)
        account = where.account or given.account
        if where.account and given.account and where.account != given.account:
            raise ObjectStoreRefusedError(
                where.name(prefix),
                f"the URL names the account {where.account!r}, the settings "
                f"{given.account!r} (storage.account_name, {azure.ACCOUNT_NAME})",
            )
        if not account:
            raise ObjectStoreRefusedError(
                where.name(prefix),
                f"no storage account: set {azure.ACCOUNT_NAME} (storage.account_name) or "
                f"{azure.CONNECTION_STRING}, or name it in the URL "
                "(abfss://container@account.dfs.core.windows.net/prefix)",
            )
        endpoint = given.endpoint or endpoint_option or where.endpoint
        name = where.name(prefix) + (f" at {_public(endpoint)}" if endpoint else "")
        if endpoint.startswith("http://"):
            client = {**client, "allow_http": True}
        config: AzureConfig = {"account_name": account}
        if endpoint:
            config["endpoint"] = endpoint
        if given.key:
            fault = azure.key_fault(given.key)
            if fault is not None:
                raise KeyMalformedError(
                    name, f"the storage account key ({azure.key_setting(env)}) {fault}"
                )
            config["account_key"] = given.key
        if given.sas_token:
            config["sas_key"] = given.sas_token
        store = functools.partial(
            AzureStore, where.container, prefix=prefix or None, config=config, client_options=client
        )
        return cls(
            name,
            *_reads_and_writes(name, store, retries),
            max_retries=max_retries,
            retry_timeout=retry_timeout,
            bucket=where.container,
            bucket_word="container",
        )

    # -- reads and plain writes ------------------------------------------------------------

    def get(self, key: str) -> tuple[bytes, str] | None:
        """The object's bytes and ETag (one response: they belong together), or None."""
        try:
            result = obstore.get(self._reads, key)
            data = bytes(result.bytes())
            etag = result.meta["e_tag"]
        except Exception as exc:
            failure = Failure.of(exc)
        else:
            if etag is None:
                raise ObjectStoreRefusedError(self.name, f"get {key!r}: the store gives no ETag")
            return data, etag
        if failure.kind == "missing":
            return None
        raise self._error("get", key, failure)

    def read_into(self, key: str, out: BinaryIO) -> int | None:
        """Write the object's bytes to `out` as they arrive, a chunk at a time, so that a
        large object (a run's base: hundreds of MiB) is never held whole in memory. The
        bytes written, or None when there is no such object (and nothing was written)."""
        written = 0
        try:
            for chunk in obstore.get(self._reads, key).stream(min_chunk_size=_CHUNK):
                out.write(chunk)
                written += len(chunk)
        except Exception as exc:
            failure = Failure.of(exc)
        else:
            return written
        if failure.kind == "missing" and not written:
            return None
        raise self._error("get", key, failure)

    def put(self, key: str, data: bytes) -> str:
        """Write `data` at `key` whatever is there (retried by obstore: idempotent).
        Returns the new ETag."""
        try:
            etag = obstore.put(self._reads, key, data)["e_tag"]
        except Exception as exc:
            failure = Failure.of(exc)
        else:
            return etag or ""
        raise self._error("put", key, failure)

    def list(self, prefix: str = "") -> list[str]:
        """The keys under the folder `prefix` (a whole path segment: "a" lists "a/x", not
        "ab"), sorted."""
        keys: list[str] = []
        try:
            for chunk in obstore.list(self._reads, prefix or None):
                keys.extend(meta["path"] for meta in chunk)
        except Exception as exc:
            failure = Failure.of(exc)
        else:
            return sorted(keys)
        raise self._error("list", prefix, failure)

    def copy(self, source: str, target: str) -> None:
        """Make `target` a copy of `source` on the server (S3's CopyObject: no byte passes
        through this process; retried by obstore, as a plain write). `target` must be a key
        of the caller's own (it is overwritten)."""
        try:
            obstore.copy(self._reads, source, target)
        except Exception as exc:
            failure = Failure.of(exc)
        else:
            return
        raise self._error("copy", source, failure)

    def delete(self, key: str) -> None:
        """Remove `key`; nothing to remove is no error."""
        try:
            obstore.delete(self._reads, key)
        except Exception as exc:
            failure = Failure.of(exc)
        else:
            return
        if failure.kind != "missing":
            raise self._error("delete", key, failure)

    def age(self, key: str) -> float | None:
        """Seconds since `key` was last written, on the store's own clock (its time now read
        from a scratch object written for it, so that no clock of this machine's is
        compared with the store's), or None when there is no such object."""
        written = self._modified(key)
        if written is None:
            return None
        scratch = f".batchval-probe/{uuid.uuid4().hex}"
        self.put(scratch, b"")
        try:
            now = self._modified(scratch)
        finally:
            with contextlib.suppress(ObjectStoreError):
                self.delete(scratch)
        return None if now is None else max(0.0, (now - written).total_seconds())

    def _modified(self, key: str) -> dt.datetime | None:
        try:
            return obstore.head(self._reads, key)["last_modified"]
        except Exception as exc:
            failure = Failure.of(exc)
        if failure.kind == "missing":
            return None
        raise self._error("head", key, failure)

    # -- conditional writes ----------------------------------------------------------------

    def create(self, key: str, data: bytes) -> bool:
        """Write `data` only if `key` holds nothing (If-None-Match: *). False when an object
        is already there (someone else's, or ours from an earlier call)."""
        return self.write_if(key, data, None) is not None

    def replace(self, key: str, data: bytes, etag: str) -> bool:
        """Write `data` only if `key` still holds the version `etag` (If-Match). False when
        it no longer does (replaced or deleted since it was read)."""
        return self.write_if(key, data, etag) is not None

    def write_if(self, key: str, data: bytes, etag: str | None) -> str | None:
        """`create` (`etag` None) or `replace`, giving the ETag of the version written, for
        the next `replace` of it; None when the condition did not hold. A write whose
        outcome is unknown is read back before it is tried again (tenacity: a tenth of a
        second doubling to 2 s, at most `max_retries` more tries within `retry_timeout`)."""
        mode: PutMode = "create" if etag is None else {"e_tag": etag}
        operation = "create" if etag is None else "replace"
        # Counted from the first failure, not the first try: one try that timed out (30 s by
        # default) would otherwise use up the whole window, and a write the read-back shows
        # never landed (a stalled upload) would not be tried again.
        deadline: float | None = None
        uncertain = False  # an earlier attempt may have landed

        def attempt() -> str | None:
            nonlocal deadline, uncertain
            try:
                written = obstore.put(self._writes, key, data, mode=mode, use_multipart=False)
            except Exception as exc:
                failure = Failure.of(exc)
            else:
                return written["e_tag"] or self._version_of(key, data)
            if failure.final:
                raise self._error(operation, key, failure)
            if failure.kind == "lost" and not uncertain:
                return None
            # The outcome is unknown (or a 412 that may answer our own earlier write, or a
            # 409 conflict): read back before anything else.
            now = self._read_back(key)
            if not isinstance(now, _Unread):
                if now is not None and now[0] == data:
                    return now[1]  # ours landed
                if etag is None and now is not None:
                    return None  # someone else's is there
                if etag is not None and (now is None or now[1] != etag):
                    return None  # the version we meant to replace is gone
                # As it was before our write: ours did not land.
            uncertain = uncertain or failure.kind != "conflict"
            if deadline is None:
                deadline = time.monotonic() + self._retry_timeout
            raise _TryAgainError(failure)

        def stop(state: tenacity.RetryCallState) -> bool:
            """The tries run out, or the next would start after the deadline."""
            late = deadline is not None and time.monotonic() + state.upcoming_sleep > deadline
            return state.attempt_number > self._max_retries or late

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(_TryAgainError),
            wait=tenacity.wait_exponential(multiplier=0.1, max=2.0),
            stop=stop,
            reraise=True,
        )
        try:
            return retrying(attempt)
        except _TryAgainError as exc:
            raise self._error(operation, key, exc.failure) from None

    def _version_of(self, key: str, data: bytes) -> str:
        """The ETag of `data` just written at `key`, for a store whose write gave none."""
        now = self.get(key)
        if now is None or now[0] != data:
            raise ObjectStoreRefusedError(self.name, f"put {key!r}: the store gives no ETag")
        return now[1]

    def _read_back(self, key: str) -> tuple[bytes, str] | _Unread | None:
        try:
            return self.get(key)
        except ObjectStoreUnavailableError:
            return _UNREAD

    # -- the probe -------------------------------------------------------------------------

    def probe(self) -> None:
        """Check on a scratch key under the prefix that the store honours create-only and
        compare-and-swap writes; raise ObjectStoreRefusedError naming the store when it does not
        (and ObjectStoreUnavailableError when it does not answer)."""
        key = f".batchval-probe/{uuid.uuid4().hex}"
        mark = key.encode()
        try:
            if not self.create(key, b"first " + mark):
                raise ObjectStoreRefusedError(self.name, "a create-only write of a new key failed")
            if self.create(key, b"second " + mark):
                raise ObjectStoreRefusedError(
                    self.name,
                    "ignores create-only writes (If-None-Match): a second create of one key "
                    "was accepted",
                )
            current = self.get(key)
            if current is None or current[0] != b"first " + mark:
                raise ObjectStoreRefusedError(self.name, "a create-only write did not hold")
            stale = current[1]
            if not self.replace(key, b"third " + mark, stale):
                raise ObjectStoreRefusedError(
                    self.name, "refused a compare-and-swap with the current ETag"
                )
            if self.replace(key, b"fourth " + mark, stale):
                raise ObjectStoreRefusedError(
                    self.name,
                    "ignores compare-and-swap writes (If-Match): a replace with a stale ETag "
                    "was accepted",
                )
        finally:
            with contextlib.suppress(ObjectStoreError):
                self.delete(key)

    def _error(self, operation: str, key: str, failure: Failure) -> ObjectStoreError:
        what = f"{operation} {key!r}"
        if failure.kind == "no_bucket":
            word = self.bucket_word
            return BucketMissingError(
                self.name, f"{what}: the {word} {self.bucket!r} does not exist", self.bucket, word
            )
        refused = failure.kind in ("refused", "credentials")
        if failure.kind == "redirect" or (
            refused and failure.status == 403 and operation in _FOLLOWED
        ):
            redirect = self._redirect(key)
            if redirect is not None or failure.kind == "redirect":
                return ObjectStoreRefusedError(
                    self.name, f"{what}: {self._redirected(redirect or failure.reason)}"
                )
        if failure.kind == "region":
            expected = f" (it expects {failure.reason!r})" if failure.reason else ""
            return ObjectStoreRefusedError(
                self.name,
                f"{what}: the store answers for another region than {self.region!r}{expected}: "
                "set AWS_REGION (or the config's storage.region) to the bucket's region",
            )
        kind = CredentialsRefusedError if failure.kind == "credentials" else ObjectStoreRefusedError
        if refused and failure.status == 403 and operation in _WRITES:
            return kind(self.name, f"{what}: the store refuses this write ({failure.reason})")
        if refused:
            return kind(self.name, f"{what}: {failure.reason}")
        return ObjectStoreUnavailableError(self.name, f"{what}: {failure.reason}")

    def _redirect(self, key: str) -> str | None:
        """The redirect the store answers a read of `key` with, unfollowed ("HTTP 307 to
        https://..."), or None when it answers none or cannot be asked: one GET, signed
        by obstore (`sign`), sent by httpx, asked only once the store has refused or
        redirected (obstore's own client follows a read's redirect, and says nothing of
        where it went, nor the Location of a write's). Where it leads is said without its
        query or user part (a signature could be there)."""
        if not isinstance(self._reads, S3Store | AzureStore):
            return None  # a local folder or memory: no redirect
        try:
            url = obstore.sign(
                self._reads, "GET", key or ".batchval-probe", dt.timedelta(seconds=60)
            )
            answer = httpx.get(url, follow_redirects=False, timeout=10.0)
        except Exception:  # no signing for this store or credentials, no answer
            return None
        if not 300 <= answer.status_code < 400:
            return None
        code = CODE.search(answer.text)
        said = f"HTTP {answer.status_code}" + (f" {code.group(1)}" if code else "")
        endpoint = _ENDPOINT.search(answer.text)
        location = answer.headers.get("location")
        if location:
            return f"{said} to {_public(location)}"
        return f"{said} to {endpoint.group(1)}" if endpoint else f"{said}, no Location"

    def _redirected(self, said: str) -> str:
        """What a redirect from the store means, and the settings that fix it."""
        head = f"the store answered a redirect ({said}): the endpoint or region is wrong"
        if self.bucket_word == "container":
            return f"{head}: set {azure.ENDPOINT} (storage.endpoint) to the account's Blob endpoint"
        return (
            f"{head} (the region set is {self.region!r}): set AWS_REGION (or the config's "
            "storage.region) to the bucket's region, or AWS_ENDPOINT_URL (storage.endpoint) "
            "to the store's endpoint"
        )


def _prefix(url: str, path: str) -> str:
    """An s3:// (or Azure) URL's prefix, its keys' common start. S3 (and Blob Storage)
    keeps a key's `..`, `.` and empty segments as they are (it is no file system), so such
    a prefix would keep the run apart from where the URL seems to point, and a second
    spelling of it elsewhere again: refused (64), naming the segment. One `/` at either
    end is no segment."""
    prefix = path.removeprefix("/").removesuffix("/")
    for segment in prefix.split("/") if prefix else ():
        if segment in ("", ".", ".."):
            said = "an empty segment ('//')" if not segment else f"the segment {segment!r}"
            raise ObjectStoreRefusedError(
                _public(url), f"the prefix {prefix!r} has {said}: name the run without it"
            )
    return prefix


def _public(url: str) -> str:
    """`url` without user information or query (where a secret could hide)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    if parts.scheme and host:
        return f"{parts.scheme}://{host}{parts.path}"
    return f"{parts.scheme}://{parts.path}" if parts.scheme else parts.path
