"""The engine's money, knowing no product: each charge's classification on the API's
clock (`charges`), charges.parquet (`charges_file`), the mode of a DIR's answers, test or
live (`modes`), and a `--live` job that never falls back to test mode (`live`)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
