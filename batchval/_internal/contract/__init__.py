"""The DIR's Parquet files as a contract, shared by the products that write them and the
commands that read them: the columns of results.parquet and problems.parquet
(`schemas`, one schema version for both), the records they are taken from (`records`)
and the lender columns (`lender`); and the local authorities' names that the answers'
codes stand for (`places`, ONS data shipped beside it)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
