"""`book.order: risk` (issue 56, part 3): once every loan of a book has been valued, a
night with too small a budget spends it on the stale loans with a revaluation trigger,
then on those whose LTV by the index is above the watched one, highest first, then on the
rest by balance x staleness; `--dry-run` lists the same picks the run then makes. Each
loan's class is computed here by hand from the book, the input and the index file."""

from __future__ import annotations

import csv
import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from support import InProcess, env_for, make_config
from test_index_run import POSTCODES, index_file, levels

from batchval._internal.sandbox.config import SandboxConfig
from batchval._internal.sandbox.market import local_authority
from batchval._internal.sandbox.server import RunningSandbox

LOANS = 36
BUDGET = 12


@pytest.fixture
def config() -> SandboxConfig:
    """Estimates indexed to June 2026 whatever the day, before the index's latest month."""
    config = make_config()
    config.figures_month = "2026-06"
    return config


def write_book(path: Path, lending: dict[str, tuple[float, float, dt.date]]) -> Path:
    """The loans, each with its balance, origination value and date (`lending`)."""
    with path.open("w", newline="", encoding="utf-8") as file:
        out = csv.writer(file)
        out.writerow(["loan_id", "postcode", "property_type", "bedrooms", "loan_balance",
                      "origination_value", "origination_date"])  # fmt: skip
        for n in range(LOANS):
            loan = f"L{n:02d}"
            balance, value, day = lending[loan]
            out.writerow([loan, POSTCODES[n % 6], "semi_detached", 1 + n // 6, f"{balance:.2f}",
                          f"{value:.2f}", day.isoformat()])  # fmt: skip
    return path


def test_a_risk_night_spends_its_budget_on_triggers_then_high_ltvs(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    today = dt.datetime.now(dt.UTC).date()
    index = index_file(tmp_path / "ukhpi.csv")
    config = tmp_path / "config.yaml"
    config.write_text(f"index:\n  source: ukhpi\n  file: {index}\n", encoding="utf-8")
    book = tmp_path / "book.parquet"
    source = tmp_path / "loans.csv"
    first = {
        f"L{n:02d}": (100_000.0, 150_000.0, today - dt.timedelta(days=400)) for n in range(LOANS)
    }
    args = ["--book", str(book), "--row-id", "loan_id", "--config", str(config)]
    night = batchval("run", str(write_book(source, first)), "--out", str(tmp_path / "1"), *args,
                     env=env_for(served))  # fmt: skip
    assert night.returncode == 0, night.stderr

    # Every loan valued: now give them balances and lender figures that make each class.
    entries = pl.read_parquet(book).select("identity", "estimate", "local_authority")
    estimate = dict(entries.select("identity", "estimate").iter_rows())
    lending: dict[str, tuple[float, float, dt.date]] = {}
    for n in range(LOANS):
        loan, worth = f"L{n:02d}", float(estimate[f"L{n:02d}"])
        share = ((0.35, 0.6, 0.82, 0.86, 0.93, 0.97)[n % 6] if n % 7 else 0.5) + n / 10_000
        value = worth * (1.25 if n % 5 == 0 else 0.8)  # a fall of 20 % since origination
        began = today - dt.timedelta(days=365 * 6 if n % 4 == 0 else 365 * 2)  # six years
        lending[loan] = (round(worth * share, 2), value, began)
    write_book(source, lending)
    # ... and make every entry stale, 40 days old.
    table = pq.read_table(book)
    at = table.schema.get_field_index("valued_at")
    older = pc.subtract(table.column("valued_at"), pa.scalar(dt.timedelta(days=40)))
    field = table.schema.field("valued_at")
    pq.write_table(table.set_column(at, field, older.cast(field.type)), book)

    # By hand: a trigger (the fall since origination above 10 %, or six years old), else
    # the LTV on the estimate rolled forward from June to September by the index.
    written = levels(index)
    authority = dict(entries.select("identity", "local_authority").iter_rows())
    expected: dict[str, str] = {}
    ltv: dict[str, Decimal] = {}
    for loan, (balance, value, began) in lending.items():
        valued = Decimal(estimate[loan])
        area = authority[loan]
        if (area, "2026-09") in written:
            rolled = valued * written[(area, "2026-09")] / written[(area, "2026-06")]
        else:  # not in the index (Cardiff): the balance over the estimate
            rolled = valued
        ltv[loan] = Decimal(str(balance)) / rolled
        fell = 1 - valued / Decimal(str(value)) > Decimal("0.1")
        old = began <= today - dt.timedelta(days=365 * 5 + 2)
        expected[loan] = (
            "trigger" if fell or old else "ltv_watch" if ltv[loan] > Decimal("0.8") else "stale"
        )
    assert {"trigger", "ltv_watch", "stale"} == set(expected.values())
    assert any(v > Decimal("0.9") for k, v in ltv.items() if expected[k] == "ltv_watch")
    assert local_authority("CF10 1AA") in authority.values()

    dry = tmp_path / "dry"
    priced = batchval("run", str(source), "--out", str(dry), *args, "--max-calls", str(BUDGET),
                      "--dry-run", env=env_for(served))  # fmt: skip
    assert priced.returncode == 0, priced.stderr
    picks = pl.read_parquet(dry / "picks.parquet").sort("position")
    assert dict(zip(picks["identity"], picks["reason"], strict=True)) == expected
    reasons = picks["reason"].to_list()
    tiers = ["trigger", "ltv_watch", "stale"]
    assert reasons == sorted(reasons, key=tiers.index)  # every trigger and high LTV first
    watched = picks.filter(pl.col("reason") == "ltv_watch")["identity"].to_list()
    assert watched == sorted(watched, key=lambda loan: -ltv[loan])  # highest first
    balances = {loan: figures[0] for loan, figures in lending.items()}
    triggered = picks.filter(pl.col("reason") == "trigger")["identity"].to_list()
    assert [balances[loan] for loan in triggered] == sorted(
        (balances[loan] for loan in triggered), reverse=True
    )
    assert picks["picked"].to_list() == [n < BUDGET for n in range(LOANS)]
    said = json.loads((dry / "dry_run.json").read_text(encoding="utf-8"))["book"]
    chosen = picks.filter("picked")["reason"].value_counts()
    assert {k: v for k, v in said["picks"].items() if v} == dict(chosen.rows())
    assert said["picks_file"] == "picks.parquet"

    # The night itself values the loans its dry run picked, and writes the same order.
    out = tmp_path / "2"
    done = batchval("run", str(source), "--out", str(out), *args, "--max-calls", str(BUDGET),
                    env=env_for(served))  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = pl.read_parquet(out / "results.parquet")
    sent = set(results.filter(pl.col("source") == "api")["loan_id"])
    assert sent == set(picks.filter("picked")["identity"])
    assert pl.read_parquet(out / "picks.parquet").equals(pl.read_parquet(dry / "picks.parquet"))


def test_the_order_is_a_setting_checked_before_anything(
    tmp_path: Path, batchval: InProcess
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("book:\n  order: newest\n", encoding="utf-8")
    done = batchval("run", "x.csv", "--out", str(tmp_path / "o"), "--config", str(config), env={})
    assert done.returncode == 64
    assert "book.order must be risk or staleness, not 'newest'" in done.stderr
    config.write_text("book:\n  ltv_watch: 0.9\n", encoding="utf-8")
    done = batchval("run", "x.csv", "--out", str(tmp_path / "o"), "--config", str(config), env={})
    assert done.returncode == 64
    assert "book.ltv_watch must be a list of LTVs above 0" in done.stderr
