"""The CSV export runs no code (issue 35, part 4): a book whose pass-through cells and
header names start each formula of OWASP's "CSV Injection", run in-process against the
embedded sandbox and exported, read back with Python's csv module and as LibreOffice Calc
imports it: every field quoted, every text cell and header that would start a formula
after a `'`, numbers still numbers; JSON Lines, which is data, as it was."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from embedded_cli import invoke
from programs import Calc

from batchval._internal.exports.export import FORMULA_START

# No API configured: the embedded sandbox, in test mode.
FORMULAS = [
    "=1+1",
    "+1",
    "-1",
    "@SUM(A1)",
    "\tx",
    "\rx",
    '=HYPERLINK("http://x","y")',
    "+cmd|' /C calc'!A0",
]
# Row 7 is refused at input (outside England and Wales), so problems.csv has cells too.
POSTCODES = ["SW1A 2AA", "M1 1AE", "LS6 2AB", "CF10 1AA", "BS1 4DJ", "NE1 7RU", "EH1 1AA", "M1 1AE"]
ARREARS = [-5, -1, 0, 3, -120, None, -7, 9]  # an integer column: numbers, never prefixed
RATES = [-0.5, 1.25, -3.0, None, 0.0, -0.001, 2.0, -12.0]
# A text column: `-12` and `+3` are text here, so prefixed; the others are not formulas.
TEXT_NUMBERS = ["-12", "12", "+3", "a-b", "", None, "'=x", "x=1"]


def inert(text: str) -> str:
    """What the export must write for a text cell or header: `'` before a formula."""
    return "'" + text if text[:1] and text[0] in FORMULA_START else text


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The book valued and exported as CSV and JSON Lines: a column named after each
    formula, holding every formula (each row starts at the next one)."""
    work = tmp_path_factory.mktemp("formulas")
    columns: dict[str, Sequence[object]] = {
        "postcode": POSTCODES,
        "property_type": ["terraced"] * len(POSTCODES),
        "bedrooms": [2] * len(POSTCODES),
    }
    for j, name in enumerate(FORMULAS):
        columns[name] = [FORMULAS[(i + j) % len(FORMULAS)] for i in range(len(POSTCODES))]
    columns |= {"arrears": ARREARS, "rate": RATES, "text_number": TEXT_NUMBERS}
    pq.write_table(pa.table(columns), work / "book.parquet")
    out = work / "run"
    ran = invoke("run", str(work / "book.parquet"), "--out", str(out))
    assert ran.exit_code == 0, ran.output
    for fmt in ("csv", "json"):
        done = invoke("export", str(out), "--format", fmt)
        assert done.exit_code == 0, done.output
    return out


@pytest.mark.parametrize("name", ["results", "problems"])
def test_every_field_is_quoted_and_no_text_starts_a_formula(exported: Path, name: str) -> None:
    """Read back with Python's csv module: the raw text is exactly every field quoted;
    each formula header and cell is its text after a `'`, a text `-12` too; the negative
    numbers of the integer and float columns are written as plain numbers."""
    parquet = pq.read_table(exported / f"{name}.parquet")
    raw = (exported / f"{name}.csv").read_bytes().decode("utf-8")  # `\r` kept as it is
    rows = list(csv.reader(io.StringIO(raw, newline="")))
    quoted = io.StringIO()
    csv.writer(quoted, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    assert raw == quoted.getvalue()
    header, cells = rows[0], rows[1:]
    assert header == [inert(n) for n in parquet.column_names]
    assert len(cells) == parquet.num_rows > 0
    written = dict(zip(parquet.column_names, zip(*cells, strict=True), strict=True))
    numbers = {
        f.name
        for f in parquet.schema
        if pa.types.is_integer(f.type) or pa.types.is_floating(f.type)
    }
    for column, fields in written.items():
        if column not in numbers:  # a negative number starts `-`, and is a number
            assert not [f for f in fields if f[:1] and f[0] in FORMULA_START], column
    for column in [*FORMULAS, "text_number"]:
        kept = parquet[column].to_pylist()
        assert list(written[column]) == ["" if v is None else inert(v) for v in kept], column
    assert [int(v) if v else None for v in written["arrears"]] == parquet["arrears"].to_pylist()
    assert [float(v) if v else None for v in written["rate"]] == parquet["rate"].to_pylist()
    assert {v for v in written["arrears"] if v.startswith("-")}  # plain negative numbers


def test_json_lines_keep_the_text_as_it_is(exported: Path) -> None:
    """results.jsonl is data, not a spreadsheet: its names and values are unprefixed."""
    lines = (exported / "results.jsonl").read_text(encoding="utf-8").splitlines()
    rows = pq.read_table(exported / "results.parquet").to_pylist()
    first = json.loads(lines[0])
    assert set(FORMULAS) <= set(first)
    assert [first[name] for name in FORMULAS] == [rows[0][name] for name in FORMULAS]
    assert first["text_number"] == "-12"


# LibreOffice as a process, two seconds a file: with the other slow cases, where `make
# test` installs it (`make calc`) and `make test-fast` needs none.
@pytest.mark.slow
@pytest.mark.parametrize("name", ["results", "problems"])
def test_calc_opens_no_formula_and_keeps_numbers_numbers(
    exported: Path, tmp_path: Path, name: str, calc: Calc
) -> None:
    """Opened as LibreOffice Calc imports a CSV: no cell is a formula (before this, `=1+1`
    and `=HYPERLINK(...)` were), every formula header and cell is text, the negative
    integers and floats are numbers and a text `-12` is text."""
    sheet = calc(exported / f"{name}.csv", tmp_path).active
    assert sheet is not None
    table = pq.read_table(exported / f"{name}.parquet")
    formulas = [c.coordinate for row in sheet.iter_rows() for c in row if c.data_type == "f"]
    assert formulas == []
    header = [c.value for c in sheet[1]]
    assert header == [inert(n).replace("\r", "\n") for n in table.column_names]  # CR as LF
    shown = dict(
        zip(table.column_names, zip(*sheet.iter_rows(min_row=2), strict=True), strict=True)
    )
    for column in FORMULAS:
        assert {c.data_type for c in shown[column]} == {"s"}, column
        assert all(str(c.value).startswith("'") for c in shown[column]), column
    for column in ("arrears", "rate"):
        cells = shown[column]
        assert [c.value for c in cells] == table[column].to_pylist(), column
        assert {c.data_type for c in cells if c.value is not None} == {"n"}, column
    for cell, kept in zip(shown["text_number"], table["text_number"].to_pylist(), strict=True):
        if kept and kept[0] in FORMULA_START:  # `-12`, `+3`: text, shown after its `'`
            assert (cell.value, cell.data_type) == (inert(kept), "s")
