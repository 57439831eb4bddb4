"""`batchval streets`, street analyses: its runner (the skeleton's steps), the job that
reads each distinct postcode once, and its files (streets.parquet, homes_with_street)."""
