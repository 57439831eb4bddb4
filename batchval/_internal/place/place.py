"""Where a run lives: a local DIR, or a URL (`s3://bucket/prefix`) that keeps the run's
memory and outputs, so that any machine with an empty disk carries the run on (issue 23).

Every command that opens a DIR or a URL holds it as one `Place`, opened one of three
ways, each removing its temporary directory whatever ends the command:

- `taken` (`run`, `streets`, `verify`, `report`, `export`): the run is the command's
  while it works; at a URL its lease is taken, its memory restored and kept as it
  commits, and its outputs published at the end;
- `viewed` (`status`, `export --out`, `batchval.open_run`): read only; at a URL a copy of
  the run's memory and outputs, the lease never taken;
- `written` (`split`): a directory whose files are published at the URL once the
  command has ended well.

The place says itself in messages (`name`, `named`, `where`, `naming`): a command never
names the directory a URL's run was copied into.

A run taken at a URL works in a local directory of its own, made empty for each
invocation, as a moved Airflow task finds its disk:

1. the store is probed for create-only and compare-and-swap writes (one that does not
   honour them is refused, 64: without them two machines could both spend);
2. the run is taken (`store/lease`): another live holder stops this one (`dir_locked`,
   75) within seconds, and sends nothing;
3. the run's memory is restored from the URL (`store/replica.restore`) and, once the
   command opens it, kept there as it commits (`Place.keep`);
4. the command runs as on a local DIR, sending only while the lease surely holds;
5. its outputs are published at the URL (`Place.publish`), each object written whole, so
   a reader never sees half of one; then the run is let go.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from batchval._internal import logs
from batchval._internal.outcome import ExitCode, RunRefusedError, SettingsError, StopReason
from batchval._internal.place.invocation import keep_privately, refuse_foreign_objects
from batchval._internal.place.names import LOG_NAME
from batchval._internal.store import (
    CHECKPOINT_NAME,
    DURATION,
    HEAD,
    LOCK_NAME,
    Database,
    Lease,
    LeaseHeldError,
    LeaseKeeper,
    Replica,
    Restored,
    StateObjectError,
    restore,
)

if TYPE_CHECKING:
    from batchval._internal.store import Objects, ObjectStoreError

log = logs.get_logger()

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# Never published: the run's memory (kept at the URL as it commits) and the local lock.
_LOCAL_ONLY = (CHECKPOINT_NAME, f"{CHECKPOINT_NAME}-wal", f"{CHECKPOINT_NAME}-shm", LOCK_NAME)


def is_url(place: str) -> bool:
    """A place named by a URL (`s3://...`; `gs://...` too, which the store refuses with
    64 rather than a directory named `gs:` being made), but `file://`, a local path."""
    return _SCHEME.match(place) is not None and not place.startswith("file://")


def local_path(place: str) -> Path:
    """The local path a place that is not a URL names: a plain path, or a `file://` URL."""
    if place.startswith("file://"):
        return Path(unquote(urlsplit(place).path))
    return Path(place)


@dataclasses.dataclass
class Place:
    """A run's place for one invocation: `local` is where the command works; `url`, where
    the run is kept (None: `local` is the DIR itself). Opened by `taken`, `viewed` or
    `written`, never made by a command."""

    local: Path
    url: str | None = None
    objects: Objects | None = None
    keeper: LeaseKeeper | None = None
    restored: Restored | None = None  # the run's memory as restored (None: there was none)
    # The sha256 of each object copied in from the URL: published again only if changed
    # (an object beside the run's outputs, such as a --book, is never written back stale).
    copied: Mapping[str, bytes] = dataclasses.field(default_factory=dict)
    # The names the URL held when a `written` place was opened (a local DIR's: none).
    held: tuple[str, ...] = ()
    # Why the outputs could not be published at the URL (the command's refusal), and where
    # the run's log was kept instead (the user's state folder), once the place is left.
    unpublished: RunRefusedError | None = None
    log_kept: Path | None = None
    # The place as its user named it ("": the URL, or else the local directory's path).
    given: str = ""

    @property
    def name(self) -> str:
        """The place in a message: as its user named it (a final `/` dropped), the URL of
        a run kept at one, never the directory it was copied into."""
        return self.given.rstrip("/") or self.given or self.url or str(self.local)

    def named(self, text: str) -> str:
        """`text` (a message about the place's local directory) naming the run's URL
        instead of the directory of this invocation's own it was copied into. A local
        DIR's path is its own name, left as it is (a path given as `./out` is said as
        `out`: rewriting `out` inside every word of a message would be worse)."""
        return text.replace(str(self.local), self.url) if self.url else text

    @contextlib.contextmanager
    def naming(self) -> Iterator[None]:
        """A refusal (or a settings error) met within names the place (`named`), not the
        directory a URL's run was read into or written in."""
        try:
            yield
        except RunRefusedError as exc:
            raise RunRefusedError(exc.reason, self.named(exc.detail)) from None
        except SettingsError as exc:
            raise SettingsError(self.named(str(exc))) from None

    def where(self, path: Path) -> str:
        """Where a file written in the local directory is for the place's user."""
        return f"{self.url}/{path.name}" if self.url else str(path)

    def left(self, code: int) -> tuple[int, list[str]]:
        """The exit code of a command that sent, once the place is left (`taken` with
        `summarised`), and the lines to say: outputs its URL could not take (never 0),
        and where the run's log was kept when not at the URL (a stop may name it)."""
        said = []
        if self.unpublished is not None:
            said.append(f"{self.unpublished} (the outputs are not at {self.url})")
            code = code or int(self.unpublished.exit_code)
        if self.log_kept is not None:
            said.append(f"the run's log is kept in {self.log_kept}, not at its URL")
        return code, said

    def keep(self, database: Database) -> None:
        """Ship every commit of the run's database to the URL from now on (a place
        taken at a URL; elsewhere nothing)."""
        if self.objects is None or self.keeper is None:
            return
        replica = Replica(
            self.objects, database.path, epoch=self.keeper.lease.epoch, url=self.url or ""
        )
        database.keep_at(replica, self.restored, self.keeper)

    def publish(self) -> list[str]:
        """Every output file of the local directory written to the URL, each whole (an
        object appears complete or not at all), but those copied in and unchanged;
        returns their names."""
        if self.objects is None:
            return []
        names = sorted(
            p.name
            for p in self.local.iterdir()
            if p.is_file() and p.name not in _LOCAL_ONLY and ".tmp-" not in p.name
        )
        published = []
        for name in names:
            data = (self.local / name).read_bytes()
            if self.copied.get(name) != hashlib.sha256(data).digest():
                self.objects.put(name, data)
                published.append(name)
        log.info("engine.place.published", url=self.url, files=published)
        return names


def _here(place: str) -> Place:
    """A place that is not a URL: the DIR itself."""
    return Place(local_path(place), given=place)


@contextlib.contextmanager
def viewed(place: str, env: Mapping[str, str]) -> Iterator[Place]:
    """A run's place as a reader sees it (`status`, `export --out`, `batchval.open_run`):
    a local DIR as it is, or a URL's run copied into a directory of this invocation's own
    (its memory restored, its published outputs beside it), with the store (for `status`
    to read the lease). Nothing is published and the run's lease is never taken: a run
    at work there goes on undisturbed."""
    if not is_url(place):
        yield _here(place)
        return
    from batchval._internal.store import ObjectStore, ObjectStoreError

    with _scratch("batchval-view-") as local:
        try:
            objects = ObjectStore.from_url(place, env)
            restore(objects, local / CHECKPOINT_NAME, url=place.rstrip("/"))
            _copy_outputs(objects, local)
        except (ObjectStoreError, StateObjectError) as exc:
            raise refusal_of(exc) from None
        try:
            yield Place(local, place.rstrip("/"), objects, given=place)
        except StateObjectError as exc:  # the lease, read by `status`
            raise refusal_of(exc) from None


@contextlib.contextmanager
def written(place: str, env: Mapping[str, str]) -> Iterator[Place]:
    """Where a command that only writes files (`split`) writes them: a local DIR as it
    is, or, for a URL, an empty directory of the invocation's own whose files are
    published at the URL, each object whole, once the command has ended well (a command
    that fails publishes nothing); `Place.held` names what the URL held."""
    if not is_url(place):
        yield _here(place)
        return
    from batchval._internal.store import ObjectStore, ObjectStoreError

    with _scratch("batchval-out-") as local:
        try:
            objects = ObjectStore.from_url(place, env)
            held = tuple(key for key in objects.list("") if "/" not in key)
        except ObjectStoreError as exc:
            raise refusal_of(exc) from None
        found = Place(local, place.rstrip("/"), objects, held=held, given=place)
        yield found
        try:
            found.publish()
        except ObjectStoreError as exc:
            raise refusal_of(exc) from None


@contextlib.contextmanager
def _scratch(prefix: str) -> Iterator[Path]:
    """A directory of this invocation's own, removed whatever ends it: it may hold the
    run's results, and the shared temporary folder is no place to leave them."""
    local = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield local
    finally:
        shutil.rmtree(local, ignore_errors=True)


def _copy_outputs(objects: Objects, local: Path) -> dict[str, bytes]:
    """The outputs published at the URL, into `local` (the run's state/ is not one);
    returns the sha256 of each object copied."""
    copied = {}
    for key in objects.list(""):
        found = None if "/" in key else objects.get(key)
        if found is not None:
            (local / key).write_bytes(found[0])
            copied[key] = hashlib.sha256(found[0]).digest()
    return copied


@contextlib.contextmanager
def input_of(source: str, env: Mapping[str, str]) -> Iterator[Path]:
    """The input file: a local path as it is, or an `s3://bucket/key` URL streamed into a
    directory of this invocation's own (its name kept: the suffix says the format), so
    that a blank machine reads it. The run knows an input by its bytes (their sha256),
    so the same object read on another machine is the same input."""
    if not is_url(source):
        yield local_path(source)
        return
    from batchval._internal.store import ObjectStore, ObjectStoreError

    parent, _, name = source.rstrip("/").rpartition("/")
    with _scratch("batchval-input-") as local:
        found = None
        if name:  # streamed to disk, never held whole (an input may be a large file)
            try:
                with (local / name).open("wb") as file:
                    found = ObjectStore.from_url(parent, env).read_into(name, file)
            except ObjectStoreError as exc:
                raise refusal_of(exc) from None
        if found is None:
            raise RunRefusedError(StopReason.INPUT_UNUSABLE, f"{source}: no such object")
        yield local / name


@contextlib.contextmanager
def taken(
    place: str, env: Mapping[str, str], *, outputs: bool = False, summarised: bool = False
) -> Iterator[Place]:
    """The run's place, taken by a command that works on the run (`run`, `streets`,
    `verify`, `report`, `export`): a local DIR as it is, or a URL's store read from `env`
    the way AWS's own tools read it (`store/objects`), its failures the command's
    refusals: a store that will not do what a run needs (credentials, no bucket, no
    conditional writes) is `refused` (64), one that does not answer `store_unavailable`
    (75). With `outputs`, the outputs published at the URL are copied beside the
    restored memory (`verify`, `report` and `export` read them).
    With `summarised`, outputs that could not be published are the caller's to say (in
    `Place.unpublished`, after its summary); else they are the refusal raised."""
    if not is_url(place):
        yield _here(place)
        return
    from batchval._internal.store import ObjectStore, ObjectStoreError

    try:
        objects = ObjectStore.from_url(place, env)
        with opened(place, objects, lease_seconds=lease_seconds(env), outputs=outputs) as found:
            yield found
    except ObjectStoreError as exc:
        raise refusal_of(exc) from None
    if found.unpublished is not None and not summarised:
        raise found.unpublished


@contextlib.contextmanager
def opened(
    place: str,
    objects: Objects | None = None,
    *,
    lease_seconds: float = DURATION,
    outputs: bool = False,
) -> Iterator[Place]:
    """The run's place for one invocation: a local DIR as it is, or a URL whose store is
    `objects` (probed, taken, restored into a directory of this invocation's own; the
    outputs published and the run let go at the end)."""
    if objects is None:
        yield _here(place)
        return
    from batchval._internal.store import (
        ObjectStoreError,
        ObjectStoreRefusedError,
        ShippedLog,
        log_key,
    )

    started = dt.datetime.now(dt.UTC)
    objects.probe()
    refuse_foreign_objects(place, objects.list(""))  # another program's objects, never a run's
    lease = Lease(
        objects,
        duration=lease_seconds,
        margin=lease_seconds / 3,
        written=lambda: objects.age(HEAD),
    )
    try:
        lease.take()
    except LeaseHeldError as exc:
        raise RunRefusedError(StopReason.DIR_LOCKED, f"{place}: {exc}") from None
    except StateObjectError as exc:
        raise refusal_of(exc) from None
    keeper = LeaseKeeper(
        lease,
        every=min(1.0, lease_seconds / 10),
        refused=(ObjectStoreRefusedError,),
        store=place,
    )
    # Made after the lease is taken, removed (`_scratch`) once the run is let go.
    with _scratch("batchval-place-") as local:
        try:
            try:
                restored = restore(objects, local / CHECKPOINT_NAME, url=place.rstrip("/"))
            except StateObjectError as exc:
                raise refusal_of(exc) from None
            copied = _copy_outputs(objects, local) if outputs else {}
            log.info(
                "engine.place.taken", url=place, epoch=lease.epoch, restored=restored is not None
            )
            found = Place(local, place.rstrip("/"), objects, keeper, restored, copied, given=place)
            # This invocation's events, kept at the URL as they come (`store/shipped_log`).
            with ShippedLog(objects, local / LOG_NAME, log_key(started, lease.epoch)):
                try:
                    yield found
                except (
                    RunRefusedError
                ) as exc:  # its log, which its line may name, is not at the URL
                    kept = keep_privately(local / LOG_NAME, "log")
                    if kept is None or str(local) not in exc.detail:
                        raise
                    detail = exc.detail.replace(str(local / LOG_NAME), str(kept))
                    raise RunRefusedError(exc.reason, detail) from None
                if keeper.holds():  # surely still this run's: never over a new holder's outputs
                    try:
                        found.publish()
                    except ObjectStoreError as exc:
                        found.unpublished = refusal_of(exc)
                else:
                    log.warning(
                        "engine.place.not_published", url=place, why="the run's lease lapsed"
                    )
                if found.unpublished is not None or not keeper.holds():
                    # The log, which names where a defect's traceback is, is not at the URL.
                    found.log_kept = keep_privately(local / LOG_NAME, "log")
        finally:
            try:
                keeper.close()
            except ObjectStoreError as exc:  # not let go: the next taker waits one lease
                log.warning("engine.place.not_let_go", url=place, why=str(exc))


# A test seam, not a setting: the seconds a run's lease at a URL holds (`store/lease`), so
# that a test of a killed or stalled holder waits out a few seconds, not DURATION.
LEASE_VARIABLE = "BATCHVAL_LEASE_SECONDS"


def lease_seconds(env: Mapping[str, str]) -> float:
    """DURATION, or what `env`'s LEASE_VARIABLE says (refused, 64, unless above 1 s)."""
    given = env.get(LEASE_VARIABLE, "").strip()
    if not given:
        return DURATION
    try:
        seconds = float(given)
    except ValueError:
        seconds = 0.0
    if not seconds > 1.0:
        raise RunRefusedError(StopReason.REFUSED, f"{LEASE_VARIABLE} must be seconds above 1")
    return seconds


def refusal_of(exc: ObjectStoreError | StateObjectError) -> RunRefusedError:
    """A store's failure as the command's refusal: one that does not answer is
    `store_unavailable` (75); a missing bucket or container `store_missing`, refused
    credentials `store_credentials` and an account key that cannot be one
    `store_key_malformed` (64 each: reason codes a scheduler tells apart without reading
    words); any other that will not do what a run needs (no conditional writes, a bad
    option), or whose run's memory cannot be trusted as it is (a damaged HEAD: the
    message says the repair), is `refused` (64)."""
    from batchval._internal.store import (
        BucketMissingError,
        CredentialsRefusedError,
        KeyMalformedError,
    )

    if exc.exit_code == ExitCode.RESUMABLE:
        return RunRefusedError(StopReason.STORE_UNAVAILABLE, str(exc))
    for kind, reason in (
        (BucketMissingError, StopReason.STORE_MISSING),
        (CredentialsRefusedError, StopReason.STORE_CREDENTIALS),
        (KeyMalformedError, StopReason.STORE_KEY_MALFORMED),
    ):
        if isinstance(exc, kind):
            return RunRefusedError(reason, str(exc))
    return RunRefusedError(StopReason.REFUSED, str(exc))
