"""What a lender does with the answers: loan-to-value, flags for weak figures, and the
portfolio's totals, made while results.parquet streams past.

Each valued row gets its `LenderFigures` from its valuation and its own pass-through
values (the loan balance and the origination value, `input/lender`). The arithmetic is
done here once, by name, and never divides by zero: a balance or an origination value
that is missing, not a number, or below zero gives nulls (a balance of 0 gives an LTV
of 0), and so does an estimate or a range low that is not above zero.

`Portfolio` adds the rows up as they come, in constant memory (a few numbers, a band
table and one entry per local authority): the writer streams a million rows and never
holds them. Every input row is a loan: rows with identical requests share one valuation
but each counts, with its own balance.
"""

from __future__ import annotations

import calendar
import dataclasses
import datetime as dt
import math
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import pyarrow as pa

from batchval._internal import logs
from batchval._internal.api import Valuation
from batchval._internal.input import (
    LenderColumnError,
    LenderOptions,
    RevaluationPolicy,
    find_lender_columns,
)

log = logs.get_logger()

# What asks for each group of result columns (`schemas.Column.asked_by`): a balance asks
# for the LTV columns, an origination value for the change since, either for the flags.
LTV_COLUMNS = "loan_balance"
ORIGINATION_COLUMNS = "origination_value"
ORIGINATION_DATE_COLUMNS = "origination_date"
# A last valuation (or, standing in, the origination value or date) asks for the
# revaluation columns: the fall since it, its age and the three triggers.
REVALUATION_COLUMNS = "revaluation"
FLAG_COLUMNS = "lender"
LENDER_GROUPS: tuple[str, ...] = (
    LTV_COLUMNS,
    ORIGINATION_COLUMNS,
    ORIGINATION_DATE_COLUMNS,
    REVALUATION_COLUMNS,
    FLAG_COLUMNS,
)
# The pass-through columns figures are made from (`input/lender` fields).
_FIGURE_SOURCES: tuple[str, ...] = (
    "loan_balance",
    "origination_value",
    "origination_date",
    "last_valuation",
    "last_valuation_date",
)
TRIGGERS: tuple[str, ...] = ("trigger_fall", "trigger_age", "trigger_large_loan_age")
# A valuation's age in years, as the results give it: days / 365.25.
DAYS_A_YEAR = 365.25
FLAGS: tuple[str, ...] = ("partial_data", "wide_range", "stale_index", "model_changed")


@dataclasses.dataclass(frozen=True, slots=True)
class LenderFigures:
    """A valued row's lender figures. LTVs are ratios (0.75 is 75 %)."""

    balance: float | None  # the row's usable loan balance, or None
    indexed_ltv: float | None  # balance / estimate
    ltv_low_estimate: float | None  # balance / range low: the conservative one
    ltv_band: str | None
    change_since_origination: float | None  # estimate / origination value - 1
    partial_data: bool | None  # dataQuality is not `full`
    wide_range: bool | None  # (high - low) / estimate above the threshold
    stale_index: bool | None  # indexedTo more than N months before the run's month
    model_changed: bool | None  # the run's valuations came from more than one model build
    # Whole calendar months from the origination date to the run's date.
    months_since_origination: int | None = None
    # The revaluation figures (`Revaluation`), when the input has what they are made from.
    revaluation_basis: str | None = None
    fall_since_last_valuation: float | None = None
    valuation_age_years: float | None = None
    trigger_fall: bool | None = None
    trigger_age: bool | None = None
    trigger_large_loan_age: bool | None = None


NO_FIGURES = LenderFigures(None, None, None, None, None, None, None, None, None)


def months_since(origination: dt.date | None, as_of: dt.date) -> int | None:
    """Whole months from `origination` to `as_of` (15 March to 14 April is 0, to 15 April
    1); None without a date, or for one after `as_of`."""
    if origination is None or origination > as_of:
        return None
    months = (as_of.year - origination.year) * 12 + as_of.month - origination.month
    return months - (as_of.day < origination.day)


def anniversary(day: dt.date, years: float) -> dt.date:
    """`day` moved on by `years` in whole calendar months (round(years x 12)); a day the
    month has not (29 February in 2025) is the month's last."""
    months = day.month - 1 + round(years * 12)
    year, month = day.year + months // 12, months % 12 + 1
    try:
        return dt.date(year, month, day.day)
    except ValueError:  # the 29th to 31st of a shorter month: its last day
        return dt.date(year, month, calendar.monthrange(year, month)[1])


def fell_more_than(value: float, estimate: float, share: float) -> bool:
    """Whether 1 - estimate / value is above `share`: in floating point, except within a
    hair of the edge, where it is decided in exact decimals (a fall from £100,000 to
    £90,000 is exactly 10 %, never 10.000000000000002 %)."""
    fall = 1 - estimate / value
    if abs(fall - share) > 1e-9:
        return fall > share
    exact = Fraction(str(value))
    return exact - Fraction(str(estimate)) > Fraction(str(share)) * exact


@dataclasses.dataclass(frozen=True, slots=True)
class Revaluation:
    """What a loan's last valuation says about revaluing it, by the lender's policy
    (`input/lender.RevaluationPolicy`), as of the run's UTC date."""

    policy: RevaluationPolicy
    as_of: dt.date

    def figures(
        self,
        estimate: float | None,
        balance: float | None,
        last: tuple[float | None, dt.date | None],
        origination: tuple[float | None, dt.date | None],
    ) -> dict[str, Any]:
        """The revaluation columns of one valued loan. Its last valuation (value, date)
        is the basis when it has either; else its origination value and date stand in
        (`revaluation_basis` says which); with neither, every figure is null."""
        basis = "last_valuation" if last != (None, None) else "origination"
        value, day = last if basis == "last_valuation" else origination
        if (value, day) == (None, None):
            return {}
        policy, as_of = self.policy, self.as_of
        fall = fell = None
        if value is not None and value > 0 and estimate is not None and estimate > 0:
            fall = 1 - estimate / value
            fell = fell_more_than(value, estimate, policy.fall_share)
        age = old = None
        if day is not None and day <= as_of:
            age = (as_of - day).days / DAYS_A_YEAR
            old = as_of >= anniversary(day, policy.max_age_years)
        large = None if balance is None else balance > policy.large_loan_balance
        large_old = large
        if large:
            large_old = (
                None
                if age is None or day is None
                else as_of >= anniversary(day, policy.large_loan_max_age_years)
            )
        return {
            "revaluation_basis": basis,
            "fall_since_last_valuation": fall,
            "valuation_age_years": age,
            "trigger_fall": fell,
            "trigger_age": old,
            "trigger_large_loan_age": large_old,
        }


def dates(values: pa.Array) -> list[dt.date | None]:
    """The dates of a pass-through column (`input/lender_values` reads lenders' text into
    dates; a DIR of an older batchval may hold ISO text): None for anything else."""
    kind = values.type
    if pa.types.is_date(kind):
        return list(values.cast(pa.date32()).to_pylist())
    if pa.types.is_timestamp(kind):
        return [None if v is None else v.date() for v in values.to_pylist()]
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        found: list[dt.date | None] = []
        for text in values.to_pylist():
            try:
                found.append(dt.date.fromisoformat(text.strip()[:10]) if text else None)
            except ValueError:
                found.append(None)
        return found
    return [None] * len(values)


def months_between(earlier: str, later: dt.date) -> int | None:
    """Calendar months from `earlier` (`YYYY-MM`) to the month of `later`; None if it is
    not a month."""
    try:
        year, month = (int(part) for part in earlier.strip().split("-"))
    except ValueError:
        return None
    if not 1 <= month <= 12:
        return None
    return (later.year * 12 + later.month) - (year * 12 + month)


def model_builds(versions: Iterable[Any]) -> set[Any]:
    """The distinct model builds among `model.version` values: one instant however it
    is written (`Z` or `+00:00`); a value that is no date-time counts as itself."""
    builds: set[Any] = set()
    for version in versions:
        try:
            when = dt.datetime.fromisoformat(str(version).strip().upper())
        except ValueError:
            builds.add(version)
            continue
        builds.add(when if when.tzinfo else when.replace(tzinfo=dt.UTC))
    return builds


def amounts(values: pa.Array) -> list[float | None]:
    """Money amounts of a pass-through column: numbers as they are, text read as a
    number (`£120,000.50` too); None for anything else, not finite or below zero."""
    kind = values.type
    found: list[Any]
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        found = values.cast(pa.float64(), safe=False).to_pylist()
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        found = [_number(text) for text in values.to_pylist()]
    else:
        return [None] * len(values)
    return [v if v is not None and math.isfinite(v) and v >= 0 else None for v in found]


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text.strip().lstrip("£").replace(",", ""))
    except ValueError:
        return None


class Lending:
    """The lender figures of one write of results.parquet: where the loan's figures are
    among the pass-through columns, the options, the run's date and model builds, and
    the `portfolio` it adds the rows to as they pass (read it after the write)."""

    def __init__(
        self,
        columns: Mapping[str, int],
        options: LenderOptions,
        *,
        as_of: dt.date,
        model_versions: Collection[Any] = (),
    ) -> None:
        self._balance_at = columns.get("loan_balance")
        self._origination_at = columns.get("origination_value")
        self._date_at = columns.get("origination_date")
        self._last_at = columns.get("last_valuation")
        self._last_date_at = columns.get("last_valuation_date")
        sources = (self._origination_at, self._date_at, self._last_at, self._last_date_at)
        self.revaluation = (
            Revaluation(options.revaluation, as_of)
            if any(at is not None for at in sources)
            else None
        )
        self.options = options
        self.as_of = as_of
        self.model_changed = len(model_builds(model_versions)) > 1
        self._labels = options.band_labels
        self._stale: dict[str | None, bool | None] = {}  # indexedTo -> stale_index
        self.portfolio = (
            Portfolio(self._labels, options.revaluation if self.revaluation else None)
            if self._balance_at is not None
            else None
        )

    @classmethod
    def for_write(
        cls,
        passthrough: pa.Schema | None,
        configured: Mapping[str, str],
        options: LenderOptions,
        *,
        as_of: dt.date,
        model_versions: Collection[Any] = (),
    ) -> Lending | None:
        """The lender figures for these pass-through columns, or None when they hold
        neither a loan balance nor an origination value."""
        names = [] if passthrough is None else passthrough.names
        try:
            found = find_lender_columns(names, configured)
        except LenderColumnError as exc:  # checked when the input was read; kept safe here
            log.warning("contract.lender.columns", detail=str(exc))
            return None
        at = {f: names.index(c) for f, c in found.items() if f in _FIGURE_SOURCES}
        if not at:
            return None
        log.info("contract.lender", columns={f: found[f] for f in at})
        return cls(at, options, as_of=as_of, model_versions=model_versions)

    @property
    def balance_at(self) -> int | None:
        """The loan balance's place among the pass-through columns, if it has one."""
        return self._balance_at

    @property
    def asks(self) -> frozenset[str]:
        """The groups of lender columns results.parquet has (`schemas.Column.asked_by`)."""
        groups = {FLAG_COLUMNS}
        if self._balance_at is not None:
            groups.add(LTV_COLUMNS)
        if self._origination_at is not None:
            groups.add(ORIGINATION_COLUMNS)
        if self._date_at is not None:
            groups.add(ORIGINATION_DATE_COLUMNS)
        if self.revaluation is not None:
            groups.add(REVALUATION_COLUMNS)
        return frozenset(groups)

    def batch(
        self, valuations: Sequence[Valuation | None], passthrough: Sequence[pa.Array]
    ) -> list[LenderFigures]:
        """The figures of a batch of rows, from their valuations and pass-through values;
        each row is added to the portfolio."""
        count = len(valuations)
        balances = (
            [None] * count if self._balance_at is None else amounts(passthrough[self._balance_at])
        )
        origins = (
            [None] * count
            if self._origination_at is None
            else amounts(passthrough[self._origination_at])
        )
        nothing: list[Any] = [None] * count
        began = nothing if self._date_at is None else dates(passthrough[self._date_at])
        months = nothing if self._date_at is None else [months_since(d, self.as_of) for d in began]
        made: list[dict[str, Any]] = [{}] * count
        revaluation = self.revaluation
        if revaluation is not None:
            lasts = nothing if self._last_at is None else amounts(passthrough[self._last_at])
            last_days = (
                nothing if self._last_date_at is None else dates(passthrough[self._last_date_at])
            )
            made = [
                {}  # an answer that cannot be read: nothing to say
                if v is None
                else revaluation.figures(v.figures.estimate, b, (last, last_day), (o, day))
                for v, b, o, last, last_day, day in zip(
                    valuations, balances, origins, lasts, last_days, began, strict=True
                )
            ]
        # One record a row, made whole at once: dataclasses.replace would double its cost.
        figures = [
            self.figures(v, b, o, months_since_origination=m, **r)
            for v, b, o, m, r in zip(valuations, balances, origins, months, made, strict=True)
        ]
        if self.portfolio is not None:
            for valuation, row in zip(valuations, figures, strict=True):
                self.portfolio.add(valuation, row)
        return figures

    def figures(
        self,
        valuation: Valuation | None,
        balance: float | None,
        origination: float | None,
        **made: Any,
    ) -> LenderFigures:
        """One row's figures (amounts as `amounts` reads them); `made`, the row's figures
        made elsewhere (its months since origination, its revaluation figures)."""
        if valuation is None:  # an answer that cannot be read: nothing to say
            return dataclasses.replace(NO_FIGURES, balance=balance, **made)
        figures = valuation.figures
        estimate, low = figures.estimate, figures.low
        ltv = low_ltv = band = change = wide = None
        if estimate > 0:
            wide = (figures.high - low) / estimate > self.options.wide_range
            if balance is not None:
                ltv = balance / estimate
                band = self._band(balance, estimate)
            if origination is not None and origination > 0:
                change = estimate / origination - 1
        if low > 0 and balance is not None:
            low_ltv = balance / low
        month = figures.indexed_to
        if month in self._stale:
            stale = self._stale[month]
        else:  # a run has a few months: each is read once
            behind = None if month is None else months_between(month, self.as_of)
            stale = None if behind is None else behind > self.options.stale_after_months
            self._stale[month] = stale
        return LenderFigures(
            balance=balance,
            indexed_ltv=ltv,
            ltv_low_estimate=low_ltv,
            ltv_band=band,
            change_since_origination=change,
            partial_data=valuation.data_quality != "full",
            wide_range=wide,
            stale_index=stale,
            model_changed=self.model_changed,
            **made,
        )

    def _band(self, balance: float, estimate: int) -> str:
        # Compared as balance x 100 <= edge x estimate, not through the rounded ratio:
        # 60,000 on 100,000 is exactly 60 % and in 0-60 (0.6 * 100 is 60.00000000000001).
        for edge, label in zip(self.options.ltv_bands, self._labels, strict=False):
            if balance * 100 <= edge * estimate:
                return label
        return self._labels[-1]


@dataclasses.dataclass(slots=True)
class _Sums:
    rows: int = 0
    balance: float = 0.0


class Portfolio:
    """Totals over the valued rows with both a usable balance and an estimate above
    zero, added up row by row as the writer streams them (summary.json's `portfolio`)."""

    def __init__(self, labels: Sequence[str], policy: RevaluationPolicy | None = None) -> None:
        self.policy = policy  # the revaluation policy, when the rows carry its figures
        self.bases: Counter[str] = Counter()  # revaluation_basis -> loans
        self.triggered = {name: _Sums() for name in (*TRIGGERS, "any")}
        self.rows = 0
        self.left_out = 0  # valued rows without a usable balance or estimate
        self.balance = 0.0
        self.estimate = 0
        self.balance_times_ltv = 0.0
        self.bands = {label: _Sums() for label in labels}
        self.authorities: dict[str, _Sums] = {}
        self.flags: Counter[str] = Counter()
        self.aged = 0  # rows with months since origination
        self.months = 0  # their sum

    def add(self, valuation: Valuation | None, row: LenderFigures) -> None:
        if row.revaluation_basis is not None:
            self._add_triggers(row)
        if valuation is None or row.balance is None or row.indexed_ltv is None:
            self.left_out += 1
            return
        balance = row.balance
        self.rows += 1
        self.balance += balance
        self.estimate += valuation.figures.estimate
        self.balance_times_ltv += balance * row.indexed_ltv
        if row.ltv_band is not None:
            band = self.bands[row.ltv_band]
            band.rows += 1
            band.balance += balance
        area = self.authorities.setdefault(valuation.local_authority, _Sums())
        area.rows += 1
        area.balance += balance
        if row.months_since_origination is not None:
            self.aged += 1
            self.months += row.months_since_origination
        flags = self.flags
        if row.partial_data:
            flags["partial_data"] += 1
        if row.wide_range:
            flags["wide_range"] += 1
        if row.stale_index:
            flags["stale_index"] += 1
        if row.model_changed:
            flags["model_changed"] += 1

    def _add_triggers(self, row: LenderFigures) -> None:
        """A loan's revaluation triggers: counted, with its balance (none: 0)."""
        self.bases[str(row.revaluation_basis)] += 1
        fired = [name for name in TRIGGERS if getattr(row, name)]
        for name in [*fired, "any"] if fired else []:
            sums = self.triggered[name]
            sums.rows += 1
            sums.balance += row.balance or 0.0

    def revaluation_json(self) -> dict[str, Any] | None:
        """summary.json's `portfolio.revaluation`: the policy, the loans by basis, and
        the loans and balance each trigger flags (`any`: flagged by one or more)."""
        if self.policy is None:
            return None
        return {
            "policy": self.policy.to_json(),
            "basis": {b: self.bases[b] for b in ("last_valuation", "origination")},
            **{
                name.removeprefix("trigger_"): {"loans": s.rows, "balance": round(s.balance, 2)}
                for name, s in self.triggered.items()
            },
        }

    def to_json(self) -> dict[str, Any]:
        totals = self._totals()
        revaluation = self.revaluation_json()
        return totals if revaluation is None else {**totals, "revaluation": revaluation}

    def _totals(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "rows_left_out": self.left_out,
            "sum_estimate": self.estimate,
            "sum_balance": round(self.balance, 2),
            # sum(balance x LTV) / sum(balance): each loan's LTV, weighted by its balance.
            "weighted_ltv": self.balance_times_ltv / self.balance if self.balance else None,
            # sum(balance) / sum(estimate): the book's debt against the book's value.
            "aggregate_ltv": self.balance / self.estimate if self.estimate else None,
            "ltv_bands": [
                {"band": label, "rows": s.rows, "balance": round(s.balance, 2)}
                for label, s in self.bands.items()
            ],
            "by_local_authority": {
                code: {"rows": s.rows, "balance": round(s.balance, 2)}
                for code, s in sorted(self.authorities.items())
            },
            "flags": {flag: self.flags[flag] for flag in FLAGS},
            # The loans' mean age in whole months, over those with an origination date.
            "mean_months_since_origination": round(self.months / self.aged, 1)
            if self.aged
            else None,
        }


REVALUATION_FIELDS: tuple[str, ...] = (
    "revaluation_basis",
    "fall_since_last_valuation",
    "valuation_age_years",
    *TRIGGERS,
)


def refresh_revaluation(
    rows: pa.Table, revaluation: Revaluation, columns: Mapping[str, str]
) -> pa.Table:
    """`rows` of results.parquet with their revaluation columns made again as of
    `revaluation.as_of`, from the rows' own estimate and lender columns (`columns`: lender
    field -> the column holding it). A `--book` night's carried rows need it: a loan
    valued on an earlier night turns five years old on a later one."""
    if "revaluation_basis" not in rows.column_names or not rows.num_rows:
        return rows
    count = rows.num_rows
    nothing: list[Any] = [None] * count

    def read(field: str, how: Any) -> list[Any]:
        name = columns.get(field)
        return nothing if name is None or name not in rows.column_names else how(rows[name])

    balances, estimates = read("loan_balance", amounts), rows["estimate"].to_pylist()
    lasts, last_days = read("last_valuation", amounts), read("last_valuation_date", dates)
    origins, began = read("origination_value", amounts), read("origination_date", dates)
    made = [
        {}
        if estimate is None
        else revaluation.figures(estimate, balance, (last, last_day), (origin, day))
        for estimate, balance, last, last_day, origin, day in zip(
            estimates, balances, lasts, last_days, origins, began, strict=True
        )
    ]
    for name in REVALUATION_FIELDS:
        at = rows.schema.get_field_index(name)
        if at >= 0:
            field = rows.schema.field(at)
            values = pa.array([m.get(name) for m in made], field.type)
            rows = rows.set_column(at, field, values)
    return rows
