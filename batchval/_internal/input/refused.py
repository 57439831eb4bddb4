"""Whether an input is fit to send: a run whose validation refuses most rows is refused.

A config missing one value mapping used to make every row an input problem, and the run
"completed" (exit 0, `next: nothing`), which cron, Airflow and `status` all read as
success. So, after reading and before any call, the rows validation refused are counted;
more than `run.max_refused_share` of them stops the run with `input_mostly_refused` (65):
nothing is sent, problems.parquet is written, and the line names the commonest problems
and their fix. `run`, `run --dry-run`, `run --book`, `check` and `streets` all ask
`mostly_refused`, the one rule.

Why the default is half (`DEFAULT_MAX_REFUSED_SHARE`): a healthy lender's file loses a few
rows to missing data and, in a UK-wide book, about a tenth to homes in Scotland and
Northern Ireland (`outside-coverage` counts like any refusal); a wrong column or code
mapping, or the wrong file, refuses a whole field's worth, usually every row. No healthy
file comes near half, and a run that values less than half its input is not the run
anyone scheduled. A lower line would also catch one unmapped code of several, but would
refuse honest books of many old or incomplete records; a book that is mostly outside
England and Wales crosses this one on purpose (leave those homes out, or raise the
setting). "More than": a file exactly half refused still runs. 0 turns the rule off.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from batchval._internal.outcome import StopInfo, StopReason

DEFAULT_MAX_REFUSED_SHARE = 0.5
SETTING = "run.max_refused_share"
_SHOWN_KINDS = 3  # problem kinds named in the line, commonest first

# What a person changes for each rule, when the rule refuses most of a file ({field}: the
# field it refused). A wrong mapping is the usual cause, so the config comes first.
FIXES = {
    "required": "give every row a {field}, or map the column that holds it under "
    "input.columns.{field} in the config",
    "area_or_bedrooms_required": "map the column that holds bedrooms or floorAreaSqm under "
    "input.columns in the config",
    "invalid_postcode": "check the column mapped to postcode (input.columns.postcode)",
    "outside-coverage": "the API values homes in England and Wales only: leave the others "
    "out of the input",
    "not_in_list": "map your codes under input.values.{field} in the config",
    "ambiguous_value": "give the rows a builtForm (a built form column), or map these "
    "wordings under input.values.{field} in the config",
    "not_an_integer": "check the column mapped to {field} (input.columns.{field})",
    "not_a_number": "check the column mapped to {field} (input.columns.{field}) and its units",
    "out_of_range": "check the column mapped to {field} (input.columns.{field}) and its units",
    "too_long": "check the column mapped to reference (input.columns.reference)",
    "formula": "check the column mapped to reference (input.columns.reference)",
    "contains_postcode": "check the column mapped to reference (input.columns.reference)",
    "invalid_include": "spell include items commentary or rebuildCost",
    "not_an_amount": "check the lender column {field}: amounts such as 412500 or £412,500.00",
    "not_a_date": "check the lender column {field}: dates such as 15/03/2019 (day first) "
    "or 2019-03-15",
}


@dataclasses.dataclass(frozen=True, slots=True)
class RefusedKind:
    """Rows validation refused for one rule on one field, and one of their details."""

    field: str | None
    rule: str
    rows: int
    example: str | None  # the first such row's detail: the value, quoted

    def words(self) -> str:
        return f"{self.field} {self.rule} {self.rows}" if self.field else f"{self.rule} {self.rows}"


def mostly_refused(
    rows: int,
    refused: int,
    kinds: Sequence[RefusedKind],
    max_share: float,
    *,
    source: str,
) -> StopInfo | None:
    """The `input_mostly_refused` stop when validation refused more than `max_share` of
    `rows` (0: never); `kinds` are the commonest problems, most rows first."""
    if max_share <= 0 or rows == 0 or refused <= max_share * rows:
        return None
    named = ", ".join(kind.words() for kind in kinds[:_SHOWN_KINDS])
    others = refused - sum(kind.rows for kind in kinds[:_SHOWN_KINDS])
    if others > 0:
        named += f", other {others}"
    fix = "see each row's problem in problems.parquet"
    if kinds:
        top = kinds[0]
        fix = FIXES.get(top.rule, fix).format(field=top.field)
        if top.example:
            fix += f" (first: {top.example})"
    return StopInfo(
        StopReason.INPUT_MOSTLY_REFUSED,
        f"validation refused {refused} of {rows} rows of {source} ({refused / rows:.0%}), "
        f"more than {SETTING} {max_share:g}, so nothing is sent: {named}; {fix}; every "
        f"refused row is in problems.parquet ({SETTING}: 0 values the rest anyway)",
    )
