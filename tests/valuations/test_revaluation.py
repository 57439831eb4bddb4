"""Revaluation triggers (issue 34): a loan's last valuation read, the fall since it and its
age, and the three flags of the lender's policy (by default the PRA's Basel 3.1 figures),
by hand at the edges and end to end on the sample book, in-process against the embedded
sandbox."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import openpyxl
import polars as pl
import pytest
from embedded_cli import SAMPLES, invoke

from batchval._internal.contract.lender import Revaluation, anniversary
from batchval._internal.input.lender import RevaluationPolicy, find_lender_columns
from batchval._internal.outcome import SettingsError
from batchval._internal.reports.report_lender import LOANS_LISTED
from batchval._internal.settings import load_settings

# Touches the calendar: `make test-dates` runs it at each hard instant (tests/clocks.py).
pytestmark = pytest.mark.dates

RULE = RevaluationPolicy()
AS_OF = dt.date(2026, 11, 27)
FIVE_YEARS_AGO = dt.date(2021, 11, 27)


def figures(
    estimate: float,
    balance: float | None,
    last: tuple[float | None, dt.date | None],
    origination: tuple[float | None, dt.date | None] = (None, None),
    policy: RevaluationPolicy = RULE,
) -> dict[str, Any]:
    return Revaluation(policy, AS_OF).figures(estimate, balance, last, origination)


def test_a_fall_of_exactly_ten_percent_is_not_more_than_ten() -> None:
    exactly = figures(90_000, 50_000, (100_000, AS_OF))
    assert exactly["fall_since_last_valuation"] == pytest.approx(0.10)
    assert exactly["trigger_fall"] is False
    assert figures(89_999, 50_000, (100_000, AS_OF))["trigger_fall"] is True
    # Exact in decimals where binary fractions are not: 1 - 270,000 / 300,000.
    assert figures(270_000, 50_000, (300_000, AS_OF))["trigger_fall"] is False
    assert figures(120_000, 50_000, (100_000, AS_OF))["fall_since_last_valuation"] == (
        pytest.approx(-0.2)
    )


def test_exactly_five_years_is_at_least_five() -> None:
    """Five years to the day (a leap day between): the anniversary is reached, though
    1,826 days / 365.25 is 4.9993 years."""
    five = figures(100_000, 50_000, (100_000, FIVE_YEARS_AGO))
    assert five["valuation_age_years"] == pytest.approx(1826 / 365.25)
    assert five["trigger_age"] is True
    day_short = figures(100_000, 50_000, (100_000, FIVE_YEARS_AGO + dt.timedelta(days=1)))
    assert day_short["trigger_age"] is False
    assert anniversary(dt.date(2020, 2, 29), 5) == dt.date(2025, 2, 28)


def test_a_balance_of_exactly_the_large_loan_limit_is_not_large() -> None:
    three_years = dt.date(2023, 11, 27)
    at_limit = figures(3_000_000, 2_600_000, (3_000_000, three_years))
    assert at_limit["trigger_large_loan_age"] is False
    above = figures(3_000_000, 2_600_000.01, (3_000_000, three_years))
    assert above["trigger_large_loan_age"] is True
    assert above["trigger_age"] is False  # three years: only the large loan's limb
    younger = figures(3_000_000, 2_600_000.01, (3_000_000, three_years + dt.timedelta(days=1)))
    assert younger["trigger_large_loan_age"] is False
    assert figures(3_000_000, None, (3_000_000, three_years))["trigger_large_loan_age"] is None
    no_date = figures(3_000_000, 2_700_000, (3_000_000, None))
    assert no_date["trigger_large_loan_age"] is None
    assert no_date["trigger_age"] is None


def test_the_origination_stands_in_and_says_so() -> None:
    began = dt.date(2015, 6, 1)
    stood_in = figures(150_000, 80_000, (None, None), (200_000, began))
    assert stood_in["revaluation_basis"] == "origination"
    assert stood_in["fall_since_last_valuation"] == pytest.approx(0.25)
    assert stood_in["trigger_fall"] is True
    assert stood_in["trigger_age"] is True
    last = figures(150_000, 80_000, (140_000, AS_OF), (200_000, began))
    assert last["revaluation_basis"] == "last_valuation"
    assert last["trigger_fall"] is False
    assert figures(150_000, 80_000, (None, None)) == {}


def test_another_policy_moves_the_flags() -> None:
    strict = RevaluationPolicy(fall_share=0.05, max_age_years=2.5, large_loan_balance=100_000)
    loan = figures(93_000, 150_000, (100_000, dt.date(2024, 5, 27)), policy=strict)
    assert loan["trigger_fall"] is True
    assert loan["trigger_age"] is True  # 30 months
    assert loan["trigger_large_loan_age"] is False  # three years not yet
    assert figures(93_000, 150_000, (100_000, dt.date(2024, 5, 27)))["trigger_fall"] is False


def test_the_usual_names_are_found() -> None:
    names = ["Loan Ref", "Latest Valuation", "Latest Valuation Date", "Current Balance"]
    found = find_lender_columns(names, {})
    assert found["last_valuation"] == "Latest Valuation"
    assert found["last_valuation_date"] == "Latest Valuation Date"


@pytest.mark.parametrize(
    ("policy", "said"),
    [
        ({"fall_share": 1.5}, "below 1"),
        ({"max_age_years": 0}, "above 0"),
        ({"large_loan_balance": "2.6m"}, "above 0"),
        ({"years": 5}, "lender.revaluation takes"),
        ([0.1], "must be a mapping"),
    ],
)
def test_a_policy_that_cannot_be_is_refused(tmp_path: Path, policy: Any, said: str) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(json.dumps({"lender": {"revaluation": policy}}))
    with pytest.raises(SettingsError, match=said):
        load_settings(config, {})


def expected(results: pl.DataFrame, policy: RevaluationPolicy, as_of: dt.date) -> pl.DataFrame:
    """The figures the rule gives, computed here from the sample's text as the lender
    wrote it (pound signs, UK dates) and the estimates of `results`, in its order."""
    book = pl.read_csv(SAMPLES / "revaluation_book.csv", infer_schema=False)
    book = results.select("Loan Ref", "estimate").join(book, on="Loan Ref", how="left")
    last = pl.col("Last Valuation").str.replace_all("[£,]", "").cast(pl.Float64)
    first = pl.col("Original Valuation").str.replace_all("[£,]", "").cast(pl.Float64)
    balance = pl.col("Current Balance").str.replace_all("[£,]", "").cast(pl.Float64)
    last_day = pl.col("Last Valuation Date").str.to_date("%d/%m/%Y", strict=False)
    first_day = pl.col("Completion Date").str.to_date("%d/%m/%Y", strict=False)
    has_last = last.is_not_null() | last_day.is_not_null()
    value = pl.when(has_last).then(last).otherwise(first)
    day = pl.when(has_last).then(last_day).otherwise(first_day)
    frame = book.select(
        "Loan Ref",
        "estimate",
        value.alias("value"),
        day.alias("day"),
        balance.alias("balance"),
        pl.when(has_last).then(pl.lit("last_valuation")).otherwise(pl.lit("origination")),
    )
    rows = []
    for loan, estimate, value_, day_, balance_, basis in frame.iter_rows():
        age_years = (as_of - day_).days / 365.25
        anniversary_ = dt.date(day_.year + int(policy.max_age_years), day_.month, day_.day)
        large_by = dt.date(day_.year + int(policy.large_loan_max_age_years), day_.month, day_.day)
        rows.append(
            {
                "Loan Ref": loan,
                "revaluation_basis": basis,
                "fall_since_last_valuation": 1 - estimate / value_,
                "valuation_age_years": age_years,
                "trigger_fall": (value_ - estimate) / value_ > policy.fall_share,
                "trigger_age": as_of >= anniversary_,
                "trigger_large_loan_age": None  # no balance: not known to be large
                if balance_ is None
                else balance_ > policy.large_loan_balance and as_of >= large_by,
            }
        )
    return pl.DataFrame(rows)


TRIGGER_COLUMNS = [
    "Loan Ref",
    "revaluation_basis",
    "fall_since_last_valuation",
    "valuation_age_years",
    "trigger_fall",
    "trigger_age",
    "trigger_large_loan_age",
]


@pytest.mark.parametrize(
    "policy",
    [{}, {"fall_share": 0.25, "max_age_years": 2, "large_loan_balance": 1_000_000}],
    ids=["the rule", "a lender's policy"],
)
def test_the_sample_book_is_flagged_counted_listed_and_exported(
    tmp_path: Path, samples: Any, policy: dict[str, Any]
) -> None:
    """Every loan's figures and flags as the rule says (with other values: the flags
    follow), counted in summary.json, listed in the report and exported."""
    config = tmp_path / "policy.yaml"
    config.write_text(json.dumps({"lender": {"revaluation": policy}}))
    out = tmp_path / "out"
    book = str(SAMPLES / "revaluation_book.csv")
    ran = invoke("run", book, "--config", str(config), "--out", str(out))
    assert ran.exit_code == 0, ran.output
    results = pl.read_parquet(out / "results.parquet")
    assert results.height == samples.REVALUATION_LOANS
    as_of = results.get_column("valued_at").max()
    assert isinstance(as_of, dt.datetime)
    rule = RevaluationPolicy(**policy)
    want = expected(results, rule, as_of.date())
    got = results.select(TRIGGER_COLUMNS)
    assert got.select(pl.exclude(r"^.*_years$|^fall.*$")).equals(
        want.select(pl.exclude(r"^.*_years$|^fall.*$"))
    )
    for name in ("fall_since_last_valuation", "valuation_age_years"):
        assert got.get_column(name).to_list() == pytest.approx(want.get_column(name).to_list())
    bases = got.get_column("revaluation_basis").value_counts().rows()
    assert dict(bases)["origination"] == len(samples.REVALUATION_UNKNOWN)
    summary = json.loads((out / "summary.json").read_text())["portfolio"]["revaluation"]
    assert summary["policy"] == rule.to_json()
    for name in ("fall", "age", "large_loan_age"):
        assert summary[name]["loans"] == int(want.get_column(f"trigger_{name}").sum())
    assert invoke("report", str(out)).exit_code == 0
    page = (out / "report.html").read_text(encoding="utf-8")
    section = page[page.index("Revaluation triggers") :]
    for loan in want.filter(pl.col("trigger_large_loan_age")).get_column("Loan Ref"):
        assert f"<td>{loan}</td>" in section
    assert "not a qualifying valuation" in section
    # The estimate against the last valuation is a change, signed: a rise reads as a rise.
    assert "<th>change since</th>" in section
    assert "fall since" not in section
    listed = (
        want.filter(pl.col("trigger_age"))
        .sort("valuation_age_years", descending=True, nulls_last=True)
        .head(LOANS_LISTED)
        .get_column("fall_since_last_valuation")
        .to_list()
    )
    for fall in listed:
        shown = "–" if fall is None else f"{-fall * 100:+,.1f} %".replace("+0.0 ", "0.0 ")
        assert f"<td>{shown}</td>" in section, fall
    assert invoke("export", str(out), "--format", "xlsx").exit_code == 0
    sheet = openpyxl.load_workbook(out / "results.xlsx").active
    assert sheet is not None
    headers = [cell.value for cell in sheet[1]]
    formats = {h: sheet.cell(2, i + 1).number_format for i, h in enumerate(headers)}
    assert "£" in formats["Last Valuation"]
    assert "%" in formats["fall_since_last_valuation"]
    assert "£" not in formats["valuation_age_years"]
    assert formats["Last Valuation Date"] == "dd/mm/yyyy"


def test_a_books_carried_loans_are_flagged_as_of_tonight(tmp_path: Path) -> None:
    """A --book night carries loans valued on an earlier night: their triggers are made
    again tonight, by tonight's policy (a loan's valuation turns five on a later night)."""
    book, first = str(SAMPLES / "revaluation_book.csv"), tmp_path / "night1"
    common = ["--book", str(tmp_path / "book.parquet"), "--row-id", "Loan Ref"]
    ran = invoke("run", book, "--out", str(first), *common, "--max-calls", "50")
    assert ran.exit_code == 0, ran.output
    strict = tmp_path / "strict.yaml"
    strict.write_text(json.dumps({"lender": {"revaluation": {"max_age_years": 1}}}))
    second = tmp_path / "night2"
    ran = invoke(
        "run", book, "--out", str(second), *common, "--max-calls", "0", "--config", str(strict)
    )
    assert ran.exit_code == 0, ran.output
    results = pl.read_parquet(second / "results.parquet")
    carried = results.filter(pl.col("source") == "book")
    assert carried.height == 50
    # The run's own date (the UTC day it started on), not the test's clock after it.
    started = json.loads((second / "summary.json").read_text())["started_at"]
    as_of = dt.datetime.fromisoformat(started).astimezone(dt.UTC).date()
    want = expected(carried, RevaluationPolicy(max_age_years=1), as_of)
    assert carried.get_column("trigger_age").to_list() == want.get_column("trigger_age").to_list()
    before = pl.read_parquet(first / "results.parquet").filter(pl.col("source") == "api")
    assert int(carried.get_column("trigger_age").sum()) > int(
        before.get_column("trigger_age").sum()
    )
    book_counts = json.loads((second / "summary.json").read_text())["book"]["portfolio"]
    assert book_counts["revaluation"]["age"]["loans"] == int(
        carried.get_column("trigger_age").sum()
    )
