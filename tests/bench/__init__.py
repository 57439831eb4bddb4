"""`make bench`: speed, pacing and memory figures of batchval, printed and written to
docs/performance.md (never asserted). Entry point: tests/bench/run.py."""
