"""The output stage: results.parquet and problems.parquet from a real checkpoint."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
import zoneinfo
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from support import settle_sent

from batchval._internal import logs
from batchval._internal.api import Valuation, record_of
from batchval._internal.api.vocabulary import INCLUDE_ITEMS
from batchval._internal.contract import schemas
from batchval._internal.contract.lender import LENDER_GROUPS
from batchval._internal.contract.problems import write_problems
from batchval._internal.contract.records import FLOOR_AREA_HINT, ProblemRow
from batchval._internal.contract.schemas import (
    PROBLEM_COLUMNS,
    RESULT_COLUMNS,
    passthrough_columns,
    problems_schema,
    results_schema,
)
from batchval._internal.input.layout import SOURCE_ROW
from batchval._internal.place import arrow, files
from batchval._internal.sandbox.data import valuation_parts
from batchval._internal.store.checkpoint import Checkpoint
from batchval._internal.store.database import Database
from batchval._internal.valuations import writer
from batchval._internal.valuations.writer import write_results

NOW = dt.datetime(2025, 3, 1, 10, 0, tzinfo=dt.UTC)
VALUED_AT = dt.datetime(2025, 3, 1, 10, 0, 0, 250_000, tzinfo=dt.UTC)
HOUSE = {
    "postcode": "LS1 4AP",
    "propertyType": "semi_detached",
    "floorAreaSqm": 96.5,
    "yearBuilt": 1931,
    "builtForm": "semi_detached",
    "wallsEnergyEfficiency": "good",
    "reference": "case-17",
}
FLAT = {"postcode": "B1 1AA", "propertyType": "flat", "bedrooms": 2}
TS = pa.timestamp("ms", tz="UTC")
S = pa.string()
I64 = pa.int64()

INSIGHTS = pa.struct(
    [
        (name, S)
        for name in (
            "seasonality",
            "growth",
            "benchmark",
            "price_velocity",
            "market_structure",
            "timing",
            "recovery",
            "investors",
            "resale_returns",
            "new_build",
            "property_types",
            "streets",
            "price_spread",
            "overview",
        )
    ]
)
COMMENTARY = pa.struct(
    [
        ("summary", S),
        ("range_width", S),
        ("range_note", S),
        ("property", S),
        ("location", S),
        ("market_momentum", S),
        ("market_conditions", S),
        ("energy_efficiency", S),
        ("data_quality", S),
        ("market_signals", S),
        ("area_insights", INSIGHTS),
        ("disclaimer", S),
    ]
)
REBUILD = pa.struct(
    [
        ("estimated", pa.bool_()),
        ("reason", S),
        ("low", I64),
        ("typical", I64),
        ("high", I64),
        ("prices_as_of", S),
    ]
)
RESULT_TAIL = [
    ("source", S),
    ("valuation_id", S),
    ("mode", S),
    ("valued_at", TS),
    ("estimate", I64),
    ("range_low", I64),
    ("range_high", I64),
    ("coverage", pa.float64()),
    ("currency", S),
    ("indexed_to", S),
    ("sector", S),
    ("local_authority", S),
    ("data_quality", S),
    ("model_version", TS),
    ("input_postcode", S),
    ("input_property_type", S),
    ("bedrooms", I64),
    ("floor_area_sqm", pa.float64()),
    ("floor_area_source", S),
    ("year_built", I64),
    ("built_form", S),
    ("walls_energy_efficiency", S),
    ("reference", S),
    ("commentary", COMMENTARY),
    ("rebuild_cost", REBUILD),
    ("credits_charged", I64),
    ("idempotency_key", S),
]
EXTRAS = {"commentary", "rebuild_cost"}
PROBLEM_TAIL = [
    ("stage", S),
    ("field", S),
    ("type", S),
    ("code", S),
    ("status", I64),
    ("detail", S),
    ("retryable", pa.bool_()),
    ("attempts", I64),
    ("valuation_id", S),
    ("answer", S),
]


@pytest.fixture
def checkpoint(tmp_path: Path) -> Iterator[Checkpoint]:
    opened = Checkpoint(Database.open(tmp_path))
    yield opened
    opened.database.close()


def _body(
    request: dict[str, Any] = HOUSE,
    *,
    include: Sequence[str] = (),
    test_mode: bool = False,
    credits: int = 10,
    number: int = 1,
) -> dict[str, Any]:
    """A valuation body as the sandbox answers it."""
    wanted = {**request, "include": list(include)} if include else dict(request)
    body: dict[str, Any] = {"id": f"val_{number:026d}"}
    if test_mode:
        body["mode"] = "test"
    if "reference" in request:
        body["reference"] = request["reference"]
    body["valuedAt"] = "2025-03-01T10:00:00.250Z"
    body.update(valuation_parts(wanted, now=NOW))
    if not test_mode:
        body["charge"] = {"credits": credits, "balanceAfter": 990}
    return body


_Row = tuple[int, str | None, str | None, str | None, str | None]


@dataclasses.dataclass(frozen=True)
class _Given:
    """A row to ingest, with its pass-through values (column -> value)."""

    row: _Row
    passthrough: dict[str, Any]


def _row(
    number: int,
    key: str | None,
    passthrough: dict[str, Any] | None = None,
    *,
    field: str | None = None,
    rule: str | None = None,
    detail: str | None = None,
) -> _Given:
    return _Given((number, key, field, rule, detail), passthrough or {})


def _ingest(
    checkpoint: Checkpoint,
    rows: Sequence[_Given],
    include: Mapping[str, Sequence[str]] | None = None,
    passthrough: pa.Schema | None = None,
) -> None:
    """The rows (consecutive), their requests and their pass-through values (of
    `passthrough`, or as pyarrow reads the values); `include`: the extras that some
    requests ask for."""
    keys = sorted({given.row[1] for given in rows if given.row[1] is not None})
    asked = include or {}
    requests = [
        (key, json.dumps({"key": key, **({"include": asked[key]} if key in asked else {})}))
        for key in keys
    ]
    values = [given.passthrough for given in rows]
    batch = None
    if passthrough is not None or any(values):
        batch = pa.RecordBatch.from_pylist(values, schema=passthrough)
    checkpoint.rows.add([given.row for given in rows], requests, batch)
    checkpoint.rows.finish()


def _value(checkpoint: Checkpoint, key: str, body: dict[str, Any]) -> None:
    """The answer kept and recorded as settling does: with its record, read once."""
    checkpoint.requests.record_answer(key, json.dumps(body).encode())
    credits = (body.get("charge") or {}).get("credits", 0)
    checkpoint.requests.record_done(key, credits, record_of(body))


def _results(checkpoint: Checkpoint, path: Path) -> pa.Table:
    write_results(checkpoint, path)
    return pq.read_table(path)


def _given(*fields: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema(list(fields))


def _lines() -> pa.Schema:
    """The pass-through a run stores: each row's line and no column of the input's."""
    return _given((SOURCE_ROW, pa.int64()))


@pytest.mark.parametrize(
    ("extras", "tail"),
    [
        (INCLUDE_ITEMS, RESULT_TAIL),
        ((), [c for c in RESULT_TAIL if c[0] not in EXTRAS]),
        (("commentary",), [c for c in RESULT_TAIL if c[0] != "rebuild_cost"]),
        (("rebuildCost",), [c for c in RESULT_TAIL if c[0] != "commentary"]),
    ],
)
def test_results_schema_is_exact(
    extras: Sequence[str], tail: list[tuple[str, pa.DataType]]
) -> None:
    """results.parquet: row_number, pass-through columns as typed, then the fixed columns
    in order, commentary and rebuild_cost only when asked for."""
    schema = results_schema(_given(("loan_id", S), ("balance", pa.decimal128(12, 2))), extras)
    expected = [("row_number", I64), ("loan_id", S), ("balance", pa.decimal128(12, 2)), *tail]
    assert [(f.name, f.type) for f in schema] == expected
    assert [f.name for f in schema if not f.nullable] == ["row_number"]


def test_problems_schema_is_exact() -> None:
    """problems.parquet: row_number, pass-through columns as typed, then the fixed columns
    in order."""
    schema = problems_schema(_given(("loan_id", I64)))
    expected = [("row_number", I64), ("loan_id", I64), *PROBLEM_TAIL]
    assert [(f.name, f.type) for f in schema] == expected
    assert [f.name for f in schema if not f.nullable] == ["row_number"]


def test_problem_columns_are_the_problem_record() -> None:
    """Each problems column is the ProblemRow member of its name, in the record's order."""
    members = [f.name for f in dataclasses.fields(ProblemRow)]
    assert ["row_number", *(c.name for c in schemas.PROBLEM_TAIL)] == members


@pytest.mark.parametrize(
    ("columns", "schema"),
    [
        (RESULT_COLUMNS, results_schema(_lines(), (*INCLUDE_ITEMS, *LENDER_GROUPS))),
        (PROBLEM_COLUMNS, problems_schema(_lines())),
    ],
)
def test_every_fixed_column_has_a_one_line_description(
    columns: dict[str, str], schema: pa.Schema
) -> None:
    """The description tables list the fixed columns in order, as the files' metadata."""
    assert list(columns) == schema.names
    for field in schema:
        description = columns[field.name]
        assert description.strip()
        assert "\n" not in description
        assert field.metadata == {b"description": description.encode()}


def test_sandbox_body_round_trips(checkpoint: Checkpoint, tmp_path: Path) -> None:
    """Every figure of a realistic valuation body lands in its column."""
    body = _body(include=("commentary", "rebuildCost"))
    _ingest(
        checkpoint,
        [_row(1, "k1", {"loan_id": "L-001"})],
        include={"k1": ["commentary", "rebuildCost"]},
    )
    _value(checkpoint, "k1", body)
    assert write_results(checkpoint, tmp_path / "results.parquet") == 1
    row = pq.read_table(tmp_path / "results.parquet").to_pylist()[0]

    figures = body["valuation"]
    assert {k: v for k, v in row.items() if k not in {"commentary", "rebuild_cost"}} == {
        "row_number": 1,
        "loan_id": "L-001",
        "source": "api",
        "valuation_id": body["id"],
        "mode": "live",
        "valued_at": VALUED_AT,
        "estimate": figures["estimate"],
        "range_low": figures["range"]["low"],
        "range_high": figures["range"]["high"],
        "coverage": figures["range"]["coverage"],
        "currency": "GBP",
        "indexed_to": "2025-01",
        "sector": "LS1 4",
        "local_authority": body["location"]["localAuthority"],
        "data_quality": "full",
        "model_version": dt.datetime(2024, 11, 4, 9, 30, tzinfo=dt.UTC),
        "input_postcode": "LS1 4AP",
        "input_property_type": "semi_detached",
        "bedrooms": None,
        "floor_area_sqm": 96.5,
        "floor_area_source": "request",
        "year_built": 1931,
        "built_form": "semi_detached",
        "walls_energy_efficiency": "good",
        "reference": "case-17",
        "credits_charged": 10,
        "idempotency_key": "k1",
    }
    text = body["commentary"]
    assert row["commentary"]["range_width"] == text["rangeWidth"]
    assert row["commentary"]["market_signals"] == text["marketSignals"]
    assert row["commentary"]["disclaimer"] == text["disclaimer"]
    insights = row["commentary"]["area_insights"]
    assert insights["price_velocity"] == text["areaInsights"].get("priceVelocity")
    assert sum(v is not None for v in insights.values()) == len(text["areaInsights"])
    assert row["rebuild_cost"] == {
        "estimated": True,
        "reason": None,
        "low": body["rebuildCost"]["low"],
        "typical": body["rebuildCost"]["typical"],
        "high": body["rebuildCost"]["high"],
        "prices_as_of": body["rebuildCost"]["pricesAsOf"],
    }
    frame = pl.read_parquet(tmp_path / "results.parquet")
    assert frame["estimate"].to_list() == [figures["estimate"]]
    assert frame["commentary"].struct.field("area_insights").struct.field("growth").to_list() == [
        text["areaInsights"].get("growth")
    ]


def test_test_mode_body_is_marked_test_and_free(checkpoint: Checkpoint, tmp_path: Path) -> None:
    """A test-mode answer (mode test, no charge) gives mode `test` and 0 credits."""
    _ingest(checkpoint, [_row(1, "k1"), _row(2, "k2")])
    _value(checkpoint, "k1", _body(FLAT, test_mode=True))
    _value(checkpoint, "k2", _body(FLAT))
    table = _results(checkpoint, tmp_path / "results.parquet")
    assert table["mode"].to_pylist() == ["test", "live"]
    assert table["credits_charged"].to_pylist() == [0, 10]
    assert table["floor_area_source"].to_pylist() == ["bedrooms", "bedrooms"]
    assert table["bedrooms"].to_pylist() == [2, 2]


@pytest.mark.parametrize(
    ("text", "instant"),
    [
        ("2025-03-01T10:00:00Z", dt.datetime(2025, 3, 1, 10, tzinfo=dt.UTC)),
        ("2025-03-01T11:00:00.123+01:00", dt.datetime(2025, 3, 1, 10, 0, 0, 123_000, dt.UTC)),
        ("2025-03-01T10:00:00.123456Z", dt.datetime(2025, 3, 1, 10, 0, 0, 123_000, dt.UTC)),
        ("2025-03-01T04:30:00-05:30", dt.datetime(2025, 3, 1, 10, tzinfo=dt.UTC)),
        ("2025-03-01t10:00:00z", dt.datetime(2025, 3, 1, 10, tzinfo=dt.UTC)),
        ("2025-03-01t10:00:00.123456z", dt.datetime(2025, 3, 1, 10, 0, 0, 123_000, dt.UTC)),
        ("not a time", None),
    ],
)
def test_valued_at_is_read_as_a_utc_instant(
    checkpoint: Checkpoint, tmp_path: Path, text: str, instant: dt.datetime | None
) -> None:
    """valuedAt with Z or an offset becomes the UTC instant (ms); an unreadable one null."""
    _ingest(checkpoint, [_row(1, "k1"), _row(2, "k2")])
    _value(checkpoint, "k1", {**_body(), "valuedAt": text})
    _value(checkpoint, "k2", _body())
    table = _results(checkpoint, tmp_path / "results.parquet")
    assert table["valued_at"].to_pylist() == [instant, VALUED_AT]


def test_structs_are_null_when_absent(checkpoint: Checkpoint, tmp_path: Path) -> None:
    """commentary and rebuild_cost are null on a row that did not ask for them; absent
    members are null."""
    _ingest(
        checkpoint, [_row(1, "k1"), _row(2, "k2")], include={"k2": ["commentary", "rebuildCost"]}
    )
    _value(checkpoint, "k1", _body())
    _value(checkpoint, "k2", _body(FLAT, include=("commentary", "rebuildCost")))
    table = _results(checkpoint, tmp_path / "results.parquet")
    assert table["commentary"].to_pylist()[0] is None
    assert table["rebuild_cost"].to_pylist()[0] is None
    thin = table["commentary"].to_pylist()[1]
    assert thin["area_insights"] is None  # a sector with thin market data
    assert thin["market_signals"] is None
    assert thin["market_momentum"] == "unknown"
    assert table["rebuild_cost"].to_pylist()[1] == {
        "estimated": False,
        "reason": "flat",
        "low": None,
        "typical": None,
        "high": None,
        "prices_as_of": None,
    }


def test_identical_requests_share_the_valuation_and_charge_once(
    checkpoint: Checkpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows sharing a request all get its valuation; only the first carries the credits."""
    monkeypatch.setattr(writer, "BATCH_ROWS", 2)  # the shared key spans batches
    _ingest(checkpoint, [_row(n, "k1" if n % 2 else "k2") for n in range(1, 7)])
    _value(checkpoint, "k1", _body(number=1))
    _value(checkpoint, "k2", _body(FLAT, number=2))
    table = _results(checkpoint, tmp_path / "results.parquet")
    assert table["row_number"].to_pylist() == [1, 2, 3, 4, 5, 6]
    assert table["valuation_id"].to_pylist() == [_body(number=n)["id"] for n in (1, 2) * 3]
    assert table["credits_charged"].to_pylist() == [10, 10, 0, 0, 0, 0]
    assert pc.sum(table["credits_charged"]).as_py() == checkpoint.counts().credits


def test_problem_columns(checkpoint: Checkpoint, tmp_path: Path) -> None:
    """Input problems and API problems fill stage, field, type, code, status, retryable."""
    _ingest(
        checkpoint,
        [
            _row(1, None, {"loan_id": "A"}, field="postcode", rule="postcode-format", detail="x"),
            _row(2, "k2", {"loan_id": "B"}),
            _row(3, "k3", {"loan_id": "C"}),
            _row(4, "k4", {"loan_id": None}),
            _row(5, None, {"loan_id": "E"}, rule="bedrooms-or-floor-area", detail="y"),
        ],
    )
    checkpoint.requests.mark_sent("k2")
    checkpoint.requests.mark_sent("k3")
    checkpoint.requests.mark_sent("k3")
    outside = {
        "type": "outside-coverage",
        "title": "Outside coverage",
        "status": 422,
        "code": "unknown_sector",
        "detail": "ZZ1 4AA is not in a valued sector.",
        "retryable": False,
    }
    checkpoint.requests.record_problem("k2", outside)
    invalid = {"type": "https://docs.example/errors/invalid-request", "status": 400, "detail": "d"}
    checkpoint.requests.record_problem(
        "k3", {**invalid, "code": "invalid_value", "retryable": True}
    )
    checkpoint.requests.record_problem("k4", {"type": "not-found", "status": 404, "detail": "gone"})
    assert write_problems(checkpoint, tmp_path / "problems.parquet") == 5
    rows = pq.read_table(tmp_path / "problems.parquet").to_pylist()
    assert rows == [
        {
            "row_number": 1,
            "loan_id": "A",
            "stage": "input",
            "field": "postcode",
            "type": "postcode-format",
            "code": None,
            "status": None,
            "detail": "x",
            "retryable": False,
            "attempts": 0,
            "valuation_id": None,
            "answer": None,
        },
        {
            "row_number": 2,
            "loan_id": "B",
            "stage": "api",
            "field": "postcode",
            "type": "outside-coverage",
            "code": "unknown_sector",
            "status": 422,
            "detail": "ZZ1 4AA is not in a valued sector.",
            "retryable": False,
            "attempts": 1,
            "valuation_id": None,
            "answer": None,
        },
        {
            "row_number": 3,
            "loan_id": "C",
            "stage": "api",
            "field": None,
            "type": "invalid-request",
            "code": "invalid_value",
            "status": 400,
            "detail": "d",
            "retryable": True,
            "attempts": 2,
            "valuation_id": None,
            "answer": None,
        },
        {
            "row_number": 4,
            "loan_id": None,
            "stage": "api",
            "field": None,
            "type": "not-found",
            "code": None,
            "status": 404,
            "detail": "gone",
            "retryable": False,
            "attempts": 0,
            "valuation_id": None,
            "answer": None,
        },
        {
            "row_number": 5,
            "loan_id": "E",
            "stage": "input",
            "field": None,
            "type": "bedrooms-or-floor-area",
            "code": None,
            "status": None,
            "detail": "y",
            "retryable": False,
            "attempts": 0,
            "valuation_id": None,
            "answer": None,
        },
    ]


@pytest.mark.parametrize(
    ("detail", "written"),
    [
        (
            "No typical floor area is known for a 7-bedroom flat in SW1A.",
            "No typical floor area is known for a 7-bedroom flat in SW1A. " + FLOOR_AREA_HINT,
        ),
        (
            "No typical floor area is known; send floorAreaSqm with a new Idempotency-Key.",
            "No typical floor area is known; send floorAreaSqm with a new Idempotency-Key.",
        ),
        ("Please supply the floor area.", "Please supply the floor area."),
        (None, FLOOR_AREA_HINT),
        ("", FLOOR_AREA_HINT),
    ],
)
def test_floor_area_required_tells_to_supply_a_floor_area(
    checkpoint: Checkpoint, tmp_path: Path, detail: str | None, written: str
) -> None:
    """A floor-area-required detail always tells the user to supply a floor area."""
    _ingest(checkpoint, [_row(1, "k1")])
    problem = {"type": "floor-area-required", "status": 422, "retryable": True}
    checkpoint.requests.record_problem(
        "k1", problem if detail is None else {**problem, "detail": detail}
    )
    write_problems(checkpoint, tmp_path / "problems.parquet")
    row = pq.read_table(tmp_path / "problems.parquet").to_pylist()[0]
    assert row["detail"] == written
    assert "floor area" in row["detail"].lower()
    assert (row["field"], row["type"], row["retryable"]) == (
        "floorAreaSqm",
        "floor-area-required",
        True,
    )


def test_empty_outputs_still_have_the_schema(checkpoint: Checkpoint, tmp_path: Path) -> None:
    """With nothing to write, both files are valid, with every column and no rows."""
    _ingest(checkpoint, [], passthrough=_given(("loan_id", S)))
    assert write_results(checkpoint, tmp_path / "results.parquet") == 0
    assert write_problems(checkpoint, tmp_path / "problems.parquet") == 0
    results = pq.read_table(tmp_path / "results.parquet")
    problems = pq.read_table(tmp_path / "problems.parquet")
    assert results.num_rows == problems.num_rows == 0
    given = _given(("loan_id", S))
    assert results.schema.equals(results_schema(given), check_metadata=True)
    assert problems.schema.equals(problems_schema(given), check_metadata=True)
    assert pl.read_parquet(tmp_path / "results.parquet").columns == results.schema.names


def test_a_failed_write_leaves_the_old_file(
    checkpoint: Checkpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old file stays whole until the new one is complete; a failure leaves no temp."""
    path = tmp_path / "results.parquet"
    _ingest(checkpoint, [_row(n, f"k{n}") for n in range(1, 5)])
    _value(checkpoint, "k1", _body())
    write_results(checkpoint, path)
    old = path.read_bytes()
    for n in range(2, 5):
        _value(checkpoint, f"k{n}", _body(number=n))

    monkeypatch.setattr(writer, "BATCH_ROWS", 1)
    monkeypatch.setattr(files, "ROW_GROUP_BYTES", 1)  # every row is written at once
    convert = arrow.column_table

    def failing(records: Sequence[Any], *args: Any) -> pa.Table:
        assert path.read_bytes() == old  # mid-write, readers still see the old file
        if records[0].row_number == 4:
            raise RuntimeError("killed")
        return convert(records, *args)

    monkeypatch.setattr(writer, "column_table", failing)
    with pytest.raises(RuntimeError, match="killed"):
        write_results(checkpoint, path)
    assert path.read_bytes() == old
    assert [p.name for p in tmp_path.iterdir() if "tmp" in p.name] == []

    monkeypatch.setattr(writer, "column_table", convert)
    assert write_results(checkpoint, path) == 4
    assert [p.name for p in tmp_path.iterdir() if "tmp" in p.name] == []


@pytest.mark.parametrize(
    ("given", "names"),
    [
        (["loan_id", "branch"], ["loan_id", "branch"]),
        (["estimate", "loan_id"], ["estimate_input", "loan_id"]),
        (["Sector", "MODE"], ["Sector_input", "MODE_input"]),
        (["row_number"], ["row_number_input"]),
        (["estimate", "estimate_input"], ["estimate_input", "estimate_input_input"]),
    ],
)
def test_passthrough_clash_is_renamed(given: list[str], names: list[str]) -> None:
    """A pass-through name that is a fixed column's (any case) gets `_input` added."""
    assert passthrough_columns(given, RESULT_COLUMNS) == names
    schema = results_schema(pa.schema([(name, S) for name in given]))
    assert schema.names[1 : 1 + len(given)] == names


def test_renamed_passthrough_keeps_its_values(checkpoint: Checkpoint, tmp_path: Path) -> None:
    """The renamed pass-through column holds the input's value; the fixed one the API's.
    A name taken in either file is renamed in both, so the two files agree."""
    _ingest(checkpoint, [_row(1, "k1", {"estimate": "user's guess", "type": "BTL"})])
    _value(checkpoint, "k1", _body())
    table = _results(checkpoint, tmp_path / "results.parquet")
    assert table["estimate_input"].to_pylist() == ["user's guess"]
    assert table["estimate"].to_pylist() == [_body()["valuation"]["estimate"]]
    assert table["type_input"].to_pylist() == ["BTL"]  # type is a problems column
    write_problems(checkpoint, tmp_path / "problems.parquet")
    names = pq.read_schema(tmp_path / "problems.parquet").names[1:3]
    assert names == ["estimate_input", "type_input"]


TYPED = pa.schema(
    [
        ("loan", I64),
        ("balance", pa.decimal128(12, 2)),
        ("opened", pa.date32()),
        ("reviewed", pa.timestamp("us", tz="Europe/London")),
        ("active", pa.bool_()),
        ("rate", pa.float64()),
        ("note", S),
    ]
)
TYPED_ROWS: list[dict[str, Any]] = [
    {
        "loan": 10 + n,
        "balance": decimal.Decimal(f"{n}123.45"),
        "opened": dt.date(2020, 1, n),
        "reviewed": dt.datetime(2024, 6, n, 9, 30, tzinfo=zoneinfo.ZoneInfo("Europe/London")),
        "active": n % 2 == 0,
        "rate": n / 8,
        "note": f"note {n}",
    }
    if n != 4
    else {}  # every value null
    for n in range(1, 8)
]


def test_passthrough_values_keep_their_types(
    checkpoint: Checkpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pass-through values come out as stored, in their types, each on its own row, in
    results and problems alike, however the rows fall into batches."""
    monkeypatch.setattr(writer, "BATCH_ROWS", 2)
    valued = {1, 2, 4, 6, 7}
    rows = [_row(n, f"k{n}", values) for n, values in enumerate(TYPED_ROWS, start=1)]
    _ingest(checkpoint, rows[:3], passthrough=TYPED)
    checkpoint.rows.add(
        [given.row for given in rows[3:]],
        [(f"k{n}", "{}") for n in range(4, 8)],
        pa.RecordBatch.from_pylist([given.passthrough for given in rows[3:]], schema=TYPED),
    )
    for n in range(1, 8):
        if n in valued:
            _value(checkpoint, f"k{n}", _body(number=n))
        else:
            checkpoint.requests.record_problem(f"k{n}", {"type": "outside-coverage", "status": 422})
    results = _results(checkpoint, tmp_path / "results.parquet")
    write_problems(checkpoint, tmp_path / "problems.parquet")
    problems = pq.read_table(tmp_path / "problems.parquet")
    for table, numbers in ((results, sorted(valued)), (problems, [3, 5])):
        assert table.schema.names[1 : 1 + len(TYPED)] == TYPED.names
        assert [table.schema.field(f.name).type for f in TYPED] == TYPED.types
        assert table["row_number"].to_pylist() == numbers
        expected = [{f.name: TYPED_ROWS[n - 1].get(f.name) for f in TYPED} for n in numbers]
        assert table.select(TYPED.names).to_pylist() == expected


def test_rows_without_stored_values_read_null(checkpoint: Checkpoint, tmp_path: Path) -> None:
    """A row whose batch stored no pass-through values (none given) reads null, and the
    rows after it still get their own."""
    for n in range(1, 5):
        values = pa.record_batch({"loan": [n]}) if n % 2 else None
        checkpoint.rows.add([(n, f"k{n}", None, None, None)], [(f"k{n}", "{}")], values)
    checkpoint.rows.finish()
    for n in range(1, 5):
        _value(checkpoint, f"k{n}", _body(number=n))
    table = _results(checkpoint, tmp_path / "results.parquet")
    assert table.schema.field("loan").type == I64
    assert table["loan"].to_pylist() == [1, None, 3, None]


def test_rows_are_in_row_order(
    checkpoint: Checkpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both files list rows by input position, each row in exactly one of them."""
    monkeypatch.setattr(writer, "BATCH_ROWS", 3)
    order = [7, 2, 9, 4, 1, 10, 5, 3, 8, 6]
    checkpoint.rows.add([_row(n, f"k{n}").row for n in order[:5]], [(f"k{n}", "{}") for n in order])
    checkpoint.rows.add([_row(n, f"k{n}").row for n in order[5:]], [])
    checkpoint.rows.finish()
    for n in order:
        if n % 3:
            _value(checkpoint, f"k{n}", _body(number=n))
        else:
            checkpoint.requests.record_problem(f"k{n}", {"type": "outside-coverage", "status": 422})
    valued = _results(checkpoint, tmp_path / "results.parquet")["row_number"].to_pylist()
    write_problems(checkpoint, tmp_path / "problems.parquet")
    refused = pq.read_table(tmp_path / "problems.parquet")["row_number"].to_pylist()
    assert valued == [1, 2, 4, 5, 7, 8, 10]
    assert refused == [3, 6, 9]


def test_values_off_the_spec_do_not_stop_the_write(checkpoint: Checkpoint, tmp_path: Path) -> None:
    """A value the record holds but its column cannot (a member of the wrong type, a number
    too big for int64, a date-time that is not one) is coerced (text) or null; the row is
    still written."""
    body = _body(include=("commentary", "rebuildCost"))
    odd = {
        **body,
        "valuedAt": "soon",
        "valuation": {**body["valuation"], "estimate": 2**70},
        "commentary": {**body["commentary"], "rangeWidth": 3, "areaInsights": "none"},
        "rebuildCost": {**body["rebuildCost"], "low": "cheap", "estimated": "yes"},
    }
    whole = {**body, "valuation": {**body["valuation"], "estimate": 250000.0}}
    _ingest(
        checkpoint, [_row(n, f"k{n}") for n in range(1, 4)], include={"k1": list(INCLUDE_ITEMS)}
    )
    for key, answer in zip(("k1", "k2", "k3"), (odd, body, whole), strict=True):
        _value(checkpoint, key, answer)
    table = _results(checkpoint, tmp_path / "results.parquet")
    assert table["estimate"].to_pylist() == [None, body["valuation"]["estimate"], 250000]
    assert table["valued_at"].to_pylist() == [None, VALUED_AT, VALUED_AT]
    first, second, _ = table["commentary"].to_pylist()
    assert (first["range_width"], first["area_insights"]) == ("3", None)
    assert first["summary"] == body["commentary"]["summary"]
    assert second["range_width"] == body["commentary"]["rangeWidth"]
    odd_cost = table["rebuild_cost"].to_pylist()[0]
    assert (odd_cost["low"], odd_cost["estimated"]) == (None, None)
    assert odd_cost["typical"] == body["rebuildCost"]["typical"]


@pytest.mark.parametrize("recorded", [True, False], ids=["its record", "no record"])
@pytest.mark.parametrize(
    "answer",
    [
        {**_body(), "valuation": {**_body()["valuation"], "estimate": "about 200k"}},
        {**_body(), "valuation": {**_body()["valuation"], "estimate": 250000.5}},
        {k: v for k, v in _body().items() if k != "location"},
        ["not", "an", "object"],
    ],
)
def test_an_answer_the_parser_refuses_still_gets_its_row(
    checkpoint: Checkpoint, tmp_path: Path, answer: Any, recorded: bool
) -> None:
    """A stored valuation that Valuation.from_json refuses (answers.settle would have made
    it a problem; a paid answer of the other mode is kept whatever it holds; an older
    checkpoint may hold one) is written with its valuation id, key and charge, no figures,
    and a warning; the write goes on. Alike whether its record says why (settled since
    the checkpoint's version 9) or there is none and the answer is read at the write."""
    _ingest(checkpoint, [_row(1, "k1"), _row(2, "k2")])
    checkpoint.requests.record_answer("k1", json.dumps(answer).encode())
    checkpoint.requests.record_done("k1", 10, record_of(answer) if recorded else None)
    _value(checkpoint, "k2", _body(number=2))
    with logs.capture() as events:
        table = _results(checkpoint, tmp_path / "results.parquet")
    first, second = table.to_pylist()
    assert first["valuation_id"] == (_body()["id"] if isinstance(answer, dict) else None)
    assert (first["idempotency_key"], first["credits_charged"]) == ("k1", 10)
    assert first["estimate"] is first["mode"] is first["valued_at"] is None
    assert second["estimate"] == _body(number=2)["valuation"]["estimate"]
    warned = [e for e in events if e["event"] == "valuations.writer.answer.unreadable"]
    assert [(e["key"], e["row_number"]) for e in warned] == [("k1", 1)]


def test_without_extras_there_are_no_extra_columns_and_csv_works(
    checkpoint: Checkpoint, tmp_path: Path
) -> None:
    """A run that asked for no extras has no commentary or rebuild_cost column, so its
    results convert to CSV."""
    _ingest(checkpoint, [_row(1, "k1", {"loan_id": "L1"}), _row(2, "k2", {"loan_id": "L2"})])
    _value(checkpoint, "k1", _body())
    _value(checkpoint, "k2", _body(FLAT, number=2))
    table = _results(checkpoint, tmp_path / "results.parquet")
    assert EXTRAS.isdisjoint(table.column_names)
    pl.read_parquet(tmp_path / "results.parquet").write_csv(tmp_path / "results.csv")
    written = pl.read_csv(tmp_path / "results.csv")
    assert written["loan_id"].to_list() == ["L1", "L2"]


@pytest.mark.parametrize(
    ("asked", "columns"),
    [
        (["commentary"], {"commentary"}),
        (["rebuildCost"], {"rebuild_cost"}),
        (list(INCLUDE_ITEMS), EXTRAS),
    ],
)
def test_extras_asked_by_one_row_make_the_columns(
    checkpoint: Checkpoint, tmp_path: Path, asked: list[str], columns: set[str]
) -> None:
    """One row's include is enough for the column; the other rows hold null in it."""
    _ingest(checkpoint, [_row(n, f"k{n}") for n in (1, 2, 3)], include={"k2": asked})
    for n in (1, 2, 3):
        _value(checkpoint, f"k{n}", _body(include=asked if n == 2 else (), number=n))
    table = _results(checkpoint, tmp_path / "results.parquet")
    assert EXTRAS & set(table.column_names) == columns
    for name in columns:
        values = table[name].to_pylist()
        assert [v is not None for v in values] == [False, True, False]


def test_the_runs_include_makes_the_columns_even_with_no_valued_row(
    checkpoint: Checkpoint, tmp_path: Path
) -> None:
    """The run's include decides the columns even when no request carries it (every row
    refused), so that a nightly file keeps one schema."""
    _ingest(checkpoint, [_row(1, None, rule="required", detail="postcode is missing")])
    path = tmp_path / "results.parquet"
    assert write_results(checkpoint, path, include=["rebuildCost"]) == 0
    assert pq.read_schema(path).names[-3:] == ["rebuild_cost", "credits_charged", "idempotency_key"]


def test_an_unreadable_answer_is_a_problem_row_with_its_raw_answer(
    checkpoint: Checkpoint, tmp_path: Path
) -> None:
    """answers.settle makes an answer the parser refuses a problem (StoredProblem); its row
    in problems.parquet keeps the valuation id and the answer exactly as received."""
    _ingest(checkpoint, [_row(1, "k1")])
    body = {k: v for k, v in _body().items() if k != "location"}
    raw = json.dumps(body)
    checkpoint.requests.mark_sent("k1")
    checkpoint.requests.record_answer("k1", raw.encode())
    settled = settle_sent(checkpoint, "k1", body)
    assert settled.problem is not None
    write_problems(checkpoint, tmp_path / "problems.parquet")
    row = pq.read_table(tmp_path / "problems.parquet").to_pylist()[0]
    assert (row["stage"], row["type"], row["status"], row["attempts"]) == (
        "api",
        "unreadable-answer",
        None,
        1,
    )
    assert (row["valuation_id"], row["answer"]) == (body["id"], raw)
    assert "'location' is missing" in row["detail"]


def test_results_are_written_from_the_records_never_the_answers_read_again(
    checkpoint: Checkpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Answers settled as a run settles them keep their records; the writer makes its rows
    from those without the parser (not one `Valuation.from_json`), and the file is the one
    the raw answers read at the write would give (the path of an answer kept with none)."""
    bodies = {
        "k1": _body(include=("commentary", "rebuildCost")),
        "k2": {**_body(number=2), "valuation": {**_body()["valuation"], "estimate": 250000.0}},
        "k3": {k: v for k, v in _body(number=3).items() if k not in {"charge", "reference"}},
        "k4": {**_body(number=4), "reference": 'Caf\u00e9 \u00a3 "quoted"'},
    }
    _ingest(
        checkpoint,
        [_row(n, f"k{n}", {"loan_id": f"L-{n}"}) for n in range(1, 5)] + [_row(5, "k1")],
        include={"k1": ["commentary", "rebuildCost"]},
    )
    for key, body in bodies.items():
        checkpoint.requests.record_answer(key, json.dumps(body).encode())
        settle_sent(checkpoint, key, body)
    read = Valuation.from_json
    calls: list[object] = []

    def counted(body: Any) -> Valuation:
        calls.append(body)
        return read(body)

    monkeypatch.setattr(Valuation, "from_json", counted)
    from_records = _results(checkpoint, tmp_path / "records.parquet")
    assert calls == []
    checkpoint.database.sql.execute("UPDATE requests SET record = NULL")
    from_answers = _results(checkpoint, tmp_path / "answers.parquet")
    assert len(calls) == len(bodies)  # read at the write, once a request
    assert from_records.equals(from_answers)
    assert from_records["estimate"].to_pylist()[1] == 250000
    assert from_records["reference"].to_pylist()[3] == bodies["k4"]["reference"]
    assert from_records["credits_charged"].to_pylist() == [10, 10, 0, 10, 0]


def test_a_paid_answer_of_the_other_mode_is_kept_read_once(
    checkpoint: Checkpoint, tmp_path: Path
) -> None:
    """A live answer in a DIR of test answers stops the run (mode_mixed) but, paid, is kept
    and recorded with its record as any valuation is: its row has its figures."""
    _ingest(checkpoint, [_row(1, "k1")])
    checkpoint.set("mode", "test")
    body = _body()
    checkpoint.requests.record_answer("k1", json.dumps(body).encode())
    settled = settle_sent(checkpoint, "k1", body)
    assert settled.stop is not None
    assert settled.stop[0].value == "mode_mixed"
    [[stored]] = list(checkpoint.valued_rows())
    assert stored.record == Valuation.from_json(body).to_record()
    [row] = _results(checkpoint, tmp_path / "results.parquet").to_pylist()
    assert (row["estimate"], row["credits_charged"]) == (body["valuation"]["estimate"], 10)
