"""input/layout: the header below a banner, and the lines of the table that are not loans,
in CSV files and sheets as lenders' systems write them (the rules at length:
test_not_loans)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xlsxwriter
from test_input_reader import read_all

from batchval._internal.input import InputError, InputOptions, open_input
from batchval._internal.input.layout import NotLoan, find_header, reporting_date
from batchval._internal.outcome import SettingsError
from batchval._internal.settings import load_settings

MAPPED = {"propertyType": "Prop Type", "bedrooms": "Beds"}
COLUMNS = ["Account No", "Post Code", "Prop Type", "Beds", "Current Balance"]
LOANS = [
    ["A1", "SW1A 1AA", "flat", "2", "100000"],
    ["A2", "SW1A 2AA", "flat", "3", "200000"],
    ["A3", "M1 1AE", "detached", "4", "300000"],
]


def csv_text(lines: list[list[str]]) -> str:
    return "".join(",".join(line) + "\n" for line in lines)


def written(path: Path, lines: list[list[str]]) -> Path:
    path.write_text(csv_text(lines), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("rows", "header"),
    [
        ([["postcode", "property_type", "bedrooms"], ["SW1A 1AA", "flat", "2"]], 0),
        (
            [
                ["Title - 30/11/2026"],
                [],
                ["Post Code", "Prop Type", "Beds"],
                ["SW1A 1AA", "f", "2"],
            ],
            2,
        ),
        ([["Report", "30/11/2026"], ["Ref", "Where"], ["R1", "SW1A 1AA"], ["R2", "M1 1AE"]], 1),
        ([["Report:", "Book"], ["Loan", "Security"], ["A1", "SW1A 1AA"]], 1),
        ([["Notes", "by"], ["free text", "ops"]], None),
        ([["A1", "SW1A 1AA", "flat"], ["A2", "SW1A 2AA", "flat"]], None),
        ([["Total", "3"], ["Post Code", "Beds"], ["SW1A 1AA", "2"]], 1),
    ],
)
def test_the_header_is_the_first_line_that_names_fields_or_heads_postcodes(
    rows: list[list[str]], header: int | None
) -> None:
    """A line of two or more cells, none a number or a postcode, that names two fields or
    stands above a column of postcodes is the header; nothing else is."""
    assert find_header(rows, {}) == header


def test_a_column_the_config_maps_names_the_header() -> None:
    """A header whose names only the config knows is found by them."""
    rows = [["Extract"], ["Security PC", "Kind"], ["not a postcode", "x"]]
    assert find_header(rows, {}) is None
    assert find_header(rows, {"postcode": "Security PC", "propertyType": "Kind"}) == 1


BANNER = [["Mortgage book extract - 30/11/2026", "", "", "", ""], ["", "", "", "", ""]]


def test_a_csv_header_below_a_banner_is_found_and_said(tmp_path: Path) -> None:
    """The title and blank line above the header are not read; the rows' lines count them."""
    path = written(tmp_path / "book.csv", [*BANNER, COLUMNS, *LOANS])
    source = open_input(path, InputOptions(columns=MAPPED))
    assert source.columns == COLUMNS
    assert source.read_as.to_json()["header_line"] == 3
    assert source.read_as.to_json()["lines_above_header"] == 2
    batches = list(source.batches())
    assert [b.lines.to_pylist() for b in batches if b.lines is not None] == [[4, 5, 6]]
    assert len(read_all(source)) == 3


def test_a_semicolon_csv_below_a_banner_with_commas_is_read(tmp_path: Path) -> None:
    """The delimiter is the one that gives a header, not the banner's."""
    lines = ["Book, as at 30/11/2026", ";".join(COLUMNS), *(";".join(row) for row in LOANS)]
    path = tmp_path / "book.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    source = open_input(path, InputOptions(columns=MAPPED))
    assert source.columns == COLUMNS
    assert len(read_all(source)) == 3


def test_a_stated_header_row_is_read_as_stated(tmp_path: Path) -> None:
    """--header-row N reads line N as the header, whatever is above it."""
    path = written(tmp_path / "book.csv", [["x", "y", "z", "w", "v"], *BANNER, COLUMNS, *LOANS])
    options = InputOptions(columns=MAPPED, header_row=4)
    source = open_input(path, options)
    assert source.columns == COLUMNS
    assert source.header is not None
    assert source.header.stated
    with pytest.raises(InputError, match="has no line 40"):
        open_input(path, InputOptions(header_row=40))


def test_a_header_row_for_parquet_is_a_usage_error(tmp_path: Path) -> None:
    """Parquet names its columns: a header row stated for one is refused (64)."""
    path = tmp_path / "book.parquet"
    pq.write_table(pa.table({"postcode": ["SW1A 1AA"], "property_type": ["flat"]}), path)
    with pytest.raises(SettingsError, match="header row"):
        open_input(path, InputOptions(header_row=2))


FOOTERS = [
    ["Total", "", "", "", "600000"],
    ["", "", "", "", ""],
    ["Source: MI warehouse. CONFIDENTIAL", "", "", "", ""],
]


def test_totals_and_footers_below_the_table_are_not_loans(tmp_path: Path) -> None:
    """A total and a footer after the last loan are left out and listed with their lines."""
    path = written(tmp_path / "book.csv", [*BANNER, COLUMNS, *LOANS, *FOOTERS])
    source = open_input(path, InputOptions(columns=MAPPED))
    assert source.read_as.not_loans == (
        NotLoan(7, "label", "Total"),
        NotLoan(9, "label", "Source: MI warehouse. CONFIDENTIAL"),
    )
    rows = read_all(source)
    assert len(rows) == 3
    assert json.dumps(source.read_as.to_json()["not_loans"])


@pytest.mark.parametrize(
    ("below", "kept"),
    [
        ([["", "", "", "", "5"]], 0),  # only an amount, no postcode or loan id
        ([["Grand Total", "", "", "", "5"], ["Sub-total", "", "", "", "5"]], 0),
        ([["Prepared by Credit Risk", "", "", "", ""]], 0),
        ([["anything at all", "", "", "", ""]], 0),  # words, no id: a note
        ([["", "", "flat", "", ""]], 0),  # a single value: a heading
        ([["A4", "", "", "", ""]], 1),  # a loan id: a loan (a problem)
        ([["A5", "", "flat", "2", "5"]], 1),
        ([["", "", "flat", "2", "123"]], 1),  # a loan with neither postcode nor id
        ([["", "XX1", "flat", "2", "123"]], 1),  # a postcode that is not one
    ],
)
def test_only_rows_that_read_as_no_loan_below_the_table_are_set_aside(
    tmp_path: Path, below: list[list[str]], kept: int
) -> None:
    """Below the table, a row is left out when it reads as a total or note, or holds only
    amounts, or a single value that is no loan id; any other stays a row (a problem)."""
    path = written(tmp_path / "book.csv", [COLUMNS, *LOANS, *below])
    source = open_input(path, InputOptions(columns=MAPPED))
    assert len(read_all(source)) == 3 + kept
    assert len(source.read_as.not_loans) == len(below) - kept


def test_a_line_with_only_its_first_cell_below_the_table_is_not_a_loan(tmp_path: Path) -> None:
    """Where the first column is no loan id, a last line with only that cell is a note."""
    header = ["Branch", *COLUMNS]
    rows = [["Leeds", *loan] for loan in LOANS]
    path = written(tmp_path / "book.csv", [header, *rows, ["Extracted 30/11/2026", *[""] * 5]])
    source = open_input(path, InputOptions(columns=MAPPED))
    assert len(read_all(source)) == 3
    assert source.read_as.not_loans == (NotLoan(5, "one_value", "Extracted 30/11/2026"),)


def test_a_subtotal_in_the_middle_of_the_table_is_set_aside(tmp_path: Path) -> None:
    """A subtotal between loans is no loan, wherever it stands."""
    middle = ["Sub-total", "", "", "", "100000"]
    path = written(tmp_path / "book.csv", [COLUMNS, LOANS[0], middle, *LOANS[1:]])
    source = open_input(path, InputOptions(columns=MAPPED))
    rows = read_all(source)
    assert len(rows) == 3
    assert source.read_as.not_loans == (NotLoan(3, "label", "Sub-total"),)


def test_a_loan_with_only_its_id_last_is_a_loan(tmp_path: Path) -> None:
    """A last row with a loan id is a loan (a problem for its missing postcode)."""
    path = written(tmp_path / "book.csv", [COLUMNS, *LOANS, ["A4", "", "", "", ""]])
    source = open_input(path, InputOptions(columns=MAPPED))
    rows = read_all(source)
    assert len(rows) == 4
    assert rows[-1]["rule"] == "required"


def test_a_sheet_header_below_a_merged_title_and_its_total(tmp_path: Path) -> None:
    """A sheet's title (merged), blank line, header on line 4 and total below are read as
    the CSV's: lines as Excel numbers them, the total left out."""
    path = tmp_path / "book.xlsx"
    with xlsxwriter.Workbook(str(path)) as book:
        sheet = book.add_worksheet("Extract")
        sheet.merge_range(0, 0, 0, 4, "Mortgage book extract - 30/11/2026")
        sheet.write(1, 0, "Produced by MI")
        sheet.write_row(3, 0, COLUMNS)
        for i, loan in enumerate(LOANS):
            sheet.write_row(4 + i, 0, [*loan[:3], int(loan[3]), float(loan[4])])
        sheet.write_row(7, 0, ["Total", None, None, None, 600000.0])
    source = open_input(path, InputOptions(columns=MAPPED))
    assert source.columns == COLUMNS
    assert source.read_as.to_json()["header_line"] == 4
    assert source.read_as.not_loans == (NotLoan(8, "label", "Total"),)
    assert [
        line for b in source.batches() if b.lines is not None for line in b.lines.to_pylist()
    ] == [5, 6, 7]


def test_an_unknown_setting_lists_the_settings_its_section_takes(tmp_path: Path) -> None:
    """`input: {header_rows: 3}` is refused naming what input takes (header_row among them)."""
    config = tmp_path / "c.yaml"
    config.write_text("input:\n  header_rows: 3\n", encoding="utf-8")
    with pytest.raises(SettingsError) as caught:
        load_settings(config, {})
    assert "unknown setting(s) in input: header_rows" in str(caught.value)
    assert "header_row" in str(caught.value).partition("takes")[2]
    config.write_text("input:\n  header_row: 3\n", encoding="utf-8")
    assert load_settings(config, {}).input.header_row == 3


def test_the_header_line_found_is_the_line_stated() -> None:
    """A header found on line 5 and `header_row: 5` are one run; another line is not."""
    found = load_settings(None, {}).read_at(5)
    stated = load_settings(None, {}, header_row=5)
    assert found.fingerprint() == stated.fingerprint()
    assert load_settings(None, {}, header_row=6).fingerprint() != found.fingerprint()
    assert load_settings(None, {}).read_at(1).fingerprint() == load_settings(None, {}).fingerprint()


@pytest.mark.parametrize(
    ("banner", "expected"),
    [
        ([["Reporting date: 31/10/2026"]], (dt.date(2026, 10, 31), 1)),
        ([["Collateral report"], ["Reporting date:", "31/10/2026"]], (dt.date(2026, 10, 31), 2)),
        ([["Book as at 30 November 2026"]], (dt.date(2026, 11, 30), 1)),
        ([["AS AT 1st Feb 2028"]], (dt.date(2028, 2, 1), 1)),
        ([["Balances as at close of business 29.02.2028"]], (dt.date(2028, 2, 29), 1)),
        ([["Month end: 2026-12-31"]], (dt.date(2026, 12, 31), 1)),
        ([["Position at 31-12-26"]], (dt.date(2026, 12, 31), 1)),
        # a title's one date; a production stamp says when the file was made, not its date
        ([["Mortgage book extract - 30/11/2026"], ["Produced 02/12/2026 06:15"]],
         (dt.date(2026, 11, 30), 1)),
        ([["Produced by MI, 02/12/2026 06:15"]], None),
        ([["Report of 01/11/2026 to 30/11/2026"]], None),  # two dates: which is unsaid
        ([["Reporting date: 31/02/2026"]], None),  # no such day
        ([["Mortgage book"]], None),
    ],
)  # fmt: skip
def test_the_reporting_date_is_read_day_first_from_the_banner(
    banner: list[list[str]], expected: tuple[dt.date, int] | None
) -> None:
    found = reporting_date(list(enumerate(banner, start=1)))
    assert (None if found is None else (found.date, found.line)) == expected


@pytest.mark.parametrize("form", ["csv", "xlsx", "xlsx stated"])
def test_a_files_reporting_date_is_in_what_was_read(tmp_path: Path, form: str) -> None:
    """A CSV's and a sheet's banner, the header found or stated: `reporting_date` and
    its line in `input_read`."""
    lines = [["Harbour BS"], ["Reporting date: 31/12/2026"], [], COLUMNS, *LOANS]
    if form == "csv":
        path = written(tmp_path / "book.csv", lines)
    else:
        path = tmp_path / "book.xlsx"
        with xlsxwriter.Workbook(str(path)) as book:
            sheet = book.add_worksheet("Loans")
            for r, cells in enumerate(lines):
                sheet.write_row(r, 0, cells)
    stated = 4 if form.endswith("stated") else None
    read = open_input(path, InputOptions(columns=MAPPED, header_row=stated)).read_as.to_json()
    assert (read["reporting_date"], read["reporting_date_line"]) == ("2026-12-31", 2)
