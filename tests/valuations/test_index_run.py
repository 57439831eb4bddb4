"""`run` with `index.source: ukhpi` (issue 55, in part): results.parquet gains the index
columns, each loan's value computed here again by hand from the index file's own text;
a file that cannot be used stops the run before any call (65); without the section the
results are as before."""

from __future__ import annotations

import csv
import dataclasses
import json
import stat
import statistics
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest
import ukhpi
from support import ROOT, InProcess, env_for, make_config

import batchval
from batchval._internal.contract.indexation import INDEX_COLUMNS
from batchval._internal.sandbox.config import SandboxConfig
from batchval._internal.sandbox.market import local_authority
from batchval._internal.sandbox.server import RunningSandbox

SAMPLES = ROOT / "sample_inputs"
POSTCODES = ["SW1A 2AA", "M1 1AE", "LS6 2AB", "CF10 1AA", "BS1 4DJ", "NE1 7RU"]


@pytest.fixture
def config() -> SandboxConfig:
    """The tests' sandbox, its figures as of June 2026 whatever the day: every estimate
    is indexed to a month before the index file's latest."""
    config = make_config()
    config.figures_month = "2026-06"
    return config


def book(path: Path) -> Path:
    """Loans with a balance and an origination value and date, one postcode not indexed."""
    with path.open("w", newline="", encoding="utf-8") as file:
        out = csv.writer(file)
        out.writerow(["loan_id", "postcode", "property_type", "bedrooms", "loan_balance",
                      "origination_value", "origination_date"])  # fmt: skip
        for n, postcode in enumerate(POSTCODES * 3):
            out.writerow([f"L{n}", postcode, "semi_detached", 1 + n % 5, 100_000 + n,
                          150_000 + 1000 * n, f"{2015 + n % 8}-0{1 + n % 9}-15"])  # fmt: skip
    return path


def index_file(path: Path) -> Path:
    """An index for every authority of the book but Cardiff's, 2015-01 to 2026-09, each
    month a known figure: 60 + area number + 0.37 a month, to two decimals."""
    areas = sorted({local_authority(p) for p in POSTCODES if not p.startswith("CF")})
    lines = ["Date,RegionName,AreaCode,Index,AveragePrice"]
    for number, area in enumerate(areas):
        for month in range(12 * 11 + 9):
            year, moy = 2015 + month // 12, month % 12 + 1
            lines.append(
                f"01/{moy:02d}/{year},Area {number},{area},{60 + number + 0.37 * month:.2f},1"
            )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def levels(path: Path) -> dict[tuple[str, str], Decimal]:
    with path.open(encoding="utf-8", newline="") as file:
        rows = list(csv.DictReader(file))
    return {(r["AreaCode"], f"{r['Date'][6:]}-{r['Date'][3:5]}"): Decimal(r["Index"]) for r in rows}


def index_config(tmp_path: Path, index: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(f"index:\n  source: ukhpi\n  file: {index}\n", encoding="utf-8")
    return path


def test_every_valued_loan_is_rolled_forward_by_hand(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    index = index_file(tmp_path / "ukhpi.csv")
    out = tmp_path / "out"
    done = batchval(
        "run", str(book(tmp_path / "book.csv")), "--out", str(out),
        "--config", str(index_config(tmp_path, index)), env=env_for(served),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = pl.read_parquet(out / "results.parquet")
    assert results.columns[-len(INDEX_COLUMNS) :] == list(INDEX_COLUMNS)
    written = levels(index)
    indexed, gaps = 0, []
    for row in results.iter_rows(named=True):
        assert row["value_method"] == "avm"  # valued tonight
        assert row["indexed_to"] < "2026-09"
        area, base_month = row["local_authority"], row["indexed_to"]
        if area == local_authority("CF10 1AA"):
            assert (row["hpi_reason"], row["hpi_value"]) == ("authority_not_in_index", None)
            continue
        # The estimate (indexed to 2026's spring) is newer than every origination.
        assert (row["hpi_basis"], row["hpi_from"], row["hpi_to"]) == ("avm", base_month, "2026-09")
        expected = (
            Decimal(row["estimate"]) * written[(area, "2026-09")] / written[(area, base_month)]
        )
        assert abs(Decimal(str(row["hpi_value"])) - expected) <= Decimal("0.005")
        assert row["hpi_ltv"] == float(row["loan_balance"]) / row["hpi_value"]
        fell = (
            written[(area, "2026-09")] / written[(area, row["origination_date"].strftime("%Y-%m"))]
        )
        assert row["trigger_market_fall"] is (fell < Decimal("0.9"))
        start = written[(area, row["origination_date"].strftime("%Y-%m"))]
        tracked = Decimal(row["origination_value"]) * written[(area, base_month)] / start
        gaps.append(Decimal(row["estimate"]) / tracked - 1)
        indexed += 1
    assert indexed == 15
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    covered = summary["portfolio"]["index"]
    assert covered["index_month"] == "2026-09"
    balances = results["loan_balance"].cast(pl.Float64)
    assert covered["coverage"]["avm"] == {"loans": 18, "balance": round(float(balances.sum()), 2)}
    assert covered["coverage"]["indexed"] == {"loans": 0, "balance": 0.0}
    rolled = results.filter(pl.col("hpi_ltv").is_not_null())
    weight = float(rolled["loan_balance"].sum())
    weighted = float((rolled["loan_balance"] * rolled["hpi_ltv"]).sum()) / weight
    assert covered["hpi_weighted_ltv"] == pytest.approx(weighted)
    # how the index tracked the model: each estimate over its origination value rolled
    # forward to the estimate's month
    tracked = covered["estimate_vs_index"]
    assert tracked["loans"] == len(gaps) == 15
    assert abs(Decimal(str(tracked["median"])) - statistics.median(gaps)) < Decimal("1e-6")
    assert "by UK HPI to 2026-09: avm 18 (£" in done.stdout
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    facts = manifest["reference_data"]["index"]
    assert facts["file"]["latest_month"] == "2026-09"
    assert "Open Government Licence v3.0" in facts["attribution"][0]


def test_an_index_file_that_cannot_be_used_stops_before_any_call(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    bad = tmp_path / "ukhpi.csv"
    bad.write_text("Date,RegionName,AreaCode,Index\n01/01/2020,X,E1,100\nJan 2020,X,E1,1\n")
    done = batchval(
        "run", str(book(tmp_path / "book.csv")), "--out", str(tmp_path / "out"),
        "--index-source", "ukhpi", "--index-file", str(bad), env=env_for(served),
    )  # fmt: skip
    assert done.returncode == 65, done.stderr
    assert "line 3: Date 'Jan 2020' is not a day of a month" in done.stderr
    assert served.sandbox.ledger.requests == []
    priced = batchval(
        "run", str(book(tmp_path / "book.csv")), "--out", str(tmp_path / "dry"), "--dry-run",
        "--index-source", "ukhpi", "--index-file", str(bad), env=env_for(served),
    )  # fmt: skip
    assert priced.returncode == 65, priced.stderr  # a dry run reads the files as a night would
    assert "line 3: Date 'Jan 2020' is not a day of a month" in priced.stderr


def test_without_the_section_the_results_have_no_index_column(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    out = tmp_path / "out"
    done = batchval("run", str(book(tmp_path / "book.csv")), "--out", str(out), env=env_for(served))
    assert done.returncode == 0, done.stderr
    names = pl.read_parquet_schema(out / "results.parquet")
    assert not set(INDEX_COLUMNS) & set(names)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert "index" not in manifest["reference_data"]
    assert manifest["settings"]["index"]["source"] == "none"


def test_a_book_night_rolls_every_loan_forward(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """Night 2 of a book of 18 loans with a budget of 6: tonight's 6 are `avm`; night 1's
    6, carried from the book, `avm_indexed` from their own estimate's month; the 6 left for
    a later night, never valued, `indexed` from their origination (source `index`); the
    Cardiff loans, not in the index, `none`. The book's portfolio counts them by method,
    and "not valued" still counts every loan without a valuation."""
    index = index_file(tmp_path / "ukhpi.csv")
    source = book(tmp_path / "book.csv")
    args = ["--book", str(tmp_path / "book.parquet"), "--row-id", "loan_id", "--max-calls", "6",
            "--config", str(index_config(tmp_path, index))]  # fmt: skip
    for night in ("1", "2"):
        done = batchval("run", str(source), "--out", str(tmp_path / night), *args,
                        env=env_for(served))  # fmt: skip
        assert done.returncode == 0, done.stderr
    results = pl.read_parquet(tmp_path / "2" / "results.parquet")
    assert results["row_number"].to_list() == list(range(1, 19))  # every loan, in order
    cardiff = local_authority("CF10 1AA")
    written = levels(index)
    for row in results.iter_rows(named=True):
        if row["source"] == "api":
            assert row["value_method"] == "avm", row
            continue
        if row["source"] == "book":
            assert row["value_method"] == (
                "none" if row["local_authority"] == cardiff else "avm_indexed"
            )
            continue
        assert row["source"] == "index"
        assert row["estimate"] is None
        area = local_authority(POSTCODES[(row["row_number"] - 1) % 6])
        if area == cardiff:  # its authority (a valued neighbour's) is not in the index
            assert (row["value_method"], row["hpi_reason"]) == ("none", "authority_not_in_index")
            continue
        assert row["value_method"] == "indexed", row
        start = written[(area, row["origination_date"].strftime("%Y-%m"))]
        expected = Decimal(row["origination_value"]) * written[(area, "2026-09")] / start
        assert abs(Decimal(str(row["hpi_value"])) - expected) <= Decimal("0.005")
    counts = dict(results["source"].value_counts().rows())
    assert counts == {"api": 6, "book": 6, "index": 6}
    summary = json.loads((tmp_path / "2" / "summary.json").read_text(encoding="utf-8"))
    covered = summary["book"]["portfolio"]["index"]["coverage"]
    methods = results["value_method"].value_counts()
    assert {m: covered[m]["loans"] for m in methods["value_method"]} == dict(methods.rows())
    assert summary["portfolio"]["loans_not_valued"] == 6  # the indexed 6: never valued
    # verify reads back the valued rows alone: an `index` row has nothing to read back
    checked = batchval("verify", str(tmp_path / "2"), env=env_for(served))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "without a valuation id" not in checked.stdout + checked.stderr
    # the report's first page: the loans by how their value was made, and the licence's words
    assert batchval("report", str(tmp_path / "2"), env=env_for(served)).returncode == 0
    page = (tmp_path / "2" / "report.html").read_text(encoding="utf-8")
    assert "Every loan by the index" in page
    assert "UK House Price Index to 2026-09" in page
    assert "never a valuation" in page
    assert "How the index tracked the model: over " in page
    assert "an earlier valuation, rolled forward</td><td>" in page
    assert "Open Government Licence v3.0" in page
    assert page.index("Every loan by the index") < page.index("<h2>Loan-to-value")


def test_the_index_rewrites_the_results_beside_the_book_as_the_run_would(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """The index step rewrites results.parquet by a thread of its own while the book
    counts its night: the file it writes has the run's modes (`output.mode: group`, 0640,
    not the 0600 a thread without the run's context would give), every loan is in it, the
    summary's book section counts the night as without the index, and the log says when
    the outputs began, how long the index's files took, and how long the night waited."""
    source = book(tmp_path / "book.csv")
    args = ["--book", str(tmp_path / "book.parquet"), "--row-id", "loan_id", "--max-calls", "6"]
    env = env_for(served, BATCHVAL_OUTPUT_MODE="group")
    index = ["--config", str(index_config(tmp_path, index_file(tmp_path / "ukhpi.csv")))]
    for name, extra in (("plain", []), ("indexed", index)):
        done = batchval("run", str(source), "--out", str(tmp_path / name), *args, *extra,
                        env=env)  # fmt: skip
        assert done.returncode == 0, done.stderr
        (tmp_path / "book.parquet").unlink()  # each a first night
    out = tmp_path / "indexed"
    assert stat.S_IMODE((out / "results.parquet").stat().st_mode) == 0o640
    assert pl.read_parquet(out / "results.parquet")["row_number"].to_list() == list(range(1, 19))
    summaries = [
        json.loads((tmp_path / name / "summary.json").read_text(encoding="utf-8"))["book"]
        for name in ("plain", "indexed")
    ]
    assert summaries[1]["rows"] == summaries[0]["rows"] == {
        "valued": 6, "carried": 0, "deferred": 12, "problems": 0, "pending": 0,
    }  # fmt: skip
    assert summaries[1]["age_profile"] == summaries[0]["age_profile"]
    events = [json.loads(line) for line in (out / "batchval.log").read_text().splitlines()]
    names = [e["event"] for e in events]
    assert names.index("run.index.read") < names.index("run.writing") < names.index("run.indexed")
    read, indexed = events[names.index("run.index.read")], events[names.index("run.indexed")]
    assert (read["authorities"], read["postcodes"]) == (5, None)
    assert (indexed["rows"], indexed["latest"]) == (18, "2026-09")
    assert min(read["seconds"], indexed["seconds"], indexed["waited"]) >= 0


def test_with_the_postcode_file_night_1_indexes_every_loan(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """The tutorial's book and index (`sample_inputs`, tests/ukhpi.py): night 1 values 20
    loans of 200, and every other loan, never valued, finds its authority in the postcode
    file and is rolled forward from its origination; none is left without a value but the
    ones the API refused (in problems.parquet, not results)."""
    out = tmp_path / "1"
    done = batchval(
        "run", str(SAMPLES / ukhpi.BOOK), "--out", str(out), "--book", str(tmp_path / "b.parquet"),
        "--row-id", "loan_id", "--max-calls", "20", "--index-source", "ukhpi",
        "--index-file", str(SAMPLES / "ukhpi_book.csv"),
        "--index-postcodes", str(SAMPLES / "postcodes_book.csv"), env=env_for(served),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = pl.read_parquet(out / "results.parquet")
    refused = pl.read_parquet(out / "problems.parquet").height
    assert results.height + refused == 200
    methods = dict(results["value_method"].value_counts().rows())
    assert methods == {"avm": 20 - refused, "indexed": 180}
    written = levels(SAMPLES / "ukhpi_book.csv")
    with (SAMPLES / ukhpi.BOOK).open(encoding="utf-8", newline="") as file:
        postcodes = {row["loan_id"]: row["postcode"] for row in csv.DictReader(file)}
    for row in results.filter(pl.col("value_method") == "indexed").iter_rows(named=True):
        area = local_authority(postcodes[row["loan_id"]])
        start = written[(area, row["origination_date"].strftime("%Y-%m"))]
        expected = Decimal(row["origination_value"]) * written[(area, "2026-09")] / start
        assert abs(Decimal(str(row["hpi_value"])) - expected) <= Decimal("0.005")


def test_the_python_api_names_the_directory_s_columns(
    served: RunningSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`index_postcode_column=` and `index_authority_column=` reach the index section:
    a directory with other column names is refused without them, read with them."""
    for name, value in env_for(served).items():
        monkeypatch.setenv(name, value)
    directory = tmp_path / "directory.csv"
    directory.write_text("pc,la\nM1 1AE,E08000003\n", encoding="utf-8")
    given = batchval.Settings(
        index_source="ukhpi",
        index_file=index_file(tmp_path / "ukhpi.csv"),
        index_postcodes=directory,
    )
    source = book(tmp_path / "book.csv")
    with pytest.raises(batchval.RunError) as refused:
        batchval.run(source, out=tmp_path / "a", progress=False, dry_run=True, settings=given)
    assert refused.value.exit_code == 65
    assert "no column 'pcds'" in str(refused.value)
    columns = dataclasses.replace(given, index_postcode_column="pc", index_authority_column="la")
    done = batchval.run(source, out=tmp_path / "b", progress=False, dry_run=True, settings=columns)
    assert done.exit_code == 0
