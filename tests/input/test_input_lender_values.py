"""input/lender_values: a lender's money and dates as lenders write them (issue 24, 3)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest

from batchval._internal.input import InputOptions, open_input

HEADER = (
    "Loan Ref,postcode,property_type,bedrooms,Current Balance,Original Valuation,Completion Date"
)


def _read(tmp_path: Path, *rows: str, encoding: str = "utf-8") -> list[dict[str, object]]:
    path = tmp_path / "book.csv"
    path.write_text("\n".join([HEADER, *rows]) + "\n", encoding=encoding)
    found = []
    for batch in open_input(path, InputOptions(encoding=encoding)).batches():
        for checked, riding in zip(
            batch.checked.to_dicts(), batch.passthrough.to_pylist(), strict=True
        ):
            found.append({**checked, **riding})
    return found


@pytest.mark.parametrize(
    ("written", "amount"),
    [
        ('"£412,500.00"', 412_500.0),
        ('"412,500"', 412_500.0),
        ("412500.00", 412_500.0),
        ("GBP 1000", 1_000.0),
        ('" £ 99,999.99 "', 99_999.99),
        ("", None),
    ],
)
def test_money_as_lenders_write_it(tmp_path: Path, written: str, amount: float | None) -> None:
    [row] = _read(tmp_path, f"L1,SW1A 2AA,flat,2,{written},300000,15/03/2019")
    assert row["rule"] is None, row["detail"]
    assert row["Current Balance"] == amount
    assert row["Original Valuation"] == 300_000.0


@pytest.mark.parametrize(
    ("written", "date"),
    [
        ("15/03/2019", dt.date(2019, 3, 15)),
        ("2019-03-15", dt.date(2019, 3, 15)),
        ("01/12/2020", dt.date(2020, 12, 1)),  # day first: 1 December
        ("15-03-2019", dt.date(2019, 3, 15)),
        ("15.03.2019", dt.date(2019, 3, 15)),
        ("15/03/2019 00:00", dt.date(2019, 3, 15)),
        ("2019-03-15T10:30:00", dt.date(2019, 3, 15)),
        ("", None),
    ],
)
def test_dates_day_first_or_iso(tmp_path: Path, written: str, date: dt.date | None) -> None:
    [row] = _read(tmp_path, f"L1,SW1A 2AA,flat,2,1000,300000,{written}")
    assert row["rule"] is None, row["detail"]
    assert row["Completion Date"] == date


@pytest.mark.parametrize(
    ("balance", "completed", "rule", "says"),
    [
        ("about 400k", "15/03/2019", "not_an_amount", "Current Balance 'about 400k' is not"),
        ('"1,000"', "31/02/2019", "not_a_date", "Completion Date '31/02/2019' is not a date"),
        ('"1,000"', "March 2019", "not_a_date", "Completion Date 'March 2019'"),
    ],
)
def test_an_unreadable_value_is_a_row_problem_naming_the_column(
    tmp_path: Path, balance: str, completed: str, rule: str, says: str
) -> None:
    rows = _read(
        tmp_path,
        f"L1,SW1A 2AA,flat,2,{balance},300000,{completed}",
        "L2,SW1A 2AA,flat,2,5000,300000,01/01/2020",
    )
    assert rows[0]["rule"] == rule
    assert rows[0]["request_json"] is None
    assert says in str(rows[0]["detail"])
    assert rows[1]["rule"] is None  # its neighbour is valued


def test_a_row_refused_by_another_rule_keeps_that_problem(tmp_path: Path) -> None:
    [row] = _read(tmp_path, "L1,NOT A POSTCODE,flat,2,junk,300000,15/03/2019")
    assert row["rule"] == "invalid_postcode"


def test_a_cp1252_file_with_pound_signs(tmp_path: Path) -> None:
    """What Excel on Windows writes: `£` is byte 0xA3."""
    rows = _read(tmp_path, 'L1,SW1A 2AA,flat,2,"£412,500.00",£300000,15/03/2019', encoding="cp1252")
    assert (rows[0]["Current Balance"], rows[0]["Original Valuation"]) == (412_500.0, 300_000.0)


def test_every_batch_has_one_schema(tmp_path: Path) -> None:
    """Money is Float64 and dates Date in every batch, whatever a batch's cells hold."""
    path = tmp_path / "book.csv"
    rows = [f"L{n},SW1A 2AA,flat,2,{n},{n}00,15/03/2019" for n in range(5)]
    rows.append('L9,SW1A 2AA,flat,2,"£1,000",,')
    path.write_text("\n".join([HEADER, *rows]) + "\n", encoding="utf-8")
    schemas = {
        batch.passthrough.schema for batch in open_input(path, InputOptions(batch_rows=2)).batches()
    }
    [schema] = schemas
    assert schema.field("Current Balance").type == pa.float64()
    assert schema.field("Completion Date").type == pa.date32()
