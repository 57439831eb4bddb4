"""Validation and encoding of rows (batchval._internal.input.validate, mapping and options)."""

from __future__ import annotations

import json
import random
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings

from batchval._internal import postcodes
from batchval._internal.api.vocabulary import INCLUDE_ITEMS, REQUEST_FIELDS
from batchval._internal.input import (
    PROBLEM_RULES,
    InputError,
    InputOptions,
    open_input,
)
from batchval._internal.input.mapping import field_value, field_values, resolve_columns
from batchval._internal.input.options import ENUM_VALUES
from batchval._internal.input.validate import (
    NORMAL_POSTCODE,
    OUTPUT_SCHEMA,
    check_batch,
    check_postcodes,
    json_string,
)
from batchval._internal.sandbox.rules import check_request

Row = Mapping[str, str | None]
GOOD: Row = {"postcode": "SW1A 1AA", "property_type": "flat", "bedrooms": "2"}
SAMPLE = Path(__file__).parents[2] / "sample_inputs" / "bad_rows.csv"


def check(rows: Sequence[Row], options: InputOptions | None = None) -> list[dict[str, Any]]:
    """The output rows for input rows given as {column: text}."""
    options = options or InputOptions()
    names = list(dict.fromkeys(name for row in rows for name in row))
    raw = pl.DataFrame(
        [{name: row.get(name) for name in names} for row in rows],
        schema=dict.fromkeys(names, pl.String),
    )
    mapped = resolve_columns(Path("rows.csv"), names, options)
    return check_batch(raw, first_row=0, columns=mapped, options=options).to_dicts()


def riding(rows: Sequence[Row], options: InputOptions | None = None) -> list[str]:
    """The columns that ride along (pass-through) for input rows given as {column: text};
    their values are the reader's (tests/input/test_input_passthrough.py)."""
    names = list(dict.fromkeys(name for row in rows for name in row))
    return resolve_columns(Path("rows.csv"), names, options or InputOptions()).passthrough


def one(changes: Row, options: InputOptions | None = None) -> dict[str, Any]:
    """The output row for GOOD with some columns changed."""
    return check([{**GOOD, **changes}], options)[0]


def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


BAD_VALUES = [
    ("postcode", "", "postcode", "required"),
    ("postcode", None, "postcode", "required"),
    ("property_type", "", "propertyType", "required"),
    ("postcode", "SW1A", "postcode", "invalid_postcode"),
    ("postcode", "SW1A 1AAA", "postcode", "invalid_postcode"),
    ("postcode", "12345", "postcode", "invalid_postcode"),
    ("postcode", "EH1 1AA", "postcode", "outside-coverage"),
    ("postcode", "eh11aa", "postcode", "outside-coverage"),
    ("postcode", "BT1 1AA", "postcode", "outside-coverage"),
    ("postcode", "IM1 1AA", "postcode", "outside-coverage"),
    ("postcode", "JE2 3AA", "postcode", "outside-coverage"),
    ("postcode", "GY1 1AA", "postcode", "outside-coverage"),
    ("property_type", "castle", "propertyType", "not_in_list"),
    ("property_type", "semi detached cottage", "propertyType", "not_in_list"),
    ("property_type", "bungalow", "propertyType", "ambiguous_value"),
    ("property_type", "park home", "propertyType", "ambiguous_value"),
    ("built_form", "terrace", "builtForm", "not_in_list"),
    ("walls_energy_efficiency", "excellent", "wallsEnergyEfficiency", "not_in_list"),
    ("bedrooms", "3.5", "bedrooms", "not_an_integer"),
    ("bedrooms", "three", "bedrooms", "not_an_integer"),
    ("bedrooms", "NaN", "bedrooms", "not_an_integer"),
    ("bedrooms", "inf", "bedrooms", "not_an_integer"),
    ("year_built", "1990.5", "yearBuilt", "not_an_integer"),
    ("floor_area_sqm", "abc", "floorAreaSqm", "not_a_number"),
    ("floor_area_sqm", "85 sqm", "floorAreaSqm", "not_a_number"),
    ("floor_area_sqm", "85,5", "floorAreaSqm", "not_a_number"),
    ("floor_area_sqm", "NaN", "floorAreaSqm", "not_a_number"),
    ("floor_area_sqm", "inf", "floorAreaSqm", "not_a_number"),
    ("floor_area_sqm", "-inf", "floorAreaSqm", "not_a_number"),
    ("bedrooms", "-1", "bedrooms", "out_of_range"),
    ("bedrooms", "21", "bedrooms", "out_of_range"),
    ("bedrooms", "1e3", "bedrooms", "out_of_range"),
    ("floor_area_sqm", "9.99", "floorAreaSqm", "out_of_range"),
    ("floor_area_sqm", "2000.01", "floorAreaSqm", "out_of_range"),
    ("year_built", "1499", "yearBuilt", "out_of_range"),
    ("year_built", "2101", "yearBuilt", "out_of_range"),
    ("reference", "x" * 65, "reference", "too_long"),
    ("reference", "Flat 2, 10 High St, SW1A 1AA", "reference", "contains_postcode"),
    ("reference", "ref sw1a1aa", "reference", "contains_postcode"),
    ("reference", "=SUM(A1:A9)", "reference", "formula"),
    ("reference", "+441234", "reference", "formula"),
    ("reference", "-1", "reference", "formula"),
    ("reference", "@cmd", "reference", "formula"),
]


@pytest.mark.parametrize("padding", ["", "  "])
@pytest.mark.parametrize(("column", "value", "field", "rule"), BAD_VALUES)
def test_bad_value_names_field_and_rule(
    column: str, value: str | None, field: str, rule: str, padding: str
) -> None:
    """Each bad value is refused with its field and rule, whatever spaces surround it."""
    padded = None if value is None else f"{padding}{value}{padding}"
    out = one({column: padded})
    assert (out["field"], out["rule"], out["request_json"]) == (field, rule, None)
    assert rule in PROBLEM_RULES


@pytest.mark.parametrize(
    ("changes", "member", "expected"),
    [
        ({"bedrooms": "0"}, "bedrooms", 0),
        ({"bedrooms": "20"}, "bedrooms", 20),
        ({"bedrooms": "3.0"}, "bedrooms", 3),
        ({"bedrooms": " 3 "}, "bedrooms", 3),
        ({"floor_area_sqm": "10"}, "floorAreaSqm", 10),
        ({"floor_area_sqm": "2000"}, "floorAreaSqm", 2000),
        ({"floor_area_sqm": "85.0"}, "floorAreaSqm", 85),
        ({"floor_area_sqm": "85.25"}, "floorAreaSqm", 85.25),
        ({"year_built": "1500"}, "yearBuilt", 1500),
        ({"year_built": "2100"}, "yearBuilt", 2100),
        ({"reference": "x" * 64}, "reference", "x" * 64),
        ({"reference": "  CASE-1  "}, "reference", "CASE-1"),
        ({"postcode": "sw1a1aa"}, "postcode", "SW1A 1AA"),
        ({"postcode": " sw1a   1aa "}, "postcode", "SW1A 1AA"),
        ({"postcode": "TD15 1AA"}, "postcode", "TD15 1AA"),
        ({"postcode": "DG16 5AA"}, "postcode", "DG16 5AA"),
        ({"postcode": "ZZ1 4AA"}, "postcode", "ZZ1 4AA"),
        ({"property_type": "Semi-Detached"}, "propertyType", "semi_detached"),
        ({"property_type": "  FLAT "}, "propertyType", "flat"),
        ({"built_form": "End Terrace"}, "builtForm", "end_terrace"),
        ({"built_form": "enclosed - mid-terrace"}, "builtForm", "enclosed_mid_terrace"),
        ({"walls_energy_efficiency": "Very Good"}, "wallsEnergyEfficiency", "very_good"),
    ],
)
def test_edge_value_is_accepted(changes: Row, member: str, expected: object) -> None:
    """Values at the limits, and untidy spellings of good values, make a request."""
    out = one(changes)
    assert out["rule"] is None, out["detail"]
    assert json.loads(out["request_json"])[member] == expected


def test_request_json_is_canonical() -> None:
    """A full row encodes with sorted keys, no spaces, integers as integers."""
    out = one(
        {
            "postcode": "sw1a1aa",
            "property_type": "Semi-Detached",
            "bedrooms": "3.0",
            "floor_area_sqm": "85.50",
            "year_built": "1930",
            "built_form": "End Terrace",
            "walls_energy_efficiency": "good",
            "reference": 'Case "7" – Zoë',
        }
    )
    assert out["request_json"] == (
        '{"bedrooms":3,"builtForm":"end_terrace","floorAreaSqm":85.5,"postcode":"SW1A 1AA",'
        '"propertyType":"semi_detached","reference":"Case \\"7\\" – Zoë",'
        '"wallsEnergyEfficiency":"good","yearBuilt":1930}'
    )


def test_absent_fields_are_left_out() -> None:
    """Empty optional values are not sent, not even as null."""
    out = one({"floor_area_sqm": "", "year_built": " ", "built_form": None, "reference": ""})
    assert out["request_json"] == '{"bedrooms":2,"postcode":"SW1A 1AA","propertyType":"flat"}'


def test_floor_area_alone_is_enough() -> None:
    """A row with a floor area and no bedrooms column is a request."""
    out = check([{"postcode": "M1 1AE", "propertyType": "flat", "floorAreaSqm": "61"}])[0]
    assert out["request_json"] == '{"floorAreaSqm":61,"postcode":"M1 1AE","propertyType":"flat"}'


def test_include_is_sorted_and_unique() -> None:
    """The run's include is added to every request, sorted, each item once."""
    options = InputOptions(include=("rebuildCost", "commentary", "rebuildCost"))
    out = one({}, options)
    assert json.loads(out["request_json"])["include"] == ["commentary", "rebuildCost"]
    assert '"include":["commentary","rebuildCost"]' in out["request_json"]


def test_invalid_include_is_a_problem_on_every_row() -> None:
    """An include item the API does not know is reported on each row, by field include."""
    rows = check([GOOD, GOOD], InputOptions(include=("commentary", "photos")))
    assert [(r["field"], r["rule"]) for r in rows] == [("include", "invalid_include")] * 2
    assert "'photos'" in rows[0]["detail"]


C, R = "commentary", "rebuildCost"


@pytest.mark.parametrize(
    ("cell", "run", "expected"),
    [
        ("commentary;rebuildCost", (), [C, R]),
        ("commentary,rebuildCost", (), [C, R]),
        ("commentary, rebuildCost", (), [C, R]),
        (" rebuildCost ;  commentary ", (), [C, R]),
        ("rebuildCost\t,\tcommentary", (), [C, R]),
        ("rebuildCost;commentary;rebuildCost", (), [C, R]),
        ("commentary;commentary", (), [C]),
        ("commentary;", (), [C]),
        (";;rebuildCost,,", (), [R]),
        ("rebuildCost", (), [R]),
        ("", (), None),
        ("   ", (), None),
        (None, (), None),
        (";", (), None),
        ("", (R,), [R]),
        (None, (C, R), [C, R]),
        (" , ", (C,), [C]),
        ("commentary", (R,), [C]),
        ("rebuildCost", (C, R), [R]),
        ("rebuildCost;commentary", (C,), [C, R]),
    ],
)
def test_include_cell_gives_the_rows_extras(
    cell: str | None, run: tuple[str, ...], expected: list[str] | None
) -> None:
    """An include cell's items, sorted and once each, replace the run's; empty is the run's."""
    out = one({"include": cell}, InputOptions(include=run))
    assert out["rule"] is None, out["detail"]
    assert json.loads(out["request_json"]).get("include") == expected


@pytest.mark.parametrize("run", [(), (C,)])
@pytest.mark.parametrize(
    ("cell", "detail"),
    [
        ("photos", "include item 'photos' is not one of commentary, rebuildCost (spelled"),
        ("commentary;photos", "include item 'photos' is not one of"),
        ("photos, maps;photos", "include items 'photos', 'maps' are not one of"),
        ("rebuildcost", "include item 'rebuildcost' is not one of"),
        ("Commentary", "include item 'Commentary' is not one of"),
        ("REBUILDCOST", "include item 'REBUILDCOST' is not one of"),
        ("rebuild_cost", "include item 'rebuild_cost' is not one of"),
        ("commentary rebuildCost", "include item 'commentary rebuildCost' is not one of"),
        ("commentary|rebuildCost", "include item 'commentary|rebuildCost' is not one of"),
        ("x" * 60, "include item '" + "x" * 40 + "…' is not one of"),
    ],
)
def test_unknown_include_item_is_a_row_problem(
    cell: str, detail: str, run: tuple[str, ...]
) -> None:
    """An item that is not the API's spelling is invalid_include naming it, run default or not."""
    out = one({"include": cell}, InputOptions(include=run))
    assert (out["field"], out["rule"], out["request_json"]) == ("include", "invalid_include", None)
    assert out["detail"].startswith(detail), out["detail"]


def test_row_include_is_checked_after_the_other_fields() -> None:
    """A row with a bad postcode and a bad include is reported for the postcode, naming both."""
    out = one({"postcode": "nowhere", "include": "photos"})
    assert (out["field"], out["rule"]) == ("postcode", "invalid_postcode")
    assert "include item 'photos'" in out["detail"]


def test_bad_run_include_spares_rows_that_name_their_own() -> None:
    """A bad run include is a problem only on rows that use it, not on rows with their own."""
    rows = check(
        [{**GOOD, "include": "commentary"}, {**GOOD, "include": ""}],
        InputOptions(include=("photos",)),
    )
    assert json.loads(rows[0]["request_json"])["include"] == [C]
    assert (rows[1]["rule"], rows[1]["detail"]) == (
        "invalid_include",
        "include item 'photos' is not one of commentary, rebuildCost (fix the run's include)",
    )


@pytest.mark.parametrize(
    ("header", "options"),
    [
        ("include", InputOptions()),
        (" Include ", InputOptions()),
        ("INCLUDE", InputOptions()),
        ("extras", InputOptions(columns={"include": "extras"})),
        ("Extras", InputOptions(columns={"include": "extras"})),
    ],
)
def test_include_column_is_found_and_not_passed_through(header: str, options: InputOptions) -> None:
    """The include column is found by name or by the config, and is no pass-through column."""
    given = [{**GOOD, "loan": "L1", header: "rebuildCost;commentary"}]
    rows = check(given, options)
    assert json.loads(rows[0]["request_json"])["include"] == [C, R]
    assert riding(given, options) == ["loan"]


def test_unmapped_extras_column_rides_along() -> None:
    """A column of extras under another name is only passed through unless the config maps it."""
    out = one({"extras": "commentary"})
    assert "include" not in json.loads(out["request_json"])
    assert riding([{**GOOD, "extras": "commentary"}]) == ["extras"]


def test_include_column_named_in_passthrough_is_sent_and_rides_along() -> None:
    """An include column the config also passes through is sent, and rides along (as
    typed: tests/input/test_input_passthrough.py)."""
    options = InputOptions(passthrough=("include",))
    out = one({"include": " rebuildCost,commentary "}, options)
    assert json.loads(out["request_json"])["include"] == [C, R]
    assert riding([{**GOOD, "include": "commentary"}], options) == ["include"]


@settings(deadline=None, max_examples=100)
@given(
    st.lists(st.sampled_from(INCLUDE_ITEMS), min_size=1, max_size=5),
    st.lists(st.sampled_from([";", ",", " ; ", ", ", " ,"]), min_size=4, max_size=4),
    st.randoms(use_true_random=False),
)
@pytest.mark.slow
def test_permuted_include_items_give_byte_identical_requests(
    items: list[str], separators: list[str], rng: random.Random
) -> None:
    """Any order, repetition and separators of the same items encode to the same bytes."""
    shuffled = rng.sample(items, len(items))
    cell = "".join(f"{separators[i % 4]}{item}" for i, item in enumerate(shuffled))[1:]
    rows = check([{**GOOD, "include": cell}, {**GOOD, "include": ";".join(sorted(set(items)))}])
    assert rows[0]["request_json"] == rows[1]["request_json"]
    want = {"bedrooms": 2, "include": sorted(set(items)), "postcode": "SW1A 1AA"}
    assert rows[0]["request_json"] == canonical({**want, "propertyType": "flat"})


# --- Unicode normal form -------------------------------------------------------------

NFC_CASES = ["Zoë", "Café Rosé", "Ångström", "Dvořák", "Łódź", "Ωmega", "한국", "x\u0301"]


@pytest.mark.parametrize("text", NFC_CASES)
def test_reference_in_either_normal_form_gives_one_request(text: str) -> None:
    """A reference typed decomposed or precomposed gives byte-identical request_json."""
    composed = unicodedata.normalize("NFC", text)
    decomposed = unicodedata.normalize("NFD", text)
    rows = check([{**GOOD, "reference": decomposed}, {**GOOD, "reference": composed}])
    assert rows[0]["request_json"] == rows[1]["request_json"]
    assert json.loads(rows[0]["request_json"])["reference"] == composed


def test_reference_length_counts_composed_characters() -> None:
    """64 accented letters typed decomposed (128 code points) are 64 characters, as sent."""
    out = one({"reference": unicodedata.normalize("NFD", "é" * 64)})
    assert json.loads(out["request_json"])["reference"] == "é" * 64


def test_value_map_matches_codes_in_either_normal_form() -> None:
    """A config code and a cell that differ only in normal form match."""
    nfd = unicodedata.normalize("NFD", "Maisonnée")
    options = InputOptions(values={"propertyType": {"Maisonnée": "flat"}})
    for cell in (nfd, "MAISONNÉE", "maisonnée "):
        out = one({"property_type": cell}, options)
        assert json.loads(out["request_json"])["propertyType"] == "flat", cell
    reverse = InputOptions(values={"propertyType": {nfd: "flat"}})
    assert json.loads(one({"property_type": "Maisonnée"}, reverse)["request_json"])


def test_value_map_codes_differing_in_normal_form_must_agree() -> None:
    """Two config codes equal but for normal form and mapping apart are refused."""
    nfd = unicodedata.normalize("NFD", "Maisonnée")
    with pytest.raises(ValueError, match="Unicode form"):
        InputOptions(values={"propertyType": {"Maisonnée": "flat", nfd: "detached"}})


def test_reference_is_sent_in_its_normal_form() -> None:
    """A reference is sent NFC (a pass-through column keeps its own form:
    tests/input/test_input_passthrough.py)."""
    nfd = unicodedata.normalize("NFD", "Zoë")
    out = one({"note": nfd, "reference": nfd})
    assert json.loads(out["request_json"])["reference"] == "Zoë"


@settings(deadline=None, max_examples=100)
@given(st.text(max_size=70))
@pytest.mark.slow
def test_any_reference_gives_the_same_answer_in_every_normal_form(reference: str) -> None:
    """A reference in NFC or in NFD gets the same request_json, or the same rule."""
    forms = [unicodedata.normalize(form, reference) for form in ("NFC", "NFD")]
    first, second = check([{**GOOD, "reference": form} for form in forms])
    assert (first["request_json"], first["rule"]) == (second["request_json"], second["rule"])


def test_several_problems_first_by_field_order_and_all_in_detail() -> None:
    """The first problem in field order is the row's rule; the detail names every one."""
    out = one({"reference": "=x", "bedrooms": "lots", "postcode": "nowhere"})
    assert (out["field"], out["rule"]) == ("postcode", "invalid_postcode")
    for fragment in ("'nowhere'", "'lots'", "'=x'"):
        assert fragment in out["detail"]


def test_detail_quotes_a_long_value_cut_short_on_one_line() -> None:
    """A long value is shown cut to about 40 characters and never breaks the line."""
    out = one({"property_type": "a very\nlong " + "x" * 100})
    assert "\n" not in out["detail"]
    assert "'a very long xxxxx" in out["detail"]
    assert "x" * 60 not in out["detail"]
    assert "…" in out["detail"]


def test_value_map_translates_codes() -> None:
    """The config's codes match on the trimmed value in any case; others still fail."""
    options = InputOptions(values={"propertyType": {"S": "semi_detached", "semi": "semi_detached"}})
    rows = check(
        [{**GOOD, "property_type": code} for code in (" s ", "SEMI", "Flat", "Q")], options
    )
    types = [r["request_json"] and json.loads(r["request_json"])["propertyType"] for r in rows]
    assert types == ["semi_detached", "semi_detached", "flat", None]
    assert rows[3]["rule"] == "not_in_list"


def test_value_map_overrides_default_normalisation() -> None:
    """A mapped code wins over the default spelling rules."""
    options = InputOptions(values={"builtForm": {"Terrace": "mid_terrace"}})
    out = one({"built_form": "terrace"}, options)
    assert json.loads(out["request_json"])["builtForm"] == "mid_terrace"


@pytest.mark.parametrize(
    "options",
    [
        {"values": {"propertyType": {"B": "bungalow"}}},
        {"values": {"propertyType": {"s": "semi_detached", " S": "detached"}}},
        {"values": {"bathrooms": {"1": "1"}}},
        {"columns": {"property_type": "type"}},
        {"encoding": "utf-16"},
        {"delimiter": ";;"},
        {"batch_rows": 0},
    ],
)
def test_bad_options_are_refused_when_built(options: dict[str, Any]) -> None:
    """A config that cannot be right is a ValueError before any file is read."""
    with pytest.raises(ValueError, match=r"\w"):
        InputOptions(**options)


def test_output_schema_and_row_numbers() -> None:
    """A batch keeps its rows in order, numbered on from first_row, in the fixed schema."""
    options = InputOptions()
    raw = pl.DataFrame([GOOD] * 3)
    mapped = resolve_columns(Path("x.csv"), raw.columns, options)
    out = check_batch(raw, first_row=40, columns=mapped, options=options)
    assert dict(out.schema) == dict(OUTPUT_SCHEMA)
    assert out["row_number"].to_list() == [41, 42, 43]


def test_sample_bad_rows_each_break_exactly_their_rule() -> None:
    """sample_inputs/bad_rows.csv: every BAD- row gets its one rule, every GOOD- row is valid."""
    rows = [
        {**row, **given}
        for batch in open_input(SAMPLE, InputOptions()).batches()
        for row, given in zip(batch.checked.to_dicts(), batch.passthrough.to_pylist(), strict=True)
    ]
    seen = set()
    for row in rows:
        loan_id = row["loan_id"]
        kind, _, rule = loan_id.partition("-")
        if kind == "GOOD":
            assert row["rule"] is None, row["detail"]
            assert check_request(json.loads(row["request_json"])) is None
        else:
            assert (row["rule"], row["request_json"]) == (rule, None), row["detail"]
            assert "; " not in row["detail"], row["detail"]
            seen.add(rule)
    # bad_rows.csv has no include column; invalid_include is tested on its own above.
    assert seen == set(PROBLEM_RULES) - {"invalid_include"}


# --- properties --------------------------------------------------------------------

IN_COVERAGE = ["SW1A 1AA", "M1 1AE", "B33 8TH", "CR2 6XH", "LS1 4AP", "CF10 1EP", "TD15 1AA"]


def _untidy(text: str) -> st.SearchStrategy[str]:
    """The text in other cases, with spaces and hyphens where people put them."""
    return st.tuples(st.sampled_from([str.lower, str.upper, str.title]), st.booleans()).map(
        lambda t: t[0](text.replace("_", "-" if t[1] else " "))
    )


@st.composite
def valid_rows(draw: st.DrawFn) -> tuple[dict[str, str], dict[str, Any]]:
    """A row any user might write that must be valid, and the request it must become."""
    row: dict[str, str] = {}
    want: dict[str, Any] = {}
    postcode = draw(st.sampled_from(IN_COVERAGE))
    compact = postcode.replace(" ", "") if draw(st.booleans()) else postcode
    row["postcode"] = compact.lower() if draw(st.booleans()) else compact
    want["postcode"] = postcode
    for field in ("propertyType", "builtForm", "wallsEnergyEfficiency"):
        if field == "propertyType" or draw(st.booleans()):
            code = draw(st.sampled_from(ENUM_VALUES[field]))
            row[field] = draw(_untidy(code))
            want[field] = code
    for field, low, high in (("bedrooms", 0, 20), ("yearBuilt", 1500, 2100)):
        if draw(st.booleans()):
            n = draw(st.integers(low, high))
            row[field] = draw(st.sampled_from([str(n), f"{n}.0", f" {n} "]))
            want[field] = n
    if "bedrooms" not in want or draw(st.booleans()):
        area = draw(st.floats(10, 2000) | st.integers(10, 2000))
        row["floorAreaSqm"] = repr(area)
        want["floorAreaSqm"] = int(area) if float(area).is_integer() else area
    reference = draw(st.text(max_size=64))
    sent = unicodedata.normalize("NFC", reference)  # what the API is sent, and checks
    tidy = sent == sent.strip() and not sent.startswith(tuple("=+-@")) and len(sent) <= 64
    if sent and tidy and not postcodes.contains_postcode(sent):
        row["reference"] = reference
        want["reference"] = sent
    if draw(st.booleans()):
        items = draw(st.lists(st.sampled_from(INCLUDE_ITEMS), max_size=4))
        separator = draw(st.sampled_from([";", ",", " ; ", ", "]))
        row["include"] = separator.join(items)
        if items:
            want["include"] = sorted(set(items))
    return row, want


@settings(deadline=None, max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(valid_rows(), min_size=1, max_size=8))
@pytest.mark.slow
def test_valid_rows_become_the_request_the_server_accepts(
    cases: list[tuple[dict[str, str], dict[str, Any]]],
) -> None:
    """Any valid row encodes to its canonical request, and the sandbox accepts it."""
    names = [*REQUEST_FIELDS, "include"]
    out = check([{name: row.get(name) for name in names} for row, _ in cases])
    for (_, want), got in zip(cases, out, strict=True):
        assert got["rule"] is None, got["detail"]
        assert got["request_json"] == canonical(want)
        assert check_request(json.loads(got["request_json"])) is None


ANY_TEXT = st.none() | st.text(max_size=20) | st.sampled_from(["", " ", "1e1", "-0", "NaN"])
LIKELY = {
    "postcode": st.sampled_from([*IN_COVERAGE, "sw1a1aa", "EH1 1AA", "BT1 1AA", "ZZ1 4AA"]),
    "propertyType": st.sampled_from([*ENUM_VALUES["propertyType"], "Semi-Detached"]),
    "bedrooms": st.integers(-2, 22).map(str) | st.floats(allow_nan=True).map(repr),
    "floorAreaSqm": st.floats(0, 2100).map(repr) | st.integers(0, 2100).map(str),
    "yearBuilt": st.integers(1400, 2200).map(str),
    "builtForm": st.sampled_from(ENUM_VALUES["builtForm"]),
    "wallsEnergyEfficiency": st.sampled_from(ENUM_VALUES["wallsEnergyEfficiency"]),
    "reference": st.text(max_size=70) | st.sampled_from(["CASE-1", "at SW1A 1AA", "=1+1"]),
    "include": st.lists(st.sampled_from([*INCLUDE_ITEMS, "photos", "Commentary", " ", ""])).map(
        ";".join
    ),
}
MESSY_ROWS = st.fixed_dictionaries({f: LIKELY[f] | ANY_TEXT for f in [*REQUEST_FIELDS, "include"]})


@settings(deadline=None, max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(MESSY_ROWS, min_size=1, max_size=8))
@pytest.mark.slow
def test_every_row_gets_a_request_or_a_rule_never_both(rows: list[dict[str, str | None]]) -> None:
    """Whatever is in a row, it gets exactly one of request_json and rule, and a request
    it gets is one the sandbox accepts."""
    for got in check(rows):
        assert (got["request_json"] is None) != (got["rule"] is None)
        assert (got["rule"] is None) == (got["field"] is None) == (got["detail"] is None)
        if got["request_json"] is not None:
            assert check_request(json.loads(got["request_json"])) is None
            assert got["request_json"] == canonical(json.loads(got["request_json"]))
        else:
            assert got["rule"] in PROBLEM_RULES


@settings(deadline=None, max_examples=100)
@given(st.text(max_size=70))
@pytest.mark.slow
def test_any_reference_the_client_passes_the_server_passes(reference: str) -> None:
    """The reference rules agree with the sandbox on any text, Unicode included."""
    got = one({"reference": reference})
    if got["request_json"] is not None:
        assert check_request(json.loads(got["request_json"])) is None


@settings(deadline=None)
@given(st.text())
def test_json_string_escapes_as_json_dumps(text: str) -> None:
    """Any text becomes the JSON string json.dumps(ensure_ascii=False) would write."""
    assert pl.select(json_string(pl.lit(text))).item() == json.dumps(text, ensure_ascii=False)


CODES = st.sampled_from(["S", "semi", " Flat ", "Semi-Detached", "TERRACED", "é", "", " "])


@settings(deadline=None)
@given(
    st.sampled_from(sorted(ENUM_VALUES)),
    st.lists(st.none() | CODES | st.text(max_size=12), max_size=30),
    st.dictionaries(CODES, st.sampled_from(["flat", "detached", "semi_detached"]), max_size=2),
)
def test_an_enumerated_field_is_translated_once_a_value_as_each_row(
    field: str, texts: list[str | None], codes: dict[str, str]
) -> None:
    """Translating an enumerated field's distinct values once and looking them up gives,
    row for row, what translating each row gives (field_values against field_value)."""
    try:
        options = InputOptions(values={field: codes})
    except ValueError:  # two codes that are one code in normal form, mapped apart
        return
    frame = pl.DataFrame({f"raw.{field}": texts}, schema={f"raw.{field}": pl.String})
    each = frame.select(field_value(field, pl.col(f"raw.{field}"), options)).to_series()
    once = frame.select(field_values(frame, field, options)).to_series()
    assert once.to_list() == each.to_list()


@given(st.from_regex(NORMAL_POSTCODE, fullmatch=True) | st.text(max_size=12))
def test_a_postcode_polars_calls_normal_is_its_own_normal_form(text: str) -> None:
    """Validation leaves a postcode in NORMAL_POSTCODE's form to polars: it must be one
    that `postcodes.normalise` returns as it is."""
    normal = pl.Series([text]).str.contains(NORMAL_POSTCODE).item()
    if normal:
        assert postcodes.normalise(text) == text


def test_postcodes_in_and_out_of_normal_form_in_one_batch() -> None:
    """Normal postcodes (polars) and others (Python) mixed in one batch, outside
    coverage or not, give one request per postcode whatever its spelling."""
    spellings = ["SW1A 1AA", "sw1a1aa", "EH1 1AA", "eh1 1aa", "TD15 1AA", "td151aa", "sw1a"]
    out = check([{**GOOD, "postcode": p} for p in spellings])
    said = [
        (o["request_json"] and json.loads(o["request_json"])["postcode"], o["rule"]) for o in out
    ]
    assert said == [
        ("SW1A 1AA", None),
        ("SW1A 1AA", None),
        (None, "outside-coverage"),
        (None, "outside-coverage"),
        ("TD15 1AA", None),
        ("TD15 1AA", None),
        (None, "invalid_postcode"),
    ]


def test_postcode_check_reads_only_the_postcode(tmp_path: Path) -> None:
    """`streets` checks only the postcode: normal form, or its problem; a bad bedrooms
    value or no property type column does not refuse the row."""
    rows: list[Row] = [
        {"postcode": " sw1a2aa ", "bedrooms": "many"},
        {"postcode": "not one", "bedrooms": "2"},
        {"postcode": None, "bedrooms": "2"},
        {"postcode": "KW1 4YT", "bedrooms": "2"},
    ]
    names = ["postcode", "bedrooms"]
    raw = pl.DataFrame([dict(r) for r in rows], schema=dict.fromkeys(names, pl.String))
    options = InputOptions()
    with pytest.raises(InputError):
        resolve_columns(Path("rows.csv"), names, options)
    mapped = resolve_columns(Path("rows.csv"), names, options, postcode_only=True)
    found = check_postcodes(raw, first_row=10, columns=mapped, options=options).to_dicts()
    assert [(r["row_number"], r["postcode"], r["rule"]) for r in found] == [
        (11, "SW1A 2AA", None),
        (12, None, "invalid_postcode"),
        (13, None, "required"),
        (14, None, "outside-coverage"),
    ]
    assert found[3]["detail"] is not None
    assert "Scotland" in found[3]["detail"]
