"""The README stays true to the code: schemas, rules, exit codes, commands."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchval.input import PROBLEM_RULES
from batchval.outcome import ExitCode, StopReason
from batchval.output.schemas import PROBLEM_COLUMNS, RESULT_COLUMNS

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("column", [*RESULT_COLUMNS, *PROBLEM_COLUMNS])
def test_every_output_column_is_documented(column: str) -> None:
    """Each column of results.parquet and problems.parquet has a row in the README."""
    assert f"| `{column}` |" in README


@pytest.mark.parametrize("rule", list(PROBLEM_RULES))
def test_every_input_rule_is_documented(rule: str) -> None:
    """Each validation rule is listed in the README."""
    assert f"| `{rule}` |" in README


@pytest.mark.parametrize("code", list(ExitCode))
def test_every_exit_code_is_documented(code: ExitCode) -> None:
    """Each exit code has a row in the README's table."""
    assert f"\n| {int(code)} |" in README


@pytest.mark.parametrize("reason", list(StopReason))
def test_every_stop_reason_is_documented(reason: StopReason) -> None:
    """Each stop reason has a row in the README's table, with its exit code."""
    assert f"| `{reason.value}` | {int(reason.exit_code)} |" in README


def test_set_up_commands_are_documented() -> None:
    """The two set-up commands are in the quick start."""
    assert "make run" in README
    assert "make test" in README
