"""The sizes of every measurement, quick and full, stated once (run.py runs them,
report.py describes them)."""

from __future__ import annotations

RATES = (5, 20, 100)  # hidden short-term limits, calls a second; each bucket holds one second
RATE_ROWS = 2_000
QUICK_SLOW_ROWS = 500  # the 5/s run in quick mode: 100 s rather than 400 s
CONCURRENCIES = (8, 32, 128)
HIDING_SECONDS = 12.0  # each latency run's rows: this long at the ideal throughput
HIDING_TIMEOUT = 60.0  # a latency run still going then is stopped (SIGTERM) and measured
COST_ROWS = 10_000
READER_ROWS = (100_000, 1_000_000)
FULL_READER_ROWS = 5_000_000
QUICK_INGEST_ROWS = 250_000  # the whole ingest into a checkpoint: about 50 s per million
RESUME_ROWS = 1_000_000


def rate_rows(limit: int, full: bool) -> int:
    return QUICK_SLOW_ROWS if limit == min(RATES) and not full else RATE_ROWS


def reader_rows(full: bool) -> tuple[int, ...]:
    return (*READER_ROWS, FULL_READER_ROWS) if full else READER_ROWS


def ingest_rows(full: bool) -> int:
    return RESUME_ROWS if full else QUICK_INGEST_ROWS
