"""Start-up of a big run: a fresh DIR, a 1,000,000-row CSV, and `batchval run` against a
sandbox with no limit: how long until its first call reaches the API.

Everything a run does before its first call is in the figure: the interpreter and
imports, the input's fingerprint, the validation of every row (an input the run would
refuse is refused before any call), its first rows keyed and stored in the checkpoint
(SQLite, synchronous=FULL), and the client's token; the run stores the rest while it
sends (ingest.Ingest). Measured from just before the process is started to the first
request in the sandbox's ledger (polled every 10 ms); the run is then killed, only its
start matters.

    python tests/bench/startup.py [--rows N] [--times K] [--keep DIR]

runs this measurement alone (K times, each in a fresh DIR), without the whole bench.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import signal
import sys
import tempfile
from pathlib import Path

if __name__ == "__main__":  # run alone: the bench's package from tests/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.processes import BATCHVAL, Child
from bench.served import NO_DAILY_LIMIT, ServedSandbox


@dataclasses.dataclass(frozen=True, slots=True)
class StartupRun:
    rows: int
    first_call_seconds: float  # from the process's start; NaN if none came
    exit_code: int


def startup_run(work: Path, book: Path, rows: int, timeout: float = 180.0) -> StartupRun:
    """`batchval run BOOK --out DIR` into a DIR of its own, to its first call."""
    out = Path(tempfile.mkdtemp(prefix="startup-", dir=work))
    with ServedSandbox(["--no-rate-limit", *NO_DAILY_LIMIT], out / "sandbox.log") as api:
        child = Child(
            [BATCHVAL, "run", str(book), "--out", str(out / "run")],
            log=out / "run.stdout",
            env=api.client_env(),
        )
        first = api.first_call_after(child, timeout)
        # Only the start is measured: no need to wait for a million calls and the outputs.
        child.stop(signal.SIGKILL)
        finished = child.wait()
    return StartupRun(rows=rows, first_call_seconds=first, exit_code=finished.exit_code)


def main() -> None:
    from bench.plan import STARTUP_ROWS
    from bench.reading import book_path

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=STARTUP_ROWS)
    parser.add_argument("--times", type=int, default=1, help="measure this many times")
    parser.add_argument("--keep", type=Path, help="keep the book and run DIRs here")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="batchval-startup-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        book = book_path(work, "CSV", args.rows)
        for _ in range(args.times):
            run = startup_run(work, book, args.rows)
            print(f"start-up, {run.rows:,} rows: first call after {run.first_call_seconds:.2f} s")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
