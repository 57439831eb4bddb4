"""Every loan rolled forward by the UK House Price Index (`input/hpi`): monitoring of the
whole book between valuations, never a valuation.

A loan's base is its newest figure by the month it was made: the API's estimate (its
month is its `indexedTo`; an estimate without one is no base), the lender's last valuation
(the month of `last_valuation_date`) or the origination value (the month of
`origination_date`); on a tie, in that order. Its value is moved by its local
authority's index from the base's month to the index's latest month for that authority:

    hpi_value = base x I(latest) / I(base month),    hpi_change = I(latest) / I(base month) - 1

A base made in or after the latest month is its own value (`hpi_change` 0). A loan
without a base, an authority, an authority in the index, the index of its base's month
(a base before the authority's series began: authorities merged since 2019 have no old
months) or of the latest month is not rolled (`basis` none, with its reason).

A loan's authority (`authorities`) is its own valuation's, else the postcode directory's,
else the one most loans of its postcode sector were given by their own valuations.

The market-fall trigger (`market_fall`) compares the index, never an estimate: the fall
of the loan's authority's index since the lender's own last valuation (else its
origination), decided exactly in the decimals the file gives.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from decimal import Context, Decimal

import polars as pl
import pyarrow as pa

from batchval._internal.contract.schemas import INDEX_DESCRIPTIONS, index_fields
from batchval._internal.input import HousePriceIndex, PostcodeAuthorities, month_text

BASES: tuple[str, ...] = ("avm", "last_valuation", "origination")
# Decimal arithmetic wide enough that a product of two of the file's figures is exact.
_EXACT = Context(prec=60)
# Why a loan is not rolled forward (`Rolled.reason`).
NO_BASE = "no_base"
NO_AUTHORITY = "no_authority"
AUTHORITY_NOT_IN_INDEX = "authority_not_in_index"
BASE_BEFORE_INDEX = "base_before_index"
MONTH_MISSING = "month_missing"
REASONS: tuple[str, ...] = (
    NO_BASE,
    NO_AUTHORITY,
    AUTHORITY_NOT_IN_INDEX,
    BASE_BEFORE_INDEX,
    MONTH_MISSING,
)


@dataclasses.dataclass(frozen=True, slots=True)
class Base:
    """The figure a loan is rolled forward from: which, how much, and its month
    (`input/hpi.month_number`)."""

    kind: str  # one of BASES
    value: float
    month: int


def newest_base(
    avm: tuple[float | None, int | None],
    last_valuation: tuple[float | None, int | None],
    origination: tuple[float | None, int | None],
) -> Base | None:
    """The newest of a loan's figures (each a value and its month, either None when it
    has none) that has both a value above zero and a month; on a tie, the API's estimate,
    then the last valuation, then the origination value."""
    found = [
        Base(kind, value, month)
        for kind, (value, month) in zip(BASES, (avm, last_valuation, origination), strict=True)
        if value is not None and value > 0 and month is not None
    ]
    if not found:
        return None
    newest = max(base.month for base in found)
    return next(base for base in found if base.month == newest)


@dataclasses.dataclass(frozen=True, slots=True)
class Rolled:
    """One loan rolled forward, or why not (`reason`, with `basis` none)."""

    value: float | None  # to the penny
    basis: str  # one of BASES, or `none`
    from_month: int | None
    to_month: int | None
    change: float | None  # I(to) / I(from) - 1: a rise is positive
    reason: str | None = None

    @property
    def from_text(self) -> str | None:
        return None if self.from_month is None else month_text(self.from_month)

    @property
    def to_text(self) -> str | None:
        return None if self.to_month is None else month_text(self.to_month)


def _not_rolled(reason: str) -> Rolled:
    return Rolled(None, "none", None, None, None, reason)


def roll_forward(index: HousePriceIndex, area: str | None, base: Base | None) -> Rolled:
    """`base` moved by `area`'s index to its latest month (the module's rule)."""
    if base is None:
        return _not_rolled(NO_BASE)
    if not area:
        return _not_rolled(NO_AUTHORITY)
    latest, first = index.latest_for(area), index.first_for(area)
    if latest is None or first is None:
        return _not_rolled(AUTHORITY_NOT_IN_INDEX)
    if base.month >= latest:  # made in or after the index's latest month: as it is
        return Rolled(round(base.value, 2), base.kind, base.month, base.month, 0.0)
    if base.month < first:
        return _not_rolled(BASE_BEFORE_INDEX)
    start, end = index.level(area, base.month), index.level(area, latest)
    if start is None or end is None:
        return _not_rolled(MONTH_MISSING)
    return Rolled(
        round(base.value * end / start, 2), base.kind, base.month, latest, end / start - 1
    )


def market_fall(
    index: HousePriceIndex, area: str | None, month: int | None, fall_share: float
) -> bool | None:
    """Whether `area`'s index fell by more than `fall_share` from `month` (the lender's
    last valuation's, else the origination's) to its latest month: I(latest) / I(month)
    < 1 - fall_share, exactly (a fall of exactly 10.0 % does not trigger at 0.10). None
    when the index cannot say (no authority, no month, a month it has not)."""
    if not area or month is None:
        return None
    latest = index.latest_for(area)
    if latest is None:
        return None
    if month >= latest:
        return False
    start, end = index.level(area, month), index.level(area, latest)
    if start is None or end is None:
        return None
    # end / start < 1 - share, as end < start x (1 - share): each figure the decimal the
    # file (or the config) wrote, the product exact at 60 digits.
    kept = _EXACT.subtract(Decimal(1), Decimal(str(fall_share)))
    return Decimal(str(end)) < _EXACT.multiply(Decimal(str(start)), kept)


# The columns `roll_forward_frame` reads: each base's value and month (`month_number`;
# null where the loan has none), and the loan's authority.
LOAN_COLUMNS: tuple[str, ...] = (
    "authority",
    *(f"{kind}_{part}" for kind in BASES for part in ("value", "month")),
)


def roll_forward_frame(
    index: HousePriceIndex,
    loans: pl.DataFrame,
    until: str | None = None,
    levels: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """`roll_forward` of every loan of `loans` (`LOAN_COLUMNS`) at once, in its order:
    `hpi_value`, `hpi_basis`, `hpi_from`, `hpi_to` (`month_number`s), `hpi_change`,
    `hpi_reason`. Two joins with the index's table (`levels`, `index.frame()` unless
    given), never a loop a loan. With `until` (a column of `loans`: a month each, or
    null), each loan is rolled to that month where it is before the authority's latest."""
    table = index.frame() if levels is None else levels
    valid = [
        pl.col(f"{kind}_value").is_not_null()
        & (pl.col(f"{kind}_value") > 0)
        & pl.col(f"{kind}_month").is_not_null()
        for kind in BASES
    ]
    months = [
        pl.when(ok).then(pl.col(f"{kind}_month")) for ok, kind in zip(valid, BASES, strict=True)
    ]
    newest = pl.max_horizontal(months)
    # The first kind, in BASES's order, whose month is the newest: the base.
    chosen = pl.coalesce(
        [
            pl.when(ok & (pl.col(f"{kind}_month") == newest)).then(pl.lit(kind))
            for ok, kind in zip(valid, BASES, strict=True)
        ]
    )
    based = (
        loans.select(*LOAN_COLUMNS, _until=pl.col(until) if until else pl.lit(None, pl.Int32))
        .with_row_index("_at")
        .with_columns(_kind=chosen, _month=newest.cast(pl.Int32))
    )
    based = based.with_columns(
        _value=pl.coalesce(
            [pl.when(pl.col("_kind") == kind).then(pl.col(f"{kind}_value")) for kind in BASES]
        ).cast(pl.Float64)
    )
    ends = table.select("area", "first", "latest", "latest_level").unique("area")
    starts = table.select(pl.col("area"), pl.col("month").alias("_month"), pl.col("level"))
    joined = based.join(
        ends, left_on="authority", right_on="area", how="left", maintain_order="left"
    ).join(
        starts,
        left_on=["authority", "_month"],
        right_on=["area", "_month"],
        how="left",
        maintain_order="left",
    )
    if until is not None:  # the level of the month rolled to, where it is before the latest
        joined = joined.with_columns(latest=pl.min_horizontal("latest", "_until")).drop(
            "latest_level"
        )
        joined = joined.join(
            starts.rename({"_month": "latest", "level": "latest_level"}),
            left_on=["authority", "latest"],
            right_on=["area", "latest"],
            how="left",
            maintain_order="left",
        )
    reason = (
        pl.when(pl.col("_kind").is_null())
        .then(pl.lit(NO_BASE))
        .when(pl.col("authority").is_null() | (pl.col("authority") == ""))
        .then(pl.lit(NO_AUTHORITY))
        .when(pl.col("latest").is_null())
        .then(pl.lit(AUTHORITY_NOT_IN_INDEX))
        .when(pl.col("_month") >= pl.col("latest"))
        .then(pl.lit(None, pl.String))
        .when(pl.col("_month") < pl.col("first"))
        .then(pl.lit(BASE_BEFORE_INDEX))
        .when(pl.col("level").is_null() | pl.col("latest_level").is_null())
        .then(pl.lit(MONTH_MISSING))
    )
    kept = pl.col("_month") >= pl.col("latest")  # in or after the latest month: as it is
    ratio = pl.col("latest_level") / pl.col("level")
    return joined.with_columns(hpi_reason=reason).select(
        hpi_value=pl.when(pl.col("hpi_reason").is_not_null())
        .then(None)
        .when(kept)
        .then(pl.col("_value").round(2))
        .otherwise((pl.col("_value") * ratio).round(2)),
        hpi_basis=pl.when(pl.col("hpi_reason").is_null())
        .then(pl.col("_kind"))
        .otherwise(pl.lit("none")),
        hpi_from=pl.when(pl.col("hpi_reason").is_null()).then(pl.col("_month")),
        hpi_to=pl.when(pl.col("hpi_reason").is_null()).then(
            pl.when(kept).then(pl.col("_month")).otherwise(pl.col("latest"))
        ),
        hpi_change=pl.when(pl.col("hpi_reason").is_not_null())
        .then(None)
        .when(kept)
        .then(pl.lit(0.0))
        .otherwise(ratio - 1),
        hpi_reason=pl.col("hpi_reason"),
    )


def authorities(
    postcode: pl.Series, own: pl.Series, directory: PostcodeAuthorities | None = None
) -> pl.Series:
    """Each loan's local authority, in order: its own valuation's (`location.localAuthority`,
    `own`), else the postcode directory's for its postcode (normal form), else the one
    most of the other loans of its postcode sector have of their own (on a tie, the lowest
    code), else null."""
    loans = pl.DataFrame({"postcode": postcode.cast(pl.String), "own": own.cast(pl.String)})
    loans = loans.with_columns(
        own=pl.when(pl.col("own").str.len_chars() > 0).then(pl.col("own")),
        sector=pl.col("postcode").str.head(-2),
    )
    found = pl.col("own")
    if directory is not None:
        loans = loans.with_columns(listed=directory.authorities(loans["postcode"]))
        found = pl.coalesce(found, pl.col("listed"))
    neighbours = (
        loans.filter(pl.col("own").is_not_null() & pl.col("sector").is_not_null())
        .group_by("sector", "own")
        .len()
        .sort(["sector", "len", "own"], descending=[False, True, False])
        .unique("sector", keep="first", maintain_order=True)
        .select("sector", neighbour=pl.col("own"))
    )
    loans = loans.join(neighbours, on="sector", how="left", maintain_order="left")
    return loans.select(authority=pl.coalesce(found, pl.col("neighbour")))["authority"]


# The columns `indexed_results` adds to results.parquet, in order.
INDEX_COLUMNS: tuple[str, ...] = tuple(INDEX_DESCRIPTIONS)
# `value_method`: valued tonight; carried from the book and rolled forward; rolled forward
# from the lender's own figures; neither.
VALUE_METHODS: tuple[str, ...] = ("avm", "avm_indexed", "indexed", "none")


@dataclasses.dataclass(frozen=True, slots=True)
class Indexed:
    """results.parquet's rows with the index columns, and how the index tracked the model
    (`tracking`)."""

    table: pa.Table
    tracking: dict[str, float | int | None]


def index_inputs(names: Sequence[str], lender: Mapping[str, str]) -> list[str]:
    """The columns of results.parquet (`names`) that `index_table` reads: the valuation's,
    the lender's figures and dates (`lender`: field -> column) and `row_number`, those it
    has."""
    figures = [column for field, column in lender.items() if field in _LENDER_INPUTS]
    wanted = ["row_number", *_VALUATION_INPUTS, *figures]
    return [name for name in dict.fromkeys(wanted) if name in names]


# The lender's fields `index_table` reads.
_LENDER_INPUTS: tuple[str, ...] = (
    "loan_balance",
    "last_valuation",
    "last_valuation_date",
    "origination_value",
    "origination_date",
)


# The valuation's columns `index_table` reads, where results.parquet has them.
_VALUATION_INPUTS: tuple[str, ...] = (
    "source",
    "estimate",
    "indexed_to",
    "local_authority",
    "input_postcode",
)


def indexed_results(
    rows: pa.Table,
    index: HousePriceIndex,
    *,
    lender: Mapping[str, str],
    fall_share: float,
    directory: PostcodeAuthorities | None = None,
    postcode_column: str = "input_postcode",
    postcodes: Mapping[int, str | None] | None = None,
) -> Indexed:
    """`rows` of results.parquet with `INDEX_COLUMNS` added (`index_table`, from the
    columns it reads alone), and how tonight's estimates compare with the lender's older
    figures rolled forward to the same month (`tracking`). `postcodes` (row number ->
    postcode) stands in for the valued postcode of a row that has none."""
    frame = pl.from_arrow(rows.select(index_inputs([*rows.column_names], lender)))
    assert isinstance(frame, pl.DataFrame)  # a Table always gives a DataFrame
    if postcodes:  # the rows with no valuation: the postcode their request asks for
        asked = pl.col("row_number").replace_strict(postcodes, default=None, return_dtype=pl.String)
        given = pl.col(postcode_column) if postcode_column in frame.columns else pl.lit(None)
        frame = frame.with_columns(pl.coalesce(given.cast(pl.String), asked).alias(postcode_column))
    added, valued = index_table(
        frame,
        index,
        lender=lender,
        fall_share=fall_share,
        directory=directory,
        postcode_column=postcode_column,
    )
    table = rows
    for field in added.schema:
        table = table.append_column(field, added.column(field.name))
    return Indexed(table, tracking(index, valued))


def index_table(
    frame: pl.DataFrame,
    index: HousePriceIndex,
    *,
    lender: Mapping[str, str],
    fall_share: float,
    directory: PostcodeAuthorities | None = None,
    postcode_column: str = "input_postcode",
    found: tuple[pl.Series, pl.DataFrame] | None = None,
) -> tuple[pa.Table, pl.DataFrame]:
    """The `INDEX_COLUMNS` of the loans of `frame` (results.parquet's rows, valued tonight,
    `source` api; carried from the book, `source` book; or a loan with no valuation, its
    estimate null), in its order, typed as results.parquet has them (`index_fields`): each
    loan's authority (`authorities`), its newest base among its estimate (at its
    `indexed_to`) and the lender's figures (`lender`: field -> column), rolled forward
    (`roll_forward_frame`), its LTV on that value, its `value_method`, and the market-fall
    trigger since its last valuation (else its origination). Dates and amounts are read
    as results.parquet types them, or from text (a DIR of an older batchval). Only the
    columns `index_inputs` names are read. With them, the loans valued tonight
    (`LOAN_COLUMNS`), which `tracking` reads. `found`: the loans' authorities and the
    index's table (`loan_authorities`, `HousePriceIndex.frame`), worked out beforehand for
    a whole of which `frame` is a part."""

    def given(field: str) -> str | None:
        name = lender.get(field)
        return name if name is not None and name in frame.columns else None

    def amount(field: str) -> pl.Expr:
        name = given(field)
        if name is None:
            return pl.lit(None, pl.Float64)
        if frame.schema[name].is_numeric():
            return pl.col(name).cast(pl.Float64)
        text = pl.col(name).cast(pl.String).str.replace_all(r"[£,\s]", "")
        return text.cast(pl.Float64, strict=False)

    def month(field: str) -> pl.Expr:
        name = given(field)
        if name is None:
            return pl.lit(None, pl.Int32)
        day = pl.col(name)
        if not frame.schema[name].is_temporal():
            day = day.cast(pl.String).str.slice(0, 10).str.to_date("%Y-%m-%d", strict=False)
        return (day.dt.year() * 12 + day.dt.month() - 1).cast(pl.Int32)

    indexed_to = (pl.col("indexed_to") + "-01").str.to_date("%Y-%m-%d", strict=False)
    authority, levels = found or (
        loan_authorities(frame, directory, postcode_column),
        index.frame(),
    )
    loans = frame.select(
        authority=authority,
        avm_value=pl.col("estimate").cast(pl.Float64),
        avm_month=(indexed_to.dt.year() * 12 + indexed_to.dt.month() - 1).cast(pl.Int32),
        last_valuation_value=amount("last_valuation"),
        last_valuation_month=month("last_valuation_date"),
        origination_value=amount("origination_value"),
        origination_month=month("origination_date"),
        balance=amount("loan_balance"),
        fall_from=pl.coalesce(month("last_valuation_date"), month("origination_date")),
        source=pl.col("source") if "source" in frame.columns else pl.lit("api"),
    )
    rolled = roll_forward_frame(index, loans, levels=levels)
    falls = market_falls(index, loans.select("authority", "fall_from"), fall_share, levels)
    added = pl.concat(
        [loans.select("balance", "source", "avm_value"), rolled, falls], how="horizontal"
    )
    added = added.select(
        hpi_value=pl.col("hpi_value"),
        hpi_ltv=pl.col("balance") / pl.col("hpi_value"),
        hpi_basis=pl.col("hpi_basis"),
        hpi_from=_month_texts(rolled["hpi_from"]),
        hpi_to=_month_texts(rolled["hpi_to"]),
        hpi_change=pl.col("hpi_change"),
        hpi_reason=pl.col("hpi_reason"),
        value_method=pl.when((pl.col("source") == "api") & pl.col("avm_value").is_not_null())
        .then(pl.lit("avm"))
        .when(pl.col("hpi_basis") == "avm")
        .then(pl.lit("avm_indexed"))
        .when(pl.col("hpi_basis").is_in(["last_valuation", "origination"]))
        .then(pl.lit("indexed"))
        .otherwise(pl.lit("none")),
        trigger_market_fall=pl.col("trigger_market_fall"),
    )
    fields = index_fields()
    table = pa.Table.from_arrays(
        [added[field.name].to_arrow().cast(field.type) for field in fields],
        schema=pa.schema(fields),
    )
    return table, loans.filter(added["value_method"] == "avm")


def loan_authorities(
    frame: pl.DataFrame,
    directory: PostcodeAuthorities | None = None,
    postcode_column: str = "input_postcode",
) -> pl.Series:
    """`authorities` of the loans of `frame` (results.parquet's rows, `index_table`'s):
    their own valuation's (`local_authority`), else their postcode's."""
    no_text = pl.Series([None] * frame.height, dtype=pl.String)
    own = frame["local_authority"] if "local_authority" in frame.columns else no_text
    postcode = frame[postcode_column] if postcode_column in frame.columns else no_text
    return authorities(postcode, own, directory)


def tracking(
    index: HousePriceIndex, loans: pl.DataFrame, levels: pl.DataFrame | None = None
) -> dict[str, float | int | None]:
    """How well the index tracked the model, for a model-risk reviewer: over the loans
    valued tonight (`loans`, `LOAN_COLUMNS`) whose lender's own last valuation or
    origination value is older than the estimate and can be rolled forward to the
    estimate's month (`indexed_to`, or the index's latest month where the estimate is
    newer), `estimate / rolled - 1`: its median and quartiles (linear interpolation) and
    the loans (`loans`). A positive figure: the model values above the index's path."""
    loans = loans.filter(pl.col("avm_month").is_not_null())  # the estimate's own month
    older = loans.with_columns(avm_value=pl.lit(None, pl.Float64), _until=pl.col("avm_month"))
    rolled = roll_forward_frame(index, older, until="_until", levels=levels)
    gaps = (
        pl.concat([loans.select("avm_value"), rolled], how="horizontal")
        .filter(
            pl.col("hpi_value").is_not_null()
            & (pl.col("hpi_value") > 0)
            & (pl.col("hpi_from") < pl.col("hpi_to"))  # an older figure, moved by the index
        )
        .select(gap=pl.col("avm_value") / pl.col("hpi_value") - 1)["gap"]
    )
    if gaps.is_empty():
        return {"loans": 0, "median": None, "lower_quartile": None, "upper_quartile": None}
    return {
        "loans": gaps.len(),
        "median": _figure(gaps.median()),
        "lower_quartile": _figure(gaps.quantile(0.25, "linear")),
        "upper_quartile": _figure(gaps.quantile(0.75, "linear")),
    }


def _figure(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _month_texts(months: pl.Series) -> pl.Series:
    """`_month_text` of each month, each distinct month formatted once (a million loans
    have a few hundred)."""
    distinct = months.unique().drop_nulls()
    texts = pl.DataFrame({"month": distinct}).select(_month_text(pl.col("month"))).to_series()
    return months.replace_strict(distinct, texts, default=None, return_dtype=pl.String)


def _month_text(months: pl.Expr) -> pl.Expr:
    """`YYYY-MM` of `month_number`s."""
    return pl.format(
        "{}-{}",
        (months // 12).cast(pl.String).str.zfill(4),
        (months % 12 + 1).cast(pl.String).str.zfill(2),
    )


# Index ratios this close to the fall's threshold (relatively) are decided exactly, in the
# decimals the file gives (`market_fall`); the others by their float ratio, whose error
# (a few parts in 10^16) is far inside this.
_NEAR = 1e-9


def market_falls(
    index: HousePriceIndex, loans: pl.DataFrame, fall_share: float, levels: pl.DataFrame
) -> pl.DataFrame:
    """`trigger_market_fall` of each loan (`authority`, `fall_from`), in order: decided once
    for each authority and month by joins with the index's table (`levels`,
    `HousePriceIndex.frame`), as `market_fall` decides; a ratio within `_NEAR` of the
    threshold by `market_fall` itself, exactly. Never a loan at a time."""
    ends = levels.select("area", "latest", "latest_level").unique("area")
    starts = levels.select("area", fall_from=pl.col("month"), level=pl.col("level"))
    pairs = (
        loans.unique()
        .join(ends, left_on="authority", right_on="area", how="left")
        .join(
            starts, left_on=["authority", "fall_from"], right_on=["area", "fall_from"], how="left"
        )
    )
    ratio = pl.col("latest_level") / pl.col("level")
    threshold = 1.0 - fall_share
    pairs = pairs.with_columns(
        trigger_market_fall=pl.when(
            pl.col("authority").is_null()
            | (pl.col("authority") == "")
            | pl.col("fall_from").is_null()
            | pl.col("latest").is_null()
        )
        .then(pl.lit(None, pl.Boolean))
        .when(pl.col("fall_from") >= pl.col("latest"))
        .then(pl.lit(False))
        .when(pl.col("level").is_null())
        .then(pl.lit(None, pl.Boolean))
        .when(ratio < threshold - _NEAR * abs(threshold))
        .then(pl.lit(True))
        .when(ratio > threshold + _NEAR * abs(threshold))
        .then(pl.lit(False)),
        near=pl.col("level").is_not_null()
        & (pl.col("fall_from") < pl.col("latest"))
        & ((ratio - threshold).abs() <= _NEAR * abs(threshold)),
    )
    near = pairs.filter(pl.col("near")).select("authority", "fall_from").rows()
    if near:
        exact = pl.DataFrame(
            {
                "authority": [a for a, _ in near],
                "fall_from": [m for _, m in near],
                "exact": [market_fall(index, a, m, fall_share) for a, m in near],
            },
            schema={"authority": pl.String, "fall_from": pl.Int32, "exact": pl.Boolean},
        )
        pairs = pairs.join(exact, on=["authority", "fall_from"], how="left").with_columns(
            trigger_market_fall=pl.when(pl.col("near"))
            .then(pl.col("exact"))
            .otherwise(pl.col("trigger_market_fall"))
        )
    decided = pairs.select("authority", "fall_from", "trigger_market_fall")
    return loans.join(
        decided, on=["authority", "fall_from"], how="left", nulls_equal=True, maintain_order="left"
    ).select("trigger_market_fall")
