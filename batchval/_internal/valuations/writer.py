"""Writing results.parquet and problems.parquet from the checkpoint.

Atomic: each file replaces the old one whole (`place.files`): a reader sees the old
file or the new one, never half of one.

Streamed: the checkpoint hands out rows in batches; each request's answer, as it was read
when settled (its record), is made a `Valuation` once per batch (`contract/records`),
never read from the raw answer again; each row becomes a frozen record, and each
column is taken from the records by the schema's own table (`contract/schemas`), then
converted to Arrow in one go (`place/arrow`); batches are gathered into Parquet row
groups: memory stays flat however long the input. A value that strays from the spec
(a number too big for int64, a commentary member that is not text, a date-time that is
not one) never stops the write: it is coerced, or null.

Credits: rows with identical requests share one call and one charge. Every such row gets
the valuation, but only the first of them (in row order) carries `credits_charged`, the
others 0, so that the column sums to what was charged. That takes a set of the charged
keys seen so far: about 100 bytes per distinct charged request.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from batchval._internal import logs
from batchval._internal.contract import (
    Answer,
    LenderFigures,
    Lending,
    ValuedRow,
    amounts,
    result_columns,
    results_schema,
)
from batchval._internal.place import PassthroughValues, column_table, write_parquet
from batchval._internal.store import Checkpoint

log = logs.get_logger()

# Memory, not speed, sets this: rows are turned from JSON into Arrow a batch at a time
# (parsed JSON takes about 10 kB a row with commentary); `write_parquet` gathers the
# batches into row groups.
BATCH_ROWS = 5_000


def write_results(
    checkpoint: Checkpoint,
    path: Path,
    *,
    include: Collection[str] = (),
    lending: Lending | None = None,
    metadata: Mapping[str, str] | None = None,
) -> int:
    """Write every valued row to `path` (results.parquet), atomically; the rows written.

    `include` is the run's include: with the items any row's request asked for, it
    decides whether `commentary` and `rebuild_cost` are columns at all. `lending`, when
    the input has lender columns, adds their figures to each row and the rows to its
    portfolio. `metadata` joins the file's key-value metadata.
    """
    extras = {*include, *checkpoint.asked_extras(), *(lending.asks if lending else ())}
    columns = result_columns(extras)
    given = PassthroughValues(checkpoint)
    schema = results_schema(given.schema, extras, metadata)
    charged: set[str] = set()  # keys whose charge a row already carries
    unread: set[str] = set()  # keys whose answer was found unreadable (logged once)

    def tables() -> Iterator[pa.Table]:
        for batch in checkpoint.valued_rows(BATCH_ROWS):
            answers: dict[str, Answer] = {}
            read: list[tuple[int, str, int, Answer]] = []
            for stored in batch:
                answer = answers.get(stored.key)
                if answer is None:
                    answer = answers[stored.key] = Answer.of(stored)
                    if answer.error is not None and stored.key not in unread:
                        unread.add(stored.key)
                        log.warning(
                            "valuations.writer.answer.unreadable",
                            key=stored.key,
                            row_number=stored.row_number,
                            detail=answer.error,
                        )
                credits = 0
                if stored.credits and stored.key not in charged:
                    credits = stored.credits
                    charged.add(stored.key)
                read.append((stored.row_number, stored.key, credits, answer))
            values = given.of([number for number, *_ in read])
            lender: Sequence[LenderFigures | None] = (
                [None] * len(read)
                if lending is None
                else lending.batch([answer.valuation for *_, answer in read], values)
            )
            rows = [
                ValuedRow(number, key, credits, answer.valuation, answer.valuation_id, figures)
                for (number, key, credits, answer), figures in zip(read, lender, strict=True)
            ]
            yield column_table(rows, values, columns, schema)

    with contextlib.closing(given):
        return write_parquet(path, schema, tables())


def not_valued(checkpoint: Checkpoint, results: Path, balance_at: int) -> dict[str, Any]:
    """The input's loans with no row in `results` (refused, a problem, still pending, or
    left for a later night) and their balance: summary.json's `loans_not_valued` and
    `balance_not_valued`. `balance_at` is the balance's place among the pass-through
    columns; a loan whose balance cannot be read counts with none."""
    valued = None
    if results.is_file():  # a row there only for its index columns was not valued
        valued = pl.read_parquet(results, columns=["row_number", "source"])
        valued = valued.filter(pl.col("source") != "index").select("row_number")
    loans, balance = 0, 0.0
    for first, batch in checkpoint.passthrough_batches():
        frame = pl.DataFrame(
            {
                "row_number": pl.int_range(first, first + batch.num_rows, eager=True),
                "balance": pl.Series(amounts(batch.column(balance_at)), dtype=pl.Float64),
            }
        )
        if valued is not None:
            frame = frame.join(valued, on="row_number", how="anti")
        loans += frame.height
        balance += float(frame.get_column("balance").sum())
    return {"loans_not_valued": loans, "balance_not_valued": round(balance, 2)}
