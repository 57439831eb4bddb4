"""Flattening (batchval/_internal/exports/flat.py): struct members as <column>_<member> columns,
lists and maps as JSON text, --nested drop, names unique ignoring case."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa

from batchval._internal.exports.flat import Nested, flat_table


def test_a_flattened_name_already_taken_gets_a_number() -> None:
    """A struct member whose flat name is another column's, or a column named like an
    earlier one but for case, is numbered, never lost."""
    table = pa.table({"s": pa.array([{"x": 1}]), "s_x": [2], "S_X": [3]})
    flat = flat_table(table, Nested.FLATTEN, lists_as_text=True)
    assert flat.to_pylist() == [{"s_x_3": 1, "s_x": 2, "S_X_2": 3}]


def test_struct_members_become_columns_in_place_and_share_the_struct_nulls() -> None:
    """A struct's members, depth after depth, take its place; a null struct gives null
    members."""
    inner = pa.struct([("z", pa.string())])
    kind = pa.struct([("x", pa.int64()), ("y", inner)])
    table = pa.table({"a": [1, 2], "s": pa.array([{"x": 1, "y": {"z": "q"}}, None], kind),
                      "b": ["u", "v"]})  # fmt: skip
    flat = flat_table(table, Nested.FLATTEN, lists_as_text=True)
    assert flat.column_names == ["a", "s_x", "s_y_z", "b"]
    assert flat.to_pylist()[1] == {"a": 2, "s_x": None, "s_y_z": None, "b": "v"}
    assert flat.schema.field("s_x").type == pa.int64()


def test_lists_and_maps_are_json_text_or_kept() -> None:
    """Lists and maps become JSON text (dates and decimals inside as JSON says them), or
    stay as they are when the format holds them."""
    table = pa.table(
        {
            "days": pa.array([[dt.date(2024, 1, 31)], None], pa.list_(pa.date32())),
            "sums": pa.array([[decimal.Decimal("1.50")], []], pa.list_(pa.decimal128(5, 2))),
            "m": pa.array([[("k", 1)], None], pa.map_(pa.string(), pa.int64())),
        }
    )
    text = flat_table(table, Nested.FLATTEN, lists_as_text=True)
    assert text.to_pylist() == [
        {"days": '["2024-01-31"]', "sums": "[1.5]", "m": '[["k", 1]]'},
        {"days": None, "sums": "[]", "m": None},
    ]
    kept = flat_table(table, Nested.FLATTEN, lists_as_text=False)
    assert kept.schema == table.schema


def test_drop_leaves_out_structs_lists_and_maps() -> None:
    """--nested drop keeps only the flat columns."""
    table = pa.table({"a": [1], "s": pa.array([{"x": 1}]), "l": pa.array([[1]]),
                      "m": pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64()))})  # fmt: skip
    assert flat_table(table, Nested.DROP, lists_as_text=True).column_names == ["a"]
