"""`verify/compare`: what verify compares, built with the writer's own columns; and
verify.parquet's schema as docs/outputs.md documents it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from api_bodies import valuation_body

from batchval._internal.api.models import Valuation
from batchval._internal.contract.records import ValuedRow
from batchval._internal.contract.schemas import RESULT_TAIL, results_schema
from batchval._internal.place.arrow import column_values
from batchval._internal.verify.compare import (
    COMPARED,
    Comparer,
    Difference,
    HeldResults,
    differences_table,
    verify_schema,
)

FIRST, SECOND = "val_" + "a" * 26, "val_" + "b" * 26


def body(valuation_id: str, estimate: int = 250000) -> dict[str, Any]:
    """A valuation as the API writes one, with commentary (docs/api.md, Valuation)."""
    return valuation_body(
        valuation_id,
        estimate=estimate,
        valued_at="2026-11-23T10:00:00.123456Z",
        commentary={"summary": "A home.", "areaInsights": {"growth": "Up."}},
    )


def results_file(
    tmp_path: Path, rows: list[tuple[int, str]], extra: pa.Table | None = None
) -> Path:
    """A results.parquet written with the writer's columns: (row_number, valuation id)."""
    schema = results_schema(pa.schema([("loan_id", pa.string())]), {"commentary"})
    records = [ValuedRow(n, f"key-{n}", 10, Valuation.from_json(body(v)), v) for n, v in rows]
    names = {c.name: c for c in RESULT_TAIL}
    arrays = [
        pa.array([n for n, _ in rows], pa.int64()),
        pa.array([f"LN-{n}" for n, _ in rows]),
        *(column_values(records, names[f.name]) for f in list(schema)[2:]),
    ]
    table = pa.Table.from_arrays(arrays, schema=schema)
    if extra is not None:
        for field in extra.schema:
            table = table.append_column(field, extra.column(field.name))
    path = tmp_path / "results.parquet"
    pq.write_table(table, path)
    return path


def test_compared_columns_are_the_writers() -> None:
    """Every compared name is a result column whose value comes from the answer (or the
    valuation id); the columns the run decides are never compared."""
    by_name = {c.name: c for c in RESULT_TAIL}
    assert all(name in by_name for name in COMPARED)
    assert all(by_name[n].of_part is not None for n in COMPARED if n != "valuation_id")
    assert {"credits_charged", "idempotency_key", "row_number"}.isdisjoint(COMPARED)


def test_the_same_answer_agrees_and_unknown_columns_are_ignored(tmp_path: Path) -> None:
    """The answers that made the file agree with it; a column verify does not know (a
    lender's `indexed_ltv`) and the pass-through columns are not read."""
    extra = pa.table({"indexed_ltv": pa.array([0.5, 0.6, 0.7])})
    path = results_file(tmp_path, [(1, FIRST), (2, SECOND), (3, FIRST)], extra)
    held = HeldResults.read(path)
    assert held.ids() == [FIRST, SECOND]
    assert "indexed_ltv" not in [c.name for c in held.columns]
    comparer = Comparer(held)
    for valuation_id in (FIRST, SECOND):
        comparer.add(Valuation.from_json(body(valuation_id)), valuation_id)
    assert comparer.finish() == []
    assert comparer.compared == 2


def test_a_difference_names_its_rows_and_nested_member(tmp_path: Path) -> None:
    """Two rows sharing a valuation and the same difference make one difference naming
    both rows; a nested member is named by its dotted path, values shown as text."""
    held = HeldResults.read(results_file(tmp_path, [(1, FIRST), (2, SECOND), (3, FIRST)]))
    comparer = Comparer(held)
    changed = body(FIRST, 260000)
    changed["commentary"]["areaInsights"]["growth"] = "Down."
    comparer.add(Valuation.from_json(changed), FIRST)
    comparer.add(Valuation.from_json(body(SECOND)), SECOND)
    found = {(d.valuation_id, d.field): d for d in comparer.finish()}
    assert set(found) == {
        (FIRST, "estimate"),
        (FIRST, "range_low"),
        (FIRST, "range_high"),
        (FIRST, "commentary.area_insights.growth"),
    }
    estimate = found[FIRST, "estimate"]
    assert (estimate.row_numbers, estimate.api_value, estimate.our_value) == (
        (1, 3),
        "260000",
        "250000",
    )
    growth = found[FIRST, "commentary.area_insights.growth"]
    assert (growth.api_value, growth.our_value) == ("Down.", "Up.")


def test_an_answer_for_another_id_and_rows_without_an_id(tmp_path: Path) -> None:
    """The API answering another valuation, and results rows with no id, are differences."""
    path = results_file(tmp_path, [(1, FIRST), (2, FIRST)])
    table = pq.read_table(path)
    at = table.schema.get_field_index("valuation_id")
    ids = pa.array([FIRST, None], pa.string())
    pq.write_table(table.set_column(at, table.schema.field(at), ids), path)
    comparer = Comparer(HeldResults.read(path))
    comparer.add(Valuation.from_json(body(SECOND)), FIRST)
    found = [(d.valuation_id, d.row_numbers, d.field) for d in comparer.finish()]
    assert found == [(FIRST, (1,), None), (None, (2,), "valuation_id")]


def test_verify_parquet_names_itself() -> None:
    """verify.parquet says what it is in its metadata (docs/outputs.md draws its columns
    from VERIFY_COLUMNS as the site is built: tests/house/test_docs.py)."""
    assert verify_schema().metadata[b"batchval.file"] == b"verify"


def test_differences_table_round_trips() -> None:
    """A difference becomes one row of verify.parquet's schema, text kept as text."""
    found = Difference(FIRST, (1, 3), "estimate", "1", None, "the API says '1'")
    table = differences_table([found])
    assert table.schema.equals(verify_schema(), check_metadata=True)
    assert table.to_pylist() == [
        {
            "valuation_id": FIRST,
            "row_numbers": [1, 3],
            "field": "estimate",
            "api_value": "1",
            "our_value": None,
            "detail": "the API says '1'",
        }
    ]
    assert json.dumps(table.to_pylist())  # plain values only
