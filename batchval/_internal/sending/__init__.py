"""The engine's sending, knowing no product: the input's batches and their verdict
(`batches`), the sending phase (`sending`) with its pool (`pool`, `job`, `loops`), pacing
(`ratecontrol`), the breaker, retries (`retry`), stops (`stop`), progress, the daily limit
(`midnight`), idempotency keys (`keys`) and read-backs by id (`reading`)."""
