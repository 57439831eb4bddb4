"""`make bench`: the figures of issue 13, printed and written to docs/performance.md.

    python tests/bench/run.py [--docs DIR] [--keep DIR]

Every measurement runs `batchval` as a process of its own against `batchval sandbox`
served in another (a fresh one each time), and reads the sandbox's ledger:

1. rate use: 2,000 rows against hidden limits of 5/s, 20/s and 100/s, with a plot of
   the 20/s run (the 5/s run, 400 s, goes on beside the rest from the start);
2. latency hiding: no limit, 500 ms answers, --concurrency 8, 32 and 128;
3. client cost: CPU per valuation over 10,000 rows, and a sequential loop's in the same
   run as the baseline;
4. reader: 100 k, 1 M and 5 M rows, CSV and Parquet, seconds and peak RSS; and the
   whole ingest into a checkpoint (1 M rows);
5. resume: a 1 M-row checkpoint 99 % done: seconds to the first new call;
6. start-up: a 1 M-row CSV into a fresh DIR: seconds to the first call.

It stays under 10 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from bench.cost import ClientCost, client_cost  # noqa: E402
from bench.live import hiding_run, rate_run  # noqa: E402
from bench.machine import Machine, load_average  # noqa: E402
from bench.plan import (  # noqa: E402
    BESIDE,
    CONCURRENCIES,
    COST_ROWS,
    EXCEL_ROWS,
    HIDING_SECONDS,
    HIDING_TIMEOUT,
    INGEST_ROWS,
    RATE_ROWS,
    RATES,
    READER_ROWS,
    RESUME_ROWS,
    STARTUP_ROWS,
)
from bench.plot import rate_plot  # noqa: E402
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


class _Progress:
    """One line per measurement, so that a long bench shows where it is."""

    def __init__(self, label: str) -> None:
        print(f"{label} ...", end=" ", flush=True)
        self._started = time.monotonic()

    def done(self, text: str) -> None:
        print(f"{text} [{time.monotonic() - self._started:.0f} s]", flush=True)


def bench(work: Path, command: str) -> Figures:
    started, load_before = time.monotonic(), load_average()
    machine = Machine.describe(ROOT)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as beside:
        slowest = beside.submit(rate_run, work, BESIDE, BESIDE, RATE_ROWS)
        print(f"rate use, {BESIDE}/s, {RATE_ROWS:,} rows: started, beside the rest", flush=True)
        figures = _measure(work)
        step = _Progress(f"rate use, {BESIDE}/s, {RATE_ROWS:,} rows")
        slow = RateFigure(BESIDE, BESIDE, slowest.result())
        step.done(f"{slow.use:.2f} of the limit, {slow.run.rate_limited} 429s")
    reader, ingest, resume, startup, costs, hiding, rate = figures
    return Figures(
        command=command,
        machine=machine,
        load=(load_before, load_average()),
        seconds=time.monotonic() - started,
        rate=sorted([slow, *rate], key=lambda r: r.rate),
        hiding=hiding,
        batchval_cost=costs[1],
        sequential_cost=costs[0],
        reader=reader,
        ingest=ingest,
        resume=resume,
        startup=startup,
    )


_Measured = tuple[
    list[ReaderRun],
    ReaderRun,
    ResumeRun,
    StartupRun,
    list[ClientCost],
    list[HidingFigure],
    list[RateFigure],
]


def _measure(work: Path) -> _Measured:
    """Everything but the slowest rate run, one after another."""
    reader = []
    for kind in ("CSV", "Parquet"):
        for rows in READER_ROWS:
            step = _Progress(f"reader, {kind}, {rows:,} rows")
            reader.append(read_book(work, kind, rows))
            step.done(
                f"{reader[-1].seconds:.1f} s, peak {reader[-1].process.peak_rss_mib:,.0f} MiB"
            )
    step = _Progress(f"reader, Excel, {EXCEL_ROWS:,} rows (a full sheet; written first)")
    reader.append(read_book(work, "Excel", EXCEL_ROWS))
    step.done(f"{reader[-1].seconds:.1f} s, peak {reader[-1].process.peak_rss_mib:,.0f} MiB")
    step = _Progress(f"ingest into a checkpoint, CSV, {INGEST_ROWS:,} rows")
    ingest = read_book(work, "CSV", INGEST_ROWS, into_checkpoint=True)
    step.done(f"{ingest.seconds:.1f} s, peak {ingest.process.peak_rss_mib:,.0f} MiB")
    step = _Progress(f"resume, {RESUME_ROWS:,} rows, 99 % done")
    resume = resume_run(work, book_path(work, "CSV", RESUME_ROWS), RESUME_ROWS)
    step.done(f"first new call after {resume.first_call_seconds:.1f} s")
    step = _Progress(f"start-up, CSV, {STARTUP_ROWS:,} rows")
    startup = startup_run(work, book_path(work, "CSV", STARTUP_ROWS), STARTUP_ROWS)
    step.done(f"first call after {startup.first_call_seconds:.1f} s")
    cost_book = book_path(work, "CSV", COST_ROWS)
    costs = []
    for client in ("sequential", "batchval"):
        step = _Progress(f"client cost, {client}, {COST_ROWS:,} rows")
        costs.append(client_cost(work, cost_book, client))
        step.done(f"{costs[-1].cpu_ms_per_valuation:.2f} ms CPU per valuation")
    hiding = []
    for concurrency in CONCURRENCIES:
        step = _Progress(f"latency hiding, --concurrency {concurrency}")
        run = hiding_run(work, concurrency, HIDING_SECONDS, HIDING_TIMEOUT)
        hiding.append(HidingFigure(concurrency, run))
        step.done(f"{hiding[-1].use:.2f} of concurrency / latency")
    rate = []
    for limit in RATES:
        if limit == BESIDE:
            continue
        step = _Progress(f"rate use, {limit}/s, {RATE_ROWS:,} rows")
        rate.append(RateFigure(limit, limit, rate_run(work, limit, limit, RATE_ROWS)))
        step.done(f"{rate[-1].use:.2f} of the limit, {rate[-1].run.rate_limited} 429s")
    return reader, ingest, resume, startup, costs, hiding, rate


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=Path, default=ROOT / "docs", help="where to write")
    parser.add_argument("--keep", type=Path, help="keep the books, logs and run DIRs here")
    args = parser.parse_args()
    command = "make bench"
    with tempfile.TemporaryDirectory(prefix="batchval-bench-") as scratch:
        work = Path(scratch)
        try:
            figures = bench(work, command)
        finally:
            if args.keep is not None:
                shutil.copytree(work, args.keep, dirs_exist_ok=True)
    print(console(figures))
    args.docs.mkdir(parents=True, exist_ok=True)
    twenty = next(r for r in figures.rate if r.rate == 20)
    title = f"batchval run, {twenty.run.rows:,} rows, against a hidden limit of 20/s"
    (args.docs / PLOT_NAME).write_text(rate_plot(title, twenty.run.per_second(), 20))
    (args.docs / "performance.md").write_text(markdown(figures))
    print(f"\nwrote {args.docs / 'performance.md'} and {args.docs / PLOT_NAME}")


if __name__ == "__main__":
    main()
