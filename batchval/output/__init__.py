"""The output stage: DIR's results.parquet and problems.parquet, written atomically
from the checkpoint, with a stable documented schema."""

from __future__ import annotations

from batchval.output.schemas import (
    PROBLEM_COLUMNS,
    RESULT_COLUMNS,
    SCHEMA_VERSION,
    passthrough_columns,
    problems_schema,
    results_schema,
)
from batchval.output.writer import write_problems, write_results

__all__ = [
    "PROBLEM_COLUMNS",
    "RESULT_COLUMNS",
    "SCHEMA_VERSION",
    "passthrough_columns",
    "problems_schema",
    "results_schema",
    "write_problems",
    "write_results",
]
