"""The UK House Price Index read, and a loan rolled forward by it (issue 55, parts 1 to 4,
the arithmetic): every figure checked against a hand computation from the file's own
text, in decimals, by code that shares nothing with batchval's."""

from __future__ import annotations

import csv
import datetime as dt
import itertools
import random
import statistics
from decimal import Decimal
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import ukhpi
from support import ROOT

from batchval._internal.contract.indexation import (
    AUTHORITY_NOT_IN_INDEX,
    BASE_BEFORE_INDEX,
    BASES,
    INDEX_COLUMNS,
    LOAN_COLUMNS,
    MONTH_MISSING,
    NO_AUTHORITY,
    NO_BASE,
    Base,
    authorities,
    indexed_results,
    market_fall,
    market_falls,
    newest_base,
    roll_forward,
    roll_forward_frame,
)
from batchval._internal.input.hpi import (
    IndexOptions,
    month_number,
    month_text,
    parse_month,
    read_postcode_directory,
    read_ukhpi,
)
from batchval._internal.input.options import InputError
from batchval._internal.valuations import indexing
from batchval._internal.valuations.book import rows_of

SAMPLE = ROOT / "sample_inputs" / "ukhpi_sample.csv"


def test_the_sample_files_are_the_generators() -> None:
    assert SAMPLE.read_text(encoding="utf-8") == ukhpi.sample_text()
    book = ROOT / "sample_inputs" / ukhpi.BOOK
    index = ROOT / "sample_inputs" / "ukhpi_book.csv"
    assert index.read_text(encoding="utf-8") == ukhpi.book_index_text(book)
    postcodes = ROOT / "sample_inputs" / "postcodes_book.csv"
    assert postcodes.read_text(encoding="utf-8") == ukhpi.book_postcodes_text(book)


def by_hand() -> dict[tuple[str, str], Decimal]:
    """(area, YYYY-MM) -> the index, as the file writes it."""
    with SAMPLE.open(encoding="utf-8", newline="") as file:
        rows = list(csv.DictReader(file))
    found = {}
    for row in rows:
        _day, month, year = row["Date"].split("/")
        found[(row["AreaCode"], f"{year}-{month}")] = Decimal(row["Index"])
    return found


def test_the_file_is_read_as_published() -> None:
    index = read_ukhpi(SAMPLE)
    written = by_hand()
    assert index.latest == month_number(*ukhpi.LATEST)
    assert set(index.levels) == set(ukhpi.AREAS)
    assert index.names["W06000015"] == "Cardiff"
    assert len(written) == sum(len(months) for months in index.levels.values())
    for (area, month), level in written.items():
        assert Decimal(str(index.level(area, parse_month(month) or 0))) == level
    assert index.level(ukhpi.GAP_AREA, month_number(*ukhpi.GAP_MONTH)) is None
    assert index.first_for(ukhpi.LATE_AREA) == month_number(*ukhpi.LATE_START)
    assert index.to_json()["latest_month"] == "2026-09"


@pytest.mark.parametrize(
    ("text", "month"),
    [("01/03/2024", "2024-03"), ("2024-03-01", "2024-03"), ("2024-03", "2024-03"),
     (" 1/12/1995 ", "1995-12"), ("31/02/2024", None), ("March 2024", None), ("", None)],
)  # fmt: skip
def test_a_date_is_day_first_or_iso(text: str, month: str | None) -> None:
    found = parse_month(text)
    assert (None if found is None else month_text(found)) == month


# Bases of every kind and age, in every authority: from 1 to 11 years before the latest
# month, a base in the latest month and one after it.
LATEST = month_number(*ukhpi.LATEST)
AGES = [1, 7, 12, 30, 61, 119, 131, 0, -2]


@pytest.mark.parametrize(("area", "age"), list(itertools.product(ukhpi.AREAS, AGES)))
def test_every_loan_rolls_forward_to_the_penny(area: str, age: int) -> None:
    index, written = read_ukhpi(SAMPLE), by_hand()
    month = LATEST - age
    value = 187_350.55
    rolled = roll_forward(index, area, Base("last_valuation", value, month))
    start = written.get((area, month_text(month)))
    end = written[(area, month_text(LATEST))]
    if age <= 0:  # made in or after the latest month: its own value, no change
        assert (rolled.value, rolled.change, rolled.basis) == (value, 0.0, "last_valuation")
        return
    if start is None:
        first = min(m for a, m in written if a == area)
        reason = BASE_BEFORE_INDEX if month_text(month) < first else MONTH_MISSING
        assert (rolled.value, rolled.basis, rolled.reason) == (None, "none", reason)
        return
    expected = Decimal(str(value)) * end / start
    assert rolled.value is not None
    assert abs(Decimal(str(rolled.value)) - expected) <= Decimal("0.005"), (rolled, expected)
    assert rolled.change is not None
    assert abs(Decimal(str(rolled.change)) - (end / start - 1)) < Decimal("1e-12")
    assert (rolled.from_text, rolled.to_text) == (month_text(month), "2026-09")


def test_a_gap_and_a_late_series_are_reasons_not_figures() -> None:
    index = read_ukhpi(SAMPLE)
    gap = roll_forward(index, ukhpi.GAP_AREA, Base("avm", 1.0, month_number(*ukhpi.GAP_MONTH)))
    assert gap.reason == MONTH_MISSING
    early = roll_forward(index, ukhpi.LATE_AREA, Base("origination", 1.0, month_number(2019, 1)))
    assert early.reason == BASE_BEFORE_INDEX
    assert roll_forward(index, "E07000999", Base("avm", 1.0, 1)).reason == AUTHORITY_NOT_IN_INDEX
    assert roll_forward(index, None, Base("avm", 1.0, 1)).reason == NO_AUTHORITY
    assert roll_forward(index, "E09000033", None).reason == NO_BASE


def test_the_newest_figure_is_the_base() -> None:
    assert newest_base((250_000, 300), (240_000, 310), (200_000, 250)) == Base(
        "last_valuation", 240_000, 310
    )
    assert newest_base((250_000, 310), (240_000, 310), (None, None)) == Base("avm", 250_000, 310)
    assert newest_base((250_000, None), (None, 300), (200_000, 250)) == Base(
        "origination", 200_000, 250
    )  # an estimate without its month, a valuation without its value: no base
    assert newest_base((0, 300), (None, None), (None, None)) is None


def index_of(tmp_path: Path, rows: list[tuple[str, str, str]]) -> Path:
    path = tmp_path / "ukhpi.csv"
    lines = ["Date,RegionName,AreaCode,Index"] + [f"{d},Somewhere,{a},{i}" for d, a, i in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_the_market_fall_is_decided_exactly(tmp_path: Path) -> None:
    """From 100 to exactly 90.00 is a fall of 10.0 %: no trigger at 0.10; to 88.00 it is."""
    path = index_of(
        tmp_path,
        [("2020-01-01", "E1", "100.00"), ("2026-09-01", "E1", "90.00"),
         ("2020-01-01", "E2", "100.00"), ("2026-09-01", "E2", "88.00"),
         ("2020-01-01", "E3", "73.30"), ("2026-09-01", "E3", "65.97")],
    )  # fmt: skip
    index = read_ukhpi(path)
    start = month_number(2020, 1)
    assert market_fall(index, "E1", start, 0.10) is False
    assert market_fall(index, "E2", start, 0.10) is True
    assert market_fall(index, "E3", start, 0.10) is False  # 65.97 / 73.30 is 0.9 exactly
    assert market_fall(index, "E2", month_number(2026, 9), 0.10) is False
    assert market_fall(index, "E2", month_number(2021, 1), 0.10) is None  # a month it has not
    assert market_fall(index, None, start, 0.10) is None


def test_the_whole_book_s_market_falls_agree_with_one_loan_at_a_time(tmp_path: Path) -> None:
    """`market_falls` decides every loan at once by its float ratio, and a ratio at the
    threshold exactly: it gives, loan by loan, what `market_fall` gives, the exact ties of
    the test above and every authority and month of the sample too, at several shares."""
    ties = index_of(
        tmp_path,
        [("2020-01-01", "E1", "100.00"), ("2026-09-01", "E1", "90.00"),
         ("2020-01-01", "E3", "73.30"), ("2026-09-01", "E3", "65.97"),
         ("2020-01-01", "E4", "10.14"), ("2026-09-01", "E4", "9.126")],  # 0.8999... as floats
    )  # fmt: skip
    for index in (read_ukhpi(ties), read_ukhpi(SAMPLE)):
        areas = [*index.levels, "E07000999", "", None]
        months = [*range(month_number(2014, 11), LATEST + 3), None]
        pairs = [(area, month) for area in areas for month in months]
        random.Random(5).shuffle(pairs)
        loans = pl.DataFrame(
            {"authority": [a for a, _ in pairs], "fall_from": [m for _, m in pairs]},
            schema={"authority": pl.String, "fall_from": pl.Int32},
        )
        for share in (0.10, 0.05, 0.0, 1.0, 1 / 3):
            found = market_falls(index, loans, share, index.frame())["trigger_market_fall"]
            assert found.to_list() == [market_fall(index, a, m, share) for a, m in pairs]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("Date,AreaCode,Index\n01/01/2020,E1,100\n", "it has no column 'RegionName'"),
        ("Date,RegionName,AreaCode,Index\n01/01/2020,X,E1,100\nJan 2020,X,E1,101\n",
         "line 3: Date 'Jan 2020' is not a day of a month"),
        ("Date,RegionName,AreaCode,Index\n01/01/2020,X,E1,0\n",
         "line 2: Index '0' is not a number above 0"),
        ("Date,RegionName,AreaCode,Index\n01/01/2020,X,E1,100\n2020-01-01,X,E1,101\n",
         "line 3: E1 2020-01 is given twice, with two figures"),
        ("Date,RegionName,AreaCode,Index\n01/01/2020,X,,100\n", "line 2: no AreaCode"),
    ],
)  # fmt: skip
def test_a_file_that_cannot_be_used_names_its_line(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as refused:
        read_ukhpi(path)
    assert said in str(refused.value)


def test_the_postcode_directory_first_wins_and_repeats_are_counted(tmp_path: Path) -> None:
    path = tmp_path / "onspd.csv"
    path.write_text(
        "pcd,pcds,oslaua,lat\n"
        "SW1A2AA,SW1A 2AA,E09000033,51.5\n"
        "M11AE,m1  1ae,E08000003,53.4\n"
        "SW1A2AA,SW1A2AA,E09000099,51.5\n"  # repeated: the first is kept
        "XX,not a postcode,E1,0\n"
        "LS62AB,LS6 2AB,,53.8\n",  # no authority: left out
        encoding="utf-8",
    )
    directory = read_postcode_directory(path)
    assert directory.repeated == 1
    asked = pl.Series(["M1 1AE", "SW1A 2AA", "LS6 2AB", "CF10 1AA"])
    assert directory.authorities(asked).to_list() == ["E08000003", "E09000033", None, None]
    with pytest.raises(InputError, match="it has no column 'pcds_x'"):
        read_postcode_directory(path, postcode_column="pcds_x")


LOANS_SCHEMA = {
    name: pl.String if name == "authority" else pl.Float64 if name.endswith("value") else pl.Int32
    for name in LOAN_COLUMNS
}


def test_the_whole_book_at_once_agrees_with_one_loan_at_a_time() -> None:
    """`roll_forward_frame` over loans of every kind (no base, no authority, one the index
    has not, a base in a gap, before a late series, after the latest month, ties between
    bases) gives, loan by loan, what `roll_forward` gives."""
    index = read_ukhpi(SAMPLE)
    draws = random.Random(7)
    areas = [*ukhpi.AREAS, "E07000999", None, ""]
    rows: list[dict[str, object]] = []
    for _ in range(3_000):
        row: dict[str, object] = {"authority": draws.choice(areas)}
        for kind in BASES:
            has = draws.random() < 0.6
            row[f"{kind}_value"] = (
                draws.choice([0.0, 125_000.0, 99_999.99, 310_500.5]) if has else None
            )
            row[f"{kind}_month"] = LATEST - draws.randint(-3, 140) if draws.random() < 0.8 else None
        rows.append(row)
    gap = {"authority": ukhpi.GAP_AREA, "avm_value": 1e5}
    rows.append({**gap, "avm_month": month_number(*ukhpi.GAP_MONTH)})
    loans = pl.DataFrame(rows, schema=LOANS_SCHEMA)
    frame = roll_forward_frame(index, loans)
    assert frame.height == loans.height
    for row, got in zip(rows, frame.iter_rows(named=True), strict=True):
        base = newest_base(*((row.get(f"{k}_value"), row.get(f"{k}_month")) for k in BASES))  # type: ignore[arg-type]
        one = roll_forward(index, row["authority"] or None, base)  # type: ignore[arg-type]
        assert (got["hpi_basis"], got["hpi_reason"]) == (one.basis, one.reason), (row, got, one)
        assert (got["hpi_from"], got["hpi_to"]) == (one.from_month, one.to_month)
        if one.value is None:
            assert got["hpi_value"] is None
        else:
            assert abs(got["hpi_value"] - one.value) <= 0.01
            assert one.change is not None
            assert abs(got["hpi_change"] - one.change) < 1e-12


def test_a_loan_s_authority_is_its_own_then_the_directory_s_then_its_sector_s(
    tmp_path: Path,
) -> None:
    path = tmp_path / "onspd.csv"
    path.write_text("pcds,oslaua\nSW1A 2AA,E09000033\nM1 1AE,E08000099\n", encoding="utf-8")
    directory = read_postcode_directory(path)
    postcode = pl.Series(
        ["M1 1AE", "SW1A 2AA", "LS6 2AB", "LS6 2XY", "LS6 2ZZ", "LS6 2QQ", "CF10 1AA", None]
    )
    own = pl.Series(
        ["E08000003", None, "E08000035", "E08000035", "E08000036", None, None, None],
        dtype=pl.String,
    )
    found = authorities(postcode, own, directory).to_list()
    assert found == [
        "E08000003",  # its own valuation's, over the directory's
        "E09000033",  # the directory's
        "E08000035",
        "E08000035",
        "E08000036",
        "E08000035",  # LS6 2: two loans of E08000035, one of E08000036
        None,  # nothing knows CF10 1
        None,
    ]
    assert authorities(postcode, own).to_list()[1] is None  # no directory, no neighbour


def results_table(rows: list[dict[str, object]]) -> pa.Table:
    """Rows as results.parquet types them (a lender's money as numbers, dates as dates)."""
    return pa.table(
        {
            "source": pa.array([r["source"] for r in rows], pa.string()),
            "estimate": pa.array([r.get("estimate") for r in rows], pa.int64()),
            "indexed_to": pa.array([r.get("indexed_to") for r in rows], pa.string()),
            "local_authority": pa.array([r.get("authority") for r in rows], pa.string()),
            "input_postcode": pa.array([r.get("postcode") for r in rows], pa.string()),
            "Curr Bal": pa.array([r.get("balance") for r in rows], pa.float64()),
            "Last Val": pa.array([r.get("last") for r in rows], pa.float64()),
            "Last Val Date": pa.array([r.get("last_day") for r in rows], pa.date32()),
            "Orig Val": pa.array([r.get("origination") for r in rows], pa.float64()),
            "Orig Date": pa.array([r.get("origination_day") for r in rows], pa.date32()),
        }
    )


LENDER = {
    "loan_balance": "Curr Bal",
    "last_valuation": "Last Val",
    "last_valuation_date": "Last Val Date",
    "origination_value": "Orig Val",
    "origination_date": "Orig Date",
}


def test_results_gain_the_index_columns_by_the_rules() -> None:
    """Tonight's valuation is `avm`; a carried one rolled forward `avm_indexed`; a loan
    with only the lender's figures `indexed`; none of them `none` with a reason; the
    LTV on the rolled value and the market fall since the lender's own valuation."""
    index, written = read_ukhpi(SAMPLE), by_hand()
    latest = written[("E08000003", "2026-09")]
    rows: list[dict[str, object]] = [
        {"source": "api", "estimate": 250_000, "indexed_to": "2026-09", "authority": "E08000003",
         "postcode": "M1 1AE", "balance": 125_000.0},
        {"source": "book", "estimate": 200_000, "indexed_to": "2021-03", "authority": "E08000003",
         "postcode": "M1 1AE", "balance": 100_000.0, "last": 180_000.0,
         "last_day": dt.date(2019, 5, 20)},
        {"source": "none", "postcode": "M1 1AE", "balance": 90_000.0, "origination": 150_000.0,
         "origination_day": dt.date(2018, 2, 1)},
        {"source": "none", "postcode": "CF10 1AA", "balance": 90_000.0, "origination": 1e5,
         "origination_day": dt.date(2018, 2, 1)},
        {"source": "none", "postcode": "M1 1AE", "balance": 90_000.0},
    ]  # fmt: skip
    table = indexed_results(results_table(rows), index, lender=LENDER, fall_share=0.10).table
    assert table.column_names[-len(INDEX_COLUMNS) :] == list(INDEX_COLUMNS)
    got = table.select(list(INDEX_COLUMNS)).to_pylist()
    methods = ["avm", "avm_indexed", "indexed", "none", "none"]
    assert [g["value_method"] for g in got] == methods
    assert [g["hpi_basis"] for g in got] == ["avm", "avm", "origination", "none", "none"]
    assert got[0]["hpi_value"] == 250_000
    assert got[0]["hpi_change"] == 0.0
    carried = Decimal(200_000) * latest / written[("E08000003", "2021-03")]
    assert abs(Decimal(str(got[1]["hpi_value"])) - carried) <= Decimal("0.005")
    assert (got[1]["hpi_from"], got[1]["hpi_to"]) == ("2021-03", "2026-09")
    assert got[1]["hpi_ltv"] == pytest.approx(100_000 / float(carried))
    # The third loan's authority is its sector's (two loans of M1 1 were given E08000003).
    lent = Decimal(150_000) * latest / written[("E08000003", "2018-02")]
    assert abs(Decimal(str(got[2]["hpi_value"])) - lent) <= Decimal("0.005")
    assert (got[3]["hpi_reason"], got[3]["hpi_value"]) == ("no_authority", None)
    assert (got[4]["hpi_reason"], got[4]["hpi_value"]) == ("no_base", None)
    fell = latest / written[("E08000003", "2019-05")] < Decimal("0.9")
    assert got[1]["trigger_market_fall"] is fell
    assert got[0]["trigger_market_fall"] is None  # no lender date to measure from
    assert got[3]["trigger_market_fall"] is None


def test_how_the_index_tracked_tonight_s_estimates() -> None:
    """Over the loans valued tonight with an older lender figure: estimate / (that figure
    moved by the index to the estimate's own month) - 1, its median and quartiles, each
    computed here by hand; a carried loan, a figure as new as the estimate, an estimate
    with no month and a base in a gap take no part."""
    index, written = read_ukhpi(SAMPLE), by_hand()
    draws = random.Random(11)
    rows: list[dict[str, object]] = []
    expected: list[Decimal] = []
    areas = [a for a in ukhpi.AREAS if a != ukhpi.LATE_AREA]
    for n in range(400):
        area = draws.choice(areas)
        month = LATEST - draws.randint(0, 5)  # the estimate's month: up to the latest
        base = month - draws.randint(1, 100)
        if base < month_number(*ukhpi.FIRST):
            continue
        value = float(draws.randint(100_000, 600_000))
        estimate = draws.randint(100, 700) * 1000
        kind = "last" if n % 2 else "origination"
        day = dt.date(base // 12, base % 12 + 1, 15)
        valued = {"source": "api", "estimate": estimate, "indexed_to": month_text(month)}
        rows.append({**valued, "authority": area, kind: value, f"{kind}_day": day})
        start, end = written.get((area, month_text(base))), written.get((area, month_text(month)))
        if start is None or end is None:  # the gap: no figure
            continue
        expected.append(Decimal(estimate) / (Decimal(str(value)) * end / start) - 1)
    same = dt.date(2026, 9, 2)
    rows += [
        {"source": "book", "estimate": 300_000, "indexed_to": "2026-06", "authority": "E08000003",
         "balance": 1.0, "last": 200_000.0, "last_day": dt.date(2019, 5, 20)},
        {"source": "api", "estimate": 300_000, "indexed_to": "2026-09", "authority": "E08000003",
         "balance": 1.0, "last": 200_000.0, "last_day": same},
        {"source": "api", "estimate": 300_000, "indexed_to": None, "authority": "E08000003",
         "balance": 1.0, "last": 200_000.0, "last_day": dt.date(2019, 5, 20)},
    ]  # fmt: skip
    tracked = indexed_results(results_table(rows), index, lender=LENDER, fall_share=0.1).tracking
    assert tracked["loans"] == len(expected) > 300
    lower, median, upper = statistics.quantiles(expected, n=4, method="inclusive")
    for name, figure in (("lower_quartile", lower), ("median", median), ("upper_quartile", upper)):
        got = tracked[name]
        assert got is not None
        assert abs(Decimal(str(got)) - figure) < Decimal("1e-6"), name
    nothing = indexed_results(results_table(rows[-3:]), index, lender=LENDER, fall_share=0.1)
    assert nothing.tracking == {
        "loans": 0, "median": None, "lower_quartile": None, "upper_quartile": None
    }  # fmt: skip


@pytest.mark.parametrize("runs_sliced", [0, 2, 512])
@pytest.mark.parametrize("piece_chunks", [1, 2, 100])
@pytest.mark.parametrize("in_order", [True, False])
def test_a_night_s_results_are_indexed_a_chunk_at_a_time_as_whole(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    in_order: bool,
    piece_chunks: int,
    runs_sliced: int,
) -> None:
    """`Indexing.add_columns` streams results.parquet into its new self a few rows at a
    time, the unvalued loans made as they come, and works out the index's columns a few
    chunks at a time (a loan's authority by its sector's neighbours in other pieces too):
    the file is the table `indexed_results` makes of the whole at once (the unvalued rows
    added first, in row order), its schema's metadata kept, whether the file is in row
    order or not, and whether a chunk's rows of the two are joined from slices or sorted
    (`RUNS_SLICED`)."""
    monkeypatch.setattr(indexing, "CHUNK_ROWS", 3)
    monkeypatch.setattr(indexing, "PIECE_CHUNKS", piece_chunks)
    monkeypatch.setattr(indexing, "RUNS_SLICED", runs_sliced)
    draws = random.Random(3)
    postcodes = ["M1 1AE", "M1 1ZZ", "SW1A 2AA", "CF10 1AA", None]
    passthrough = pa.table(
        {
            "row_number": pa.array(range(1, 21), pa.int64()),
            "Curr Bal": pa.array([90_000.0 + n for n in range(20)], pa.float64()),
            "Orig Val": pa.array([150_000.0 + 10 * n for n in range(20)], pa.float64()),
            "Orig Date": pa.array(
                [dt.date(2016 + n % 9, 1 + n % 12, 3) for n in range(20)], pa.date32()
            ),
        }
    )
    valued = [2, 5, 6, 11, 17]
    given = results_table(
        [
            {"source": draws.choice(["api", "book"]), "estimate": 200_000 + n,
             "indexed_to": f"202{n % 6}-0{1 + n % 9}", "authority": "E08000003",
             "postcode": "M1 1AE"}
            for n in valued
        ]
    ).select(["source", "estimate", "indexed_to", "local_authority", "input_postcode"])  # fmt: skip
    chosen = passthrough.take([n - 1 for n in valued])
    table = pa.Table.from_arrays(
        [*chosen.columns, *given.columns], names=[*chosen.column_names, *given.column_names]
    )
    table = table.replace_schema_metadata({"batchval": "kept"})
    unsent = [(n, postcodes[n % len(postcodes)]) for n in range(1, 21) if n not in {2, 6, 11}]
    lender = {k: v for k, v in LENDER.items() if v in table.column_names}
    missing = [(n, p) for n, p in unsent if n not in valued]
    added = rows_of(
        table.schema, pa.array([n for n, _ in missing], pa.int64()), passthrough, "index"
    )
    whole = pa.concat_tables([table, added]).sort_by("row_number")
    expected = indexed_results(
        whole, read_ukhpi(SAMPLE), lender=lender, fall_share=0.10, postcodes=dict(missing)
    )
    path = tmp_path / "results.parquet"
    written = table if in_order else table.take([3, 0, 4, 2, 1])
    pq.write_table(written, path)
    found = indexing.Indexing(IndexOptions("ukhpi", "x"), read_ukhpi(SAMPLE), None)
    numbers = pa.array([n for n, _ in unsent], pa.int64())
    asked = pa.array([p for _, p in unsent], pa.string())
    rows, tracked = found.add_columns(path, lender, 0.10, (numbers, asked, passthrough))
    assert rows == 20
    assert tracked == expected.tracking
    done = pq.read_table(path)
    assert done.schema.equals(expected.table.schema, check_metadata=True)
    assert done.equals(expected.table)
    assert done.column("source").to_pylist().count("index") == 15


@pytest.mark.parametrize(
    "among",
    [[1, 2, 3, 4, 5], [3, 4, 5, 6], [1, 2, 4, 5, 6], [5, 4, 3, 2, 1], [2, 2, 3], []],
)
@pytest.mark.parametrize("asked", [[0, 1, 2, 3, 5, 6, 7, None], [3, 4, None, 5], [4], []])
def test_a_row_s_place_among_the_pass_through_rows_is_its_look_up_s(
    among: list[int], asked: list[int | None]
) -> None:
    """`_places`: the place of each row number among the pass-through rows' (null where
    it is not there), the same by subtraction (rows numbered one by one) as by a look-up,
    whether some are outside the rows or all inside."""
    numbers = pa.array(asked, pa.int64())
    rows = pa.chunked_array([pa.array(among[:2], pa.int64()), pa.array(among[2:], pa.int64())])
    found = indexing._places(numbers, rows)
    assert found.to_pylist() == pc.index_in(numbers, rows).to_pylist()


def test_the_rewrite_dictionary_encodes_only_text_whose_values_repeat() -> None:
    """`_text_columns`: text columns are dictionary-encoded unless the first chunk's values
    are mostly distinct (a loan's id: the writer would make the dictionary and drop it)."""
    first = pa.table(
        {
            "loan_id": pa.array([f"L{n:04d}" for n in range(100)]),
            "value_method": pa.array(["indexed", "avm", "none", "indexed"] * 25),
            "hpi_reason": pa.nulls(100, pa.string()),
            "estimate": pa.array(range(100), pa.int64()),
        }
    )
    assert indexing._text_columns(first.schema, first) == ["value_method", "hpi_reason"]
    assert indexing._text_columns(first.schema, None) == ["loan_id", "value_method", "hpi_reason"]
