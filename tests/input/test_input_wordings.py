"""input/wordings: the property-type and built-form wordings of lenders, the EPC register
and HM Land Registry, read without a `values` map (issue 24)."""

from __future__ import annotations

import json
from typing import Any

import polars as pl
import pytest
from test_input_validate import check

from batchval._internal.input import InputOptions
from batchval._internal.input.mapping import default_code, field_value
from batchval._internal.sandbox.rules import check_request


def _one(
    property_type: str | None, built_form: str | None = None, options: InputOptions | None = None
) -> dict[str, Any]:
    row: dict[str, str | None] = {"postcode": "SW1A 2AA", "propertyType": property_type}
    row["bedrooms"] = "3"
    if built_form is not None:
        row["builtForm"] = built_form
    [found] = check([row], options)
    return found


def _sent(found: dict[str, Any]) -> tuple[str | None, str | None]:
    assert found["request_json"] is not None, found["detail"]
    request = json.loads(found["request_json"])
    assert check_request(request) is None  # what the API itself would accept
    return request["propertyType"], request.get("builtForm")


@pytest.mark.parametrize(
    ("wording", "sent"),
    [
        ("Detached House", ("detached", "detached")),
        ("Semi-Detached House", ("semi_detached", "semi_detached")),
        ("semi detached", ("semi_detached", None)),  # the API's own code, as before
        ("Terraced House", ("terraced", None)),
        ("Mid Terrace", ("terraced", "mid_terrace")),
        ("Mid-Terraced House", ("terraced", "mid_terrace")),
        ("End Terrace House", ("terraced", "end_terrace")),
        ("end-of-terrace", ("terraced", "end_terrace")),
        ("Enclosed End-Terrace", ("terraced", "enclosed_end_terrace")),
        ("Enclosed Mid Terrace House", ("terraced", "enclosed_mid_terrace")),
        ("Flat", ("flat", None)),
        ("Maisonette", ("flat", None)),
        ("Flat/Maisonette", ("flat", None)),
        ("  FLAT / MAISONETTE ", ("flat", None)),
        ("Apartment", ("flat", None)),
        ("D", ("detached", "detached")),
        ("S", ("semi_detached", "semi_detached")),
        ("T", ("terraced", None)),
        ("F", ("flat", None)),
    ],
)
def test_a_wording_gives_the_api_type_and_built_form(
    wording: str, sent: tuple[str | None, str | None]
) -> None:
    assert _sent(_one(wording)) == sent


@pytest.mark.parametrize(
    ("property_type", "built_form", "sent"),
    [
        ("House", "Semi-Detached", ("semi_detached", "semi_detached")),
        ("House", "Mid-Terrace", ("terraced", "mid_terrace")),
        ("House", "End-Terrace", ("terraced", "end_terrace")),
        ("Bungalow", "Detached", ("detached", "detached")),
        ("Bungalow", "Enclosed End-Terrace", ("terraced", "enclosed_end_terrace")),
        ("Flat", "Mid-Terrace", ("flat", "mid_terrace")),
        ("Maisonette", "NO DATA!", ("flat", None)),
        ("Detached", "Unknown", ("detached", None)),
        # The file's own builtForm wins over the one a wording implies.
        ("End Terrace House", "Mid-Terrace", ("terraced", "mid_terrace")),
    ],
)
def test_the_epc_pair_of_columns_gives_both_fields(
    property_type: str, built_form: str, sent: tuple[str | None, str | None]
) -> None:
    assert _sent(_one(property_type, built_form)) == sent


@pytest.mark.parametrize(
    ("wording", "built_form", "says"),
    [
        ("Bungalow", None, "but not which kind: give the row a builtForm"),
        ("House", "NO DATA!", "but not which kind: give the row a builtForm"),
        ("Park Home", None, "is none of the API's property types"),
        ("O", None, "is none of the API's property types"),
    ],
)
def test_an_ambiguous_wording_is_a_problem_that_says_what_to_send(
    wording: str, built_form: str | None, says: str
) -> None:
    found = _one(wording, built_form)
    assert found["request_json"] is None
    assert (found["field"], found["rule"]) == ("propertyType", "ambiguous_value")
    assert found["detail"].startswith(f"propertyType '{wording}' ")
    assert says in found["detail"]
    assert "is not one of" not in found["detail"]  # one sentence, the right one


def test_an_unknown_wording_is_still_not_in_list() -> None:
    found = _one("Castle")
    assert (found["rule"], found["request_json"]) == ("not_in_list", None)


def test_a_values_map_still_wins() -> None:
    options = InputOptions(values={"propertyType": {"Bungalow": "detached", "D": "flat"}})
    assert _sent(_one("Bungalow", options=options)) == ("detached", None)
    assert _sent(_one("D", options=options)) == ("flat", None)


def test_each_row_of_a_batch_reads_its_own_wording() -> None:
    """Rows of one batch with different wordings and built forms, decided per row."""
    rows: list[dict[str, str | None]] = [
        {"propertyType": "House", "builtForm": "Semi-Detached"},
        {"propertyType": "End Terrace House", "builtForm": None},
        {"propertyType": "detached", "builtForm": "NO DATA!"},
        {"propertyType": "Bungalow", "builtForm": None},
        {"propertyType": "Flat/Maisonette", "builtForm": "End-Terrace"},
    ]
    for row in rows:
        row.update(postcode="M1 1AE", bedrooms="2")
    found = check(rows)
    sent = [None if f["request_json"] is None else _sent(f) for f in found]
    assert sent == [
        ("semi_detached", "semi_detached"),
        ("terraced", "end_terrace"),
        ("detached", None),
        None,
        ("flat", "end_terrace"),
    ]
    assert found[3]["rule"] == "ambiguous_value"


def test_text_that_starts_as_a_formula_is_no_wording() -> None:
    """`+flat` or `=Detached House` is a spreadsheet's formula, not a wording: refused."""
    for text in ("+flat", "=Detached House", "@Flat/Maisonette"):
        assert _one(text)["rule"] == "not_in_list", text


@pytest.mark.parametrize("text", ["Semi-Detached", " END  terrace ", "mid- Terrace", "flat"])
def test_the_default_spelling_reads_one_value_as_it_reads_a_column(text: str) -> None:
    """`mapping.default_code` (one value, in Python: the mapping assistant's) is the
    default spelling `field_value` gives a column of values."""
    column = pl.select(field_value("builtForm", pl.lit(text), InputOptions())).item()
    assert default_code(text) == column
