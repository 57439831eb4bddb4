"""Records to Arrow (batchval/_internal/place/arrow.py): columns, coercion, pass-through values."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Generator
from typing import Any

import pyarrow as pa
import pytest

from batchval._internal.api.models import Valuation
from batchval._internal.place.arrow import (
    Column,
    PassthroughValues,
    column_array,
    column_table,
    column_values,
)
from batchval._internal.sandbox.data import valuation_parts

MS = pa.timestamp("ms", tz="UTC")
COST = pa.struct([("low", pa.int64()), ("prices_as_of", pa.string())])
COST_JSON = pa.struct([("low", pa.int64()), ("pricesAsOf", pa.string())])


@pytest.mark.parametrize(
    ("kind", "values", "expected"),
    [
        (pa.int64(), [1, None, 3], [1, None, 3]),
        (pa.int64(), [250000.0, 2], [250000, 2]),  # a whole float is a whole number
        (pa.int64(), [2.5, 2], [None, 2]),  # never truncated to 2
        (pa.int64(), [2**70, 1], [None, 1]),
        (pa.int64(), [True, "3", 4], [None, None, 4]),
        (pa.float64(), [1, 2.5, "x", False], [1.0, 2.5, None, None]),
        (pa.bool_(), [True, "yes", 1], [True, None, None]),
        (pa.string(), ["a", 3, {"b": "£"}], ["a", "3", '{"b": "£"}']),
        (
            MS,
            ["2025-03-01T11:00:00.123456+01:00"],
            [dt.datetime(2025, 3, 1, 10, 0, 0, 123_000, dt.UTC)],
        ),
        (
            MS,
            ["2025-03-01t10:00:00z", "soon", 5],
            [dt.datetime(2025, 3, 1, 10, tzinfo=dt.UTC), None, None],
        ),
        (
            MS,
            ["2025-03-01T10:00:00"],
            [dt.datetime(2025, 3, 1, 10, tzinfo=dt.UTC)],
        ),  # no offset: UTC
    ],
)
def test_values_are_converted_or_coerced_or_null(
    kind: pa.DataType, values: list[Any], expected: list[Any]
) -> None:
    """A value that fits its column is kept; one that strays is coerced (text) or null,
    and the rest of the batch is converted as ever."""
    array = column_array(values, pa.field("x", kind))
    assert array.type == kind
    assert array.to_pylist() == expected


def test_a_struct_is_read_under_its_json_type_then_viewed_as_the_column() -> None:
    """A column's json_type names the JSON's own members; the array comes out in the
    column's type, and a member off the spec is coerced or null."""
    column: Column[Any] = Column("cost", COST, "A cost.", lambda r: r, json_type=COST_JSON)
    records = [{"low": 1, "pricesAsOf": "2025-01"}, {"low": "cheap", "pricesAsOf": 3}, None]
    array = column_values(records, column)
    assert array.type == COST
    assert array.to_pylist() == [
        {"low": 1, "prices_as_of": "2025-01"},
        {"low": None, "prices_as_of": "3"},
        None,
    ]


@pytest.mark.parametrize("name", ["cost", "commentary", "rebuild_cost"])
def test_a_column_name_decides_nothing(name: str) -> None:
    """Without a json_type a struct is read under its own member names, whatever the
    column is called: the conversion knows no product's columns."""
    array = column_array([{"prices_as_of": "2025-01", "pricesAsOf": "x"}], pa.field(name, COST))
    assert array.to_pylist() == [{"low": None, "prices_as_of": "2025-01"}]


NOW = dt.datetime(2025, 3, 1, 10, 0, tzinfo=dt.UTC)
VALUATION = Valuation.from_json(
    {
        "id": "val_" + "a" * 26,
        "valuedAt": "2025-03-01T10:00:00Z",
        **valuation_parts({"postcode": "B1 1AA", "propertyType": "flat", "bedrooms": 2}, now=NOW),
    }
)


@dataclasses.dataclass(frozen=True)
class _Record:
    row_number: int
    valuation: Valuation | None
    note: str


def test_a_batch_becomes_row_numbers_pass_through_then_columns() -> None:
    """column_table: row_number, the pass-through arrays as given, then each column by its
    getter; a column of the valuation alone is null where the record has none."""
    columns: tuple[Column[_Record], ...] = (
        Column("note", pa.string(), "A note.", lambda r: r.note),
        Column(
            "estimate",
            pa.int64(),
            "",
            lambda r: 0,
            part=lambda r: r.valuation,
            of_part=lambda v: v.figures.estimate,
        ),
    )
    schema = pa.schema(
        [("row_number", pa.int64(), False), ("loan", pa.int64()), *(c.field() for c in columns)]
    )
    records = [_Record(2, VALUATION, "a"), _Record(5, None, "b")]
    table = column_table(records, [pa.array([7, None], pa.int64())], columns, schema)
    assert table.schema.equals(schema, check_metadata=True)
    assert table.to_pylist() == [
        {"row_number": 2, "loan": 7, "note": "a", "estimate": VALUATION.figures.estimate},
        {"row_number": 5, "loan": None, "note": "b", "estimate": None},
    ]


class _Store:
    """Stored pass-through batches, each with the row number of its first row."""

    def __init__(self, schema: pa.Schema | None, batches: list[tuple[int, list[int]]]) -> None:
        self.schema = schema
        self.batches = batches
        self.closed = False

    def passthrough_schema(self) -> pa.Schema | None:
        return self.schema

    def passthrough_batches(self) -> Generator[tuple[int, pa.RecordBatch], None, None]:
        try:
            for first, loans in self.batches:
                yield first, pa.record_batch({"loan": pa.array(loans, pa.int64())})
        finally:
            self.closed = True


def test_passthrough_values_follow_the_rows_asked_for() -> None:
    """Rows asked for in ascending order, over several calls, get their stored values;
    rows no stored batch holds get null; close lets the stored batches go."""
    store = _Store(pa.schema([("loan", pa.int64())]), [(1, [11, 12, 13]), (6, [16, 17])])
    given = PassthroughValues(store)
    assert [a.to_pylist() for a in given.of([1, 3, 4])] == [[11, 13, None]]
    assert [a.to_pylist() for a in given.of([5, 7, 9])] == [[None, 17, None]]
    assert [a.type for a in given.of([])] == [pa.int64()]
    given.close()
    assert store.closed


def test_no_passthrough_columns_give_no_arrays() -> None:
    """An input without pass-through columns adds none to a table."""
    given = PassthroughValues(_Store(None, []))
    assert given.schema == pa.schema([])
    assert given.of([1, 2]) == []
    given.close()
