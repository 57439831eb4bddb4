"""`batchval verify DIR`: every valuation of DIR's results read back by id (free) and
compared with what results.parquet holds; the differences in verify.parquet."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
