"""The engine's sending, knowing no product: the input's batches and their verdict
(`batches`), the sending phase (`sending`) with its pool (`pool`, `job`, `loops`), pacing
(`ratecontrol`), the breaker, retries (`retry`), stops (`stop`), progress, the daily limit
(`midnight`), idempotency keys (`keys`) and read-backs by id (`reading`)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
