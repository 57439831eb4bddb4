"""`batchval run`, the valuations product: its runner (the skeleton's steps), the ingest
and the book's plan, the valuation job with its answers and recovery, and its files
(results.parquet, problems.parquet, manifest.json, the book, --metrics-file)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
