"""`batchval run`, the valuations product: its runner (the skeleton's steps), the ingest
and the book's plan, the valuation job with its answers and recovery, and its files
(results.parquet, problems.parquet, manifest.json, the book, --metrics-file)."""
