"""The command line in this process with no API configured: the embedded sandbox, in test
mode (the MI extracts' tests, the revaluation's, the committee report's, the exports')."""

from __future__ import annotations

import os

from click.testing import CliRunner, Result
from support import ROOT

from batchval._internal.cli import cli

SAMPLES = ROOT / "sample_inputs"
# No API configured: the embedded sandbox, in test mode.
CLEAN_ENV: dict[str, str | None] = {k: None for k in os.environ if k.startswith("BATCHVAL_")}


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=CLEAN_ENV, catch_exceptions=False)
