"""The names of the files every command finds in a DIR, stated once (run writes them;
streets, verify, report and export read or share them). Files of one writer keep their
name beside it (`summary.SUMMARY_NAME`, `manifest.MANIFEST_NAME`, ...)."""

from __future__ import annotations

RESULTS_NAME = "results.parquet"
PROBLEMS_NAME = "problems.parquet"
LOG_NAME = "batchval.log"
CHARGES_NAME = "charges.parquet"
# verify's differences, which a run that replaces results.parquet removes.
VERIFY_NAME = "verify.parquet"
