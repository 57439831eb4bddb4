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
# A dry run's price (`summary.DryRunSummary`), and its problems in a DIR that holds a run
# (beside the run's problems.parquet, never over it; in a DIR with no run they are
# problems.parquet, as the run would write them).
DRY_RUN_NAME = "dry_run.json"
DRY_RUN_PROBLEMS_NAME = "dry_run_problems.parquet"
# A `--book` night's order (`valuations/booking`): the loans it planned to value, in order,
# each with why; a dry run's beside a run's, as its problems.
PICKS_NAME = "picks.parquet"
DRY_RUN_PICKS_NAME = "dry_run_picks.parquet"

# Every name a command writes into DIR (each named here or beside its writer: a test holds
# them equal). A DIR that holds none of a run's own marks (its checkpoint, its lock file, a
# dry run's price, its log: `place/invocation.RUN_MARKS`) but a file of one of these names is
# someone else's: refused, not overwritten (`place/invocation.refuse_foreign_files`).
WRITTEN_NAMES: tuple[str, ...] = (
    "summary.json",
    "manifest.json",
    RESULTS_NAME,
    PROBLEMS_NAME,
    CHARGES_NAME,
    VERIFY_NAME,
    DRY_RUN_PROBLEMS_NAME,
    PICKS_NAME,
    DRY_RUN_PICKS_NAME,
    "street_analysis.parquet",
    "homes_with_street.parquet",
    "report.html",
)
