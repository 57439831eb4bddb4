"""Every rule of docs/api.md sections 3 and 6, checked on a whole batch at once.

A row that passes here must never be refused by the API as `invalid-request`: the
sandbox's own reading of the rules (`batchval._internal.sandbox.rules`) is the other half of that
promise, and a property test holds the two together. Where this side is stricter (a
reference that a spreadsheet would run as a formula), it says so in PROBLEM_RULES.

The checks are polars expressions over the batch. Python sees only *distinct* values,
and only where the rule is shared code that must not be written twice: postcode
normalisation and regions (`batchval._internal.postcodes`, which the sandbox uses too), and the
postcode-in-reference test for the rare reference that is not plain ASCII (polars'
regex engine and Python's agree on ASCII text only).

The request is encoded as canonical JSON by string expressions too; the encoding equals
`json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`, which the
tests check against json.dumps itself. Its text is NFC (mapping.field_value) and its
`include` sorted and unique, so that rows asking the same thing in other spellings send
the same bytes and get the same idempotency key.
"""

from __future__ import annotations

import dataclasses
import json
import types
from collections.abc import Mapping
from typing import Protocol

import polars as pl

from batchval._internal import postcodes
from batchval._internal.api import INCLUDE_ITEMS, REQUEST_FIELDS
from batchval._internal.input.lender_values import RULES as LENDER_RULES
from batchval._internal.input.mapping import ColumnMap, field_values, include_items
from batchval._internal.input.options import ENUM_VALUES, ROW_FIELDS, InputOptions
from batchval._internal.input.wordings import (
    BUILT_FORM_WORDINGS,
    NEEDS_BUILT_FORM,
    PROPERTY_TYPE_OF_FORM,
    WORDINGS,
    needs_a_built_form,
    wording_key,
)

PROBLEM_RULES: Mapping[str, str] = types.MappingProxyType(
    {
        "required": "postcode or propertyType is missing or empty",
        "area_or_bedrooms_required": "neither bedrooms nor floorAreaSqm is given",
        "invalid_postcode": "the postcode is not shaped like a full UK postcode (SW1A 1AA)",
        # The API's own name for the same problem: one spelling whichever side finds it.
        "outside-coverage": "the postcode is certainly outside England and Wales "
        "(Scotland, Northern Ireland, Isle of Man, Channel Islands)",
        "not_in_list": "the value is not one of the field's codes, after the config's value "
        "map and the wordings batchval knows",
        "ambiguous_value": "the property type's wording does not say which of the API's types "
        "it is (a House or Bungalow with no builtForm, a Park Home): the detail says what "
        "to send",
        "not_an_integer": "bedrooms or yearBuilt is not a whole number (3.0 is one)",
        "not_a_number": "floorAreaSqm is not a finite number",
        "out_of_range": "the number is outside the API's limits (bedrooms 0-20, "
        "floorAreaSqm 10-2000, yearBuilt 1500-2100)",
        "too_long": "the reference is longer than 64 characters",
        "formula": "the reference starts with = + - or @, which a spreadsheet would run as "
        "a formula (stricter than the API)",
        "contains_postcode": "the reference holds a postcode; the API forbids names and "
        "addresses there",
        **LENDER_RULES,
        "invalid_include": "an include item is not commentary or rebuildCost, spelled so "
        "(case counts): in the row's include column, or in the run's include for a row "
        "that names none",
    }
)

OUTPUT_SCHEMA: Mapping[str, pl.DataType] = types.MappingProxyType(
    {
        "row_number": pl.UInt64(),
        "request_json": pl.String(),
        "field": pl.String(),
        "rule": pl.String(),
        "detail": pl.String(),
    }
)

_INT_RANGES = {"bedrooms": (0, 20), "yearBuilt": (1500, 2100)}
_AREA_RANGE = (10, 2000)
_REFERENCE_MAX = 64
_SHOWN_MAX = 40  # characters of a value quoted in a problem's detail

# Where each region certainly outside coverage is, in words for a detail.
_PLACES = {
    postcodes.Region.SCOTLAND: "Scotland",
    postcodes.Region.NORTHERN_IRELAND: "Northern Ireland",
    postcodes.Region.ISLE_OF_MAN: "the Isle of Man",
    postcodes.Region.CHANNEL_ISLANDS: "the Channel Islands",
}

# json.dumps' own escapes (ensure_ascii=False): backslash, quote and control characters.
_ESCAPED = ["\\", '"', *map(chr, range(0x20))]
_ESCAPES = [json.dumps(c, ensure_ascii=False)[1:-1] for c in _ESCAPED]
_NEEDS_ESCAPE = r'[\x00-\x1f"\\]'
_ASCII = r"^[\x00-\x7f]*$"
# A postcode in its normal form, which `postcodes.normalise` returns as it is (checked
# by a property test): polars finds these, Python normalises the rest.
NORMAL_POSTCODE = r"^[A-Z]{1,2}[0-9][A-Z0-9]? [0-9][A-Z]{2}$"


@dataclasses.dataclass(frozen=True, slots=True)
class _Check:
    """One rule on one field: where it is broken and what to tell the person."""

    field: str
    rule: str
    broken: pl.Expr  # true on rows that break it
    detail: pl.Expr  # the sentence, read only where broken

    def where(self, then: pl.Expr) -> pl.Expr:
        """`then` on rows that break the rule, null elsewhere (a null test is no break)."""
        return pl.when(self.broken.fill_null(False)).then(then)


def _raw(field: str) -> pl.Expr:
    return pl.col(f"raw.{field}")


def _value(field: str) -> pl.Expr:
    return pl.col(f"value.{field}")


def _shown(value: pl.Expr) -> pl.Expr:
    """The text trimmed, on one line, cut to about 40 characters: fit to quote."""
    text = value.str.strip_chars().str.replace_all(r"\s+", " ")
    return (
        pl.when(text.str.len_chars() > _SHOWN_MAX)
        .then(pl.concat_str([text.str.slice(0, _SHOWN_MAX), pl.lit("…")]))
        .otherwise(text)
    )


def _said(field: str, *parts: str | pl.Expr) -> pl.Expr:
    """`field 'value' ...`: the value as typed, trimmed, on one line, cut to ~40 chars."""
    words = [pl.lit(p) if isinstance(p, str) else p for p in parts]
    return pl.concat_str([pl.lit(f"{field} '"), _shown(_raw(field)), pl.lit("' "), *words])


def json_string(text: pl.Expr) -> pl.Expr:
    """A JSON string literal of the text, byte for byte as json.dumps writes it."""
    escaped = (
        pl.when(text.str.contains(_NEEDS_ESCAPE))
        .then(text.str.replace_many(_ESCAPED, _ESCAPES))
        .otherwise(text)
    )
    return pl.concat_str([pl.lit('"'), escaped, pl.lit('"')])


def _member(key: str, value: pl.Expr) -> pl.Expr:
    return pl.concat_str([pl.lit(json.dumps(key, ensure_ascii=False) + ":"), value])


def _with_postcodes(work: pl.DataFrame) -> pl.DataFrame:
    """Adds the normal form of each postcode and, when certainly outside, where it is.

    A postcode already in its normal form (`SW1A 1AA`: ASCII capitals, one space before
    the inward code) is its own normal form, as `postcodes.normalise` would say (a test
    holds it to that); `postcodes.normalise` runs once per distinct other value, and
    `postcodes.region` once per outward code, so a batch costs Python time in proportion
    to its variety, not its size.
    """
    value = pl.col("value.postcode")
    normal_already = value.str.contains(NORMAL_POSTCODE)
    distinct = (
        work.filter(value.is_not_null() & ~normal_already).get_column("value.postcode").unique()
    )
    normal = pl.Series(
        "postcode.looked_up", [postcodes.normalise(v) for v in distinct.to_list()], pl.String
    )
    table = pl.DataFrame([distinct, normal])
    work = work.join(table, on="value.postcode", how="left", maintain_order="left")
    work = work.with_columns(
        pl.when(normal_already)
        .then(value)
        .otherwise(pl.col("postcode.looked_up"))
        .alias("postcode.normal")
    ).drop("postcode.looked_up")
    outward = pl.col("postcode.normal").str.extract(r"^(\S+) ")
    examples = (
        work.select(outward.alias("outward"), pl.col("postcode.normal"))
        .drop_nulls("outward")
        .group_by("outward")
        .agg(pl.first("postcode.normal"))
    )
    places = {
        code: _PLACES.get(postcodes.region(example)) for code, example in examples.iter_rows()
    }
    return work.with_columns(
        outward.replace_strict(places, default=None, return_dtype=pl.String).alias(
            "postcode.outside"
        )
    )


def _reference_has_postcode(work: pl.DataFrame) -> pl.Expr:
    """True where the reference holds a postcode, as `postcodes.contains_postcode` says."""
    ref = _value("reference")
    ascii_text = ref.str.contains(_ASCII)
    others = work.filter(ref.is_not_null() & ~ascii_text).get_column("value.reference")
    hits = [text for text in others.unique().to_list() if postcodes.contains_postcode(text)]
    return (
        pl.when(ascii_text)
        .then(ref.str.contains(postcodes.POSTCODE_IN_TEXT))
        .otherwise(ref.is_in(hits))
    )


def _number(field: str) -> pl.Expr:
    return _value(field).cast(pl.Float64, strict=False)


def _number_checks(field: str) -> list[_Check]:
    present = _value(field).is_not_null()
    number = _number(field)
    finite = number.is_finite().fill_null(False)
    if field in _INT_RANGES:
        low, high = _INT_RANGES[field]
        sound = finite & (number == number.floor())
        fault = _Check(
            field, "not_an_integer", present & ~sound, _said(field, "is not a whole number")
        )
    else:
        low, high = _AREA_RANGE
        sound = finite
        fault = _Check(field, "not_a_number", present & ~sound, _said(field, "is not a number"))
    outside = present & sound & ~number.is_between(low, high)
    limits = f"is outside the API's limits of {low} to {high}"
    return [fault, _Check(field, "out_of_range", outside, _said(field, limits))]


def _postcode_checks() -> list[_Check]:
    missing = _value("postcode").is_null()
    outside = pl.col("postcode.outside")
    return [
        _Check(
            "postcode", "required", missing, pl.lit("postcode is missing (every row needs one)")
        ),
        _Check(
            "postcode",
            "invalid_postcode",
            ~missing & pl.col("postcode.normal").is_null(),
            _said("postcode", "is not a full UK postcode such as SW1A 1AA"),
        ),
        _Check(
            "postcode",
            "outside-coverage",
            outside.is_not_null(),
            _said(
                "postcode",
                "is in ",
                outside,
                ", outside England and Wales, which the API does not value",
            ),
        ),
    ]


def _reference_checks(has_postcode: pl.Expr) -> list[_Check]:
    ref = _value("reference")
    length = ref.str.len_chars()
    return [
        _Check(
            "reference",
            "too_long",
            length > _REFERENCE_MAX,
            _said(
                "reference",
                "has ",
                length.cast(pl.String),
                f" characters, more than the API's {_REFERENCE_MAX}",
            ),
        ),
        _Check(
            "reference",
            "formula",
            ref.str.contains(r"^[=+\-@]"),
            _said(
                "reference",
                "starts with '",
                ref.str.slice(0, 1),
                "', so a spreadsheet would run it",
            ),
        ),
        _Check(
            "reference",
            "contains_postcode",
            has_postcode,
            _said("reference", "holds a postcode, and the API forbids names and addresses there"),
        ),
    ]


def _checks(options: InputOptions, reference_has_postcode: pl.Expr) -> list[_Check]:
    """Every rule, in the order problems are reported: by field, then by rule."""
    neither = _value("bedrooms").is_null() & _value("floorAreaSqm").is_null()
    give = "bedrooms and floorAreaSqm are both missing (give floorAreaSqm, or at least bedrooms)"
    checks = [
        *_postcode_checks(),
        _Check(
            "propertyType",
            "required",
            _value("propertyType").is_null(),
            pl.lit("propertyType is missing (every row needs one)"),
        ),
        _Check(
            "propertyType",
            "ambiguous_value",
            pl.col(_UNPLACED).is_not_null(),
            _said("propertyType", pl.col(_UNPLACED)),
        ),
        _enum_check("propertyType", unless=pl.col(_UNPLACED).is_not_null()),
        _Check("bedrooms", "area_or_bedrooms_required", neither, pl.lit(give)),
        *_number_checks("bedrooms"),
        *_number_checks("floorAreaSqm"),
        *_number_checks("yearBuilt"),
        _enum_check("builtForm"),
        _enum_check("wallsEnergyEfficiency"),
        *_reference_checks(reference_has_postcode),
    ]
    checks.append(_row_include_check())
    bad = [item for item in options.include if item not in INCLUDE_ITEMS]
    if bad:
        allowed = ", ".join(INCLUDE_ITEMS)
        detail = f"include item {bad[0]!r} is not one of {allowed} (fix the run's include)"
        # A row that names its own extras does not use the run's.
        uses_run = _value("include").is_null()
        checks.append(_Check("include", "invalid_include", uses_run, pl.lit(detail)))
    return checks


def _row_include_check() -> _Check:
    """Items of the row's own include that the API does not know, each named once.

    Only the API's spellings are accepted: `rebuildcost` or `Commentary` is refused
    here rather than guessed at, as the API would refuse it.
    """
    unknown = (
        _value("include")
        .list.eval(pl.element().filter(~pl.element().is_in(INCLUDE_ITEMS)))
        .list.unique(maintain_order=True)
    )
    count = unknown.list.len()
    quoted = unknown.list.eval(_shown(pl.element())).list.join("', '")
    detail = pl.concat_str(
        [
            pl.when(count == 1).then(pl.lit("include item '")).otherwise(pl.lit("include items '")),
            quoted,
            pl.when(count == 1).then(pl.lit("' is")).otherwise(pl.lit("' are")),
            pl.lit(
                f" not one of {', '.join(INCLUDE_ITEMS)} (spelled exactly so, case counts; "
                "separate items with ; or ,)"
            ),
        ]
    )
    return _Check("include", "invalid_include", count > 0, detail)


def _enum_check(field: str, unless: pl.Expr | None = None) -> _Check:
    allowed = ENUM_VALUES[field]
    broken = _value(field).is_not_null() & ~_value(field).is_in(allowed)
    if unless is not None:  # another rule of the field says it better
        broken = broken & ~unless.fill_null(False)
    detail = _said(
        field, f"is not one of {', '.join(allowed)} (map other codes under values in the config)"
    )
    return _Check(field, "not_in_list", broken, detail)


def _request_members(options: InputOptions) -> dict[str, pl.Expr]:
    """The JSON members a valid row sends, by name; null where the row has no value."""
    members: dict[str, pl.Expr] = {}
    for field in REQUEST_FIELDS:
        value = _value(field)
        if field == "postcode":
            text = pl.concat_str([pl.lit('"'), pl.col("postcode.normal"), pl.lit('"')])
        elif field in ENUM_VALUES:
            text = pl.concat_str([pl.lit('"'), value, pl.lit('"')])
        elif field == "reference":
            text = json_string(value)
        else:
            number = _number(field)
            whole = number.cast(pl.Int64, strict=False).cast(pl.String)
            text = pl.when(number == number.floor()).then(whole).otherwise(number.cast(pl.String))
        members[field] = pl.when(value.is_not_null()).then(_member(field, text))
    # A row's own include replaces the run's. Only valid rows are encoded, so every item
    # is one of the API's words, which JSON writes without escapes.
    own = _value("include").list.unique().list.sort()
    items = pl.concat_str([pl.lit('["'), own.list.join('","'), pl.lit('"]')])
    if options.include:
        default = json.dumps(sorted(set(options.include)), separators=(",", ":"))
        items = pl.coalesce(items, pl.lit(default))
    members["include"] = _member("include", items)
    return members


def _work_frame(raw: pl.DataFrame, columns: ColumnMap, options: InputOptions) -> pl.DataFrame:
    """Each field's text as read (`raw.*`) and translated (`value.*`).

    A field the file has no column for is a null column, so every rule reads alike.
    Columns are taken by position: a name such as "*" would be a pattern to polars.
    Every column is text but a Parquet list (the include column): `value.include` is the
    row's list of items, null where it names none. Pass-through columns are not read
    here: they ride along typed, beside the checked rows (`input/passthrough`).
    """
    absent = pl.lit(None, dtype=pl.String)

    def column(name: str) -> pl.Expr:
        """The input column as text; a list (of text, as the reader lets through) as is."""
        index = raw.get_column_index(name)
        listed = isinstance(raw.schema[name], pl.List)
        return pl.nth(index) if listed else pl.nth(index).cast(pl.String)

    picked = [
        (column(columns.fields[f]) if f in columns.fields else absent).alias(f"raw.{f}")
        for f in ROW_FIELDS
    ]
    include = columns.fields.get("include")
    listed = include is not None and isinstance(raw.schema[include], pl.List)
    work = raw.select(*picked)
    work = work.with_columns(
        *(field_values(work, f, options).alias(f"value.{f}") for f in REQUEST_FIELDS),
        include_items(_raw("include"), is_list=listed).alias("value.include"),
    )
    return _with_wordings(work)


_UNPLACED = "unplaced.propertyType"  # why a propertyType wording says no type, or null


def _unknown(work: pl.DataFrame, field: str) -> list[str]:
    """The distinct raw values of `field` whose value is not one of its codes."""
    value = _value(field)
    return (
        work.filter(value.is_not_null() & ~value.is_in(ENUM_VALUES[field]))
        .get_column(f"raw.{field}")
        .unique()
        .to_list()
    )


def _with_wordings(work: pl.DataFrame) -> pl.DataFrame:
    """propertyType and builtForm as the wordings batchval knows read them
    (`input/wordings`), where the value map and the default spelling did not: one
    column feeds both fields, a `House` takes its type from the builtForm, and a wording
    none of the API's types fits says why in `_UNPLACED`. Decided once per distinct
    value, as `mapping.field_values` does."""
    forms = {raw: wording_key(raw) for raw in _unknown(work, "builtForm")}
    forms = {raw: key for raw, key in forms.items() if key in BUILT_FORM_WORDINGS}
    types_ = {raw: WORDINGS.get(wording_key(raw)) for raw in _unknown(work, "propertyType")}
    said = {raw: wording for raw, wording in types_.items() if wording is not None}

    def by_raw(field: str, table: Mapping[str, str | None], default: pl.Expr) -> pl.Expr:
        if not table:
            return default
        return _raw(field).replace_strict(
            list(table), list(table.values()), default=default, return_dtype=pl.String
        )

    absent = pl.lit(None, pl.String)
    built_form = by_raw(
        "builtForm", {r: BUILT_FORM_WORDINGS[k] for r, k in forms.items()}, _value("builtForm")
    )
    implied = by_raw("propertyType", {r: w.built_form for r, w in said.items()}, absent)
    built_form = pl.coalesce(built_form, implied)
    named = by_raw("propertyType", {r: w.property_type for r, w in said.items()}, absent)
    of_form = built_form.replace_strict(
        list(PROPERTY_TYPE_OF_FORM),
        list(PROPERTY_TYPE_OF_FORM.values()),
        default=None,
        return_dtype=pl.String,
    )
    needs = named == NEEDS_BUILT_FORM
    property_type = (
        pl.when(needs)
        .then(pl.coalesce(of_form, _value("propertyType")))
        .otherwise(pl.coalesce(named, _value("propertyType")))
    )
    unplaced = by_raw("propertyType", {r: w.unplaced for r, w in said.items()}, absent)
    needing = {
        r: needs_a_built_form(r) for r, w in said.items() if w.property_type == NEEDS_BUILT_FORM
    }
    unplaced = (
        pl.when(needs & of_form.is_null())
        .then(by_raw("propertyType", needing, absent))
        .otherwise(unplaced)
    )
    return work.with_columns(
        property_type.alias("value.propertyType"),
        built_form.alias("value.builtForm"),
        unplaced.alias(_UNPLACED),
    )


def _placed(height: int, values: pl.Series, at: pl.Series) -> pl.Series:
    """A text column of `height` rows: `values` at the positions `at`, null elsewhere."""
    column = pl.repeat(None, height, dtype=pl.String, eager=True)
    return column.scatter(at, values) if at.len() else column


class Checker(Protocol):
    """Validation of one batch: `check_batch` (every rule), or `check_postcodes`."""

    def __call__(
        self, raw: pl.DataFrame, *, first_row: int, columns: ColumnMap, options: InputOptions
    ) -> pl.DataFrame: ...


def check_batch(
    raw: pl.DataFrame,
    *,
    first_row: int,
    columns: ColumnMap,
    options: InputOptions,
    encode: bool = True,
) -> pl.DataFrame:
    """Validates and encodes one batch of input rows (all text), numbered from first_row+1.

    Returns one row per input row with the columns of OUTPUT_SCHEMA: either
    `request_json` or `field`/`rule`/`detail` is set, never both, never neither. Without
    `encode`, `request_json` is null throughout: what validation refuses, a third sooner.
    """
    work = _with_postcodes(_work_frame(raw, columns, options))
    checks = _checks(options, _reference_has_postcode(work))
    # The first rule each row breaks, as its index in `checks` (null: none).
    first = work.select(
        pl.coalesce([c.where(pl.lit(i, pl.UInt8)) for i, c in enumerate(checks)])
    ).to_series()
    bad = first.is_not_null()
    encoded = ~bad & encode  # the rows whose request is written
    # The JSON and the detail are built only on the rows that need them: most rows are
    # good, and a detail costs more than all the checks together.
    members = _request_members(options)
    body = pl.concat_str([members[k] for k in sorted(members)], separator=",", ignore_nulls=True)
    requests = work.filter(encoded).select(pl.concat_str([pl.lit("{"), body, pl.lit("}")]))
    details = work.filter(bad).select(
        pl.concat_str([c.where(c.detail) for c in checks], separator="; ", ignore_nulls=True)
    )
    index = list(range(len(checks)))
    return pl.DataFrame(
        {
            "row_number": pl.int_range(
                first_row + 1, first_row + work.height + 1, dtype=pl.UInt64, eager=True
            ),
            "request_json": _placed(work.height, requests.to_series(), encoded.arg_true()),
            "field": first.replace_strict(index, [c.field for c in checks], return_dtype=pl.String),
            "rule": first.replace_strict(index, [c.rule for c in checks], return_dtype=pl.String),
            "detail": _placed(work.height, details.to_series(), bad.arg_true()),
        },
        schema=dict(OUTPUT_SCHEMA),
    )


POSTCODE_SCHEMA: Mapping[str, pl.DataType] = types.MappingProxyType(
    {
        "row_number": pl.UInt64(),
        "postcode": pl.String(),
        "field": pl.String(),
        "rule": pl.String(),
        "detail": pl.String(),
    }
)


def check_postcodes(
    raw: pl.DataFrame, *, first_row: int, columns: ColumnMap, options: InputOptions
) -> pl.DataFrame:
    """Only the postcode rules, for `streets`: one row per input row (POSTCODE_SCHEMA),
    with its postcode in normal form, or the postcode's problem. A row another field of
    which is wrong (bedrooms, say) still has its postcode."""
    work = _with_postcodes(_work_frame(raw, columns, options))
    checks = _postcode_checks()
    first = work.select(
        pl.coalesce([c.where(pl.lit(i, pl.UInt8)) for i, c in enumerate(checks)])
    ).to_series()
    index = list(range(len(checks)))
    detail = pl.concat_str([c.where(c.detail) for c in checks], separator="; ", ignore_nulls=True)
    found = work.select(
        pl.when(first.is_null()).then(pl.col("postcode.normal")).alias("postcode"),
        pl.when(first.is_not_null()).then(detail).alias("detail"),
    )
    return pl.DataFrame(
        {
            "row_number": pl.int_range(
                first_row + 1, first_row + work.height + 1, dtype=pl.UInt64, eager=True
            ),
            "postcode": found.get_column("postcode"),
            "field": first.replace_strict(index, [c.field for c in checks], return_dtype=pl.String),
            "rule": first.replace_strict(index, [c.rule for c in checks], return_dtype=pl.String),
            "detail": found.get_column("detail"),
        },
        schema=dict(POSTCODE_SCHEMA),
    )
