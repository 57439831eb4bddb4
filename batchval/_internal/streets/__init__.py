"""`batchval streets`, street analyses: its runner (the skeleton's steps), the job that
reads each distinct postcode once, and its files (streets.parquet, homes_with_street)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
