"""`make bench`: the figures of issues 13 and 23, printed and written to
docs/performance.md.

    python tests/bench/run.py [--docs DIR] [--keep DIR] [--only reader,ingest,...]

Every measurement runs `batchval` as a process of its own against `batchval sandbox`
served in another (a fresh one each time), and reads the sandbox's ledger:

1. rate use: 2,000 rows against hidden limits of 5/s, 20/s and 100/s, with a plot of
   the 20/s run (the 5/s run, 400 s, goes on beside the rest from the start);
2. latency hiding: no limit, 500 ms answers, --concurrency 8, 32 and 128;
3. client cost: CPU per valuation over 10,000 rows, and a sequential loop's in the same
   run as the baseline; then batchval's run again under cProfile: where its CPU goes;
4. reader: 100 k, 1 M and 5 M rows, CSV and Parquet, seconds and peak RSS; and the
   whole ingest into a checkpoint (1 M rows);
5. resume: a 1 M-row checkpoint 99 % done: seconds to the first new call;
6. start-up: a 1 M-row CSV into a fresh DIR: seconds to the first call;
7. a run at a URL (`--out s3://...` on a local S3 server, tests/bench/url.py): its wall
   time at 20/s and its calls a second with no limit, each against the same run in a
   local DIR back to back; a blank machine resuming a 1 M-row run from the store; and
   what the URL holds after ten resumes with nothing to do, against after one;
8. the index on a night (issue 55, tests/bench/indexed.py): the first night of a
   1 M-loan --book with --max-calls 1000, with `--index-source ukhpi` rolling every loan
   forward and without, two of each: the seconds and the peak RSS the index adds.

`--only` measures some of them (`--only url`, `--only resume,startup`) and prints them,
leaving docs/ as it is: a quick loop while working on one figure. The whole bench takes
about 20 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import shutil
import sys
import tempfile
import time
from collections.abc import Collection
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from bench.cost import ClientCost, client_cost  # noqa: E402
from bench.indexed import IndexFigures, index_measured, index_run  # noqa: E402
from bench.live import hiding_run, rate_run  # noqa: E402
from bench.machine import Machine, load_average  # noqa: E402
from bench.plan import (  # noqa: E402
    BESIDE,
    BLANK_ROWS,
    CONCURRENCIES,
    COST_ROWS,
    EXCEL_ROWS,
    HIDING_SECONDS,
    HIDING_TIMEOUT,
    IDLE_RESUMES,
    IDLE_ROWS,
    INDEX_ROWS,
    INGEST_ROWS,
    PACED_RATE,
    PACED_ROWS,
    RATE_ROWS,
    RATES,
    READER_ROWS,
    RESUME_ROWS,
    STARTUP_ROWS,
    UNLIMITED_ROWS,
)
from bench.plot import rate_plot  # noqa: E402
from bench.profile import ClientProfile, client_profile  # noqa: E402
from bench.reading import ReaderRun, book_path, read_book  # noqa: E402
from bench.report import (  # noqa: E402
    PLOT_NAME,
    Figures,
    HidingFigure,
    RateFigure,
    console,
    markdown,
)
from bench.resume import ResumeRun, resume_run  # noqa: E402
from bench.startup import StartupRun, startup_run  # noqa: E402
from bench.url import (  # noqa: E402
    UrlFigures,
    blank_resume,
    idle_resumes,
    paced_pair,
    s3_server,
    unlimited_pair,
)


class _Progress:
    """One line per measurement, so that a long bench shows where it is."""

    def __init__(self, label: str) -> None:
        print(f"{label} ...", end=" ", flush=True)
        self._started = time.monotonic()

    def done(self, text: str) -> None:
        print(f"{text} [{time.monotonic() - self._started:.0f} s]", flush=True)


# The measurements, in the order they run; `--only` picks some of them.
CASES = ("reader", "ingest", "resume", "startup", "cost", "hiding", "rate", "url", "index")


def bench(work: Path, command: str, only: Collection[str] = CASES) -> Figures:
    started, load_before = time.monotonic(), load_average()
    machine = Machine.describe(ROOT)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as beside:
        slowest = None
        if "rate" in only:
            slowest = beside.submit(rate_run, work, BESIDE, BESIDE, RATE_ROWS)
            print(f"rate use, {BESIDE}/s, {RATE_ROWS:,} rows: started, beside the rest", flush=True)
        figures = _measure(work, only)
        if slowest is not None:
            step = _Progress(f"rate use, {BESIDE}/s, {RATE_ROWS:,} rows")
            slow = RateFigure(BESIDE, BESIDE, slowest.result())
            step.done(f"{slow.use:.2f} of the limit, {slow.run.rate_limited} 429s")
            figures.rate.append(slow)
            figures.rate.sort(key=lambda r: r.rate)
    return Figures(
        command=command,
        machine=machine,
        load=(load_before, load_average()),
        seconds=time.monotonic() - started,
        **{field.name: getattr(figures, field.name) for field in dataclasses.fields(figures)},
    )


@dataclasses.dataclass
class _Measured:
    """Every figure but the bench's own, None or empty when not asked for."""

    reader: list[ReaderRun] = dataclasses.field(default_factory=list)
    ingest: ReaderRun | None = None
    resume: ResumeRun | None = None
    startup: StartupRun | None = None
    costs: tuple[ClientCost, ClientCost] | None = None
    hiding: list[HidingFigure] = dataclasses.field(default_factory=list)
    rate: list[RateFigure] = dataclasses.field(default_factory=list)
    url: UrlFigures | None = None
    profile: ClientProfile | None = None
    index: IndexFigures | None = None


def _measure(work: Path, only: Collection[str]) -> _Measured:
    """Everything in `only` but the slowest rate run, one after another."""
    found = _Measured()
    if "reader" in only:
        for kind in ("CSV", "Parquet"):
            for rows in READER_ROWS:
                step = _Progress(f"reader, {kind}, {rows:,} rows")
                read = read_book(work, kind, rows)
                found.reader.append(read)
                step.done(f"{read.seconds:.1f} s, peak {read.process.peak_rss_mib:,.0f} MiB")
        step = _Progress(f"reader, Excel, {EXCEL_ROWS:,} rows (a full sheet; written first)")
        read = read_book(work, "Excel", EXCEL_ROWS)
        found.reader.append(read)
        step.done(f"{read.seconds:.1f} s, peak {read.process.peak_rss_mib:,.0f} MiB")
    if "ingest" in only:
        step = _Progress(f"ingest into a checkpoint, CSV, {INGEST_ROWS:,} rows")
        ingest = found.ingest = read_book(work, "CSV", INGEST_ROWS, into_checkpoint=True)
        step.done(f"{ingest.seconds:.1f} s, peak {ingest.process.peak_rss_mib:,.0f} MiB")
    if "resume" in only:
        step = _Progress(f"resume, {RESUME_ROWS:,} rows, 99 % done")
        resume = found.resume = resume_run(work, book_path(work, "CSV", RESUME_ROWS), RESUME_ROWS)
        step.done(f"first new call after {resume.first_call_seconds:.1f} s")
    if "startup" in only:
        step = _Progress(f"start-up, CSV, {STARTUP_ROWS:,} rows")
        book = book_path(work, "CSV", STARTUP_ROWS)
        startup = found.startup = startup_run(work, book, STARTUP_ROWS)
        step.done(f"first call after {startup.first_call_seconds:.1f} s")
    if "cost" in only:
        cost_book = book_path(work, "CSV", COST_ROWS)
        costs = []
        for client in ("sequential", "batchval"):
            step = _Progress(f"client cost, {client}, {COST_ROWS:,} rows")
            costs.append(client_cost(work, cost_book, client))
            step.done(f"{costs[-1].cpu_ms_per_valuation:.2f} ms CPU per valuation")
        found.costs = (costs[1], costs[0])
        step = _Progress(f"where batchval's CPU goes, {COST_ROWS:,} rows under cProfile")
        profile = found.profile = client_profile(work, cost_book)
        step.done(f"{100 * profile.share(profile.packages[0]):.0f} % in {profile.packages[0].what}")
    if "hiding" in only:
        for concurrency in CONCURRENCIES:
            step = _Progress(f"latency hiding, --concurrency {concurrency}")
            run = hiding_run(work, concurrency, HIDING_SECONDS, HIDING_TIMEOUT)
            found.hiding.append(HidingFigure(concurrency, run))
            step.done(f"{found.hiding[-1].use:.2f} of concurrency / latency")
    if "rate" in only:
        for limit in RATES:
            if limit == BESIDE:
                continue
            step = _Progress(f"rate use, {limit}/s, {RATE_ROWS:,} rows")
            found.rate.append(RateFigure(limit, limit, rate_run(work, limit, limit, RATE_ROWS)))
            step.done(
                f"{found.rate[-1].use:.2f} of the limit, {found.rate[-1].run.rate_limited} 429s"
            )
    if "url" in only:
        found.url = _measure_url(work)
    if "index" in only:
        step = _Progress(f"the index on a night, {INDEX_ROWS:,} loans, with and without")
        index = found.index = index_run(work, INDEX_ROWS)
        _, memory = index_measured(index)
        step.done(f"{index.added:.1f} s, peak RSS {memory}")
    return found


def _measure_url(work: Path) -> UrlFigures:
    """A run at a URL on a local S3 server, beside the same run in a local DIR."""
    with s3_server(work) as s3:
        step = _Progress(f"run at a URL, hidden {PACED_RATE}/s, {PACED_ROWS:,} rows, and locally")
        paced = paced_pair(work, s3, PACED_ROWS)
        step.done(f"{paced.wall_ratio:.3f} × the local DIR's wall time")
        step = _Progress(f"run at a URL, no limit, {UNLIMITED_ROWS:,} rows, and locally")
        unlimited = unlimited_pair(work, s3, UNLIMITED_ROWS)
        step.done(f"{unlimited.rate_ratio:.2f} × the local DIR's calls a second")
        step = _Progress(f"blank machine resumes a run at a URL, {BLANK_ROWS:,} rows")
        blank = blank_resume(work, s3, book_path(work, "CSV", BLANK_ROWS), BLANK_ROWS)
        step.done(
            f"first call after {blank.first_call_seconds:.1f} s, peak {blank.peak_rss_mib:,.0f} MiB"
        )
        step = _Progress(f"{IDLE_RESUMES} resumes with nothing to do at a URL, {IDLE_ROWS:,} rows")
        idle = idle_resumes(work, s3)
        step.done(
            f"objects under state/ {idle.objects_ratio:.2f} × the first resume's, bytes under "
            f"the URL {idle.bytes_ratio:.2f} ×"
        )
    return UrlFigures(paced, unlimited, blank, idle)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--docs",
        type=Path,
        help="where to write performance.md (default docs/, and only when every measurement "
        "was made)",
    )
    parser.add_argument("--keep", type=Path, help="keep the books, logs and run DIRs here")
    parser.add_argument(
        "--only",
        type=lambda text: text.split(","),
        default=list(CASES),
        help=f"measure only these, comma-separated (of {', '.join(CASES)})",
    )
    args = parser.parse_args()
    unknown = sorted(set(args.only) - set(CASES))
    if unknown:
        parser.error(f"no such measurement: {', '.join(unknown)}")
    whole = set(args.only) == set(CASES)
    command = "make bench" if whole else f"tests/bench/run.py --only {','.join(args.only)}"
    with tempfile.TemporaryDirectory(prefix="batchval-bench-") as scratch:
        work = Path(scratch)
        try:
            figures = bench(work, command, args.only)
        finally:
            if args.keep is not None:
                # The S3 server's Unix sockets cannot be copied (nor used once it stopped).
                ignore = shutil.ignore_patterns("*.sock")
                shutil.copytree(work, args.keep, dirs_exist_ok=True, ignore=ignore)
    print(console(figures))
    docs = args.docs or (ROOT / "docs" if whole else None)
    if docs is None:
        print("\nsome measurements left out (--only): docs/performance.md left as it is")
        return
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "performance.md").write_text(markdown(figures))
    print(f"\nwrote {docs / 'performance.md'}")
    twenty = next((r for r in figures.rate if r.rate == 20), None)
    if twenty is not None:
        title = f"batchval run, {twenty.run.rows:,} rows, against a hidden limit of 20/s"
        (docs / PLOT_NAME).write_text(rate_plot(title, twenty.run.per_second(), 20))
        print(f"wrote {docs / PLOT_NAME}")


if __name__ == "__main__":
    main()
