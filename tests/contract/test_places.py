"""Local authorities by name: ONS's codes and names shipped with the package."""

from __future__ import annotations

import csv
import re
import tomllib
from importlib import resources

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import ROOT

from batchval._internal.contract.places import DATA_FILE, authority_name, authority_names
from batchval._internal.sandbox import market

CODE = re.compile(r"[EW]0[6-9]\d{6}")


def data_rows() -> list[dict[str, str]]:
    text = (
        resources.files("batchval._internal.contract")
        .joinpath(DATA_FILE)
        .read_text(encoding="utf-8")
    )
    return list(csv.DictReader(text.splitlines()))


@pytest.mark.parametrize(
    ("code", "name"),
    [
        ("E09000033", "Westminster"),
        ("E09000001", "City of London"),
        ("E08000035", "Leeds"),
        ("E06000023", "Bristol, City of"),
        ("E06000010", "Kingston upon Hull, City of"),
        ("W06000015", "Cardiff"),
        ("W06000016", "Rhondda Cynon Taf"),
        ("E07000216", "Waverley"),
        ("E06000060", "Buckinghamshire"),
        ("E06000063", "Cumberland"),
        ("E06000065", "North Yorkshire"),
        ("E06000066", "Somerset"),
        ("E08000038", "Barnsley"),
        ("E08000039", "Sheffield"),
    ],
)
def test_current_codes_give_their_names(code: str, name: str) -> None:
    """A code in use today gives ONS's name for it, spelled as ONS spells it."""
    assert authority_name(code) == name


@pytest.mark.parametrize(
    ("code", "name"),
    [
        ("E07000004", "Aylesbury Vale"),
        ("E07000007", "Wycombe"),
        ("E07000154", "Northampton"),
        ("E07000028", "Carlisle"),
        ("E07000165", "Harrogate"),
        ("E07000187", "Mendip"),
        ("E07000246", "Somerset West and Taunton"),
        ("E06000028", "Bournemouth"),
        ("E08000016", "Barnsley"),
    ],
)
def test_retired_codes_give_their_last_name(code: str, name: str) -> None:
    """A code retired by a reorganisation still gives the name it last had."""
    assert authority_name(code) == name


@pytest.mark.parametrize("code", ["E09000099", "W06000007", "E07999999", "S12000036"])
def test_an_unknown_code_is_shown_as_it_came_and_marked(code: str) -> None:
    """A code the file does not know is shown as the code, marked as no name."""
    assert authority_name(code) == f"{code} (name unknown)"


@given(st.text(max_size=12))
def test_any_text_gives_a_name_or_itself_marked(code: str) -> None:
    """Whatever comes in, the answer is a known name, the text marked unknown, or a blank
    text as it is."""
    found = authority_name(code)
    assert found in {*authority_names().values(), f"{code} (name unknown)"} or (
        not code.strip() and found == code
    )


def test_none_gives_none() -> None:
    """A row with no local authority has no name either."""
    assert authority_name(None) is None


def test_the_file_is_sorted_unique_and_well_formed() -> None:
    """The data file is `code,name`, sorted by code, one row a code, every code an English
    or Welsh district's and every name given."""
    rows = data_rows()
    codes = [row["code"] for row in rows]
    assert list(rows[0]) == ["code", "name"]
    assert codes == sorted(set(codes))
    assert all(CODE.fullmatch(code) for code in codes)
    assert all(row["name"] and row["name"] == row["name"].strip() for row in rows)


def test_every_kind_of_district_is_covered() -> None:
    """Each kind holds at least its current count (63 unitaries, 164 shire districts, 36
    metropolitan districts, 33 London boroughs with the City, 22 Welsh areas)."""
    prefixes = [code[:3] for code in authority_names()]
    assert prefixes.count("E06") >= 63
    assert prefixes.count("E07") >= 164
    assert prefixes.count("E08") >= 36
    assert prefixes.count("E09") == 33
    assert prefixes.count("W06") == 22


def test_the_wheel_carries_the_file() -> None:
    """pyproject's package data lists the file, so an installed wheel has it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = config["tool"]["setuptools"]["package-data"]["batchval"]
    assert f"_internal/contract/{DATA_FILE}" in listed


def test_most_sandbox_codes_have_names() -> None:
    """The sandbox draws its codes inside the real ranges, so most of them are named."""
    with (ROOT / "sample_inputs" / "portfolio.csv").open(encoding="utf-8") as lines:
        postcodes = [row["postcode"] for row in csv.DictReader(lines)][:500]
    codes = [market.local_authority(postcode) for postcode in postcodes]
    named = sum(not str(authority_name(code)).endswith("(name unknown)") for code in codes)
    share = named / len(codes)
    print(f"sandbox codes named: {named} of {len(codes)} ({share:.0%})")
    assert share >= 0.85
