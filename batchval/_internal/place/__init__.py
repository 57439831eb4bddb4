"""The engine's place, knowing no product: where a run's DIR is, on a disk or at a URL
(`place`), the files written there whole (`files`, `arrow`), what its Parquet outputs hold
(`outputs`), their shared names (`names`), the files derived from them (`derived`), the
DIR's hold (`invocation`) and one file several machines may replace (`versioned`)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
