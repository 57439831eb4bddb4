"""Excel workbooks read as inputs (input.excel, through input.reader): cell types,
sheets, blank rows, and the same problems as a CSV's."""

from __future__ import annotations

import datetime as dt
import gc
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xlsxwriter
from support import ROOT
from test_input_reader import read_all

from batchval._internal.input import InputError, InputOptions, ReadAs, excel, open_input
from batchval._internal.input.excel import NoTableError
from batchval._internal.input.layout import Header

Cell = str | int | float | bool | dt.datetime | None


@pytest.fixture(autouse=True, params=["whole", "streamed"])
def sheet_reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test twice: the sheet read whole by fastexcel, and streamed by openpyxl as a
    sheet of more than CELL_LIMIT cells is (here every sheet is one). Both must read alike."""
    if request.param == "streamed":
        monkeypatch.setattr(excel, "CELL_LIMIT", 0)
    return str(request.param)


HEADER: list[Cell] = ["Loan Ref", "postcode", "property_type", "bedrooms", "Balance", "Completed"]


def workbook(
    path: Path, sheets: dict[str, Sequence[Sequence[Cell]]], *, vba: Path | None = None
) -> Path:
    """A workbook of the sheets given, in order, each a list of rows from the first row
    (None: an empty cell); a date-time is written as Excel keeps one (a dated number)."""
    book = xlsxwriter.Workbook(str(path))
    dated = book.add_format({"num_format": "dd/mm/yyyy"})
    for name, rows in sheets.items():
        sheet = book.add_worksheet(name)
        for r, row in enumerate(rows):
            for c, value in enumerate(row):
                if isinstance(value, dt.datetime):
                    sheet.write_datetime(r, c, value, dated)
                elif value is not None:
                    sheet.write(r, c, value)
    if vba is not None:
        book.add_vba_project(str(vba))
    book.close()
    return path


def request(row: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(row["request_json"])
    return found


LOANS: list[list[Cell]] = [
    HEADER,
    [1001, "sw1a1aa", "flat", 3.0, 412500.5, dt.datetime(2019, 3, 15)],
    [1002, "SW1A 2AA", "detached", 4, 250000, dt.datetime(2020, 1, 31)],
]


def test_a_sheet_reads_with_its_cell_types(tmp_path: Path) -> None:
    """Pass-through columns keep their cells' types (whole numbers as integers, dates as
    dates); request fields read as text, as Parquet's do (bedrooms 3.0 is 3)."""
    path = workbook(tmp_path / "loans.xlsx", {"Loans": LOANS})
    source = open_input(path, InputOptions())
    assert source.read_as == ReadAs("excel", sheet="Loans", header=Header(1))
    batch = next(source.batches())
    assert batch.passthrough.schema == pa.schema(
        [("Loan Ref", pa.int64()), ("Balance", pa.float64()), ("Completed", pa.date32())]
    )
    rows = read_all(source)
    assert [r["passthrough"] for r in rows] == [
        {"Loan Ref": 1001, "Balance": 412500.5, "Completed": dt.date(2019, 3, 15)},
        {"Loan Ref": 1002, "Balance": 250000.0, "Completed": dt.date(2020, 1, 31)},
    ]
    assert [request(r)["bedrooms"] for r in rows] == [3, 4]
    assert request(rows[0])["postcode"] == "SW1A 1AA"


def test_other_types_and_mixed_columns(tmp_path: Path) -> None:
    """A date-time with a time stays a timestamp; whole numbers in a column that also
    holds a fraction stay doubles; a column that mixes numbers and text is text, each
    number as it reads; a column of true and false is boolean."""
    rows: list[list[Cell]] = [
        ["postcode", "property_type", "bedrooms", "seen", "rate", "ref", "insured"],
        ["SW1A 1AA", "flat", 2, dt.datetime(2021, 5, 1, 10, 30), 1, "A1", True],
        ["SW1A 2AA", "flat", 2, dt.datetime(2021, 5, 2), 1.25, 5, False],
    ]
    path = workbook(tmp_path / "loans.xlsx", {"Sheet1": rows})
    read = read_all(open_input(path, InputOptions()))
    assert [r["passthrough"] for r in read] == [
        {"seen": dt.datetime(2021, 5, 1, 10, 30), "rate": 1.0, "ref": "A1", "insured": True},
        {"seen": dt.datetime(2021, 5, 2), "rate": 1.25, "ref": "5", "insured": False},
    ]


def test_the_first_sheet_is_read_unless_one_is_named(tmp_path: Path) -> None:
    """With no sheet named the first is read; --sheet reads the one it names."""
    other: list[list[Cell]] = [HEADER, [7, "M1 1AE", "terraced", 2, 1.5, None]]
    path = workbook(tmp_path / "loans.xlsx", {"Loans": LOANS, "Later": other})
    assert len(read_all(open_input(path, InputOptions()))) == 2
    source = open_input(path, InputOptions(sheet="Later"))
    assert source.read_as.sheet == "Later"
    assert [r["passthrough"]["Loan Ref"] for r in read_all(source)] == [7]


def test_an_unknown_sheet_is_refused_naming_the_sheets(tmp_path: Path) -> None:
    """A sheet the workbook does not have is refused (65), naming those it has."""
    path = workbook(tmp_path / "loans.xlsx", {"Loans": LOANS, "Notes": [["x"]]})
    with pytest.raises(InputError) as caught:
        open_input(path, InputOptions(sheet="loans 2026"))
    assert str(caught.value) == (
        f"{path}: has no sheet 'loans 2026'; its sheets: 'Loans', 'Notes' (--sheet NAME)"
    )


@pytest.mark.parametrize(
    ("rows", "said"),
    [
        ([], "sheet 'Loans' is empty"),
        ([HEADER], "sheet 'Loans' has a header but no data rows"),
        ([HEADER, [None, "  ", None], []], "sheet 'Loans' has a header but no data rows"),
    ],
    ids=["empty", "header only", "header and blank rows"],
)
def test_a_sheet_without_data_is_refused(tmp_path: Path, rows: list[list[Cell]], said: str) -> None:
    """An empty sheet, or one with a header and no row with a value, cannot be used."""
    path = workbook(tmp_path / "loans.xlsx", {"Other": LOANS, "Loans": rows})
    with pytest.raises(InputError) as caught:
        open_input(path, InputOptions(sheet="Loans"))
    assert str(caught.value) == f"{path}: {said}"


def test_a_first_sheet_that_does_not_fit_names_the_others(tmp_path: Path) -> None:
    """When the first sheet is read by default and lacks a column, the fault names the
    workbook's other sheets and --sheet (no other sheet holds a table either)."""
    notes: list[list[Cell]] = [["Note", "By"], ["Extract of 2026-11", "ops"]]
    other: list[list[Cell]] = [["Owner", "Team"], ["J Bloggs", "ops"]]
    path = workbook(tmp_path / "loans.xlsx", {"Notes": notes, "Owners": other})
    with pytest.raises(InputError) as caught:
        open_input(path, InputOptions())
    assert str(caught.value).endswith(
        "; sheet 'Notes' was read (the first sheet; the others: 'Owners'; --sheet NAME reads "
        "another)"
    )


def test_a_cover_sheet_first_is_refused_naming_the_sheets_with_a_table(tmp_path: Path) -> None:
    """A first sheet that holds no table, before sheets that do, is refused (65) naming
    those sheets, never read with a wrong header; --sheet reads one."""
    notes: list[list[Cell]] = [["Note", "By"], ["Extract of 2026-11", "ops"]]
    cover: list[list[Cell]] = [["Monthly Mortgage Pack"], [None], ["Prepared by Credit Risk"]]
    path = workbook(
        tmp_path / "pack.xlsx", {"Cover": cover, "Loans": LOANS, "Notes": notes, "Old": LOANS}
    )
    with pytest.raises(NoTableError) as caught:
        open_input(path, InputOptions())
    assert caught.value.sheets == ["Loans", "Old"]
    assert "first sheet 'Cover' holds no table" in str(caught.value)
    assert len(read_all(open_input(path, InputOptions(sheet="Loans")))) == 2


def test_blank_rows_are_skipped_and_not_counted(tmp_path: Path) -> None:
    """A row with no value (empty cells, or spaces) is skipped as a CSV's blank line is:
    the rows after it are numbered as if it were not there; a bad row is a problem at its
    place, naming the field."""
    rows: list[list[Cell]] = [
        HEADER,
        [1, "SW1A 1AA", "flat", 2, None, None],
        [None, " ", None, None, None, None],
        [],
        [2, "SW1A 2AA", "flat", "many", None, None],
        [3, "SW1A 2AA", "flat", 2, None, None],
    ]
    path = workbook(tmp_path / "loans.xlsx", {"Loans": rows})
    read = read_all(open_input(path, InputOptions()))
    assert [(r["row_number"], r["passthrough"]["Loan Ref"]) for r in read] == [
        (1, 1),
        (2, 2),
        (3, 3),
    ]
    assert (read[1]["field"], read[1]["rule"]) == ("bedrooms", "not_an_integer")


def test_a_blank_header_cell_names_its_column_by_position(tmp_path: Path) -> None:
    """A header cell left empty names its column column_N, N its 1-based position, as in
    a CSV; the mapping finds the other columns as usual."""
    rows: list[list[Cell]] = [
        ["postcode", None, "property_type", "bedrooms"],
        ["SW1A 1AA", "note", "flat", 2],
    ]
    path = workbook(tmp_path / "loans.xlsx", {"Loans": rows})
    source = open_input(path, InputOptions())
    assert source.columns == ["postcode", "column_2", "property_type", "bedrooms"]
    assert read_all(source)[0]["passthrough"] == {"column_2": "note"}


def test_a_macro_enabled_workbook_reads(tmp_path: Path) -> None:
    """An .xlsm (a workbook with a VBA project) reads as an .xlsx does; its macros are
    never run, only its cells read."""
    vba = tmp_path / "vbaProject.bin"
    vba.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504))
    path = workbook(tmp_path / "loans.xlsm", {"Loans": LOANS}, vba=vba)
    assert [r["passthrough"]["Loan Ref"] for r in read_all(open_input(path, InputOptions()))] == [
        1001,
        1002,
    ]


def test_a_workbook_reads_again_and_leaves_no_file_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`batches()` reads the sheet again (a resumed run does); the sheet's temporary file
    goes when the source does."""
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    path = workbook(tmp_path / "loans.xlsx", {"Loans": LOANS})
    source = open_input(path, InputOptions(batch_rows=1))
    assert len(read_all(source)) == len(read_all(source)) == 2
    assert list((tmp_path / "tmp").iterdir())
    del source
    gc.collect()
    assert not list((tmp_path / "tmp").iterdir())


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_a_sheet_named_for_a_file_that_is_not_a_workbook_is_refused(
    tmp_path: Path, kind: str
) -> None:
    """--sheet names a workbook's sheet: for a CSV or Parquet file it is a mistake."""
    path = tmp_path / f"homes.{kind}"
    if kind == "csv":
        path.write_text("postcode,property_type,bedrooms\nSW1A 1AA,flat,2\n")
    else:
        table = pa.table({"postcode": ["SW1A 1AA"], "property_type": ["flat"], "bedrooms": [2]})
        pq.write_table(table, path)
    with pytest.raises(InputError, match="not an Excel workbook: it has no sheet 'Loans'"):
        open_input(path, InputOptions(sheet="Loans"))


def test_formulas_are_their_saved_values_and_errors_are_empty(tmp_path: Path) -> None:
    """A formula cell reads as the value Excel saved for it (never computed here), in a
    request field as in a pass-through column; an error cell (#DIV/0!) reads as empty."""
    path = tmp_path / "loans.xlsx"
    book = xlsxwriter.Workbook(str(path))
    sheet = book.add_worksheet("Loans")
    sheet.write_row(0, 0, ["postcode", "property_type", "bedrooms", "ratio"])
    sheet.write_row(1, 0, ["SW1A 1AA", "flat"])
    sheet.write_formula(1, 2, "=1+2", None, 3)
    sheet.write_formula(1, 3, "=1/0", None, "#DIV/0!")
    sheet.write_row(2, 0, ["SW1A 2AA", "flat", 2, 0.5])
    book.close()
    rows = read_all(open_input(path, InputOptions()))
    assert [request(r)["bedrooms"] for r in rows] == [3, 2]
    assert [r["passthrough"]["ratio"] for r in rows] == [None, 0.5]


def test_a_sheet_s_cells_are_read_from_its_own_dimension(tmp_path: Path) -> None:
    """What decides a streamed read: rows x columns by the sheet's <dimension>, read
    from its XML head (not by opening the workbook), by name, whatever its position."""
    path = workbook(tmp_path / "book.xlsx", {"Loans": LOANS, "Notes": [["a note"]]})
    assert excel._cells(path, "Loans") == 3 * 6
    assert excel._cells(path, "Notes") == 1
    assert excel._cells(path, "Nope") is None
    assert excel._cells(ROOT / "sample_inputs" / "lender_book.xlsx", "Loans") == 67 * 8
