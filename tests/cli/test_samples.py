"""The sample inputs (sample_inputs/make_samples.py): the MI extract's shape (issue 32), as a
lender's warehouse writes it, and the files the script writes the same again."""

from __future__ import annotations

import csv
from pathlib import Path
from types import ModuleType

import openpyxl
import pytest
from support import ROOT

SAMPLES = ROOT / "sample_inputs"


def _lines(path: Path) -> list[list[str]]:
    with path.open(encoding="cp1252", newline="") as handle:
        return list(csv.reader(handle))


def test_the_windows_csv_holds_its_table_between_banner_lines_and_a_total(
    samples: ModuleType,
) -> None:
    """The header is line 4, below the title, the produced line and a blank line; 150 loans
    follow, then Total, a blank line and the footer, every line as wide as the table."""
    lines = _lines(SAMPLES / "mi_extract_windows.csv")
    header = samples.MI_HEADER_LINE
    assert lines[header - 1] == list(samples.MI_COLUMNS)
    assert [line[0] for line in lines[: header - 1]] == [samples.MI_TITLE, samples.MI_PRODUCED, ""]
    loans = lines[header : samples.MI_TOTAL_LINE - 1]
    assert len(loans) == samples.MI_LOANS == 150
    assert all(line[0] and line[0] != "Total" for line in loans)
    assert [line[0] for line in lines[samples.MI_TOTAL_LINE - 1 :]] == [
        "Total",
        "",
        samples.MI_FOOTER,
    ]
    assert len(lines) == samples.MI_FOOTER_LINE
    assert {len(line) for line in lines} == {len(samples.MI_COLUMNS)}
    assert not any(lines[2])
    assert not any(lines[-2])


def test_the_windows_csv_is_what_excel_on_windows_saves(samples: ModuleType) -> None:
    """cp1252 pound signs, CRLF line ends, money as displayed and UK dates."""
    raw = (SAMPLES / "mi_extract_windows.csv").read_bytes()
    assert raw.count(b"\r\n") == raw.count(b"\n") == samples.MI_FOOTER_LINE
    assert b"\xa3" in raw
    assert "£".encode() not in raw
    first = dict(
        zip(samples.MI_COLUMNS, _lines(SAMPLES / "mi_extract_windows.csv")[4], strict=True)
    )
    assert first["Current Balance"].startswith("£")
    assert first["Current Balance"][-3] == "."
    day, month, year = first["Completion Date"].split("/")
    assert (len(day), len(month), len(year)) == (2, 2, 4)


def test_one_loan_midway_has_only_its_account_number(samples: ModuleType) -> None:
    """The MI_BLANK_LOAN-th loan's line holds its account number and nothing else."""
    extract = samples.mi_extract()
    line = _lines(SAMPLES / "mi_extract_windows.csv")[samples.MI_BLANK_LINE - 1]
    assert line[0] == extract.blank_account
    assert not any(line[1:])


def test_the_borrowers_are_found_only_where_the_file_names_them(samples: ModuleType) -> None:
    """Every surname, e-mail and birth date is in the CSV, and no surname is in a cell of
    any other column or in any other sample file: a test may look for them in outputs."""
    extract = samples.mi_extract()
    text = (SAMPLES / "mi_extract_windows.csv").read_text(encoding="cp1252")
    births = [born.strftime("%d/%m/%Y") for born in extract.birth_dates]
    assert all(name in text for name in [*extract.surnames, *extract.emails, *births])
    assert len(set(extract.emails)) == len(extract.emails) == samples.MI_LOANS - 1
    assert len(set(births)) == len(births)
    personal = {samples.MI_COLUMNS.index(c) for c in samples.MI_PERSONAL_COLUMNS}
    elsewhere = " ".join(
        cell
        for line in _lines(SAMPLES / "mi_extract_windows.csv")
        for column, cell in enumerate(line)
        if column not in personal
    ).lower()
    others = " ".join(
        path.read_text(encoding="cp1252" if "windows" in path.name else "utf-8-sig")
        for path in SAMPLES.glob("*.csv")
        if not path.name.startswith("mi_")
    ).lower()
    for surname in extract.surnames:
        assert surname.replace("-", "").isalpha()
        assert surname.lower() not in f"{elsewhere} {others}", surname


def test_the_pack_opens_on_a_cover_and_holds_the_table_on_its_loans_sheet(
    samples: ModuleType,
) -> None:
    """The pack's first sheet is a title page with no header row; Loans holds the same lines
    as the extract workbook's one sheet, the header on line 4 and typed cells."""
    pack = openpyxl.load_workbook(SAMPLES / "mi_pack.xlsx")
    extract = openpyxl.load_workbook(SAMPLES / "mi_extract.xlsx")
    assert pack.sheetnames == list(samples.MI_PACK_SHEETS)
    header = tuple(samples.MI_COLUMNS)
    cover = [row for row in pack["Cover"].iter_rows(values_only=True) if any(row)]
    assert header not in cover
    assert [v for row in cover for v in row if v] == [
        *samples.MI_PACK_COVER,
        samples.MI_PACK_CONTENTS,
    ]
    loans = list(pack["Loans"].iter_rows(values_only=True))
    assert loans == list(extract.worksheets[0].iter_rows(values_only=True))
    assert loans[samples.MI_HEADER_LINE - 1] == header
    assert [str(r) for r in pack["Loans"].merged_cells.ranges] == ["A1:O1"]
    total = dict(zip(header, loans[samples.MI_TOTAL_LINE - 1], strict=True))
    figures = samples.mi_extract()
    assert total["Account No"] == "Total"
    assert total["Current Balance"] == pytest.approx(figures.balance_total)
    assert total["Original Valuation"] == figures.valuation_total


def test_the_script_writes_the_same_files_again(samples: ModuleType, tmp_path: Path) -> None:
    """The same seed gives the same CSV bytes as the files kept here, and the same workbook
    bytes at every run (their creation date pinned)."""
    for run in ("one", "two"):
        (tmp_path / run).mkdir()
        samples.main(tmp_path / run)
    for path in sorted((tmp_path / "one").iterdir()):
        again = tmp_path / "two" / path.name
        if path.suffix == ".csv":
            assert path.read_bytes() == (SAMPLES / path.name).read_bytes(), path.name
        if path.suffix == ".xlsx":
            assert path.read_bytes() == again.read_bytes(), path.name
