"""XLSX (batchval/_internal/exports/workbook.py): each column's number format, text kept as text,
Excel's limits (rows, 15 digits, names alike but for case) met without losing data."""

from __future__ import annotations

from pathlib import Path

import openpyxl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from batchval._internal.exports import workbook
from batchval._internal.exports.export import Format, export_dir
from batchval._internal.exports.workbook import header, number_format
from batchval._internal.outcome import ExitCode, RunRefusedError

MONEY = '"£"#,##0.00'  # pounds and pence


def test_xlsx_writes_text_as_text(tmp_path: Path) -> None:
    """Text that looks like a formula, a number or a link stays text in the workbook."""
    texts = ['=HYPERLINK("http://x.invalid")', "007", "http://x.invalid"]
    pq.write_table(
        pa.table({"row_number": [1, 2, 3], "borrower": texts}), tmp_path / "results.parquet"
    )
    export_dir(tmp_path, Format.XLSX)
    sheet = openpyxl.load_workbook(tmp_path / "results.xlsx")["results"]
    cells = [sheet.cell(n, 2) for n in (2, 3, 4)]
    assert [(c.value, c.data_type) for c in cells] == [(t, "s") for t in texts]
    assert all(c.hyperlink is None for c in cells)


def test_xlsx_refuses_more_rows_than_a_sheet_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file longer than an Excel sheet is refused (64, pointing to CSV) before any
    workbook is written."""
    pq.write_table(pa.table({"row_number": [1, 2, 3]}), tmp_path / "results.parquet")
    monkeypatch.setattr(workbook, "XLSX_MAX_ROWS", 2)
    with pytest.raises(RunRefusedError) as refused:
        export_dir(tmp_path, Format.XLSX)
    assert refused.value.exit_code == ExitCode.USAGE
    assert "--format csv" in str(refused.value)
    assert not (tmp_path / "results.xlsx").exists()


def test_xlsx_keeps_columns_named_alike_and_long_numbers(tmp_path: Path) -> None:
    """Columns `Loan` and `loan` both reach the sheet (an Excel table refuses the two
    names), and an integer column with a value of more than 15 digits is text, every
    digit kept."""
    table = pa.table(
        {
            "row_number": [1, 2],
            "Loan": [1, 2],
            "loan": [3, 4],
            "account": [12345678901234567, 5],
            "bedrooms": [999_999_999_999_999, 2],
        }
    )
    pq.write_table(table, tmp_path / "results.parquet")
    export_dir(tmp_path, Format.XLSX)
    sheet = openpyxl.load_workbook(tmp_path / "results.xlsx")["results"]
    assert [[c.value for c in row] for row in sheet.iter_rows()] == [
        ["row_number", "Loan", "loan_2", "account", "bedrooms"],
        [1, 1, 3, "12345678901234567", 999_999_999_999_999],
        [2, 2, 4, "5", 2],
    ]


def test_text_past_a_cells_limit_is_cut_and_counted(tmp_path: Path) -> None:
    """Text longer than a cell holds is cut to 32,767 characters, and the export says
    how many cells it cut."""
    long = "x" * 40_000
    table = pa.table({"row_number": [1, 2, 3], "answer": [long, "short", long]})
    pq.write_table(table, tmp_path / "results.parquet")
    done = export_dir(tmp_path, Format.XLSX)
    assert [f.cut for f in done.files] == [2]
    assert "2 cells cut to Excel's 32,767 characters" in done.render()
    sheet = openpyxl.load_workbook(tmp_path / "results.xlsx")["results"]
    assert [len(sheet.cell(n, 2).value) for n in (2, 3, 4)] == [32_767, 5, 32_767]


@pytest.mark.parametrize(
    ("name", "kind", "description", "code"),
    [
        ("estimate", pa.int64(), "Middle figure of the valuation, pounds.", MONEY),
        ("rebuild_cost_typical", pa.int64(), "", MONEY),
        ("loan_balance", pa.decimal128(12, 2), "", MONEY),
        ("Current Balance", pa.float64(), "", MONEY),
        ("property-value", pa.int64(), "", MONEY),
        ("median", pa.float64(), "Median sold price, pounds.", MONEY),
        ("coverage", pa.float64(), "Back-test share of sales.", "0.0%"),
        ("indexed_ltv", pa.float64(), "", "0.0%"),
        ("ltv_low_estimate", pa.float64(), "", "0.0%"),
        ("year_built", pa.int64(), "Year built sent.", "0"),
        ("credits_charged", pa.int64(), "Credits charged; rows sharing one request.", "0"),
        ("floor_area_sqm", pa.float64(), "", "0.00"),
        ("previous_estimate", pa.int64(), "", MONEY),
        ("last_valuation", pa.float64(), "", MONEY),
        ("Loan Amount", pa.decimal128(12, 2), "", MONEY),
        ("balance_after", pa.int64(), "The balance after the charge.", "0"),
        ("months_since_valuation", pa.int64(), "", "0"),
        ("opened", pa.date32(), "", "dd/mm/yyyy"),
        ("valued_at", pa.timestamp("ms", tz="UTC"), "", "dd/mm/yyyy hh:mm"),
        ("data_quality", pa.string(), "", None),
        ("wide_range", pa.bool_(), "", None),
    ],
)
def test_number_formats(name: str, kind: pa.DataType, description: str, code: str | None) -> None:
    """Each column's Excel format follows from its type, its name's words and its
    description: money, shares, whole numbers, other numbers, dates, none for text."""
    field = pa.field(name, kind, metadata={"description": description})
    assert number_format(field) == code


def test_columns_named_as_money_are_money_whatever_their_words() -> None:
    """A column the export found to hold a lender's money (`Amt Owed`) is money; the same
    name not found so is a plain number."""
    field = pa.field("Amt Owed", pa.float64())
    assert number_format(field, frozenset({"Amt Owed"})) == MONEY
    assert number_format(field) == "0.00"


@pytest.mark.parametrize(
    ("kind", "shown"),
    [
        (pa.timestamp("ms", tz="UTC"), "valued_at (UTC)"),
        (pa.timestamp("ms"), "valued_at"),  # a lender's own date and time: no zone to say
        (pa.date32(), "valued_at"),
    ],
)
def test_an_instants_header_says_utc(kind: pa.DataType, shown: str) -> None:
    """An instant's column is headed `<name> (UTC)`: Excel holds its UTC wall time."""
    assert header(pa.field("valued_at", kind)) == shown
