"""A lender's optional columns, and how the figures made from them are read.

A mortgage book names, beside each home, the loan against it: `loan_balance`,
`origination_value` (the valuation when the loan was made), `origination_date` and
`loan_id`. None of them shapes a request: they ride along as pass-through columns, in
their input types, and `contract/lender` makes loan-to-value figures from them. Each is
found by the name `input.columns` maps it to in the config (`loan_balance: Balance`),
exactly as request fields are; else by its own name (in any case, with `_`, `-`, spaces
or none between the words: `Loan Balance`, `loanBalance`); else by the names lenders
usually give it (`USUAL_NAMES`: `Current Balance`, `Outstanding Balance`, `Original
Valuation`, `Completion Date`, `Loan Ref`, ...), the first of those the file has, a
heading's short forms read as the words MI packs shorten (`ABBREVIATIONS`: `Acc No` is
`account number`, `O/S Bal` `outstanding balance`, `Orig Val Dt` `original valuation date`).

`LenderOptions` (the config's `lender` section) holds the loan-to-value bands, the
thresholds of two flags, and the revaluation policy (`RevaluationPolicy`: when a loan's
last valuation is due again, docs/how-to/revaluation-triggers.md).
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Mapping, Sequence

LENDER_FIELDS: tuple[str, ...] = (
    "loan_balance",
    "origination_value",
    "origination_date",
    "last_valuation",
    "last_valuation_date",
    "loan_id",
)

# The names lenders usually give each field, in the order they are preferred when a file
# has two of them (compared as `lender_key` compares).
USUAL_NAMES: Mapping[str, tuple[str, ...]] = {
    "loan_balance": (
        "current balance",
        "outstanding balance",
        "balance outstanding",
        "current loan balance",
        "outstanding loan balance",
        "loan amount outstanding",
        "outstanding principal",
        "principal outstanding",
        "os balance",
        "balance",
    ),
    "origination_value": (
        "original valuation",
        "original value",
        "original property value",
        "valuation at origination",
        "valuation at completion",
        "origination valuation",
        "original valuation amount",
        "property value at origination",
    ),
    "origination_date": (
        "completion date",
        "origination date",
        "loan start date",
        "start date",
        "drawdown date",
        "advance date",
        "original valuation date",
        "completion",
    ),
    "last_valuation": (
        "last valuation",
        "latest valuation",
        "last valuation amount",
        "latest valuation amount",
        "last valuation value",
        "latest valuation value",
        "last property valuation",
        "latest property valuation",
        "most recent valuation",
        "last revaluation",
        "latest revaluation",
    ),
    "last_valuation_date": (
        "last valuation date",
        "latest valuation date",
        "date of last valuation",
        "date of latest valuation",
        "last revaluation date",
        "latest revaluation date",
        "most recent valuation date",
        "valuation date",
    ),
    "loan_id": (
        "loan ref",
        "loan reference",
        "loan number",
        "loan no",
        "account number",
        "account no",
        "mortgage number",
        "mortgage account number",
        "loan account number",
        "account",
    ),
}

# The lender columns figures are made from (`contract/lender`).
FIGURE_FIELDS: tuple[str, ...] = ("loan_balance", "origination_value", "last_valuation")
# What each lender field holds, stated once: its money is read from text as money
# (`input/lender_values`) and shown in pounds and pence by the xlsx export
# (`exports/export`), its dates read day first and shown as UK dates. A new field goes in
# one of these (a test holds every field of LENDER_FIELDS to exactly one).
MONEY_FIELDS: tuple[str, ...] = ("loan_balance", "origination_value", "last_valuation")
DATE_FIELDS: tuple[str, ...] = ("origination_date", "last_valuation_date")
ID_FIELDS: tuple[str, ...] = ("loan_id",)

# Upper edges of the loan-to-value bands, in percent: 0-60, 60-75, ..., 95-100, over 100.
DEFAULT_LTV_BANDS: tuple[float, ...] = (60, 75, 80, 85, 90, 95, 100)
_SEPARATORS = re.compile(r"[\s_\-]+")
# The short forms of UK MI extracts' headings, a word at a time (and `A/C`, `O/S`, two
# letters split by a slash), read as the words they shorten before a heading is compared
# with the usual names.
ABBREVIATIONS: Mapping[str, str] = {
    "acc": "account",
    "acct": "account",
    "ac": "account",
    "no": "number",
    "num": "number",
    "nbr": "number",
    "cur": "current",
    "curr": "current",
    "bal": "balance",
    "os": "outstanding",
    "orig": "original",
    "val": "valuation",
    "valn": "valuation",
    "dt": "date",
    "ref": "reference",
    "amt": "amount",
    "prin": "principal",
    "prop": "property",
    "mtg": "mortgage",
    "lst": "last",
}
_WORDS = re.compile(r"[A-Za-z0-9]+")
# A letter, a slash, a letter (`A/C`, `O/S`): one short form, not two words.
_SPLIT_SHORT = re.compile(r"\b([A-Za-z])/([A-Za-z])\b")


def lender_key(name: str) -> str:
    """How a column is matched to a lender field: `Loan Balance` and `loanBalance` are
    `loanbalance`, like `loan_balance`."""
    return _SEPARATORS.sub("", name).lower()


def expanded_key(name: str) -> str:
    """`lender_key` of the heading with its short forms read out (`ABBREVIATIONS`):
    `Curr Bal`, `Cur. Bal.` and `curr_bal` are `currentbalance`."""
    words = _WORDS.findall(_SPLIT_SHORT.sub(r"\1\2", name))
    return "".join(ABBREVIATIONS.get(word.lower(), word.lower()) for word in words)


def _named(name: str, usual: str) -> bool:
    """Whether the heading `name` is the usual name `usual`, as written or read out."""
    key = lender_key(usual)
    return lender_key(name) == key or expanded_key(name) == key


def lender_matches(names: Sequence[str]) -> dict[str, list[str]]:
    """Lender field -> every column of `names` named like it, in the rule's order: those
    with the field's own name, then those with each of its usual names in turn
    (`find_lender_columns` takes the first), each in the file's order."""
    found: dict[str, list[str]] = {}
    for field in LENDER_FIELDS:
        ordered = [n for n in names if lender_key(n) == lender_key(field)]
        for usual in USUAL_NAMES[field]:
            ordered += [n for n in names if _named(n, usual) and n not in ordered]
        if ordered:
            found[field] = ordered
    return found


class LenderColumnError(ValueError):
    """A lender field's column cannot be told: mapped to no column, or matched by two."""


def find_lender_columns(names: Sequence[str], configured: Mapping[str, str]) -> dict[str, str]:
    """Lender field -> the column of `names` that holds it, for the fields found.

    A field mapped in the config (`configured`, the input's `columns`) takes the column
    of that name, exactly or but for case and surrounding spaces; any other field takes
    the one column named like it, else the one with the first of its usual names the
    file has (`USUAL_NAMES`). Raises LenderColumnError for a mapped column that is
    not among `names`, and for two columns that both look like a balance or an
    origination value (two that look like a loan id are left alone: no figure is made
    from them).
    """
    found: dict[str, str] = {}
    for field in LENDER_FIELDS:
        wanted = configured.get(field)
        if wanted is not None:
            near = [n for n in names if n == wanted] or [
                n for n in names if n.strip().lower() == wanted.strip().lower()
            ]
            if len(near) != 1:
                seen = "which matches no" if not near else "which matches more than one"
                raise LenderColumnError(
                    f"the config maps {field} to {wanted!r}, {seen} pass-through column"
                )
        else:
            near = [n for n in names if lender_key(n) == lender_key(field)]
            for usual in () if near else USUAL_NAMES[field]:
                near = [n for n in names if _named(n, usual)]
                if near:
                    break
            if len(near) > 1 and field not in FIGURE_FIELDS:
                continue  # two loan ids: nothing is made from them, so nothing to refuse
            if len(near) > 1:
                raise LenderColumnError(
                    f"columns {', '.join(map(repr, near))} all look like {field}; name the "
                    "one to use under input.columns in the config"
                )
        if near:
            found[field] = near[0]
    return found


@dataclasses.dataclass(frozen=True, slots=True)
class RevaluationPolicy:
    """The config's `lender.revaluation`: when a loan's last valuation is due again.

    The defaults follow the PRA's Basel 3.1 rule for exposures under the standardised
    approach (CRR Article 124D(5), docs/how-to/revaluation-triggers.md): a fall of more
    than 10 % since the last valuation, five years since it, three for a large loan;
    `large_loan_balance` is where the lender sets "large" (the rule's £2.6 m, or 5 % of
    its own funds when that is less).

    fall_share: `trigger_fall` when 1 - estimate / last valuation is above it.
    max_age_years: `trigger_age` when the last valuation is at least this many years old.
    large_loan_balance: a balance above it makes a loan large.
    large_loan_max_age_years: `trigger_large_loan_age` when a large loan's last valuation
        is at least this many years old.
    """

    fall_share: float = 0.10
    max_age_years: float = 5
    large_loan_balance: float = 2_600_000
    large_loan_max_age_years: float = 3

    def __post_init__(self) -> None:
        for name in ("fall_share", "max_age_years", "large_loan_balance"):
            _positive(getattr(self, name), f"lender.revaluation.{name}")
        _positive(self.large_loan_max_age_years, "lender.revaluation.large_loan_max_age_years")
        if self.fall_share >= 1:
            raise ValueError("lender.revaluation.fall_share must be below 1 (0.10 is 10 %)")

    def to_json(self) -> dict[str, float]:
        return dataclasses.asdict(self)


def _positive(value: object, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{where} must be a number above 0")


@dataclasses.dataclass(frozen=True, slots=True)
class LenderOptions:
    """The config's `lender` section.

    ltv_bands: the bands' upper edges in percent, ascending; a band holds its upper edge
        and not its lower one (0-60 is 0 to 60 inclusive, 60-75 is above 60 up to 75),
        and a last band, `over N`, holds the rest.
    wide_range: `wide_range` is set when (range_high - range_low) / estimate is above it.
    stale_after_months: `stale_index` is set when `indexedTo` is more than this many
        calendar months before the month of the run (6: two quarters).
    revaluation: when a loan's last valuation is due again (`RevaluationPolicy`).
    """

    ltv_bands: tuple[float, ...] = DEFAULT_LTV_BANDS
    wide_range: float = 0.3
    stale_after_months: int = 6
    revaluation: RevaluationPolicy = RevaluationPolicy()

    def __post_init__(self) -> None:
        edges = tuple(self.ltv_bands)
        if not edges or any(isinstance(e, bool) or not isinstance(e, int | float) for e in edges):
            raise ValueError("lender.ltv_bands must be a list of numbers (percent)")
        if any(e <= 0 for e in edges) or any(b <= a for a, b in itertools.pairwise(edges)):
            raise ValueError("lender.ltv_bands must be above 0 and strictly ascending")
        wide = self.wide_range
        if isinstance(wide, bool) or not isinstance(wide, int | float) or not wide > 0:
            raise ValueError("lender.wide_range must be a number above 0")
        months = self.stale_after_months
        if isinstance(months, bool) or not isinstance(months, int) or months < 0:
            raise ValueError("lender.stale_after_months must be a whole number of at least 0")
        object.__setattr__(self, "ltv_bands", edges)

    @property
    def band_labels(self) -> tuple[str, ...]:
        """`0-60`, `60-75`, ..., `over 100`: one per band, in order."""
        edges = [_percent(e) for e in self.ltv_bands]
        lows = ["0", *edges[:-1]]
        bands = [f"{low}-{high}" for low, high in zip(lows, edges, strict=True)]
        return (*bands, f"over {edges[-1]}")

    def to_json(self) -> dict[str, object]:
        return {
            "ltv_bands": list(self.ltv_bands),
            "wide_range": self.wide_range,
            "stale_after_months": self.stale_after_months,
            "revaluation": self.revaluation.to_json(),
        }


def _percent(edge: float) -> str:
    return f"{edge:g}"
