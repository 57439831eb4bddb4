"""`charges.parquet`: the charges ledger (`store/charges`), one row for each call that
carried a charge, for a finance team to reconcile against the account line by line.

Written by `run` and `streets` with their other outputs (replaced atomically), read by
`export` like the other files. Fresh rows are what the account was charged for this
DIR's calls; replay rows were answered free from the API's idempotency store (their
credits are what the first call cost, elsewhere); uncertain rows are kept out of the
totals (docs/outputs.md, "Credits and charges").
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa

from batchval._internal.place import Column, column_values, write_parquet
from batchval._internal.store import ChargeLine

CHARGES_SCHEMA_VERSION = "1"
_TIMESTAMP = pa.timestamp("us", tz="UTC")

CHARGE_COLUMNS: tuple[Column[ChargeLine], ...] = (
    Column(
        "at",
        _TIMESTAMP,
        "When the API made the charge: the answer's `valuedAt` (a street analysis: "
        "`generatedAt`); null when the answer does not say",
        lambda c: c.at,
    ),
    Column("product", pa.string(), "`valuation` or `street`", lambda c: c.product, False),
    Column(
        "idempotency_key",
        pa.string(),
        "The `Idempotency-Key` the call carried (null for a street analysis)",
        lambda c: c.item if c.product == "valuation" else None,
    ),
    Column("valuation_id", pa.string(), "The valuation's id", lambda c: _ref(c, "valuation")),
    Column("postcode", pa.string(), "The street analysis's postcode", lambda c: _ref(c, "street")),
    Column("credits", pa.int64(), "The answer's `charge.credits`", lambda c: c.credits, False),
    Column(
        "balance_after",
        pa.int64(),
        "The answer's `charge.balanceAfter`: the balance after the charge, when it was made",
        lambda c: c.balance_after,
    ),
    Column(
        "kind",
        pa.string(),
        "`fresh`: this DIR's call was charged; `replay`: answered free from the API's "
        "idempotency store, the charge made by an earlier call elsewhere; `uncertain`: the "
        "evidence cannot tell, kept out of the totals",
        lambda c: c.kind,
        False,
    ),
    Column("why", pa.string(), "The evidence for `kind`, in words", lambda c: c.why, False),
    Column(
        "invocation",
        pa.int64(),
        "The invocation of the run that received the answer (1 for the first); null for "
        "an answer a killed invocation stored and a later one read",
        lambda c: c.invocation,
    ),
    Column(
        "received_at",
        _TIMESTAMP,
        "When batchval received the answer, by its own clock",
        lambda c: c.received_at,
    ),
)


def _ref(line: ChargeLine, product: str) -> str | None:
    return line.ref if line.product == product else None


def charges_schema() -> pa.Schema:
    return pa.schema(
        [c.field() for c in CHARGE_COLUMNS],
        metadata={"batchval.file": "charges", "batchval.schema_version": CHARGES_SCHEMA_VERSION},
    )


def write_charges(batches: Iterable[list[ChargeLine]], path: Path) -> int:
    """Every line of the ledger to `path`, atomically; returns the rows written."""
    schema = charges_schema()

    def tables() -> Iterable[pa.Table]:
        for lines in batches:
            arrays = [column_values(lines, c) for c in CHARGE_COLUMNS]
            yield pa.Table.from_arrays(arrays, schema=schema)

    return write_parquet(path, schema, tables())
