"""Lender outputs (contract/lender): loan-to-value, bands, flags and the portfolio totals,
by the arithmetic alone and through `batchval run` against the served sandbox."""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from api_bodies import valuation_body
from support import InProcess, env_for, outputs, run_in_process

from batchval._internal.api.models import Valuation
from batchval._internal.contract.lender import (
    FLAGS,
    LenderFigures,
    Lending,
    amounts,
    dates,
    model_builds,
    months_between,
    months_since,
)
from batchval._internal.input.lender import LenderOptions
from batchval._internal.sandbox.server import RunningSandbox

# Touches the calendar: `make test-dates` runs it at each hard instant (tests/clocks.py).
pytestmark = pytest.mark.dates

LENDER_COLUMNS = [
    "indexed_ltv",
    "ltv_low_estimate",
    "ltv_band",
    "change_since_origination",
    *FLAGS,
]
AS_OF = dt.date(2026, 11, 23)
POSTCODES = ["SW1A 2AA", "M1 1AE", "LS6 2AB", "CF10 1AA", "BS1 4DJ", "NE1 7RU"]


def valuation(
    estimate: int = 100_000,
    low: int = 90_000,
    high: int = 110_000,
    *,
    quality: str = "full",
    indexed_to: str | None = "2026-09",
    version: str = "2024-11-04T09:30:00Z",
) -> Valuation:
    body = valuation_body(
        "val_" + "0" * 26,
        estimate=estimate,
        low=low,
        high=high,
        coverage=0.85,
        indexed_to=indexed_to,
        quality=quality,
        model_version=version,
        echo={"propertyType": "flat", "floorAreaSqm": 60.0},
    )
    return Valuation.from_json(body)


def lending(options: LenderOptions | None = None, **kwargs: Any) -> Lending:
    columns = {"loan_balance": 0, "origination_value": 1}
    return Lending(columns, options or LenderOptions(), as_of=AS_OF, **kwargs)


def figures(balance: float | None, origination: float | None = None, **given: Any) -> LenderFigures:
    return lending().figures(valuation(**given), balance, origination)


# --- the arithmetic ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("balance", "band"),
    [
        (0, "0-60"),
        (60_000, "0-60"),
        (60_001, "60-75"),
        (75_000, "60-75"),
        (75_000.01, "75-80"),
        (80_000, "75-80"),
        (95_000, "90-95"),
        (100_000, "95-100"),
        (100_001, "over 100"),
        (250_000, "over 100"),
    ],
)
def test_band_holds_its_upper_edge(balance: float, band: str) -> None:
    """A band holds its upper edge, not its lower one: exactly 60 % is 0-60, above is 60-75."""
    assert figures(balance, estimate=100_000).ltv_band == band


def test_bands_come_from_the_config() -> None:
    """Configured edges give their own labels and bands, edges included the same way."""
    options = LenderOptions(ltv_bands=(50, 80.5))
    assert options.band_labels == ("0-50", "50-80.5", "over 80.5")
    row = lending(options)
    assert row.figures(valuation(estimate=200_000), 161_000, None).ltv_band == "50-80.5"
    assert row.figures(valuation(estimate=200_000), 161_001, None).ltv_band == "over 80.5"


def test_ltvs_and_change_are_the_ratios() -> None:
    """indexed_ltv = balance/estimate, ltv_low_estimate = balance/low, change = est/orig - 1."""
    found = figures(150_000, 120_000, estimate=200_000, low=180_000, high=230_000)
    assert found.indexed_ltv == 150_000 / 200_000
    assert found.ltv_low_estimate == 150_000 / 180_000
    assert found.change_since_origination == 200_000 / 120_000 - 1
    assert found.balance == 150_000


@pytest.mark.parametrize(
    ("balance", "origination", "given", "nulls"),
    [
        (None, None, {}, {"indexed_ltv", "ltv_low_estimate", "ltv_band", "change"}),
        (100_000, 0, {}, {"change"}),
        (
            100_000,
            50_000,
            {"estimate": 0, "low": 0},
            {"indexed_ltv", "ltv_low_estimate", "ltv_band", "change"},
        ),
        (100_000, 50_000, {"low": 0}, {"ltv_low_estimate"}),
        (
            100_000,
            50_000,
            {"estimate": -5, "low": -10},
            {"indexed_ltv", "ltv_low_estimate", "ltv_band", "change"},
        ),
    ],
)
def test_never_divides_by_zero(
    balance: float | None, origination: float | None, given: dict[str, Any], nulls: set[str]
) -> None:
    """A missing input or a divisor not above 0 gives null, never a division by zero."""
    found = figures(balance, origination, **given)
    values = {
        "indexed_ltv": found.indexed_ltv,
        "ltv_low_estimate": found.ltv_low_estimate,
        "ltv_band": found.ltv_band,
        "change": found.change_since_origination,
    }
    assert {name for name, value in values.items() if value is None} == nulls


def test_zero_balance_is_an_ltv_of_zero() -> None:
    """A balance of 0 (a loan paid off) gives LTV 0 and the lowest band."""
    found = figures(0)
    assert (found.indexed_ltv, found.ltv_low_estimate, found.ltv_band) == (0.0, 0.0, "0-60")


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (pa.array([100, None, -1, 0], pa.int64()), [100.0, None, None, 0.0]),
        (pa.array([1.5, float("nan"), float("inf")]), [1.5, None, None]),
        (
            pa.array([decimal.Decimal("120000.50"), None], pa.decimal128(12, 2)),
            [120000.5, None],
        ),
        (
            pa.array(["£120,000.50", " 95000 ", "n/a", "", None]),
            [120000.5, 95000.0, None, None, None],
        ),
        (pa.array([True, False]), [None, None]),
    ],
)
def test_amounts_read_numbers_in_any_type(values: pa.Array, expected: list[float | None]) -> None:
    """Balances are read from numbers, decimals and number-like text; the rest is no value."""
    assert amounts(values) == expected


def test_flags_from_the_answer() -> None:
    """partial_data from dataQuality, wide_range above the threshold (strictly)."""
    assert figures(1, quality="partial").partial_data is True
    assert figures(1, quality="full").partial_data is False
    # (130,000 - 100,000) / 100,000 = 0.3: not above 0.3
    assert figures(1, low=100_000, high=130_000, estimate=100_000).wide_range is False
    assert figures(1, low=100_000, high=130_001, estimate=100_000).wide_range is True
    strict = lending(LenderOptions(wide_range=0.1))
    assert strict.figures(valuation(low=94_000, high=105_000), 1, None).wide_range is True


@pytest.mark.parametrize(
    ("month", "stale"),
    [("2026-09", False), ("2026-05", False), ("2026-04", True), ("2025-12", True), (None, None)],
)
def test_stale_index_counts_months_back_from_the_run(month: str | None, stale: bool | None) -> None:
    """indexedTo more than 6 months before the run's month is stale; absent is unknown."""
    assert figures(1, indexed_to=month).stale_index is stale


def test_months_between() -> None:
    """Calendar months from a YYYY-MM month to a date's month; None for a bad month."""
    assert months_between("2026-05", AS_OF) == 6
    assert months_between("2025-11", AS_OF) == 12
    assert months_between("2026-13", AS_OF) is None
    assert months_between("soon", AS_OF) is None


def test_model_changed_needs_two_builds() -> None:
    """One build however written is no change; a second build flags every row."""
    same = ["2024-11-04T09:30:00Z", "2024-11-04T09:30:00+00:00", "2024-11-04T09:30:00"]
    assert len(model_builds(same)) == 1
    assert lending(model_versions=same).figures(valuation(), 1, None).model_changed is False
    two = [*same, "2025-02-01T08:00:00Z"]
    assert lending(model_versions=two).figures(valuation(), 1, None).model_changed is True


def test_portfolio_counts_each_row_as_a_loan() -> None:
    """Rows sharing a valuation each count; rows without a balance are left out."""
    row = lending()
    same = valuation(estimate=200_000, quality="partial")
    balances = pa.array([100_000, 150_000, None], pa.int64())
    row.batch([same, same, same], [balances, pa.array([None, None, None], pa.int64())])
    assert row.portfolio is not None
    totals = row.portfolio.to_json()
    assert (totals["rows"], totals["rows_left_out"]) == (2, 1)
    assert (totals["sum_balance"], totals["sum_estimate"]) == (250_000, 400_000)
    assert totals["aggregate_ltv"] == 250_000 / 400_000
    weighted = (100_000 * 0.5 + 150_000 * 0.75) / 250_000
    assert totals["weighted_ltv"] == pytest.approx(weighted)
    bands = {b["band"]: (b["rows"], b["balance"]) for b in totals["ltv_bands"]}
    assert bands["0-60"] == (1, 100_000)
    assert bands["60-75"] == (1, 150_000)
    assert totals["by_local_authority"] == {"E09000033": {"rows": 2, "balance": 250_000}}
    assert totals["flags"]["partial_data"] == 2


def test_no_lender_columns_no_lending() -> None:
    """An input with no balance, origination value or date gets no lender figures; a
    date alone gives the months since origination, the revaluation figures (the
    origination standing in for a last valuation) and the flags."""
    schema = pa.schema([("loan_id", pa.string())])
    assert Lending.for_write(schema, {}, LenderOptions(), as_of=AS_OF) is None
    dated = schema.append(pa.field("origination_date", pa.date32()))
    aged = Lending.for_write(dated, {}, LenderOptions(), as_of=AS_OF)
    assert aged is not None
    assert aged.asks == {"lender", "origination_date", "revaluation"}
    schema = schema.append(pa.field("origination_date", pa.string()))
    with_balance = schema.append(pa.field("Loan Balance", pa.int64()))
    found = Lending.for_write(with_balance, {}, LenderOptions(), as_of=AS_OF)
    assert found is not None
    assert found.portfolio is not None


# --- through `batchval run` ---------------------------------------------------------------


def book(path: Path, rows: int, *, balance: str = "loan_balance") -> Path:
    """A mortgage book: every other row with full details (dataQuality full), the rest
    bedrooms only (partial); the last two rows repeat the first two's requests; row 3
    has no balance and row 4 a balance of 0."""
    with path.open("w", newline="", encoding="utf-8") as stream:
        out = csv.writer(stream)
        out.writerow(
            [
                "loan_id",
                "postcode",
                "property_type",
                "bedrooms",
                "floor_area_sqm",
                "year_built",
                "built_form",
                "walls_energy_efficiency",
                balance,
                "origination_value",
            ]
        )
        for n in range(rows):
            m = n if n < rows - 2 else n - (rows - 2)
            full = m % 2 == 0
            details = [70 + 5 * m, 1930 + m, "mid_terrace", "good"] if full else ["", "", "", ""]
            amount = "" if n == 2 else "0" if n == 3 else str(40_000 + 23_500 * n)
            out.writerow(
                [
                    f"LN-{n:05d}",
                    POSTCODES[m % 6],
                    "terraced",
                    1 + m % 4,
                    *details,
                    amount,
                    150_000 + 1_000 * n,
                ]
            )
    return path


def expected_band(ltv_percent_edges: Sequence[float], balance: float, estimate: int) -> str:
    labels = LenderOptions(ltv_bands=tuple(ltv_percent_edges)).band_labels
    for edge, label in zip(ltv_percent_edges, labels, strict=False):
        if balance * 100 <= edge * estimate:
            return label
    return labels[-1]


@pytest.mark.slow
def test_ltv_and_portfolio_through_a_run(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """Every valued row's indexed_ltv is balance / estimate; the summary's portfolio LTVs
    match the formulas recomputed from results.parquet; duplicates count as loans."""
    source = book(tmp_path / "book.csv", 14)
    out = tmp_path / "out"
    done = batchval("run", str(source), "--out", str(out), env=env_for(served))
    assert done.returncode == 0, done.stderr
    results, _, summary = outputs(out)
    assert results.height == 14
    assert set(LENDER_COLUMNS) <= set(results.columns)
    assert results.schema["loan_balance"] == pl.Int64  # still a pass-through, typed
    with_balance = results.filter(pl.col("loan_balance").is_not_null())
    assert with_balance.height == 13
    assert (
        with_balance["indexed_ltv"] == with_balance["loan_balance"] / with_balance["estimate"]
    ).all()
    assert (
        with_balance["ltv_low_estimate"] == with_balance["loan_balance"] / with_balance["range_low"]
    ).all()
    assert results.filter(pl.col("loan_balance").is_null())["indexed_ltv"].to_list() == [None]
    change = results["estimate"] / results["origination_value"] - 1
    assert (results["change_since_origination"] - change).abs().max() < 1e-12  # type: ignore[operator]
    edges = [60, 75, 80, 85, 90, 95, 100]
    assert with_balance["ltv_band"].to_list() == [
        expected_band(edges, b, e)
        for b, e in zip(with_balance["loan_balance"], with_balance["estimate"], strict=True)
    ]
    assert results["partial_data"].to_list() == [q != "full" for q in results["data_quality"]]
    assert set(results["partial_data"]) == {True, False}  # rows without details are partial

    portfolio = summary["portfolio"]
    balance = pl.col("loan_balance")
    recomputed = with_balance.select(
        balance=balance.sum(),
        estimate=pl.col("estimate").sum(),
        weighted=(balance * pl.col("indexed_ltv")).sum() / balance.sum(),
        aggregate=balance.sum() / pl.col("estimate").sum(),
    ).row(0, named=True)
    assert portfolio["rows"] == 13
    assert portfolio["rows_left_out"] == 1
    assert portfolio["sum_balance"] == recomputed["balance"]
    assert portfolio["sum_estimate"] == recomputed["estimate"]
    assert portfolio["weighted_ltv"] == pytest.approx(recomputed["weighted"], rel=1e-12)
    assert portfolio["aggregate_ltv"] == pytest.approx(recomputed["aggregate"], rel=1e-12)
    bands = with_balance.group_by("ltv_band").agg(pl.len(), pl.col("loan_balance").sum())
    counted = {b["band"]: (b["rows"], b["balance"]) for b in portfolio["ltv_bands"] if b["rows"]}
    assert counted == {r["ltv_band"]: (r["len"], r["loan_balance"]) for r in bands.to_dicts()}
    areas = with_balance.group_by("local_authority").agg(pl.len())
    assert {k: v["rows"] for k, v in portfolio["by_local_authority"].items()} == dict(
        areas.iter_rows()
    )
    assert portfolio["flags"]["partial_data"] == with_balance["partial_data"].sum()
    assert "portfolio: 13 loans" in done.stdout


@pytest.mark.slow
def test_mapped_balance_and_configured_threshold(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A column `balance` mapped to loan_balance in the config gives the LTVs; the config's
    wide_range threshold decides the flag; the mapped column stays a pass-through."""
    source = book(tmp_path / "book.csv", 10, balance="balance")
    config = tmp_path / "config.yaml"
    config.write_text(
        "input:\n  columns:\n    loan_balance: balance\nlender:\n  wide_range: 0.15\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    args = ["run", str(source), "--out", str(out), "--config", str(config)]
    done = batchval(*args, env=env_for(served))
    assert done.returncode == 0, done.stderr
    results, _, summary = outputs(out)
    assert "balance" in results.columns
    assert "loan_balance" not in results.columns
    valued = results.filter(pl.col("balance").is_not_null())
    assert (valued["indexed_ltv"] == valued["balance"] / valued["estimate"]).all()
    width = (results["range_high"] - results["range_low"]) / results["estimate"]
    assert results["wide_range"].to_list() == (width > 0.15).to_list()
    assert set(results["wide_range"]) == {True, False}
    assert summary["portfolio"]["flags"]["wide_range"] == valued["wide_range"].sum()


@pytest.mark.slow
def test_stale_index_uses_the_runs_date(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """Run eight months after the sandbox's today, every indexedTo (two months back there)
    is more than six months old: stale on every row."""
    source = book(tmp_path / "book.csv", 4)
    out = tmp_path / "out"
    later = str(240 * 86_400)
    done = batchval(
        "run",
        str(source),
        "--out",
        str(out),
        env=env_for(served, BATCHVAL_CLOCK_OFFSET_SECONDS=later),
    )
    assert done.returncode == 0, done.stderr
    results, _, summary = outputs(out)
    assert results["stale_index"].to_list() == [True] * 4
    assert summary["portfolio"]["flags"]["stale_index"] == 3  # the row without a balance is out
    assert results["model_changed"].to_list() == [False] * 4  # the sandbox has one model


@pytest.mark.slow
def test_no_lender_columns_without_a_balance(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """An input with a loan id but no balance or origination value has no lender columns
    and a null portfolio."""
    source = tmp_path / "book.csv"
    source.write_text(
        "loan_id,postcode,property_type,bedrooms\nLN-1,SW1A 2AA,flat,2\n", encoding="utf-8"
    )
    out = tmp_path / "out"
    done = batchval("run", str(source), "--out", str(out), env=env_for(served))
    assert done.returncode == 0, done.stderr
    results, _, summary = outputs(out)
    assert not set(LENDER_COLUMNS) & set(results.columns)
    assert summary["portfolio"] is None
    assert json.loads((out / "summary.json").read_text())["portfolio"] is None


@pytest.mark.slow
def test_sample_mortgage_book(served: RunningSandbox, tmp_path: Path, batchval: InProcess) -> None:
    """sample_inputs/mortgage_book.csv values with its lender figures: every valued row
    but the two without a balance is in the portfolio."""
    source = Path(__file__).resolve().parents[2] / "sample_inputs" / "mortgage_book.csv"
    out = tmp_path / "out"
    done = batchval("run", str(source), "--out", str(out), env=env_for(served))
    assert done.returncode == 0, done.stderr
    results, _, summary = outputs(out)
    counted = results.filter(pl.col("indexed_ltv").is_not_null()).height
    assert summary["portfolio"]["rows"] == counted == results.height - 2
    assert summary["portfolio"]["rows_left_out"] == 2
    assert results.filter(pl.col("loan_balance") == 0)["indexed_ltv"].to_list() == [0.0, 0.0]


@pytest.mark.parametrize(
    ("origination", "months"),
    [
        (dt.date(2019, 3, 15), 7 * 12 + 8),  # to 23 November 2026
        (dt.date(2026, 10, 23), 1),
        (dt.date(2026, 10, 24), 0),
        (dt.date(2026, 11, 23), 0),
        (dt.date(2026, 11, 24), None),  # after the run's date
        (None, None),
    ],
)
def test_months_since_origination_are_whole_months(
    origination: dt.date | None, months: int | None
) -> None:
    assert months_since(origination, AS_OF) == months


def test_dates_are_read_from_dates_timestamps_and_iso_text() -> None:
    assert dates(pa.array([dt.date(2019, 3, 15), None])) == [dt.date(2019, 3, 15), None]
    stamps = pa.array([dt.datetime(2019, 3, 15, 10, 30)], pa.timestamp("ms"))
    assert dates(stamps) == [dt.date(2019, 3, 15)]
    assert dates(pa.array(["2019-03-15", "15/03/2019", None])) == [dt.date(2019, 3, 15), None, None]


def test_a_short_passthrough_list_keeps_the_figures(
    served: RunningSandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`passthrough: [Account No]` on a book with `Current Balance`, `Original Valuation`
    and `Completion Date`: every valued row has its LTV, band and months since origination,
    the portfolio is summed, and the lender columns follow the listed one in the outputs."""
    source = tmp_path / "book.csv"
    with source.open("w", newline="", encoding="utf-8") as stream:
        out = csv.writer(stream)
        out.writerow(
            [
                "Account No",
                "Post Code",
                "Prop Type",
                "Beds",
                "Completion Date",
                "Current Balance",
                "Original Valuation",
                "Notes",
            ]
        )
        for n, postcode in enumerate(POSTCODES):
            out.writerow(
                [f"A{n:03d}", postcode, "terraced", 2 + n % 3, "15/03/2019", "£120,000", "", "x"]
            )
    config = tmp_path / "config.yaml"
    config.write_text(
        "input:\n  columns: {postcode: Post Code, propertyType: Prop Type, bedrooms: Beds}\n"
        "  passthrough: [Account No]\n",
        encoding="utf-8",
    )
    out_dir = tmp_path / "out"
    args = ("run", str(source), "--config", str(config), "--out", str(out_dir))
    code, _, stderr = run_in_process(
        *args, env=env_for(served), monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 0, stderr
    results, problems, summary = outputs(out_dir)
    assert results.height == len(POSTCODES)
    listed = ["Account No", "Completion Date", "Current Balance", "Original Valuation"]
    for columns in (results.columns, problems.columns):
        first = columns.index("Account No")
        assert columns[first : first + 4] == listed
    assert "Notes" not in results.columns
    assert (results["indexed_ltv"] == 120_000 / results["estimate"]).all()
    assert results["ltv_band"].is_not_null().all()
    assert results["months_since_origination"].is_not_null().all()
    assert summary["portfolio"]["rows"] == len(POSTCODES)
    assert summary["portfolio"]["sum_balance"] == 120_000 * len(POSTCODES)
