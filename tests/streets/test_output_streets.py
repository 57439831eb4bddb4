"""street_analysis.parquet, problems.parquet and homes_with_street.parquet of `streets`."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from batchval._internal.contract.problems import write_problems
from batchval._internal.sandbox.streets import street_analysis_body
from batchval._internal.store.database import Database
from batchval._internal.store.streets import StreetStore
from batchval._internal.streets.files import write_homes, write_streets
from batchval._internal.streets.schema import (
    ENERGY,
    PRICE_INDEX,
    RENTAL,
    SOLD_PRICES,
    from_api,
)

NOW = dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)


def answer(postcode: str, **changes: Any) -> bytes:
    body = street_analysis_body(postcode, now=NOW)
    assert body is not None
    body.update(changes)
    return json.dumps({**body, "charge": {"credits": 20, "balanceAfter": 80}}).encode()


def stored(tmp_path: Path) -> StreetStore:
    """Rows 1-4: SW1A 2AA (read), a refused postcode, M1 1AE (404), SW1A 2AA again; plus
    LS6 2AB read with every optional section null."""
    store = StreetStore(Database.open(tmp_path))
    store.restart_ingest()
    store.add_rows(
        [
            (1, "SW1A 2AA", None, None, None),
            (2, None, "postcode", "invalid_postcode", "postcode 'x' is not one"),
            (3, "M1 1AE", None, None, None),
            (4, "SW1A 2AA", None, None, None),
            (5, "LS6 2AB", None, None, None),
        ],
        pa.record_batch({"loan_id": ["A", "B", "C", "D", "E"], "balance": [1, 2, 3, 4, 5]}),
    )
    store.finish_ingest()
    nulls = dict(soldPrices=None, crime=None, rental=None, energy=None, priceIndex=None)
    for postcode, body in (
        ("SW1A 2AA", answer("SW1A 2AA")),
        ("LS6 2AB", answer("LS6 2AB", **nulls)),
    ):
        store.queue.record_answer(postcode, body)
        store.record_read(postcode, credits=20, charged=True, read_at=NOW, fresh_from=NOW)
    store.record_problem("M1 1AE", {"type": "not-found", "status": 404, "field": "postcode"}, NOW)
    return store


def test_every_section_is_a_typed_column(tmp_path: Path) -> None:
    """One row a postcode read; each section of the answer has its nested Arrow type."""
    store = stored(tmp_path)
    assert write_streets(store, tmp_path / "s.parquet") == 2
    table = pq.read_table(tmp_path / "s.parquet")
    schema = table.schema
    assert schema.field("sold_prices").type == SOLD_PRICES
    assert (
        schema.field("crime").type.field("by_type").type.value_type.field("crime_count").type
        == pa.int64()
    )
    assert schema.field("transport").type.value_type.field("distance_band").type == pa.string()
    assert schema.field("rental").type == RENTAL
    assert schema.field("energy").type == ENERGY
    assert schema.field("energy").type.field("gas").type.field("meters").type == pa.int64()
    assert schema.field("price_index").type == PRICE_INDEX
    assert schema.field("covered_postcodes").type == pa.list_(pa.string())
    assert schema.field("generated_at").type == pa.timestamp("ms", tz="UTC")
    rows = {r["postcode"]: r for r in table.to_pylist()}
    sw = rows["SW1A 2AA"]
    body = json.loads(answer("SW1A 2AA"))
    assert sw["rows"] == 2
    assert sw["credits_charged"] == 20
    assert sw["covered_postcodes"] == body["coveredPostcodes"]
    if body["soldPrices"] is not None:
        assert sw["sold_prices"]["total_sold"] == body["soldPrices"]["totalSold"]
        assert len(sw["sold_prices"]["by_year"]) == len(body["soldPrices"]["byYear"])
    assert [s["name"] for s in sw["transport"]] == [s["name"] for s in body["transport"]]
    ls = rows["LS6 2AB"]
    assert [ls[k] for k in ("sold_prices", "crime", "rental", "energy", "price_index")] == [
        None
    ] * 5


def test_rental_groups_keep_what_the_api_sent() -> None:
    """byBedroom's members become typed items, each with its whole object as JSON."""
    field = pa.field("rental", RENTAL, metadata={"api": "rental"})
    rental = {
        "averageRent": 1200,
        "byBedroom": {"two": {"averageRent": 1100.0, "annualChangePct": 3.5, "extra": "x"}},
        "byPropertyType": {"flat": {"rent": 900}},
    }
    shaped = from_api(rental, field)
    assert shaped["average_rent"] == 1200.0
    two = shaped["by_bedroom"][0]
    assert (two["group"], two["average_rent"], two["annual_change_pct"]) == ("two", 1100.0, 3.5)
    assert json.loads(two["fields_json"])["extra"] == "x"
    flat = shaped["by_property_type"][0]
    assert flat["average_rent"] is None
    assert json.loads(flat["fields_json"]) == {"rent": 900}
    assert from_api({"averageRent": "a lot"}, field)["average_rent"] is None


def test_problems_name_every_row_that_asked(tmp_path: Path) -> None:
    """The refused postcode and the 404's row are problems, with run's columns."""
    store = stored(tmp_path)
    assert write_problems(store, tmp_path / "p.parquet") == 2
    rows = pq.read_table(tmp_path / "p.parquet").to_pylist()
    assert [(r["row_number"], r["loan_id"], r["stage"], r["type"]) for r in rows] == [
        (2, "B", "input", "invalid_postcode"),
        (3, "C", "api", "not-found"),
    ]
    assert rows[1]["field"] == "postcode"
    assert rows[1]["status"] == 404


def test_homes_join_has_every_input_row(tmp_path: Path) -> None:
    """homes_with_street has one row an input row, its pass-through typed, its street."""
    store = stored(tmp_path)
    assert write_homes(store, tmp_path / "h.parquet") == 5
    table = pq.read_table(tmp_path / "h.parquet")
    assert table.schema.field("balance").type == pa.int64()
    assert table.column("loan_id").to_pylist() == ["A", "B", "C", "D", "E"]
    crime = table.column("covered_postcodes").to_pylist()
    assert [c is not None for c in crime] == [True, False, False, True, True]
    assert table.schema.field("sold_prices").type == SOLD_PRICES
