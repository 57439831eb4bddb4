"""`batchval verify DIR`: every valuation of DIR's results read back by id (free) and
compared with what results.parquet holds; the differences in verify.parquet."""
