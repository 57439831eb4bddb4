"""`batchval init INPUT`: a mapping assistant that proposes a config, says why, lists what
it cannot place, and reads the file through its own proposal (issue 24, 5)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
import yaml
from support import ROOT, InProcess, env_for, outputs, run_in_process

from batchval._internal.admin.init import LOST_WITHOUT, propose, render, summary_lines, survey
from batchval._internal.sandbox.server import RunningSandbox
from batchval._internal.settings import load_settings

SAMPLES = ROOT / "sample_inputs"


def _proposed(frame: pl.DataFrame) -> dict[str, str]:
    columns = frame.columns
    surveyed, rows = survey(columns, [frame.cast(pl.String)])
    return dict(propose(columns, surveyed, rows).columns)


def test_columns_are_chosen_by_their_values_and_names() -> None:
    frame = pl.DataFrame(
        {
            "Acct": ["A1", "A2", "A3", "A4"],
            "Where": ["SW1A 2AA", "m1 1ae", "LS62AB", "CF10 1AA"],
            "Kind": ["Semi-Detached House", "Flat", "D", "End Terrace House"],
            "No. of Beds": ["3", "2", "4", "3"],
            "Floor Area": ["85.5", "60", "120", "90"],
            "Case Ref": ["C1", "C2", "C3", "C4"],
            "Outstanding Balance": ["£100,000", "90000", "1", "2"],
            "Notes": ["x", "y", "z", "w"],
        }
    )
    assert _proposed(frame) == {
        "postcode": "Where",
        "propertyType": "Kind",
        "bedrooms": "No. of Beds",
        "floorAreaSqm": "Floor Area",
        "reference": "Case Ref",
        "loan_balance": "Outstanding Balance",
        "loan_id": "Acct",  # an MI pack's short form of "account"
    }


def test_a_column_whose_values_do_not_fit_is_not_chosen() -> None:
    """Named like bedrooms but holding text: no bedrooms column, and said so."""
    frame = pl.DataFrame(
        {"postcode": ["SW1A 2AA"] * 3, "Type": ["Flat"] * 3, "Beds": ["two", "three", "?"]}
    )
    surveyed, rows = survey(frame.columns, [frame])
    proposal = propose(frame.columns, surveyed, rows)
    assert "bedrooms" not in proposal.columns
    assert proposal.missing == ("bedrooms or floorAreaSqm",)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["lender_book.csv", "lender_book_windows.csv", "lender_book.xlsx"])
def test_init_proposes_a_config_that_values_the_book_unchanged(
    served: RunningSandbox, tmp_path: Path, name: str, batchval: InProcess
) -> None:
    """From a lender's file to a run: init, then run with the proposal as written."""
    proposal = tmp_path / "proposal.yaml"
    source = str(SAMPLES / name)
    done = batchval("init", source, "--out", str(proposal), env=env_for(served))
    assert done.returncode == 0, done.stderr
    assert "postcode <- 'Property Postcode'" in done.stdout
    assert "with it: 57 of 66 rows valued by 57 request(s), £5.70" in done.stdout
    assert "ambiguous_value 9" in done.stdout
    # A workbook's sheet read is named in the proposal, and in the command.
    sheet = " --sheet Loans" if name.endswith(".xlsx") else ""
    assert f"next: batchval run {source}{sheet} --config {proposal}" in done.stdout
    text = proposal.read_text(encoding="utf-8")
    assert "'Park Home': ...   # 3 rows" in text  # what it could not place, counted
    assert yaml.safe_load(text)["input"]["columns"]["loan_id"] == "Loan Ref"
    load_settings(proposal, {})  # a valid config as written
    again = batchval("init", source, "--out", str(proposal), env=env_for(served))
    assert again.returncode == 64, again.stderr  # never over a file without --force
    out = tmp_path / "out"
    run = batchval("run", source, "--config", str(proposal), "--out", str(out), env=env_for(served))
    assert run.returncode == 0, run.stderr
    results, problems, _ = outputs(out)
    assert (results.height, problems.height) == (57, 9)
    assert "Loan Ref" in results.columns  # sent as the reference, kept as the loan id


@pytest.mark.slow
def test_init_on_a_file_it_cannot_map_says_what_is_missing(
    tmp_path: Path, batchval: InProcess
) -> None:
    source = tmp_path / "odd.csv"
    source.write_text("a,b\n1,2\n3,4\n", encoding="utf-8")
    proposal = tmp_path / "p.yaml"
    done = batchval("init", str(source), "--out", str(proposal), env={"PATH": "/usr/bin"})
    assert done.returncode == 65, done.stdout + done.stderr
    assert "postcode: no column fits" in done.stdout
    assert "required column missing" in done.stderr
    assert "# postcode: no column fits" in proposal.read_text(encoding="utf-8")


MI_BOOK = {
    "Account No": ["A001", "A002", "A003"],
    "Borrower Surname": ["Smith", "Jones", "Patel"],
    "Date of Birth": ["01/02/1970", "03/04/1980", "05/06/1990"],
    "Contact": ["jane@example.com", "bob@example.com", "raj@example.com"],
    "Security Address 1": ["1 High St", "2 Low St", "3 Mid St"],
    "Post Code": ["SW1A 2AA", "M1 1AE", "CF10 1AA"],
    "Prop Type": ["Flat", "Terraced House", "Detached House"],
    "Beds": ["2", "3", "4"],
    "Current Balance": ["£100,000", "120000", "90000"],
    "Notes": ["x", "y", "z"],
}


def test_the_proposal_lists_the_passthrough_without_personal_columns() -> None:
    """The proposed passthrough: every column not sent, the loan id and balance among
    them, less the personal columns (by name, and by values: e-mail addresses)."""
    frame = pl.DataFrame(MI_BOOK)
    surveyed, rows = survey(frame.columns, [frame])
    proposal = propose(frame.columns, surveyed, rows)
    assert proposal.passthrough == ("Account No", "Current Balance", "Notes")
    assert proposal.personal == {
        "Borrower Surname": "by name",
        "Date of Birth": "by name",
        "Contact": "holds e-mail addresses",
        "Security Address 1": "by name",
    }
    text = render(proposal, "book.csv")
    assert yaml.safe_load(text)["input"]["passthrough"] == list(proposal.passthrough)
    said = " ".join(line.strip(" #") for line in text.splitlines() if line.lstrip().startswith("#"))
    assert (
        "left out as personal data: Borrower Surname, Date of Birth, Security Address 1 (by name);"
        in said
    )
    assert "Contact (holds e-mail addresses)" in said


def test_init_then_run_with_the_proposal_copies_nothing_personal(
    served: RunningSandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`init FILE --out P` then `run FILE --config P` unchanged: exit 0, LTVs made, and no
    surname, birth date or e-mail in any file the run writes."""
    source = tmp_path / "book.csv"
    pl.DataFrame(MI_BOOK).write_csv(source)
    proposal = tmp_path / "proposal.yaml"
    code, stdout, stderr = run_in_process(
        "init",
        str(source),
        "--out",
        str(proposal),
        env={},
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert code == 0, stdout + stderr
    assert "left out as personal data: Borrower Surname, Date of Birth" in stdout
    out = tmp_path / "out"
    args = ("run", str(source), "--config", str(proposal), "--out", str(out))
    code, stdout, stderr = run_in_process(
        *args, env=env_for(served), monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 0, stdout + stderr
    results, _, _ = outputs(out)
    assert results.get_column("indexed_ltv").is_not_null().all()
    assert "Account No" in results.columns
    for file in out.iterdir():
        data = file.read_bytes()
        for needle in (b"Smith", b"01/02/1970", b"jane@example.com", b"High St"):
            assert needle not in data, f"{needle!r} in {file.name}"


@pytest.mark.parametrize(
    ("headings", "unfound"),
    [
        (["Post Code", "Type", "Beds"], list(LOST_WITHOUT)),
        (["Post Code", "Type", "Beds", "Curr Bal", "Acc No"],
         ["origination_value", "origination_date", "last_valuation", "last_valuation_date"]),
        (["Post Code", "Type", "Beds", "O/S Bal", "Orig Val", "Orig Val Dt", "Last Val",
          "Val Dt", "A/C No"], []),
    ],
)  # fmt: skip
def test_init_says_which_lender_fields_it_found_no_column_for(
    headings: list[str], unfound: list[str]
) -> None:
    """Each lender field without a column is named in the proposal with what is lost
    without it; a field found (by an MI pack's short heading too) is not."""
    values = {"Post Code": "SW1A 2AA", "Type": "Flat", "Beds": "2"}
    frame = pl.DataFrame({h: [values.get(h, "1000")] * 3 for h in headings})
    surveyed, rows = survey(frame.columns, [frame])
    text = " ".join(
        line.strip().lstrip("# ")
        for line in render(propose(frame.columns, surveyed, rows), "f.csv").splitlines()
        if line.strip().startswith("#")
    )
    said = text.split("no column found for ", 1)[1].split(": name yours", 1)[0] if unfound else ""
    for field in LOST_WITHOUT:
        assert (f"{field} ({LOST_WITHOUT[field]})" in said) is (field in unfound), field


@pytest.mark.parametrize(
    ("headings", "field", "took", "left"),
    [
        (["Orig Val", "Prop Val"], "origination_value", "Orig Val", ["Prop Val"]),
        (["Prop Val", "Original Valuation", "Orig Val"], "origination_value",
         "Original Valuation", ["Orig Val", "Prop Val"]),
        (["Balance", "Curr Bal"], "loan_balance", "Curr Bal", ["Balance"]),
        (["Curr Bal", "Arrears Bal"], "loan_balance", "Curr Bal", ["Arrears Bal"]),
        (["Cur Bal", "Curr Bal"], "loan_balance", "Cur Bal", ["Curr Bal"]),
    ],
)  # fmt: skip
def test_init_says_which_of_two_matching_columns_it_took_and_which_it_left(
    headings: list[str], field: str, took: str, left: list[str]
) -> None:
    """The rule's order decides (the usual names in turn, then the file's order) and the
    proposal and the terminal say what was left; two that tie are still proposed (the
    first, written under columns so a run takes it)."""
    values = {"Post Code": "SW1A 2AA", "Type": "Flat", "Beds": "2"}
    columns = ["Post Code", "Type", "Beds", *headings]
    frame = pl.DataFrame({h: [values.get(h, "100000")] * 3 for h in columns})
    surveyed, rows = survey(frame.columns, [frame])
    proposal = propose(frame.columns, surveyed, rows)
    assert proposal.lender[field] == took
    assert list(proposal.left[field]) == left
    listed = ", ".join(repr(c) for c in left)
    assert f"left {listed}, which also name" in render(proposal, "f.csv")
    assert any(f"left {listed}" in line for line in summary_lines(proposal))
    if "Cur Bal" in headings:  # a tie: written, so the run takes the same column
        assert proposal.config_columns()[field] == took
