"""`batchval init INPUT`: a mapping assistant that proposes a config, says why, lists what
it cannot place, and reads the file through its own proposal (issue 24, 5)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
import yaml
from support import ROOT, env_for, outputs, run_cli

from batchval.sandbox.server import RunningSandbox
from batchval.settings import load_settings
from batchval.tools.init import propose, survey

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
    served: RunningSandbox, tmp_path: Path, name: str
) -> None:
    """From a lender's file to a run: init, then run with the proposal as written."""
    proposal = tmp_path / "proposal.yaml"
    source = str(SAMPLES / name)
    done = run_cli("init", source, "--out", str(proposal), env=env_for(served))
    assert done.returncode == 0, done.stderr
    assert "postcode <- 'Property Postcode'" in done.stdout
    assert "with it: 57 of 66 rows valued by 57 request(s), £5.70" in done.stdout
    assert "ambiguous_value 9" in done.stdout
    assert f"next: batchval run {source} --config {proposal}" in done.stdout
    text = proposal.read_text(encoding="utf-8")
    assert "'Park Home': ...   # 3 rows" in text  # what it could not place, counted
    assert yaml.safe_load(text)["input"]["columns"]["loan_id"] == "Loan Ref"
    load_settings(proposal, {})  # a valid config as written
    again = run_cli("init", source, "--out", str(proposal), env=env_for(served))
    assert again.returncode == 64, again.stderr  # never over a file without --force
    out = tmp_path / "out"
    run = run_cli("run", source, "--config", str(proposal), "--out", str(out), env=env_for(served))
    assert run.returncode == 0, run.stderr
    results, problems, _ = outputs(out)
    assert (results.height, problems.height) == (57, 9)
    assert "Loan Ref" in results.columns  # sent as the reference, kept as the loan id


@pytest.mark.slow
def test_init_on_a_file_it_cannot_map_says_what_is_missing(tmp_path: Path) -> None:
    source = tmp_path / "odd.csv"
    source.write_text("a,b\n1,2\n3,4\n", encoding="utf-8")
    proposal = tmp_path / "p.yaml"
    done = run_cli("init", str(source), "--out", str(proposal), env={"PATH": "/usr/bin"})
    assert done.returncode == 65, done.stdout + done.stderr
    assert "postcode: no column fits" in done.stdout
    assert "required column missing" in done.stderr
    assert "# postcode: no column fits" in proposal.read_text(encoding="utf-8")
