"""The README and docs/outputs.md stay true to the code: schemas, rules, exit codes,
commands."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from batchval.input import PROBLEM_RULES
from batchval.outcome import ExitCode, StopReason
from batchval.output.arrow import Column
from batchval.output.book import BOOK_KEYS
from batchval.output.charges import CHARGE_COLUMNS
from batchval.output.schemas import (
    PROBLEM_COLUMNS,
    PROBLEM_TAIL,
    RESULT_COLUMNS,
    RESULT_TAIL,
    ROW_NUMBER,
    SCHEMA_VERSION,
    markdown_table,
)

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
# The output schemas' contract: the README sums it up and points there.
OUTPUTS = (ROOT / "docs" / "outputs.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("column", [*RESULT_COLUMNS, *PROBLEM_COLUMNS])
def test_every_output_column_is_documented(column: str) -> None:
    """Each column of results.parquet and problems.parquet has a row in docs/outputs.md."""
    assert f"| `{column}` |" in OUTPUTS


@pytest.mark.parametrize(
    "columns",
    [[ROW_NUMBER, *RESULT_TAIL], [ROW_NUMBER, *PROBLEM_TAIL]],
    ids=["results", "problems"],
)
def test_output_tables_are_the_schemas(columns: Sequence[Column[Any]]) -> None:
    """docs/outputs.md shows each file's fixed columns exactly as output/schemas makes them:
    names, types and meanings, in order."""
    assert markdown_table(columns) in OUTPUTS


def test_book_table_is_the_schema() -> None:
    """docs/outputs.md shows the book's own columns exactly as output/book makes them."""
    assert markdown_table(BOOK_KEYS) in OUTPUTS
    assert "## The book (`--book`)" in OUTPUTS


def test_output_schema_version_is_documented() -> None:
    """docs/outputs.md names the current schema version and says what changed in it."""
    assert f"## Schema version {SCHEMA_VERSION}, and what changed" in OUTPUTS
    assert f"\n| {SCHEMA_VERSION} | " in OUTPUTS


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


def test_charges_table_is_the_schema() -> None:
    """docs/outputs.md shows charges.parquet's columns exactly as output/charges makes them."""
    assert "## charges.parquet" in OUTPUTS
    assert markdown_table(CHARGE_COLUMNS) in OUTPUTS
