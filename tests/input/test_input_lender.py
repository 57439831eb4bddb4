"""A lender's optional columns (input/lender): found by name or mapped, kept as
pass-through columns, and the `lender` section of the config."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchval._internal.input import InputError, InputOptions, lender
from batchval._internal.input.lender import LenderColumnError, LenderOptions, find_lender_columns
from batchval._internal.input.mapping import resolve_columns
from batchval._internal.outcome import SettingsError
from batchval._internal.settings import load_settings

HEADER = ["loan_id", "postcode", "property_type", "bedrooms"]


@pytest.mark.parametrize(
    "name", ["loan_balance", "Loan Balance", "loanBalance", " LOAN-BALANCE ", "Loan_Balance"]
)
def test_balance_found_by_its_name(name: str) -> None:
    """A balance column is found whatever its case and word separators."""
    assert find_lender_columns([*HEADER, name], {}) == {"loan_balance": name, "loan_id": "loan_id"}


def test_mapped_column_wins() -> None:
    """A column mapped in the config is used, even beside one named like the field."""
    names = [*HEADER, "loan_balance", "Balance"]
    found = find_lender_columns(names, {"loan_balance": "balance"})
    assert found["loan_balance"] == "Balance"


@pytest.mark.parametrize(
    ("names", "configured", "message"),
    [
        ([*HEADER, "Balance"], {"loan_balance": "Outstanding"}, "matches no"),
        ([*HEADER, "loan balance", "LoanBalance"], {}, "all look like loan_balance"),
    ],
)
def test_unclear_columns_are_refused(
    names: list[str], configured: dict[str, str], message: str
) -> None:
    """A mapped column that is not there, or two columns that look like one field: refused."""
    with pytest.raises(LenderColumnError, match=message):
        find_lender_columns(names, configured)


def test_lender_columns_stay_pass_through() -> None:
    """A mapped lender column is not a request field: it rides along."""
    options = InputOptions(columns={"loan_balance": "Balance", "origination_value": "Valued"})
    mapped = resolve_columns(Path("book.csv"), [*HEADER, "Balance", "Valued"], options)
    assert mapped.passthrough == ["loan_id", "Balance", "Valued"]
    assert "loan_balance" not in mapped.fields


def test_mapped_column_left_out_of_the_passthrough_rides_along_all_the_same() -> None:
    """A lender column the configured passthrough does not list is read all the same,
    after the listed columns: a short list never costs the figures."""
    options = InputOptions(columns={"loan_balance": "Balance"}, passthrough=("loan_id",))
    mapped = resolve_columns(Path("book.csv"), [*HEADER, "Notes", "Balance"], options)
    assert mapped.passthrough == ["loan_id", "Balance"]


def test_a_mapped_lender_column_the_file_lacks_is_refused() -> None:
    """A lender column mapped to no column of the file: the input's fault, exit 65."""
    options = InputOptions(columns={"loan_balance": "Balance"}, passthrough=("loan_id",))
    with pytest.raises(InputError, match="maps loan_balance to 'Balance'"):
        resolve_columns(Path("book.csv"), HEADER, options)


def test_a_lender_name_that_is_no_field_is_still_refused() -> None:
    """Only request fields and the four lender columns can be mapped."""
    with pytest.raises(ValueError, match="lender column"):
        InputOptions(columns={"loan_amount": "Amount"})


def test_band_labels() -> None:
    """The default bands, and their labels, as the issue names them."""
    assert LenderOptions().band_labels == (
        "0-60",
        "60-75",
        "75-80",
        "80-85",
        "85-90",
        "90-95",
        "95-100",
        "over 100",
    )


@pytest.mark.parametrize(
    "section",
    [
        "ltv_bands: [75, 60]",
        "ltv_bands: []",
        "ltv_bands: [0, 60]",
        "ltv_bands: [sixty]",
        "ltv_bands: 60",
        "wide_range: 0",
        "wide_range: true",
        "stale_after_months: -1",
        "stale_after_months: 2.5",
        "stale: 3",
    ],
)
def test_bad_lender_settings_are_refused(tmp_path: Path, section: str) -> None:
    """A bad lender section is a configuration error (exit 64), named."""
    config = tmp_path / "config.yaml"
    config.write_text(f"lender: {{{section}}}\n", encoding="utf-8")
    with pytest.raises(SettingsError, match="lender"):
        load_settings(config, {})


def test_lender_settings_are_read(tmp_path: Path) -> None:
    """The lender section sets the bands and thresholds."""
    config = tmp_path / "config.yaml"
    config.write_text(
        "lender: {ltv_bands: [50, 80], wide_range: 0.2, stale_after_months: 3}\n",
        encoding="utf-8",
    )
    lender = load_settings(config, {}).lender
    assert lender == LenderOptions(ltv_bands=(50, 80), wide_range=0.2, stale_after_months=3)


def test_lender_mapping_leaves_the_fingerprint_alone(tmp_path: Path) -> None:
    """Mapping a lender column shapes no request: a resumed run is not refused for it."""
    config = tmp_path / "config.yaml"
    config.write_text("input: {columns: {loan_balance: Balance}}\n", encoding="utf-8")
    assert load_settings(config, {}).fingerprint() == load_settings(None, {}).fingerprint()


def test_two_loan_ids_are_left_alone() -> None:
    """Two columns that look like a loan id refuse nothing: no figure is made from them."""
    found = find_lender_columns(["loan_id", "Loan ID", "loan_balance"], {})
    assert found == {"loan_balance": "loan_balance"}


@pytest.mark.parametrize(
    ("section", "said"),
    [
        ("{wide_range: '0.3'}", "lender.wide_range must be a number above 0"),
        ("{wide_range: 0}", "lender.wide_range must be a number above 0"),
        ("{ltv_bands: [80, 60]}", "strictly ascending"),
    ],
)
def test_a_bad_lender_setting_is_one_clear_line(tmp_path: Path, section: str, said: str) -> None:
    """A lender threshold of the wrong type or value is a settings error naming it."""
    config = tmp_path / "config.yaml"
    config.write_text(f"lender: {section}\n", encoding="utf-8")
    with pytest.raises(SettingsError, match=said):
        load_settings(config, {})


LENDER_EXTRACT = [
    "Loan Ref",
    "Property Postcode",
    "Prop Type",
    "Beds",
    "Current Balance",
    "Original Valuation",
    "Completion Date",
]


def test_a_lenders_usual_names_are_found_without_a_mapping() -> None:
    """`Current Balance`, `Original Valuation`, `Completion Date`, `Loan Ref`: found."""
    assert find_lender_columns(LENDER_EXTRACT, {}) == {
        "loan_balance": "Current Balance",
        "origination_value": "Original Valuation",
        "origination_date": "Completion Date",
        "loan_id": "Loan Ref",
    }


@pytest.mark.parametrize(
    ("names", "balance"),
    [
        (["Outstanding Balance", "Balance"], "Outstanding Balance"),  # the first usual name
        (["OS_Balance"], "OS_Balance"),
        (["loan_balance", "Current Balance"], "loan_balance"),  # its own name first
    ],
)
def test_the_first_usual_name_wins(names: list[str], balance: str) -> None:
    assert find_lender_columns([*HEADER, *names], {})["loan_balance"] == balance


def test_two_columns_of_one_usual_name_are_refused() -> None:
    with pytest.raises(LenderColumnError, match="all look like loan_balance"):
        find_lender_columns([*HEADER, "Current Balance", "current_balance"], {})


def test_a_column_may_be_both_the_reference_and_the_loan_id() -> None:
    """`Loan Ref` sent as the reference and kept as the row's identity (issue 24, 6)."""
    options = InputOptions(
        columns={
            "reference": "Loan Ref",
            "loan_id": "Loan Ref",
            "postcode": "Property Postcode",
            "propertyType": "Prop Type",
            "bedrooms": "Beds",
        }
    )
    mapped = resolve_columns(Path("book.csv"), LENDER_EXTRACT, options)
    assert mapped.fields["reference"] == "Loan Ref"
    assert mapped.passthrough == [
        "Loan Ref",
        "Current Balance",
        "Original Valuation",
        "Completion Date",
    ]


def test_every_lender_field_has_one_kind() -> None:
    """Each lender field is money, a date or an id, exactly one: a new field (a last
    valuation) is read and exported as what it is, never left out of both."""
    kinds = [*lender.MONEY_FIELDS, *lender.DATE_FIELDS, *lender.ID_FIELDS]
    assert sorted(kinds) == sorted(lender.LENDER_FIELDS)


@pytest.mark.parametrize(
    ("heading", "field"),
    [
        ("Acc No", "loan_id"),
        ("A/C No", "loan_id"),
        ("ACCT", "loan_id"),
        ("Acct. Num", "loan_id"),
        ("Mtg Acc Nbr", "loan_id"),
        ("Loan Ref.", "loan_id"),
        ("Curr Bal", "loan_balance"),
        ("CUR_BAL", "loan_balance"),
        ("O/S Bal", "loan_balance"),
        ("o/s balance", "loan_balance"),
        ("Prin O/S", "loan_balance"),
        ("Orig Val", "origination_value"),
        ("Orig. Valuation", "origination_value"),
        ("Orig Val Date", "origination_date"),
        ("orig_val_dt", "origination_date"),
        ("Last Val", "last_valuation"),
        ("Lst Valn", "last_valuation"),
        ("Val Dt", "last_valuation_date"),
        ("Last Val Dt", "last_valuation_date"),
    ],
)
def test_the_short_forms_of_an_mi_pack_are_read_as_their_words(heading: str, field: str) -> None:
    """A heading's short forms are read word by word (`Acc`, `A/C`, `Curr`, `O/S`, `Orig`,
    `Val`, `Dt`, ...), whatever the case and the separators: the column is the field's."""
    assert find_lender_columns(["Postcode", heading], {}) == {field: heading}


def test_a_heading_that_only_looks_short_is_no_lender_field() -> None:
    """`Prop Val` (a property's value, not named as any field) and `Valid` are left alone."""
    assert find_lender_columns(["Prop Val", "Valid", "Notes"], {}) == {}
