"""Columns holding a person's data, found by their names and by their values, and left out
of the default pass-through (issue 32, 4)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from support import env_for, outputs, run_in_process

from batchval._internal.input import InputOptions, open_input
from batchval._internal.input.personal import (
    BY_NAME,
    EMAILS,
    HIDDEN,
    INTERNAL,
    LONG_TEXT,
    NI_NUMBERS,
    PHONES,
    by_name,
    by_values,
    header_words,
    left_out_line,
    personal_columns,
)
from batchval._internal.sandbox.server import RunningSandbox


@pytest.mark.parametrize(
    "header",
    [
        "Borrower Surname",
        "Borrower Forename",
        "SURNAME",
        "Forenames",
        "first_name",
        "firstName",
        "FIRSTNAME",
        "Last Name",
        "Full Name",
        "Borrower Name",
        "Customer Name",
        "Applicant 2 Name",
        "Account Holder Name",
        "Name",
        "Borrower 1",
        "Joint Borrower",
        "Date of Birth",
        "DOB",
        "DoB",
        "Birth Date",
        "birthdate",
        "Email",
        "E-mail",
        "email_address",
        "Telephone",
        "Tel",
        "Home Phone",
        "Mobile",
        "Mobile Number",
        "Contact Number",
        "NI Number",
        "NINO",
        "National Insurance Number",
        "Address 1",
        "Address Line 2",
        "Security Address 1",
        "securityAddress1",
        "Correspondence Address",
        "Street",
        "House Number",
        "Cust_Nm",
        "Cust Nm",
        "CustNm",
        "Brwr Fnm",
        "Ph No",
    ],
)
def test_headers_naming_a_persons_data_are_found(header: str) -> None:
    """A name, a birth date, an e-mail, a telephone, an NI number or an address line, in
    any case and spacing."""
    assert by_name(header)


@pytest.mark.parametrize(
    "header",
    [
        "Postcode",
        "Post Code",
        "Security Address Postcode",
        "Address Town",
        "Town",
        "County",
        "Loan Name",
        "Product Name",
        "Branch Name",
        "Account No",
        "Customer Number",
        "Telephone Banking Flag",
        "Email Opt In",
        "Mobile Home",
        "Prop Type",
        "Beds",
        "Current Balance",
        "Completion Date",
        "Notes",
        "Cust No",
        "Product Nm",
        "",
    ],
)
def test_headers_of_things_are_not_personal(header: str) -> None:
    """A thing's name, a postcode or town, a flag about a channel: not a person's data."""
    assert not by_name(header)


def test_header_words_forgive_case_and_separators() -> None:
    """`Security Address 1` in any spelling is the same words."""
    for spelling in (
        "Security Address 1",
        "security_address1",
        "securityAddress1",
        "SECURITY-ADDRESS-1",
    ):
        assert header_words(spelling) == ("security", "address", "1")


@pytest.mark.parametrize(
    ("values", "why"),
    [
        (["jane@example.com", "bob.smith@mail.co.uk", ""], EMAILS),
        (["07700 900123", "+44 (0)20 7946 0000", "0161-496-0000"], PHONES),
        (["QQ 12 34 56 C", "ab123456d", None], NI_NUMBERS),
        (["jane@example.com", "n/a", "bob@example.org"], EMAILS),  # most, not all
    ],
)
def test_columns_holding_contacts_are_found_by_their_values(
    values: list[str | None], why: str
) -> None:
    """A column more than half of whose non-empty values have the shape."""
    assert by_values(pl.DataFrame({"Contact": values}, schema={"Contact": pl.String})) == {
        "Contact": why
    }


@pytest.mark.parametrize(
    "values",
    [
        ["SW1A 2AA", "M1 1AE"],  # postcodes
        ["LN3169116", "LN8437041"],  # loan ids
        ["100000", "250000.50"],  # amounts
        ["jane@example.com", "x", "y"],  # one e-mail among others
        ["0770090", "12345678901"],  # too short, no leading 0
        ["", None],  # empty
    ],
)
def test_other_values_are_not_personal(values: list[str | None]) -> None:
    """Postcodes, ids, amounts, a minority of e-mails, numbers of no telephone's shape."""
    assert by_values(pl.DataFrame({"Notes": values}, schema={"Notes": pl.String})) == {}


def test_columns_named_like_polars_patterns_are_looked_at_by_name() -> None:
    """A column called `*` or `^a$` is one column, not a pattern."""
    sample = pl.DataFrame({"*": ["a@b.com"], "^a$": ["x"], "row_number": ["1"]})
    assert personal_columns(["*", "^a$", "row_number"], sample) == {"*": EMAILS}


def test_kept_columns_are_never_personal() -> None:
    """The columns a run uses (passed as kept) stay, whatever their name or values."""
    sample = pl.DataFrame({"Email": ["a@b.com"], "Ref": ["c@d.com"], "Notes": ["e@f.com"]})
    found = personal_columns(["Email", "Ref", "Notes"], sample, kept={"Email", "Ref"})
    assert found == {"Notes": EMAILS}


def test_left_out_line_groups_columns_by_why() -> None:
    """One line, the columns grouped by why, and how to keep one."""
    line = left_out_line({"Surname": BY_NAME, "Contact": EMAILS, "Email": BY_NAME})
    assert line == (
        "left out as personal data: Surname, Email (by name); Contact (holds e-mail "
        "addresses); input.passthrough lists a column to keep it"
    )
    assert left_out_line({}) == ""


BOOK = (
    "Account No,Borrower Surname,Date of Birth,Contact,Security Address 1,Post Code,"
    "Prop Type,Beds,Current Balance,Telephone Banking Flag\n"
    "A001,Smith,01/02/1970,jane@example.com,1 High St,SW1A 2AA,flat,2,100000,Y\n"
    "A002,Jones,03/04/1980,bob@example.com,2 Low St,M1 1AE,terraced,3,120000,N\n"
)
MAPPED = {"postcode": "Post Code", "propertyType": "Prop Type", "bedrooms": "Beds"}


def test_default_pass_through_leaves_personal_columns_out(tmp_path: Path) -> None:
    """The default pass-through keeps the loan id, the balance and the flag, and says which
    columns it left out and why (summary.json's `input_read.personal_left_out`)."""
    path = tmp_path / "book.csv"
    path.write_text(BOOK, encoding="utf-8")
    source = open_input(path, InputOptions(columns=MAPPED))
    assert source.passthrough == ["Account No", "Current Balance", "Telephone Banking Flag"]
    assert source.read_as.to_json()["personal_left_out"] == {
        "Borrower Surname": BY_NAME,
        "Date of Birth": BY_NAME,
        "Contact": EMAILS,
        "Security Address 1": BY_NAME,
    }
    for batch in source.batches():
        assert "Borrower Surname" not in batch.passthrough.schema.names
        assert not batch.checked.get_column("request_json").str.contains("Smith|jane@").any()


def test_a_listed_personal_column_is_copied(tmp_path: Path) -> None:
    """A column listed under passthrough is the user's choice: copied, nothing left out."""
    path = tmp_path / "book.csv"
    path.write_text(BOOK, encoding="utf-8")
    source = open_input(path, InputOptions(columns=MAPPED, passthrough=("Borrower Surname",)))
    assert source.passthrough == ["Borrower Surname", "Account No", "Current Balance"]
    assert source.read_as.personal_left_out == {}


def test_a_parquet_file_is_looked_at_in_its_text_columns(tmp_path: Path) -> None:
    """Parquet: e-mail addresses in a text column are found; numbers are not looked at."""
    path = tmp_path / "book.parquet"
    pl.DataFrame(
        {
            "postcode": ["SW1A 2AA", "M1 1AE"],
            "propertyType": ["flat", "flat"],
            "bedrooms": [2, 3],
            "Contact": ["jane@example.com", "bob@example.com"],
            "Score": [7700900123, 7700900124],
        }
    ).write_parquet(path)
    source = open_input(path, InputOptions())
    assert source.passthrough == ["Score"]
    assert source.read_as.personal_left_out == {"Contact": EMAILS}


def _book_and_config(tmp_path: Path, passthrough: list[str] | None) -> tuple[Path, Path]:
    path = tmp_path / "book.csv"
    path.write_text(BOOK, encoding="utf-8")
    config = tmp_path / "config.yaml"
    section: dict[str, object] = {"columns": MAPPED}
    if passthrough is not None:
        section["passthrough"] = passthrough
    config.write_text(json.dumps({"input": section}), encoding="utf-8")
    return path, config


def test_a_run_leaves_personal_data_out_of_every_output_and_says_so(
    served: RunningSandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No passthrough: the run says what it left out, at the terminal and in summary.json,
    and no surname, birth date or e-mail is in any file of DIR (checkpoint and log too)."""
    path, config = _book_and_config(tmp_path, None)
    out = tmp_path / "out"
    args = ("run", str(path), "--config", str(config), "--out", str(out))
    code, stdout, stderr = run_in_process(
        *args, env=env_for(served), monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 0, stderr
    assert (
        "input: left out as personal data: Borrower Surname, Date of Birth, Security Address 1 "
        "(by name); Contact (holds e-mail addresses)" in stdout
    )
    results, _, summary = outputs(out)
    assert list(summary["input_read"]["personal_left_out"]) == [
        "Borrower Surname",
        "Date of Birth",
        "Contact",
        "Security Address 1",
    ]
    assert {"Account No", "Current Balance"} <= set(results.columns)
    assert results.get_column("indexed_ltv").is_not_null().all()
    for file in out.iterdir():
        data = file.read_bytes()
        for needle in (b"Smith", b"Jones", b"01/02/1970", b"jane@example.com", b"High St"):
            assert needle not in data, f"{needle!r} in {file.name}"


def test_a_dry_run_says_what_it_leaves_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`run --dry-run` says the same line."""
    path, config = _book_and_config(tmp_path, None)
    args = ("run", str(path), "--config", str(config), "--out", str(tmp_path / "out"))
    code, stdout, stderr = run_in_process(
        *args, "--dry-run", env={}, monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 0, stderr
    assert "input: left out as personal data: Borrower Surname" in stdout


def test_a_listed_personal_column_is_in_the_results(
    served: RunningSandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A surname listed under passthrough is copied, as the user chose; nothing is said."""
    path, config = _book_and_config(tmp_path, ["Account No", "Borrower Surname"])
    out = tmp_path / "out"
    args = ("run", str(path), "--config", str(config), "--out", str(out))
    code, stdout, stderr = run_in_process(
        *args, env=env_for(served), monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 0, stderr
    assert "personal data" not in stdout
    results, _, summary = outputs(out)
    assert results.get_column("Borrower Surname").sort().to_list() == ["Jones", "Smith"]
    assert summary["input_read"]["personal_left_out"] == {}


@pytest.mark.parametrize("command", ["run", "check"])
def test_a_passthrough_naming_a_missing_column_exits_64_naming_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
) -> None:
    """The config's fault, not the file's: exit 64, the column named."""
    path, config = _book_and_config(tmp_path, ["Loan Id"])
    out = ("--out", str(tmp_path / "out")) if command == "run" else ()
    code, stdout, stderr = run_in_process(
        command,
        str(path),
        "--config",
        str(config),
        *out,
        env={},
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert code == 64, stdout + stderr
    assert "passes through 'Loan Id', which is not a column" in stdout + stderr


@pytest.mark.parametrize(
    ("header", "values", "why"),
    [
        ("Internal Score", ["7", "3"], INTERNAL),
        ("Risk Grade (Confidential)", ["A", "B"], INTERNAL),
        ("grade_not_for_distribution", ["A", "B"], INTERNAL),
        ("RESTRICTED flag", ["Y", "N"], INTERNAL),
        ("Officer Notes", ["x" * 41, "y" * 60, ""], LONG_TEXT),
        (
            "Comments",
            ["Spoke to the borrower about arrears on the phone, agreed a plan"],
            LONG_TEXT,
        ),
        ("Branch", ["Leeds", "A short note on the file"], None),
        ("Short notes", ["ok", "call back", "x" * 100], None),  # its median is short
        ("Internals", ["7"], None),  # a word of its own, not `internal`
    ],
)
def test_internal_and_long_text_columns_are_left_out(
    header: str, values: list[str], why: str | None
) -> None:
    """A heading marked internal, confidential, restricted or not for distribution, or a
    column whose median value is over 40 characters, is left out like a person's data."""
    sample = pl.DataFrame({header: values})
    assert personal_columns([header], sample).get(header) == why


def test_a_workbooks_hidden_column_is_left_out_unless_listed(tmp_path: Path) -> None:
    """A column the workbook hides is left out of the default pass-through and said so; a
    pass-through that lists it copies it; a lender column hidden is read all the same."""
    import xlsxwriter

    path = tmp_path / "book.xlsx"
    with xlsxwriter.Workbook(str(path)) as book:
        sheet = book.add_worksheet("Loans")
        sheet.write_row(
            0, 0, ["Acc No", "Score", "Postcode", "Property Type", "Bedrooms", "Curr Bal"]
        )
        sheet.write_row(1, 0, ["00000001", 7, "SW1A 1AA", "flat", 2, 100000.5])
        sheet.set_column(1, 1, None, None, {"hidden": True})
        sheet.set_column(5, 5, None, None, {"hidden": True})
    source = open_input(path, InputOptions())
    assert source.read_as.hidden_columns == ("Score", "Curr Bal")
    assert source.read_as.personal_left_out == {"Score": HIDDEN}
    assert source.passthrough == ["Acc No", "Curr Bal"]
    listed = open_input(path, InputOptions(passthrough=("Score",)))
    assert listed.passthrough[0] == "Score"
    assert listed.read_as.personal_left_out == {}


def test_the_left_out_line_says_personal_and_internal_apart() -> None:
    line = left_out_line({"Cust Nm": BY_NAME, "Score": HIDDEN, "Notes": LONG_TEXT})
    assert line == (
        "left out as personal data: Cust Nm (by name); left out as internal: Score "
        f"({HIDDEN}); Notes ({LONG_TEXT}); input.passthrough lists a column to keep it"
    )
