"""Where a crash job's run lives: a local DIR, or an `s3://` URL on a local SeaweedFS
reached through a fault-injecting proxy, each invocation from a blank machine.

The crash harness (`crash.py`) asks a place the same questions whatever it is: the
`--out` to pass, where an invocation runs, the run's memory as the next invocation
would find it, the killed process's temporary files, the published outputs. A local
place answers from DIR. A URL place answers from the store, as a moved task would:

- each invocation runs in an empty working directory of its own, which is also its
  `TMPDIR` (so the run's working copy, `batchval-place-*`, is on that "machine's" disk);
  after the invocation the directory is scanned for secrets and removed: the next
  invocation is a blank machine;
- the run's memory after a kill is what `store/replica.restore` makes of the URL (the
  commits the killed process had shipped, not the ones on its dead disk);
- the store faults (`StoreFaults`) strike through `s3_proxy`: a request answered 503
  without being forwarded (an upload that never landed), an upload that lands but whose
  answer is a 503, and a log upload that is never answered (a stalled store: the client
  gives up after its own timeout). Each fault strikes first at a random early request
  and then at its share of the rest, so a small job meets each of them;
- a SIGKILLed holder's lease (`state/LEASE`) would make the next invocation watch it for
  the lease's `DURATION` (30 s) before taking the run. The harness saw the process die,
  so it lets that lease go itself (as the holder's own exit would have), except after the
  last `lease_waits` kills of a job, where the next invocation waits it out as a real
  taker does.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import random
import shutil
import threading
from collections.abc import Iterator
from email.message import Message
from pathlib import Path

from objects_server import S3Server
from s3_proxy import Fault, proxy

from batchval._internal.store.database import CHECKPOINT_NAME
from batchval._internal.store.lease import LEASE, LeaseState
from batchval._internal.store.objects import ObjectStore
from batchval._internal.store.replica import restore


@dataclasses.dataclass(frozen=True, slots=True)
class StoreFaults:
    """The store faults of a URL job: shares of the requests they strike (after a first
    strike at one of the first `first_within` requests that qualify), and stalled log
    uploads (from one of the first `stall_within`; a run ships a log object about every
    second while it sends)."""

    reply_503_share: float = 0.02  # any request: 503 SlowDown, not forwarded
    land_then_503_share: float = 0.02  # a PUT: forwarded (it lands), then 503
    stalls: int = 1  # log uploads (`state/*/*.wal` PUTs) never answered, per job
    first_within: int = 40
    stall_within: int = 12

    def switched_on(self) -> list[str]:
        on = []
        if self.reply_503_share > 0:
            on.append(Fault.REPLY_503.value)
        if self.land_then_503_share > 0:
            on.append(Fault.LAND_THEN_503.value)
        if self.stalls > 0:
            on.append(Fault.STALL.value)
        return on


# A stall holds its request until the client gives up: obstore's timeout in
# store/objects.DEFAULT_OPTIONS (30 s), so each one costs about that much.
NO_STORE_FAULTS = StoreFaults(reply_503_share=0.0, land_then_503_share=0.0, stalls=0)


class _Chooser:
    """The proxy's choice for each request of one job (thread-safe: the proxy serves each
    connection on a thread of its own)."""

    def __init__(self, faults: StoreFaults, rng: random.Random) -> None:
        self.faults = faults
        self._rng = random.Random(rng.random())
        self._lock = threading.Lock()
        self._requests = self._puts = 0
        self._first_503 = self._rng.randrange(1, faults.first_within)
        self._first_landed = self._rng.randrange(1, faults.first_within)
        self._first_stall = self._rng.randrange(2, max(3, faults.stall_within))
        self._logs = 0
        self.struck: collections.Counter[str] = collections.Counter()

    def __call__(self, method: str, path: str, headers: Message) -> Fault:
        with self._lock:
            fault = self._choose(method, path)
            if fault is not Fault.FORWARD:
                self.struck[fault.value] += 1
            return fault

    def _choose(self, method: str, path: str) -> Fault:
        faults, rng = self.faults, self._rng
        self._requests += 1
        if method == "PUT" and path.endswith(".wal"):
            self._logs += 1
            if self.struck[Fault.STALL.value] < faults.stalls and self._logs >= self._first_stall:
                return Fault.STALL
        if faults.reply_503_share > 0 and (
            self._requests == self._first_503 or rng.random() < faults.reply_503_share
        ):
            return Fault.REPLY_503
        if method == "PUT" and faults.land_then_503_share > 0:
            self._puts += 1
            if self._puts == self._first_landed or rng.random() < faults.land_then_503_share:
                return Fault.LAND_THEN_503
        return Fault.FORWARD


class LocalPlace:
    """The run in a local DIR, every invocation from the harness's own directory."""

    kind = "local"

    def __init__(self, root: Path) -> None:
        self.out = root / "out"
        self.struck: dict[str, int] = {}

    @property
    def target(self) -> str:
        return str(self.out)

    @contextlib.contextmanager
    def serving(self, rng: random.Random) -> Iterator[None]:
        yield

    @contextlib.contextmanager
    def machine(self, env: dict[str, str]) -> Iterator[tuple[Path | None, dict[str, str]]]:
        yield None, env

    def memory(self) -> Path | None:
        path = self.out / CHECKPOINT_NAME
        return path if path.exists() else None

    def temporaries(self, pid: int | None = None) -> list[Path]:
        """The writer's temporary Parquet files (`.NAME.parquet.tmp-PID-RANDOM`), of one process."""
        return sorted(self.out.glob(f".*.parquet.tmp-{'*' if pid is None else f'{pid}-*'}"))

    def read(self, name: str) -> bytes | None:
        path = self.out / name
        return path.read_bytes() if path.is_file() else None

    def blobs(self) -> list[bytes]:
        return [p.read_bytes() for p in self.out.iterdir() if p.is_file()]

    def killed(self, *, wait_out_lease: bool) -> None:
        """Nothing to do: the lock of a killed process goes with it."""

    def never_struck(self) -> list[str]:
        return []


class UrlPlace:
    """The run at `s3://BUCKET/PREFIX` on `server`, reached by batchval through a proxy
    that injects `faults`; the harness reads the store directly."""

    kind = "url"

    def __init__(self, root: Path, server: S3Server, prefix: str, faults: StoreFaults) -> None:
        self.root = root
        self.server = server
        self.url = server.url(prefix)
        self.faults = faults
        self.store = ObjectStore.from_url(self.url, server.env())
        self._endpoint = server.endpoint
        self._chooser: _Chooser | None = None
        self._machines = 0
        self._leftovers: list[bytes] = []  # what killed processes left on their disks
        self.struck: dict[str, int] = {}

    @property
    def target(self) -> str:
        return self.url

    @contextlib.contextmanager
    def serving(self, rng: random.Random) -> Iterator[None]:
        """The fault-injecting proxy for the job's invocations."""
        self._chooser = _Chooser(self.faults, rng)
        try:
            with proxy(self.server, self._chooser) as (endpoint, _):
                self._endpoint = endpoint
                yield
        finally:
            self.struck = dict(self._chooser.struck)
            self._endpoint = self.server.endpoint

    @contextlib.contextmanager
    def machine(self, env: dict[str, str]) -> Iterator[tuple[Path | None, dict[str, str]]]:
        """A blank machine for one invocation: an empty directory as its working
        directory and TMPDIR, the store's credentials, the proxy as the endpoint. What the
        invocation leaves there is kept for the secrets scan, then removed."""
        self._machines += 1
        work = self.root / f"machine-{self._machines}"
        work.mkdir(parents=True)
        env = {
            **{k: v for k, v in env.items() if not k.startswith("AWS_")},
            **self.server.env(),
            "AWS_ENDPOINT_URL": self._endpoint,
            "TMPDIR": str(work),
        }
        try:
            yield work, env
        finally:
            self._leftovers += [p.read_bytes() for p in work.rglob("*") if p.is_file()]
            shutil.rmtree(work, ignore_errors=True)

    def memory(self) -> Path | None:
        """The run's memory as a blank machine would restore it from the URL now (None:
        the URL holds no run yet)."""
        path = self.root / "restored" / CHECKPOINT_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        return path if restore(self.store, path) is not None else None

    def temporaries(self, pid: int | None = None) -> list[Path]:
        """The writer's temporary Parquet files on the current machine's disk (in the
        run's working copy under its TMPDIR), of one process."""
        pattern = f"machine-*/batchval-place-*/.*.parquet.tmp-{'*' if pid is None else f'{pid}-*'}"
        return sorted(self.root.glob(pattern))

    def read(self, name: str) -> bytes | None:
        found = self.store.get(name)
        return None if found is None else found[0]

    def blobs(self) -> list[bytes]:
        """Every object under the URL, and what killed processes left on their disks."""
        found = [self.store.get(key) for key in self.store.list("")]
        return [f[0] for f in found if f is not None] + self._leftovers

    def killed(self, *, wait_out_lease: bool) -> None:
        """After a SIGKILL the harness saw land: unless the next invocation is to wait the
        lease out, mark the dead holder's lease released (compare-and-swap, so a lease
        that changed meanwhile is read again), as its own exit would have."""
        if wait_out_lease:
            return
        for _ in range(10):
            found = self.store.get(LEASE)
            if found is None:
                return
            state = LeaseState.of(found[0])
            if state.released:
                return
            released = dataclasses.replace(state, released=True)
            if self.store.replace(LEASE, released.to_bytes(), found[1]):
                return
        raise RuntimeError(f"{self.url}: the killed holder's lease could not be let go")

    def never_struck(self) -> list[str]:
        return [name for name in self.faults.switched_on() if not self.struck.get(name)]


Place = LocalPlace | UrlPlace


def unique_prefix(seed: int) -> str:
    """A prefix of one suite run's own on a shared bucket."""
    return f"crash-{seed}-{os.getpid()}-{random.SystemRandom().randrange(1 << 32):08x}"
