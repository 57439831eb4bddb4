"""`index.source: ukhpi`: every loan of results.parquet rolled forward by the UK House
Price Index (`contract/indexation`), after the night's valuations and the book's carried
rows are in it. The index and the postcode directory are read before anything is sent, so
that a file that cannot be used stops the run (65) without a call."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import structlog

from batchval.contract.indexation import indexed_results
from batchval.contract.schemas import INDEX_DESCRIPTIONS, RESULT_COLUMNS
from batchval.engine.files import write_table_atomic
from batchval.engine.place import input_of
from batchval.input.hpi import (
    ONSPD_ATTRIBUTION,
    UKHPI_ATTRIBUTION,
    HousePriceIndex,
    IndexOptions,
    PostcodeAuthorities,
    read_postcode_directory,
    read_ukhpi,
)
from batchval.input.lender import LenderColumnError, find_lender_columns
from batchval.input.options import InputError
from batchval.outcome import RunRefusedError, StopReason

log = structlog.get_logger()


@dataclasses.dataclass(frozen=True, slots=True)
class Indexing:
    """The index a run rolls its loans forward by, and where postcodes find their
    authority."""

    options: IndexOptions
    index: HousePriceIndex
    directory: PostcodeAuthorities | None

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

    def add_columns(self, results: Path, lender: Mapping[str, str], fall_share: float) -> None:
        """results.parquet with the index columns added (`indexed_results`), replaced
        atomically, its schema's metadata kept."""
        table = pq.read_table(results)
        indexed = indexed_results(
            table, self.index, lender=lender, fall_share=fall_share, directory=self.directory
        )
        write_table_atomic(results, indexed.replace_schema_metadata(table.schema.metadata))
        log.info("run.indexed", rows=indexed.num_rows, latest=self.index.to_json()["latest_month"])


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
