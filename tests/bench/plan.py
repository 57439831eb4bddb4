"""The sizes of every measurement, stated once (run.py runs them, report.py describes
them): the targets' own sizes."""

from __future__ import annotations

RATES = (5, 20, 100)  # hidden short-term limits, calls a second; each bucket holds one second
RATE_ROWS = 2_000
# The slowest rate run (2,000 rows at 5/s: 400 s) goes on beside every other measurement,
# from the start: it uses about 2 % of a core, and the sandbox as much, so the others
# hardly feel it, and the bench is almost 7 minutes shorter than with it run alone.
BESIDE = min(RATES)
CONCURRENCIES = (8, 32, 128)
HIDING_SECONDS = 12.0  # each latency run's rows: this long at the ideal throughput
HIDING_TIMEOUT = 60.0  # a latency run still going then is stopped (SIGTERM) and measured
COST_ROWS = 10_000
READER_ROWS = (100_000, 1_000_000, 5_000_000)
# An Excel workbook's one size: a full sheet, Excel's 1,048,576 rows less the header (a
# sheet cannot be larger, and is read whole: input/excel).
EXCEL_ROWS = 1_048_575
INGEST_ROWS = 1_000_000  # the whole ingest into a checkpoint
RESUME_ROWS = 1_000_000
STARTUP_ROWS = 1_000_000  # a fresh run's start-up: its CSV read into the checkpoint, first call
# A run at a URL (tests/bench/url.py), each beside the same run in a local DIR:
PACED_RATE = 20  # the hidden limit, calls a second, as the rate runs
PACED_ROWS = 2_000  # 100 s at 20/s: a second more is 1 % of the wall time
UNLIMITED_ROWS = 10_000  # about 15 s at no limit
BLANK_ROWS = 1_000_000  # the run a blank machine resumes from the store
BLANK_FIRST_DAY = 1_000  # the daily limit that stops its first invocation
# Resumes with nothing to do (issue 36): the URL after each of IDLE_RESUMES, against the first.
IDLE_ROWS = 1_000  # at PACED_RATE: about 50 s
IDLE_RESUMES = 10
# The index on a night (issue 55, tests/bench/indexed.py): a book of this many loans, its
# first night with --max-calls 1,000, with the index and without.
INDEX_ROWS = 1_000_000
