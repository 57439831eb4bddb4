"""`batchval export DIR` (exports/export.py): a real run's results and problems as
CSV, XLSX and JSON Lines, read back with polars and openpyxl: every row, the pass-through
types, the flattened (or dropped) nested columns, the workbook's panes and formats."""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import io
import json
import re
from pathlib import Path
from typing import Any

import openpyxl
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import InProcess, env_for
from typed_book import book, write

from batchval._internal.contract.schemas import index_fields
from batchval._internal.exports.export import Format, export_dir
from batchval._internal.exports.workbook import SHARE, number_format
from batchval._internal.outcome import ExitCode
from batchval._internal.sandbox.server import RunningSandbox

NESTED = ("commentary", "rebuild_cost")
MONEY = '"£"#,##0.00'  # the workbook's money: pounds and pence


def valued_dir(batchval: InProcess, served: RunningSandbox, tmp_path: Path, rows: int = 20) -> Path:
    """A finished run of `book(rows)` (typed pass-through columns; rows 3 and 5 problems)
    where a quarter of the rows ask for commentary and another quarter for rebuildCost."""
    table = book(rows)
    asked = [("commentary", "rebuildCost", None, None)[n % 4] for n in range(rows)]
    table = table.append_column("include", pa.array(asked, pa.string()))
    out = tmp_path / "out"
    done = batchval("run", str(write(table, tmp_path / "book.parquet")), "--out", str(out),
                   env=env_for(served))  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


def as_typed(path: Path) -> io.BytesIO:
    """An exported CSV as a spreadsheet reads its cells, for `polars.read_csv`: every field
    of the export is quoted, which polars takes for text, whereas a spreadsheet reads a
    quoted `-1.5` as a number and `""` as an empty cell. The same cells, quoted only where
    a field needs it, so polars reads their types from their text (an empty one as null)."""
    with path.open(newline="", encoding="utf-8") as file:
        rows = list(csv.reader(file))
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(rows)
    return io.BytesIO(text.getvalue().encode("utf-8"))


def exported(batchval: InProcess, out: Path, *args: str) -> str:
    done = batchval("export", str(out), *args, env={})
    assert done.returncode == 0, done.stderr
    return done.stdout


def leaves(schema: pa.Schema) -> list[str]:
    """The flat names of a schema's columns: a struct's members as <column>_<member>."""

    def names(field: pa.Field, prefix: str) -> list[str]:
        name = prefix + field.name
        if pa.types.is_struct(field.type):
            return [n for child in field.type for n in names(child, name + "_")]
        return [name]

    return [n for field in schema for n in names(field, "")]


def member(rows: list[dict[str, Any]], column: str, *path: str) -> list[Any]:
    """A nested member of each row, None where the row's struct is null."""
    found = []
    for row in rows:
        value = row[column]
        for step in path:
            value = None if value is None else value[step]
        found.append(value)
    return found


@pytest.mark.slow
def test_csv_keeps_every_row_the_types_and_flattens_the_structs(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """results.csv and problems.csv hold every row in order, the pass-through columns read
    back in their types (int, decimal as a number, date, bool, text), numbers as numbers,
    and commentary and rebuild_cost as commentary_* and rebuild_cost_* columns."""
    out = valued_dir(batchval, served, tmp_path)
    printed = exported(batchval, out, "--format", "csv")
    assert f"{out / 'results.csv'}: 18 rows" in printed
    for name in ("results", "problems"):
        parquet = pq.read_table(out / f"{name}.parquet")
        csv = pl.read_csv(
            as_typed(out / f"{name}.csv"), try_parse_dates=True, infer_schema_length=None
        )
        assert csv.columns == leaves(parquet.schema)
        rows = parquet.to_pylist()
        assert csv["row_number"].to_list() == [r["row_number"] for r in rows]
        assert csv.schema["loan"] == pl.Int64
        assert csv.schema["opened"] == pl.Date
        assert csv.schema["active"] == pl.Boolean
        assert csv.schema["balance"] == pl.Float64  # a number, not text
        for column in ("loan", "opened", "active", "branch"):
            assert csv[column].to_list() == [r[column] for r in rows]
        balances = [None if r["balance"] is None else float(r["balance"]) for r in rows]
        assert csv["balance"].to_list() == balances
    results = pq.read_table(out / "results.parquet").to_pylist()
    csv = pl.read_csv(as_typed(out / "results.csv"), infer_schema_length=None)
    assert csv.schema["estimate"] == pl.Int64
    assert csv["estimate"].to_list() == [r["estimate"] for r in results]
    summaries = member(results, "commentary", "summary")
    assert csv["commentary_summary"].to_list() == summaries
    assert 0 < sum(s is not None for s in summaries) < len(summaries)  # some rows asked
    growth = member(results, "commentary", "area_insights", "growth")
    assert csv["commentary_area_insights_growth"].to_list() == growth
    assert csv["rebuild_cost_low"].to_list() == member(results, "rebuild_cost", "low")
    assert not set(NESTED) & set(csv.columns)


@pytest.mark.parametrize("fmt", ["csv", "json", "xlsx"])
@pytest.mark.slow
def test_nested_drop_leaves_the_structs_out(
    served: RunningSandbox, tmp_path: Path, fmt: str, batchval: InProcess
) -> None:
    """--nested drop writes every flat column and no commentary or rebuild_cost column."""
    out = valued_dir(batchval, served, tmp_path)
    exported(batchval, out, "--format", fmt, "--nested", "drop")
    parquet = pq.read_table(out / "results.parquet")
    flat = [f.name for f in parquet.schema if not pa.types.is_struct(f.type)]
    assert set(NESTED) <= set(parquet.column_names)
    if fmt == "csv":
        columns = pl.read_csv(out / "results.csv").columns
    elif fmt == "json":
        columns = list(json.loads((out / "results.jsonl").read_text().splitlines()[0]))
    else:
        sheet = pl.read_excel(out / "results.xlsx", sheet_name="results", engine="openpyxl")
        columns = [name.removesuffix(" (UTC)") for name in sheet.columns]  # instants' headers
    assert columns == flat


@pytest.mark.slow
def test_xlsx_has_sheets_panes_formats_and_typed_cells(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """results.xlsx has a sheet per file with a header row, the header and row_number
    frozen, money in pounds and pence, coverage as a percentage, dates as UK dates (an
    instant's header saying UTC), and every cell the value and type of the Parquet file."""
    out = valued_dir(batchval, served, tmp_path)
    exported(batchval, out, "--format", "xlsx")
    book_ = openpyxl.load_workbook(out / "results.xlsx")
    assert book_.sheetnames == ["results", "problems", "charges"]
    for name in ("results", "problems"):
        sheet = book_[name]
        parquet = pq.read_table(out / f"{name}.parquet")
        header = [cell.value for cell in sheet[1]]
        assert [name.removesuffix(" (UTC)") for name in header] == leaves(parquet.schema)
        if name == "results":
            assert "valued_at (UTC)" in header
        assert sheet.freeze_panes == "B2"
        assert sheet["A1"].font.b
        rows = parquet.to_pylist()
        assert sheet.max_row == len(rows) + 1
        column = {n: i + 1 for i, n in enumerate(header)}
        for at, row in enumerate(rows, start=2):
            cells = {n: sheet.cell(at, i) for n, i in column.items()}
            cell = cells.__getitem__
            assert cell("row_number").value == row["row_number"]
            if row["loan"] is not None:
                assert (type(cell("loan").value), cell("loan").value) == (int, row["loan"])
                assert cell("opened").is_date
                assert cell("opened").value.date() == row["opened"]
                assert cell("opened").number_format == "dd/mm/yyyy"
                assert cell("balance").value == float(row["balance"])
                assert cell("balance").number_format == MONEY
                assert cell("active").value is row["active"]
            if name == "results":
                assert (cell("estimate").value, cell("estimate").number_format) == (
                    row["estimate"],
                    MONEY,
                )
                assert cell("coverage").number_format == "0.0%"
                assert cell("coverage").value == row["coverage"]
                valued_at = cell("valued_at (UTC)")
                assert valued_at.value == row["valued_at"].replace(tzinfo=None)
                assert valued_at.number_format == "dd/mm/yyyy hh:mm"
                assert cell("credits_charged").number_format == "0"
                summary = member([row], "commentary", "summary")[0]
                assert cell("commentary_summary").value == summary
    frame = pl.read_excel(out / "results.xlsx", sheet_name="results", engine="openpyxl")
    results = pq.read_table(out / "results.parquet")
    assert frame["row_number"].to_list() == results["row_number"].to_pylist()
    assert frame.schema["loan"] == pl.Int64
    assert frame["loan"].to_list() == results["loan"].to_pylist()


@pytest.mark.slow
def test_json_lines_hold_every_row_with_numbers_as_numbers(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """results.jsonl is one object a row: ints and decimals as JSON numbers, dates as ISO
    text, the structs flattened."""
    out = valued_dir(batchval, served, tmp_path)
    exported(batchval, out, "--format", "json")
    for name in ("results", "problems"):
        rows = pq.read_table(out / f"{name}.parquet").to_pylist()
        lines = [json.loads(line) for line in (out / f"{name}.jsonl").read_text().splitlines()]
        assert [line["row_number"] for line in lines] == [r["row_number"] for r in rows]
        for line, row in zip(lines, rows, strict=True):
            assert line["loan"] == row["loan"]
            assert line["balance"] == (None if row["balance"] is None else float(row["balance"]))
            assert line["opened"] == (None if row["opened"] is None else row["opened"].isoformat())
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    rows = pq.read_table(out / "results.parquet").to_pylist()
    assert [line["estimate"] for line in lines] == [r["estimate"] for r in rows]
    assert [line["commentary_summary"] for line in lines] == member(rows, "commentary", "summary")


@pytest.mark.slow
def test_empty_results_give_a_header_only(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A run where every row is a problem (refused as a whole, input_mostly_refused, its
    outputs written) exports a results.csv of just its header, a results sheet of just its
    header row, and an empty results.jsonl; its problems export for a person to fix."""
    source = tmp_path / "book.csv"
    source.write_text("postcode,property_type,bedrooms,loan\nEH1 1AA,flat,2,7\nG1 1AA,flat,2,8\n")
    out = tmp_path / "out"
    done = batchval("run", str(source), "--out", str(out), env=env_for(served))
    assert done.returncode == 65, done.stderr
    assert pq.read_metadata(out / "results.parquet").num_rows == 0
    for fmt in ("csv", "xlsx", "json"):
        exported(batchval, out, "--format", fmt)
    columns = pq.read_schema(out / "results.parquet").names
    assert (out / "results.csv").read_text().splitlines() == [",".join(f'"{c}"' for c in columns)]
    sheet = openpyxl.load_workbook(out / "results.xlsx")["results"]
    headers = [[c.value.removesuffix(" (UTC)") for c in row] for row in sheet.iter_rows()]
    assert headers == [columns]
    assert (out / "results.jsonl").read_bytes() == b""
    problems = pl.read_csv(as_typed(out / "problems.csv"))
    assert (problems["row_number"].to_list(), problems["loan"].to_list()) == ([1, 2], [7, 8])


def test_a_dir_without_results_exits_64_and_writes_nothing(
    tmp_path: Path, batchval: InProcess
) -> None:
    """DIR with no results.parquet: exit 64, one line naming the file, nothing written."""
    (tmp_path / "problems.parquet").write_bytes(b"")  # alone, it is nothing to export
    done = batchval("export", str(tmp_path), "--format", "csv", env={})
    assert done.returncode == ExitCode.USAGE
    assert done.stderr.count("\n") == 1
    assert "results.parquet" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["problems.parquet"]


@pytest.mark.slow
def test_an_unreadable_results_file_exits_65(tmp_path: Path, batchval: InProcess) -> None:
    """A results.parquet that is not Parquet: exit 65, one line, no CSV left behind."""
    (tmp_path / "results.parquet").write_text("row_number\n1\n")
    done = batchval("export", str(tmp_path), "--format", "csv", env={})
    assert done.returncode == ExitCode.INPUT, done.stderr
    assert done.stderr.startswith("batchval: input_unusable:")
    assert done.stderr.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.parquet"]


@pytest.mark.slow
def test_out_writes_elsewhere_and_any_file_of_dir_comes_along(
    tmp_path: Path, batchval: InProcess
) -> None:
    """--out writes there, not in DIR; columns the export does not know (a later
    version's) come out too, and street_analysis.parquet's lists become JSON text in CSV
    and stay arrays in JSON."""
    results = pa.table({"row_number": [1, 2], "indexed_ltv": [0.61, None]})
    pq.write_table(results, tmp_path / "results.parquet")
    by_year = pa.list_(pa.struct([("year", pa.int64()), ("median", pa.int64())]))
    streets = pa.table(
        {
            "postcode": ["M1 1AE", "LS6 2AB"],
            "sold": pa.array(
                [{"count": 3, "by_year": [{"year": 2024, "median": 250000}]}, None],
                pa.struct([("count", pa.int64()), ("by_year", by_year)]),
            ),
            "covered_postcodes": pa.array([["M1 1AE", "M1 1AF"], []], pa.list_(pa.string())),
        }
    )
    pq.write_table(streets, tmp_path / "street_analysis.parquet")
    elsewhere = tmp_path / "people" / "files"
    for fmt in ("csv", "json"):
        exported(batchval, tmp_path, "--format", fmt, "--out", str(elsewhere))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "people",
        "results.parquet",
        "street_analysis.parquet",
    ]
    assert pl.read_csv(as_typed(elsewhere / "results.csv"))["indexed_ltv"].to_list() == [0.61, None]
    csv = pl.read_csv(as_typed(elsewhere / "street_analysis.csv"))
    assert csv.columns == ["postcode", "sold_count", "sold_by_year", "covered_postcodes"]
    assert csv["sold_by_year"].to_list() == ['[{"year": 2024, "median": 250000}]', None]
    assert csv["covered_postcodes"].to_list() == ['["M1 1AE", "M1 1AF"]', "[]"]
    lines = (elsewhere / "street_analysis.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    assert first["sold_by_year"] == [{"year": 2024, "median": 250000}]
    assert first["covered_postcodes"] == ["M1 1AE", "M1 1AF"]


def test_decimals_wider_than_a_double_stay_text_in_json_and_xlsx(tmp_path: Path) -> None:
    """A decimal of 15 digits is a number in JSON and Excel (the double nearest it); one
    of 20 digits, which no double holds, stays exact as text."""
    narrow = pa.array([decimal.Decimal("1234567890123.45")], pa.decimal128(15, 2))
    wide = pa.array([decimal.Decimal("123456789012345678.90")], pa.decimal128(20, 2))
    pq.write_table(
        pa.table({"row_number": [1], "narrow": narrow, "wide": wide}),
        tmp_path / "results.parquet",
    )
    export_dir(tmp_path, Format.JSON)
    export_dir(tmp_path, Format.XLSX)
    line = json.loads((tmp_path / "results.jsonl").read_text())
    assert line == {"row_number": 1, "narrow": 1234567890123.45, "wide": "123456789012345678.90"}
    sheet = openpyxl.load_workbook(tmp_path / "results.xlsx")["results"]
    assert [c.value for c in sheet[2]] == [1, 1234567890123.45, "123456789012345678.90"]


def test_a_streets_dir_exports_a_workbook_named_after_its_main_file(tmp_path: Path) -> None:
    """A streets DIR (no results.parquet) gets street_analysis.xlsx, not problems.xlsx."""
    pl.DataFrame({"row_number": [3], "type": ["not-found"]}).write_parquet(
        tmp_path / "problems.parquet"
    )
    pl.DataFrame({"postcode": ["SW1A 2AA"], "rows": [2]}).write_parquet(
        tmp_path / "street_analysis.parquet"
    )
    export_dir(tmp_path, Format.XLSX)
    assert not (tmp_path / "problems.xlsx").exists()
    workbook = openpyxl.load_workbook(tmp_path / "street_analysis.xlsx", read_only=True)
    assert sorted(workbook.sheetnames) == ["problems", "street_analysis"]


@pytest.mark.slow
def test_lender_money_columns_get_money_formats_whatever_their_names(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A balance column mapped in the config under a name that says nothing of money
    (`Amt Owed`) and an origination value under a lender's usual name (`Original
    Valuation`) are formatted as money in the workbook, as the run found them; a numeric
    loan id is not."""
    source = tmp_path / "book.csv"
    source.write_text(
        "Loan No,postcode,property_type,bedrooms,Amt Owed,Original Valuation\n"
        "1001,SW1A 2AA,terraced,3,181636.39,363000\n"
        "1002,M1 1AE,flat,2,95000,120000\n",
        encoding="utf-8",
    )
    config = tmp_path / "config.yaml"
    config.write_text("input:\n  columns:\n    loan_balance: Amt Owed\n", encoding="utf-8")
    out = tmp_path / "out"
    done = batchval("run", str(source), "--config", str(config), "--out", str(out),
                   env=env_for(served))  # fmt: skip
    assert done.returncode == 0, done.stderr
    exported(batchval, out, "--format", "xlsx")
    sheet = openpyxl.load_workbook(out / "results.xlsx")["results"]
    column = {cell.value: cell.column for cell in sheet[1]}
    formats = {name: sheet.cell(2, column[name]).number_format for name in column}
    assert formats["Amt Owed"] == formats["Original Valuation"] == MONEY
    assert sheet.cell(2, column["Amt Owed"]).value == 181636.39
    assert formats["Loan No"] == "0"


@pytest.mark.slow
def test_csv_times_are_utc_wall_times_excel_reads_as_dates(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """An instant in CSV is `YYYY-MM-DD HH:MM:SS`, its UTC wall time to the second: no
    `T`, no offset, no fraction (Excel reads it as a date and time); JSON keeps ISO 8601."""
    out = valued_dir(batchval, served, tmp_path, rows=6)
    exported(batchval, out, "--format", "csv")
    exported(batchval, out, "--format", "json")
    parquet = pq.read_table(out / "results.parquet")["valued_at"].to_pylist()
    written = pl.read_csv(out / "results.csv", infer_schema_length=0)["valued_at"].to_list()
    assert written == [t.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S") for t in parquet]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", text) for text in written)
    lines = (out / "results.jsonl").read_text().splitlines()
    assert "T" in json.loads(lines[0])["valued_at"]


def test_the_index_columns_get_their_formats() -> None:
    """A workbook shows an indexed value in pounds and the index's LTV and change as
    percentages, whatever words their descriptions hold."""
    formats = {f.name: number_format(f) for f in index_fields()}
    assert formats == {
        "hpi_value": MONEY,
        "hpi_ltv": SHARE,
        "hpi_basis": None,
        "hpi_from": None,
        "hpi_to": None,
        "hpi_change": SHARE,
        "hpi_reason": None,
        "value_method": None,
        "trigger_market_fall": None,
    }
