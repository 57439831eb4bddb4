"""A lender's own book, the first time (issue 24): the three forms of
sample_inputs/lender_book.* valued with a config that names only the postcode, type and
bedroom columns. Every row whose wording batchval reads is sent; the ambiguous ones are
problems that say what to send; money and dates are read as numbers and dates."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest
from support import ROOT, InProcess, assert_paid_once, env_for, outputs

from batchval._internal.sandbox.server import RunningSandbox

pytestmark = [pytest.mark.slow, pytest.mark.dates]

SAMPLES = ROOT / "sample_inputs"
AMBIGUOUS = {"Bungalow", "Park Home", "O"}  # Bungalow with no built form
NAMED_ONLY = (
    "input:\n  columns: {postcode: Property Postcode, propertyType: Prop Type, bedrooms: Beds}\n"
)


def _expected() -> tuple[int, int]:
    book = pl.read_csv(SAMPLES / "lender_book.csv", infer_schema=False)
    ambiguous = book.filter(
        pl.col("Prop Type").is_in(["Park Home", "O"])
        | ((pl.col("Prop Type") == "Bungalow") & pl.col("Built Form").is_null())
    ).height
    return book.height - ambiguous, ambiguous


@pytest.mark.parametrize("name", ["lender_book.csv", "lender_book.xlsx", "lender_book_windows.csv"])
def test_a_lenders_book_values_with_only_three_columns_named(
    served: RunningSandbox, tmp_path: Path, name: str, batchval: InProcess
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(NAMED_ONLY, encoding="utf-8")
    out = tmp_path / "out"
    done = batchval(
        "run", str(SAMPLES / name), "--out", str(out), "--config", str(config),
        env=env_for(served),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    results, problems, summary = outputs(out)
    valued, ambiguous = _expected()
    assert (results.height, problems.height) == (valued, ambiguous)
    assert set(problems["type"].to_list()) == {"ambiguous_value"}
    assert set(problems["Loan Ref"].to_list()) <= set(
        pl.read_csv(SAMPLES / "lender_book.csv")["Loan Ref"].to_list()
    )
    assert results.schema["Current Balance"] == pl.Float64
    assert results.schema["Completion Date"] == pl.Date
    assert results["months_since_origination"].null_count() == 0
    assert results["indexed_ltv"].null_count() == 0
    # End Terrace House sends both fields.
    end_terrace = results.filter(pl.col("built_form") == "end_terrace")
    assert end_terrace.height > 0
    assert set(end_terrace["input_property_type"].to_list()) <= {"terraced", "flat"}
    assert summary["portfolio"]["mean_months_since_origination"] > 0
    assert_paid_once(served, out)
    first = results.sort("row_number").row(0, named=True)
    assert isinstance(first["Completion Date"], dt.date)
