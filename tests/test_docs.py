"""The README and docs/outputs.md stay true to the code: schemas, rules, exit codes,
commands."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from batchval.contract.schemas import (
    PROBLEM_COLUMNS,
    PROBLEM_TAIL,
    RESULT_COLUMNS,
    RESULT_TAIL,
    ROW_NUMBER,
    SCHEMA_VERSION,
    markdown_table,
)
from batchval.engine.arrow import Column
from batchval.engine.charges_file import CHARGE_COLUMNS
from batchval.input import PROBLEM_RULES
from batchval.outcome import ExitCode, StopReason
from batchval.valuations.book import BOOK_KEYS

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
    """docs/outputs.md shows each file's fixed columns exactly as contract/schemas makes them:
    names, types and meanings, in order."""
    assert markdown_table(columns) in OUTPUTS


def test_book_table_is_the_schema() -> None:
    """docs/outputs.md shows the book's own columns exactly as valuations/book makes them."""
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


def _table_after(text: str, heading: str, first: str) -> dict[str, list[str]]:
    """The Markdown table that follows `heading` and whose header starts `| first |`: its
    rows by their first cell (backticks taken off), each with its other cells."""
    start = text.index(heading)
    lines = text[start:].splitlines()
    top = next(i for i, line in enumerate(lines) if line.startswith(f"| {first} |"))
    rows: dict[str, list[str]] = {}
    for line in lines[top + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        rows[cells[0].strip("`")] = cells[1:]
    return rows


def test_the_exit_code_table_is_the_codes() -> None:
    """The README's exit-code table has a row for every exit code, and no other."""
    table = _table_after(README, "### Exit codes", "code")
    assert sorted(table, key=int) == sorted(str(int(code)) for code in ExitCode)


def test_the_stop_reason_table_is_the_reasons() -> None:
    """The README's stop-reason table has a row for every reason, and no other, each with
    the exit code the reason gives."""
    table = _table_after(README, "reasons are stable words:", "reason")
    assert {reason: cells[0] for reason, cells in table.items()} == {
        reason.value: str(int(reason.exit_code)) for reason in StopReason
    }


def test_every_schema_version_the_readme_names_is_the_code_s() -> None:
    """Wherever the README names the output schema version (prose, a manifest example),
    it is the one the code writes."""
    named = re.findall(r"schema version (\d+)|\"schema_version\": \"(\d+)\"", README)
    assert named  # the check can see
    assert {a or b for a, b in named} == {SCHEMA_VERSION}


def test_set_up_commands_are_documented() -> None:
    """The two set-up commands are in the quick start."""
    assert "make run" in README
    assert "make test" in README


@pytest.mark.slow
def test_the_first_command_after_make_run_works_as_written(tmp_path: Path) -> None:
    """The quick start's first batchval command, run as written where `make run` left
    its run (make's own `run` recipe, in a copy of the checkout's layout)."""
    recipe = re.search(r"^run: .*\n\t(.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert recipe is not None
    after = README.split("batchval is then `.venv/bin/batchval`", 1)[1]
    block = re.search(r"```sh\n(.+?)\n```", after, re.DOTALL)
    assert block is not None
    command = block.group(1).splitlines()[0].split("#")[0].strip()
    assert command.startswith(".venv/bin/batchval ")
    for name in (".venv", "sample_inputs"):
        (tmp_path / name).symlink_to(ROOT / name)
    made = recipe.group(1).replace("$(BIN)", ".venv/bin")
    first = subprocess.run(made.split(), cwd=tmp_path, capture_output=True, text=True, check=False)
    assert first.returncode == 0, first.stderr
    done = subprocess.run(
        command.split(), cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "complete" in done.stdout


def test_charges_table_is_the_schema() -> None:
    """docs/outputs.md shows charges.parquet's columns exactly as engine/charges_file makes them."""
    assert "## charges.parquet" in OUTPUTS
    assert markdown_table(CHARGE_COLUMNS) in OUTPUTS
