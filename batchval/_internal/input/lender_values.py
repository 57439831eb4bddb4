"""A lender's money and dates as lenders write them, read into numbers and dates.

The lender columns (`input/lender`) ride along as pass-through columns. A column of two
kinds that the input holds as text is read here, batch by batch (a column is text in
every batch or in none: the pass-through types are the whole file's, so every batch
keeps one schema); a column the input types already (numbers, decimals, dates and
timestamps of a Parquet file or a workbook) keeps its type:

- **money** (`loan_balance`, `origination_value`): text to Float64. It may carry a pound
  sign or `GBP`, thousands separators and pence: `£412,500.00`, `412,500`, `412500.00`.
- **dates** (`origination_date`): text to Date, read day first, as UK files write it
  (`15/03/2019`, `15-03-2019`, `15.03.2019`), or ISO (`2019-03-15`), a time after the
  date left out (`15/03/2019 00:00`).

An empty cell is a missing value. Any other value that cannot be read makes the row a
problem naming the column (`not_an_amount`, `not_a_date`), so that no figure is made from
a balance misread; a row another rule refused keeps that problem.
"""

from __future__ import annotations

import types
from collections.abc import Mapping

import polars as pl
import pyarrow as pa

from batchval._internal.input.lender import DATE_FIELDS, MONEY_FIELDS, find_lender_columns

# Day first, then ISO; a time after the date is cut off before these are tried.
DATE_FORMATS: tuple[str, ...] = ("%d/%m/%Y", "%Y-%m-%d", "%d-%m-%Y", "%d.%m.%Y", "%Y/%m/%d")

_SAID = {
    "not_an_amount": "is not an amount (412500, 412,500.00 and £412,500.00 are)",
    "not_a_date": "is not a date (15/03/2019, day first, or 2019-03-15)",
}
RULES: Mapping[str, str] = types.MappingProxyType(
    {
        "not_an_amount": f"a lender money column ({', '.join(MONEY_FIELDS)}) holds "
        "something that is not an amount (412500, 412,500.00 and £412,500.00 are)",
        "not_a_date": f"the {' or '.join(DATE_FIELDS)} column holds something that is not "
        "a date (15/03/2019, day first, or 2019-03-15)",
    }
)


def lender_kinds(passthrough: list[str], configured: Mapping[str, str]) -> dict[str, str]:
    """Pass-through column -> `money` or `date`, for the lender columns read here."""
    try:
        found = find_lender_columns(passthrough, configured)
    except ValueError:  # resolve_columns has refused such a file already
        return {}
    kinds = {found[f]: "money" for f in MONEY_FIELDS if f in found}
    kinds.update({found[f]: "date" for f in DATE_FIELDS if f in found})
    return kinds


def _money(column: pl.Series) -> pl.Series:
    text = column.str.strip_chars()
    bare = text.str.replace(r"^(?:£|GBP|gbp)\s*", "").str.replace_all(r"[,\s]", "")
    shaped = bare.str.contains(r"^-?(?:\d+\.?\d*|\.\d+)$")
    return pl.select(pl.when(shaped).then(bare).cast(pl.Float64, strict=False)).to_series()


def _date(column: pl.Series) -> pl.Series:
    text = column.str.strip_chars().str.replace(r"[T ].*$", "")
    tries = [text.str.to_date(f, strict=False) for f in DATE_FORMATS]
    return pl.select(pl.coalesce(tries)).to_series()


def read_lender_values(
    checked: pl.DataFrame, typed: pa.RecordBatch, kinds: Mapping[str, str]
) -> tuple[pl.DataFrame, pa.RecordBatch]:
    """The batch with its money and date columns read (`kinds`), and rows with a value
    that cannot be read made problems (unless another rule refused them first)."""
    if not kinds or typed.num_rows == 0:
        return checked, typed
    arrays = []
    unread: list[tuple[str, str, pl.Series, pl.Series]] = []  # column, rule, given, read
    for name, array in zip(typed.schema.names, typed.columns, strict=True):
        kind = kinds.get(name)
        if kind is None or not (
            pa.types.is_string(array.type) or pa.types.is_large_string(array.type)
        ):
            arrays.append(array)  # not a lender column, or one the input types already
            continue
        given = pl.Series(name, array)
        read = _money(given) if kind == "money" else _date(given)
        arrays.append(read.to_arrow())
        rule = "not_an_amount" if kind == "money" else "not_a_date"
        unread.append((name, rule, given, read))
    typed = pa.RecordBatch.from_arrays(arrays, names=typed.schema.names)
    for name, rule, given, read in unread:
        blank = given.str.strip_chars().fill_null("") == ""
        broken = read.is_null() & ~blank & checked.get_column("rule").is_null()
        if not broken.any():
            continue
        shown = pl.lit(given.str.strip_chars().str.slice(0, 40))
        detail = pl.concat_str([pl.lit(f"{name} '"), shown, pl.lit(f"' {_SAID[rule]}")])
        checked = checked.with_columns(
            pl.when(broken)
            .then(pl.lit(None, pl.String))
            .otherwise("request_json")
            .alias("request_json"),
            pl.when(broken).then(pl.lit(name)).otherwise("field").alias("field"),
            pl.when(broken).then(pl.lit(rule)).otherwise("rule").alias("rule"),
            pl.when(broken).then(detail).otherwise("detail").alias("detail"),
        )
    return checked, typed
