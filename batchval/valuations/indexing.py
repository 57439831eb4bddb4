"""`index.source: ukhpi`: every loan of results.parquet rolled forward by the UK House
Price Index (`contract/indexation`), after the night's valuations and the book's carried
rows are in it. The index and the postcode directory are read before anything is sent, so
that a file that cannot be used stops the run (65) without a call."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import structlog

from batchval.contract.indexation import VALUE_METHODS, indexed_results
from batchval.contract.schemas import INDEX_DESCRIPTIONS, RESULT_COLUMNS
from batchval.engine.files import write_table_atomic
from batchval.engine.place import input_of
from batchval.input.hpi import (
    ONSPD_ATTRIBUTION,
    UKHPI_ATTRIBUTION,
    HousePriceIndex,
    IndexOptions,
    PostcodeAuthorities,
    month_text,
    read_postcode_directory,
    read_ukhpi,
)
from batchval.input.lender import LenderColumnError, find_lender_columns
from batchval.input.options import InputError
from batchval.outcome import RunRefusedError, StopReason
from batchval.valuations.book import rows_of

log = structlog.get_logger()


@dataclasses.dataclass(frozen=True, slots=True)
class Indexing:
    """The index a run rolls its loans forward by, and where postcodes find their
    authority."""

    options: IndexOptions
    index: HousePriceIndex
    directory: PostcodeAuthorities | None

    @property
    def latest_month(self) -> str | None:
        """The index's newest month (`YYYY-MM`)."""
        latest = self.index.latest
        return None if latest is None else month_text(latest)

    def facts(self) -> dict[str, Any]:
        """What the manifest says of the files read, and the attributions their licence
        asks for."""
        found: dict[str, Any] = {
            "source": self.options.source,
            "file": {"path": self.options.file, **self.index.to_json()},
            "attribution": [UKHPI_ATTRIBUTION],
        }
        if self.directory is not None:
            found["postcodes"] = {
                "path": self.options.postcodes,
                "sha256": self.directory.sha256,
                "bytes": self.directory.size,
                "postcodes": self.directory.frame.height,
                "repeated": self.directory.repeated,
            }
            found["attribution"].append(ONSPD_ATTRIBUTION)
        return found

    def add_columns(
        self,
        results: Path,
        lender: Mapping[str, str],
        fall_share: float,
        unvalued: tuple[Sequence[tuple[int, str | None]], pa.Table] | None = None,
    ) -> dict[str, float | int | None]:
        """results.parquet with the index columns added (`indexed_results`), read and
        replaced atomically once, its schema's metadata kept. With `unvalued` (a --book
        night's unsent rows, each a row number and its request's postcode, and the
        checkpoint's pass-through table), a row first for each loan the file has none for
        (`with_unvalued_rows`). How the index tracked tonight's estimates
        (`indexation.tracking`) is returned."""
        table = pq.read_table(results)
        postcodes: dict[int, str | None] = {}
        if unvalued is not None:
            table, postcodes = with_unvalued_rows(table, *unvalued)
        indexed = indexed_results(
            table,
            self.index,
            lender=lender,
            fall_share=fall_share,
            directory=self.directory,
            postcodes=postcodes,
        )
        write_table_atomic(results, indexed.table.replace_schema_metadata(table.schema.metadata))
        log.info("run.indexed", rows=indexed.table.num_rows, latest=self.latest_month)
        return indexed.tracking


def coverage(
    results: Path,
    balance: str | None,
    latest: str | None,
    tracked: Mapping[str, float | int | None] | None = None,
) -> dict[str, Any]:
    """The loans of results.parquet by `value_method`, each with their loan balance (the
    `balance` column's; 0 without one), and the balance-weighted LTV on the indexed values:
    sum(balance x hpi_ltv) / sum(balance) over the loans with both; with how the index
    tracked tonight's estimates (`tracked`, as `estimate_vs_index`). summary.json's
    `portfolio.index` (`book.portfolio.index` on a book night)."""
    names = ["value_method", "hpi_ltv", *([balance] if balance else [])]
    frame = pl.read_parquet(results, columns=names)
    amount = pl.col(balance).cast(pl.Float64, strict=False) if balance else pl.lit(0.0)
    frame = frame.with_columns(amount=amount.fill_null(0.0))
    sums = {
        method: {"loans": int(loans), "balance": round(float(total), 2)}
        for method, loans, total in frame.group_by("value_method")
        .agg(pl.len(), pl.col("amount").sum())
        .iter_rows()
    }
    rolled = frame.filter(pl.col("hpi_ltv").is_not_null() & (pl.col("amount") > 0))
    weight = float(rolled["amount"].sum())
    weighted = float((rolled["amount"] * rolled["hpi_ltv"]).sum()) / weight if weight else None
    return {
        "index_month": latest,
        "coverage": {m: sums.get(m, {"loans": 0, "balance": 0.0}) for m in VALUE_METHODS},
        "hpi_weighted_ltv": weighted,
        "estimate_vs_index": dict(tracked or {}),
    }


def load(options: IndexOptions, env: Mapping[str, str]) -> Indexing | None:
    """The index the settings name, or None (`index.source: none`); a file that cannot be
    used is the run's refusal (`input_unusable`, 65), before any call."""
    if not options.on or options.file is None:
        return None
    try:
        with input_of(options.file, env) as path:
            index = read_ukhpi(path)
        directory = None
        if options.postcodes is not None:
            with input_of(options.postcodes, env) as path:
                directory = read_postcode_directory(
                    path, options.postcode_column, options.authority_column
                )
    except InputError as exc:
        raise RunRefusedError(StopReason.INPUT_UNUSABLE, f"index: {exc}") from None
    return Indexing(options, index, directory)


def result_lender_columns(results: Path, configured: Mapping[str, str]) -> dict[str, str]:
    """Lender field -> the results.parquet column that holds it (none when the columns
    cannot be told apart: refused when the input was read)."""
    fixed = {*RESULT_COLUMNS, *INDEX_DESCRIPTIONS}
    names = [n for n in pq.read_schema(results).names if n not in fixed]  # the input's
    try:
        return find_lender_columns(names, configured)
    except LenderColumnError:
        return {}


def with_unvalued_rows(
    table: pa.Table, unsent: Sequence[tuple[int, str | None]], passthrough: pa.Table
) -> tuple[pa.Table, dict[int, str | None]]:
    """A --book night's results with a row for each loan of `unsent` (row number, its
    request's postcode) that has none yet (left for a later night with no book entry to
    carry): its pass-through values, `source` `index`, no valuation (`book.rows_of`); the
    index columns give it its value. In row order, the schema's metadata kept; with the
    rows added (row number -> postcode). `passthrough` is the checkpoint's, `row_number`
    first, as `booking.passthrough_table` gives it."""
    have = set(table.column("row_number").to_pylist())
    wanted = [(n, postcode) for n, postcode in unsent if n not in have]
    if not wanted:
        return table, {}
    numbers = pa.array([n for n, _ in wanted], pa.int64())
    added = rows_of(table.schema, numbers, passthrough, "index")
    whole = pa.concat_tables([table, added]).sort_by("row_number")
    return whole.replace_schema_metadata(table.schema.metadata), dict(wanted)
