"""The engine every product runs on, and which knows no product: the command skeleton
(`command`), the DIR's hold (`invocation`), the input's batches and their verdict
(`batches`), the sending phase (`sending`) with its pool (`pool`, `job`), pacing
(`ratecontrol`), breaker, retries, stops, progress and the daily limit (`midnight`), the
charges' classification (`charges`), read-backs by id (`reading`), the summary
(`summary`), and the files: atomic writes (`files`), Arrow conversion (`arrow`), the
DIR's shared names (`names`) and charges.parquet (`charges_file`)."""
