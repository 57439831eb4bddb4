"""Pass-through columns keep their input types (batchval._internal.input.passthrough, read through
open_input as a run reads them)."""

from __future__ import annotations

import datetime as dt
import decimal
import unicodedata
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from batchval._internal.input import InputError, InputOptions, open_input, stream

HOME = ["SW1A 1AA", "flat", "2"]
HEAD = ["postcode", "property_type", "bedrooms"]


def write_csv(path: Path, columns: dict[str, list[str]], encoding: str = "utf-8") -> Path:
    """A CSV of valid homes with these extra columns (cells written as given)."""
    rows = len(next(iter(columns.values())))
    lines = [",".join([*HEAD, *columns])]
    lines += [",".join([*HOME, *(cells[n] for cells in columns.values())]) for n in range(rows)]
    path.write_bytes(("\n".join(lines) + "\n").encode(encoding))
    return path


def passed(path: Path, options: InputOptions | None = None) -> pa.Table:
    """The pass-through columns of every row, as one table."""
    source = open_input(path, options or InputOptions())
    batches = [batch.passthrough for batch in source.batches()]
    return pa.Table.from_batches(batches)


def polars_types(path: Path) -> dict[str, pa.DataType]:
    """What polars itself infers over the whole file, as Arrow types."""
    schema = pl.read_csv(path, infer_schema_length=None).schema
    arrow: dict[Any, pa.DataType] = {pl.Int64: pa.int64(), pl.Float64: pa.float64()}
    arrow[pl.Boolean] = pa.bool_()
    return {name: arrow.get(kind, pa.string()) for name, kind in schema.items()}


# --- CSV: polars' inference ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cells", "kind", "values"),
    [
        (["1", "-20", ""], pa.int64(), [1, -20, None]),
        (["0", "-0", "9223372036854775807"], pa.int64(), [0, 0, 2**63 - 1]),
        (["1.5", "2", "-3.25"], pa.float64(), [1.5, 2.0, -3.25]),
        (["1e3", ".5", "5."], pa.float64(), [1000.0, 0.5, 5.0]),
        (["true", "False", "TRUE"], pa.bool_(), [True, False, True]),
        (["x", "", "y z"], pa.string(), ["x", None, "y z"]),
        (["1", "two", "3"], pa.string(), ["1", "two", "3"]),
        (["true", "1", "0"], pa.string(), ["true", "1", "0"]),
        (["2024-01-31", "2024-02-01", ""], pa.string(), ["2024-01-31", "2024-02-01", None]),
        (["", "", ""], pa.string(), [None, None, None]),
        (['"12"', '"13"', "14"], pa.int64(), [12, 13, 14]),
    ],
)
def test_csv_columns_keep_polars_inferred_types(
    tmp_path: Path, cells: list[str], kind: pa.DataType, values: list[Any]
) -> None:
    """A CSV column rides along in the type polars infers over the whole file (integers,
    floats, booleans, else text; dates are text, as polars reads them by default)."""
    path = write_csv(tmp_path / "homes.csv", {"loan_id": ["L1", "L2", "L3"], "extra": cells})
    table = passed(path)
    assert dict(zip(table.schema.names, table.schema.types, strict=True)) == {
        name: kind for name, kind in polars_types(path).items() if name in {"loan_id", "extra"}
    }
    assert table.schema.field("extra").type == kind
    assert table["extra"].to_pylist() == values


@pytest.mark.parametrize(
    ("cells", "why"),
    [
        (["007", "12", "3"], "a leading zero: an account number a number would lose"),
        (["-01", "2", "3"], "a leading zero after the sign"),
        (["99999999999999999999", "1", "2"], "beyond Int64: polars' Int128 has no Arrow type"),
    ],
)
def test_integers_whose_text_a_number_would_lose_stay_text(
    tmp_path: Path, cells: list[str], why: str
) -> None:
    """Where polars infers integers but a number would not say what the text says, the
    column stays text, exactly as written."""
    path = write_csv(tmp_path / "homes.csv", {"account": cells})
    table = passed(path)
    assert table.schema.field("account").type == pa.string(), why
    assert table["account"].to_pylist() == cells


def test_types_are_decided_over_the_whole_file(tmp_path: Path) -> None:
    """A text value in the last batch makes the column text in every batch, as polars
    reads the whole file: one type for the whole run."""
    cells = [str(n) for n in range(25)] + ["n/a"]
    path = write_csv(tmp_path / "homes.csv", {"loan": cells, "flag": ["true"] * 26})
    source = open_input(path, InputOptions(batch_rows=10))
    batches = [batch.passthrough for batch in source.batches()]
    assert [b.num_rows for b in batches] == [10, 10, 6]
    assert {b.schema for b in batches} == {pa.schema([("loan", pa.string()), ("flag", pa.bool_())])}
    assert batches[0]["loan"].to_pylist()[:2] == ["0", "1"]


@pytest.mark.parametrize(
    ("last", "kind"),
    [("n/a", pa.string()), ("007", pa.string()), ("2.5", pa.float64()), ("", pa.int64())],
)
def test_types_are_decided_over_blocks_past_the_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, last: str, kind: pa.DataType
) -> None:
    """A value in the last block of a file of several (pyarrow reads it a block at a time)
    types the column as it types a file of one block: text, a leading zero, a float, or
    nothing at all."""
    monkeypatch.setattr(stream, "BLOCK_BYTES", 16 * 1024)
    cells = [str(n) for n in range(20_000)] + [last]
    path = write_csv(tmp_path / "homes.csv", {"loan": cells})
    assert path.stat().st_size > 10 * stream.BLOCK_BYTES
    table = passed(path)
    assert table.schema.field("loan").type == kind
    assert table["loan"].to_pylist()[:2] == (["0", "1"] if kind == pa.string() else [0, 1])


def test_csv_text_is_kept_exactly(tmp_path: Path) -> None:
    """Text rides along as read: quotes, line breaks, tabs, control characters, spaces and
    its own Unicode form (never normalised: it is the user's, not the request's); an
    empty cell is null."""
    nfd = unicodedata.normalize("NFD", "Zoë ☃")
    path = tmp_path / "homes.csv"
    path.write_text(
        "postcode,property_type,bedrooms,loan id,note\n"
        f'SW1A 1AA,flat,2,"L""1""\n\t\x01 ",{nfd}\n'
        "SW1A 1AA,flat,2,,\n",
        encoding="utf-8",
    )
    table = passed(path)
    assert table.to_pylist() == [
        {"loan id": 'L"1"\n\t\x01 ', "note": nfd},
        {"loan id": None, "note": None},
    ]


def test_latin1_csv_is_typed_after_transcoding(tmp_path: Path) -> None:
    """Types are inferred from the transcoded text, as the rows are read."""
    path = write_csv(
        tmp_path / "homes.csv", {"amount": ["1.5", "2"], "note": ["Café", "é"]}, "latin-1"
    )
    table = passed(path, InputOptions(encoding="latin-1"))
    assert table.to_pylist() == [{"amount": 1.5, "note": "Café"}, {"amount": 2.0, "note": "é"}]


def test_a_csv_polars_cannot_type_is_refused_as_before(tmp_path: Path) -> None:
    """A malformed file is refused by the read, with the same message as ever: the type
    inference does not get in first."""
    path = tmp_path / "homes.csv"
    path.write_text("postcode,property_type,bedrooms,loan\nSW1A 1AA,flat,2,1\nM1 1AE,flat,3,2,9\n")
    with pytest.raises(InputError, match="cannot be read after data row"):
        passed(path)


def test_include_column_named_in_passthrough_rides_along_as_typed(tmp_path: Path) -> None:
    """An include column the config also passes through is echoed as typed."""
    path = tmp_path / "homes.csv"
    path.write_text(
        'postcode,property_type,bedrooms,include\nSW1A 1AA,flat,2," rebuildCost,commentary "\n'
    )
    table = passed(path, InputOptions(passthrough=("include",)))
    assert table.to_pylist() == [{"include": " rebuildCost,commentary "}]


# --- Parquet: the file's own types -----------------------------------------------------------

LONDON = dt.timezone(dt.timedelta(hours=1))


def homes_parquet(path: Path, columns: dict[str, pa.Array]) -> Path:
    rows = len(next(iter(columns.values())))
    base = {
        "postcode": pa.array(["SW1A 1AA"] * rows),
        "property_type": pa.array(["flat"] * rows),
        "bedrooms": pa.array([2] * rows),
    }
    pq.write_table(pa.table({**base, **columns}), path)
    return path


KEPT = {
    "loan": pa.array([1, None], pa.int64()),
    "balance": pa.array([decimal.Decimal("1234.50"), None], pa.decimal128(12, 2)),
    "opened": pa.array([dt.date(2020, 2, 29), None], pa.date32()),
    "reviewed": pa.array([dt.datetime(2024, 6, 1, 9, 30), None], pa.timestamp("ms")),
    "stamped": pa.array(
        [dt.datetime(2024, 6, 1, 8, 30, tzinfo=dt.UTC), None], pa.timestamp("us", tz="UTC")
    ),
    "active": pa.array([True, None], pa.bool_()),
    "branch": pa.array(["Leeds", None], pa.string()),
    "rate": pa.array([0.25, None], pa.float32()),
    "grade": pa.array([3, None], pa.uint8()),
    "wide": pa.array([decimal.Decimal("1.5"), None], pa.decimal256(20, 1)),
}


def test_parquet_columns_keep_their_types(tmp_path: Path) -> None:
    """Integers, decimals, dates, timestamps (with their zone), booleans, text and floats
    ride along in the file's own types and values."""
    table = passed(homes_parquet(tmp_path / "homes.parquet", KEPT))
    expected = {name: array.type for name, array in KEPT.items()}
    expected["wide"] = pa.decimal128(20, 1)  # a decimal256 that fits 38 digits
    assert dict(zip(table.schema.names, table.schema.types, strict=True)) == expected
    assert table.to_pylist()[0] == {
        "loan": 1,
        "balance": decimal.Decimal("1234.50"),
        "opened": dt.date(2020, 2, 29),
        "reviewed": dt.datetime(2024, 6, 1, 9, 30),
        "stamped": dt.datetime(2024, 6, 1, 8, 30, tzinfo=dt.UTC),
        "active": True,
        "branch": "Leeds",
        "rate": 0.25,
        "grade": 3,
        "wide": decimal.Decimal("1.5"),
    }
    assert set(table.to_pylist()[1].values()) == {None}


@pytest.mark.parametrize(
    ("array", "kind", "value"),
    [
        (pa.array(["a", "b"]).dictionary_encode(), pa.string(), "a"),
        (pa.array([b"abc", b"d\xc3\xa9f"], pa.binary()), pa.string(), "abc"),
        (pa.array([b"abc", b"def"], pa.large_binary()), pa.string(), "abc"),
        (
            pa.array([decimal.Decimal("1.5"), None], pa.decimal256(40, 1)),
            pa.string(),
            "1.5",
        ),
    ],
)
def test_parquet_types_readers_cannot_use_are_written_usably(
    tmp_path: Path, array: pa.Array, kind: pa.DataType, value: Any
) -> None:
    """A dictionary is its values; binary is its UTF-8 text (Hive's habit for text); a
    decimal wider than 38 digits, which polars, DuckDB and Spark cannot hold, its text."""
    table = passed(homes_parquet(tmp_path / "homes.parquet", {"given": array}))
    assert table.schema.field("given").type == kind
    assert table["given"].to_pylist()[0] == value


def test_parquet_binary_that_is_not_text_is_refused(tmp_path: Path) -> None:
    """Binary that is not UTF-8 has no text form: the file is refused, as before."""
    path = homes_parquet(tmp_path / "homes.parquet", {"scan": pa.array([b"\xff\xfe", b"x"])})
    with pytest.raises(InputError, match=r"column 'scan' \(binary\) has no text form"):
        passed(path)


def test_a_pass_through_column_may_also_be_a_request_field(tmp_path: Path) -> None:
    """A field column named in the passthrough is validated as text and rides along in
    its own type (Parquet) or polars' (CSV)."""
    path = homes_parquet(tmp_path / "homes.parquet", {"loan": pa.array([7, 8])})
    source = open_input(path, InputOptions(passthrough=("loan", "bedrooms")))
    (batch,) = list(source.batches())
    assert batch.checked["rule"].to_list() == [None, None]
    assert batch.passthrough.to_pylist() == [{"loan": 7, "bedrooms": 2}, {"loan": 8, "bedrooms": 2}]
