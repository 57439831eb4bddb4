"""A book whose pass-through columns have a type each (integers, decimals, dates,
timestamps with and without a zone, booleans, text), for the tests that hold those types
through a run (tests/cli/test_output_types.py) and an export (tests/exports/test_export.py)."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

POSTCODES = ["SW1A 2AA", "M1 1AE", "LS6 2AB", "CF10 1AA", "BS1 4DJ", "NE1 7RU"]
TYPES = pa.schema(
    [
        ("loan", pa.int64()),
        ("balance", pa.decimal128(12, 2)),
        ("opened", pa.date32()),
        ("reviewed", pa.timestamp("ms")),
        ("stamped", pa.timestamp("us", tz="UTC")),
        ("active", pa.bool_()),
        ("branch", pa.string()),
    ]
)


def book(rows: int, distinct: int = 12) -> pa.Table:
    """Homes asking `distinct` requests between them (so few calls), each row with its own
    typed pass-through values (some null); row 3 is refused before sending (outside
    England and Wales) and row 5 by the API (a 9-bedroom flat: floor-area-required)."""
    homes: list[dict[str, Any]] = []
    for n in range(rows):
        m = n % distinct
        home: dict[str, Any] = {
            "postcode": POSTCODES[m % 6],
            "property_type": "terraced",
            "bedrooms": 1 + m // 6,
            "loan": 1000 + n,
            "balance": decimal.Decimal(n * 1001) / 100,
            "opened": dt.date(2000, 1, 1) + dt.timedelta(days=n),
            "reviewed": dt.datetime(2024, 1, 1, 9, 30) + dt.timedelta(hours=n),
            "stamped": dt.datetime(2024, 6, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=n),
            "active": n % 3 == 0,
            "branch": f"Branch {n} – Zoë",
        }
        if n % 7 == 6:
            home.update(dict.fromkeys(TYPES.names))  # every pass-through value null
        homes.append(home)
    homes[2]["postcode"] = "EH1 1AA"
    homes[4].update(property_type="flat", bedrooms=9)
    base = pa.schema(
        [("postcode", pa.string()), ("property_type", pa.string()), ("bedrooms", pa.int64())]
    )
    return pa.Table.from_pylist(homes, schema=pa.schema([*base, *TYPES]))


def write(table: pa.Table, path: Path) -> Path:
    pq.write_table(table, path)
    return path
