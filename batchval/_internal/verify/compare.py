"""What `batchval verify` compares, and `verify.parquet`, the differences it found.

The comparison cannot drift from the writer: for each valuation read back, the rows of
results.parquet that hold it are built again from the API's answer with the writer's own
column table (`contract/schemas`, each column taken from the record by name) and its own
conversion to Arrow (`arrow.column_values`), then compared value by value with what the
file holds. Only the columns the API's answer decides are compared (`COMPARED`): the
valuation, where it is, what was valued, the extras when the file has them. The
pass-through columns, `credits_charged`, `idempotency_key`, `row_number` and any column
this code does not know (a later release's, a lender's) are not. A nested column
(`commentary`, `rebuild_cost`) is compared member by member, and a difference names the
member (`commentary.area_insights.growth`).

Rows sharing a valuation are compared one by one: an edit to one of them is found. One
row of verify.parquet stands for one difference, with every row that holds it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import operator
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from batchval._internal.api import Valuation
from batchval._internal.contract import RESULT_TAIL, ValuedRow
from batchval._internal.place import Column, column_values

VERIFY_SCHEMA_VERSION = "1"
# The columns of results.parquet that the API's answer alone decides, in the file's order.
COMPARED = (
    "valuation_id",
    "mode",
    "valued_at",
    "estimate",
    "range_low",
    "range_high",
    "coverage",
    "currency",
    "indexed_to",
    "sector",
    "local_authority",
    "data_quality",
    "model_version",
    "input_postcode",
    "input_property_type",
    "bedrooms",
    "floor_area_sqm",
    "floor_area_source",
    "year_built",
    "built_form",
    "walls_energy_efficiency",
    "reference",
    "commentary",
    "rebuild_cost",
)
BATCH = 1000  # valuations compared at a time: their rows are built and converted together


@dataclasses.dataclass(frozen=True, slots=True)
class Difference:
    """One row of verify.parquet."""

    valuation_id: str | None
    row_numbers: tuple[int, ...]
    field: str | None
    api_value: str | None
    our_value: str | None
    detail: str


def _verify(name: str, kind: pa.DataType, description: str) -> Column[Difference]:
    return Column(name, kind, description, operator.attrgetter(name))


VERIFY_COLUMNS: tuple[Column[Difference], ...] = (
    _verify(
        "valuation_id", pa.string(), "The valuation read back (null: a results row without one)."
    ),
    _verify(
        "row_numbers",
        pa.list_(pa.int64()),
        "The `row_number`s of the results rows that hold this difference.",
    ),
    _verify(
        "field",
        pa.string(),
        "The results column that differs (`commentary.summary` for a nested member); "
        "null when the whole answer differs (unreadable, or another valuation's).",
    ),
    _verify("api_value", pa.string(), "What the API says, as text; null when absent."),
    _verify("our_value", pa.string(), "What results.parquet holds, as text; null when absent."),
    _verify("detail", pa.string(), "The difference in words."),
)


def verify_schema() -> pa.Schema:
    return pa.schema(
        [c.field() for c in VERIFY_COLUMNS],
        metadata={"batchval.file": "verify", "batchval.schema_version": VERIFY_SCHEMA_VERSION},
    )


def differences_table(differences: Sequence[Difference]) -> pa.Table:
    schema = verify_schema()
    arrays = [column_values(differences, c) for c in VERIFY_COLUMNS]
    return pa.Table.from_arrays(arrays, schema=schema)


class HeldResults:
    """The compared columns of results.parquet, and where each valuation's rows are."""

    def __init__(self, table: pa.Table) -> None:
        self.columns = [
            c for c in RESULT_TAIL if c.name in COMPARED and c.name in table.schema.names
        ]
        self._table = table
        self._numbers: list[int] = [int(n) for n in table.column("row_number").to_pylist()]
        self.rows_of: dict[str | None, list[int]] = {}  # valuation id -> positions in the file
        for at, found in enumerate(table.column("valuation_id").to_pylist()):
            self.rows_of.setdefault(found, []).append(at)

    @classmethod
    def read(cls, path: Path) -> HeldResults:
        """The file's valued rows: a row there for its index columns alone (`source`
        `index`, no valuation) has nothing to read back."""
        names = pq.read_schema(path).names
        wanted = ["row_number", *(name for name in COMPARED if name in names)]
        table = pq.read_table(path, columns=[*wanted, *(["source"] if "source" in names else [])])
        if "source" in names:
            table = table.filter(pc.not_equal(table.column("source"), "index")).select(wanted)
        return cls(table)

    @property
    def rows(self) -> int:
        return len(self._numbers)

    def ids(self) -> list[str]:
        """The distinct valuation ids, in the order of their first row."""
        return [found for found in self.rows_of if found is not None]

    def number(self, at: int) -> int:
        """The row_number of the row at this position in the file."""
        return self._numbers[at]

    def numbers(self, valuation_id: str | None) -> tuple[int, ...]:
        return tuple(self._numbers[at] for at in self.rows_of.get(valuation_id, []))

    def values(self, positions: Sequence[int], column: Column[Any]) -> list[Any]:
        taken = self._table.column(column.name).take(pa.array(positions, pa.int64()))
        return list(taken.to_pylist())


class Comparer:
    """Collects the valuations read back and compares them a batch at a time."""

    def __init__(self, held: HeldResults) -> None:
        self._held = held
        self._waiting: list[Valuation] = []
        self.differences: list[Difference] = []
        self.compared = 0  # valuations compared
        unnamed = held.numbers(None)
        if unnamed:
            self.differences.append(
                Difference(
                    None,
                    unnamed,
                    "valuation_id",
                    None,
                    None,
                    "results rows without a valuation id cannot be read back",
                )
            )

    def add(self, valuation: Valuation, asked: str) -> None:
        """The answer read back for the valuation `asked` for."""
        if valuation.id != asked:
            self.whole(asked, f"the API answered valuation {valuation.id} when asked for it")
            return
        self._waiting.append(valuation)
        if len(self._waiting) >= BATCH:
            self._compare()

    def whole(self, valuation_id: str, detail: str, *, field: str | None = None) -> None:
        """The valuation cannot be compared at all: the API refused or garbled it."""
        self.compared += 1
        ours = valuation_id if field == "valuation_id" else None
        self.differences.append(
            Difference(valuation_id, self._held.numbers(valuation_id), field, None, ours, detail)
        )

    def finish(self) -> list[Difference]:
        """Every difference, in the order of the rows that hold them."""
        self._compare()
        return sorted(self.differences, key=lambda d: d.row_numbers[:1] or (0,))

    def _compare(self) -> None:
        held, waiting = self._held, self._waiting
        if not waiting:
            return
        self._waiting = []
        self.compared += len(waiting)
        positions: list[int] = []
        rebuilt: list[ValuedRow] = []  # each results row, as the API's answer makes it
        for valuation in waiting:
            for at in held.rows_of[valuation.id]:
                positions.append(at)
                rebuilt.append(ValuedRow(held.number(at), "", 0, valuation, valuation.id))
        found: dict[tuple[str, str, str | None, str | None], list[int]] = {}
        for column in held.columns:
            api = column_values(rebuilt, column).to_pylist()
            ours = held.values(positions, column)
            for row, theirs, mine in zip(rebuilt, api, ours, strict=True):
                for name, said, held_value in _leaves(column.name, theirs, mine):
                    key = (str(row.valuation_id), name, _text(said), _text(held_value))
                    found.setdefault(key, []).append(row.row_number)
        for (valuation_id, name, said_text, held_text), rows in found.items():
            detail = (
                f"the API says {_quoted(said_text)}, results.parquet holds {_quoted(held_text)}"
            )
            self.differences.append(
                Difference(valuation_id, tuple(rows), name, said_text, held_text, detail)
            )


def _leaves(name: str, api: Any, ours: Any) -> Iterator[tuple[str, Any, Any]]:
    """The members that differ, by dotted name (a struct member by member)."""
    if isinstance(api, Mapping) and isinstance(ours, Mapping):
        for member in [*api, *(m for m in ours if m not in api)]:
            yield from _leaves(f"{name}.{member}", api.get(member), ours.get(member))
    elif api != ours:
        yield name, api, ours


def _quoted(text: str | None) -> str:
    return "null" if text is None else repr(text)


def _text(value: Any) -> str | None:
    """A value as verify.parquet shows it: text as it is, numbers as written, instants in
    ISO 8601, a struct as JSON, null as null."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value, ensure_ascii=False, default=str)
