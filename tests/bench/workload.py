"""The books the bench values: synthetic, deterministic, every row a valid request.

Built with polars expressions rather than a Python loop, so that 5,000,000 rows take
seconds to write: each column is a hash of the row number, never a random generator,
so a given (rows, seed) always gives the same file. Every row has its own `reference`,
so no two rows share a request (and a key); postcodes are in England and Wales, so the
sandbox values every row.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

COLUMNS = (
    "loan_id",
    "postcode",
    "property_type",
    "bedrooms",
    "floor_area_sqm",
    "year_built",
    "reference",
)
_AREAS = ["SW", "M", "LS", "CF", "BS", "NE", "B", "L", "S", "NG", "LE", "CV", "OX"]
_INWARD_FIRST = list("ABDEFGHJ")
_INWARD_SECOND = list("LNPQRSTU")
_KINDS = ["detached", "semi_detached", "terraced", "flat"]


def _draw(seed: int, salt: int, modulo: int) -> pl.Expr:
    """A number in [0, modulo) that looks random and depends only on the row and seed."""
    return (pl.col("n").hash(seed=seed * 1_000 + salt) % modulo).cast(pl.Int64)


def _pick(choices: list[str], seed: int, salt: int) -> pl.Expr:
    return pl.lit(pl.Series(choices)).gather(_draw(seed, salt, len(choices)))


def book(rows: int, seed: int = 1, first: int = 0) -> pl.DataFrame:
    """`rows` rows numbered from `first`, as the text a spreadsheet export would hold."""
    number = pl.int_range(first, first + rows, dtype=pl.Int64).alias("n")
    postcode = pl.concat_str(
        _pick(_AREAS, seed, 1),
        (_draw(seed, 2, 20) + 1).cast(pl.String),
        pl.lit(" "),
        (_draw(seed, 3, 9) + 1).cast(pl.String),
        _pick(_INWARD_FIRST, seed, 4),
        _pick(_INWARD_SECOND, seed, 5),
    )
    floor_area = (30 + _draw(seed, 7, 2200) / 10).round(1).cast(pl.String)
    return (
        pl.select(number)
        .with_columns(
            loan_id=pl.lit("LN-") + pl.col("n").cast(pl.String).str.zfill(8),
            postcode=postcode,
            property_type=_pick(_KINDS, seed, 6),
            bedrooms=(_draw(seed, 8, 6) + 1).cast(pl.String),
            # Some rows leave the floor area or the year out, as real books do.
            floor_area_sqm=pl.when(_draw(seed, 9, 10) < 6).then(floor_area),
            year_built=pl.when(_draw(seed, 10, 10) < 7).then(
                (1850 + _draw(seed, 11, 175)).cast(pl.String)
            ),
            reference=pl.lit("CASE-") + pl.col("n").cast(pl.String).str.zfill(8),
        )
        .select(COLUMNS)
    )


def write_csv(path: Path, rows: int, seed: int = 1, chunk: int = 1_000_000) -> Path:
    """A CSV of `rows` rows, written a million at a time (flat memory at 5 M)."""
    with path.open("wb") as out:
        for first in range(0, rows, chunk):
            part = book(min(chunk, rows - first), seed, first)
            part.write_csv(out, include_header=first == 0)
    return path


def write_xlsx(path: Path, rows: int, seed: int = 1, chunk: int = 100_000) -> Path:
    """The same book as an Excel workbook of one sheet, typed as a lender's would be
    (numbers as numbers, empty cells where the CSV is empty), with xlsxwriter's constant
    memory (strings inline, not shared: about a minute for a full sheet)."""
    import xlsxwriter

    workbook = xlsxwriter.Workbook(str(path), {"constant_memory": True})
    sheet = workbook.add_worksheet("Book")
    sheet.write_row(0, 0, COLUMNS)
    for first in range(0, rows, chunk):
        part = book(min(chunk, rows - first), seed, first).with_columns(
            pl.col("bedrooms", "year_built").cast(pl.Int64),
            pl.col("floor_area_sqm").cast(pl.Float64),
        )
        for n, row in enumerate(part.iter_rows(), start=first + 1):
            sheet.write_row(n, 0, row)  # None: an empty cell
    workbook.close()
    return path


def write_parquet(path: Path, rows: int, seed: int = 1, chunk: int = 1_000_000) -> Path:
    """The same book as Parquet, typed as a database export would type it (integers and
    floats, nulls where the CSV is empty), in row groups of `chunk` rows at most."""
    import pyarrow.parquet as pq

    writer: pq.ParquetWriter | None = None
    try:
        for first in range(0, rows, chunk):
            part = book(min(chunk, rows - first), seed, first).with_columns(
                pl.col("bedrooms", "year_built").cast(pl.Int64),
                pl.col("floor_area_sqm").cast(pl.Float64),
            )
            table = part.to_arrow()
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table, row_group_size=min(chunk, 100_000))
    finally:
        if writer is not None:
            writer.close()
    return path
