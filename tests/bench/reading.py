"""Reader: read, validate and key a book, in a child process of its own (reader_child.py),
for its seconds and its peak RSS, at several sizes and in both formats; and the whole
ingest (the same, written to a checkpoint) for comparison."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from bench.processes import PYTHON, Finished, run_measured
from bench.workload import write_csv, write_parquet, write_xlsx

READER_CHILD = str(Path(__file__).with_name("reader_child.py"))


@dataclasses.dataclass(frozen=True, slots=True)
class ReaderRun:
    kind: str  # "CSV", "Parquet" or "Excel"
    into_checkpoint: bool  # the whole ingest: the rows written to a checkpoint too
    rows: int
    keyed: int
    seconds: float  # opening the file to the last batch keyed
    process: Finished

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds


def book_path(work: Path, kind: str, rows: int) -> Path:
    """The book of that size and format, written once and shared by the sections."""
    suffix, write = {
        "CSV": ("csv", write_csv),
        "Parquet": ("parquet", write_parquet),
        "Excel": ("xlsx", write_xlsx),
    }[kind]
    path = work / f"book-{rows}.{suffix}"
    if not path.exists():
        write(path, rows)
    return path


def read_book(work: Path, kind: str, rows: int, into_checkpoint: bool = False) -> ReaderRun:
    source = book_path(work, kind, rows)
    name = f"{'ingest' if into_checkpoint else 'reader'}-{kind}-{rows}"
    argv = [PYTHON, READER_CHILD, str(source)]
    if into_checkpoint:
        (work / name).mkdir()
        argv.append(str(work / name))
    log = work / f"{name}.log"
    process = run_measured(argv, log=log)
    if process.exit_code != 0:
        raise RuntimeError(f"the reader child failed; see {log}")
    figures = json.loads(log.read_text().splitlines()[-1])
    return ReaderRun(
        kind, into_checkpoint, figures["rows"], figures["keyed"], figures["seconds"], process
    )
