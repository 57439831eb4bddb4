"""A lender's real extract (issue 32): the MI samples (a banner above the header, a total
and a footer below the table, a cover sheet first) go from `batchval init` to `batchval
run` with the proposal unchanged, in-process against the embedded sandbox."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import polars as pl
import pytest
from embedded_cli import SAMPLES, invoke


@pytest.mark.slow  # init, then a run end to end, of each sample extract
@pytest.mark.parametrize("name", ["mi_extract.xlsx", "mi_extract_windows.csv", "mi_pack.xlsx"])
def test_an_mi_extract_runs_from_init_to_run_with_the_proposal_unchanged(
    tmp_path: Path, samples: ModuleType, name: str
) -> None:
    """rows.total is the loans, not_loans names exactly the total and the footer, the
    mid-table loan with only its account number is a problem at its own line."""
    config = tmp_path / "proposal.yaml"
    proposed = invoke("init", str(SAMPLES / name), "--out", str(config))
    assert proposed.exit_code == 0, proposed.output
    assert f"({samples.MI_LOANS} data rows)" in proposed.output
    assert f"header_row: {samples.MI_HEADER_LINE}" in config.read_text()
    out = tmp_path / "run"
    ran = invoke("run", str(SAMPLES / name), "--config", str(config), "--out", str(out))
    assert ran.exit_code == 0, ran.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rows"]["total"] == samples.MI_LOANS
    assert summary["input_read"]["header_line"] == samples.MI_HEADER_LINE
    assert summary["input_read"]["not_loans"] == [
        {"line": samples.MI_TOTAL_LINE, "reason": "label", "label": "Total", "text": "Total"},
        {
            "line": samples.MI_FOOTER_LINE,
            "reason": "label",
            "label": samples.MI_FOOTER,
            "text": samples.MI_FOOTER,
        },
    ]
    problems = pl.read_parquet(out / "problems.parquet")
    blank = problems.filter(pl.col("source_row") == samples.MI_BLANK_LINE)
    assert blank.select("row_number", "Account No", "field").rows() == [
        (samples.MI_BLANK_LOAN, samples.mi_extract().blank_account, "postcode")
    ]
    results = pl.read_parquet(out / "results.parquet")
    assert results.columns[:2] == ["row_number", "source_row"]
    assert (results["source_row"] - results["row_number"]).unique().to_list() == [
        samples.MI_HEADER_LINE
    ]
    assert "2 lines set aside, not loans: 'Total' (line" in ran.output
    reported = invoke("report", str(out))
    assert reported.exit_code == 0, reported.output
    page = (out / "report.html").read_text()
    assert f"{samples.mi_extract().blank_account} (line {samples.MI_BLANK_LINE})" in page


def test_a_pack_with_a_cover_sheet_is_refused_without_its_sheet(tmp_path: Path) -> None:
    """run without --sheet on a workbook whose first sheet is a cover exits 65 naming the
    sheet that holds the table; init proposes that sheet and says why."""
    ran = invoke("run", str(SAMPLES / "mi_pack.xlsx"), "--out", str(tmp_path / "run"))
    assert ran.exit_code == 65
    assert "first sheet 'Cover' holds no table" in ran.output
    assert "'Loans'" in ran.output
    config = tmp_path / "proposal.yaml"
    proposed = invoke("init", str(SAMPLES / "mi_pack.xlsx"), "--out", str(config))
    assert "sheet 'Loans': the first sheet 'Cover' holds no table" in proposed.output
    assert "sheet: 'Loans'" in config.read_text()
    assert "--sheet Loans --header-row 4" in proposed.output


def test_the_header_row_on_the_command_line_reads_the_raw_extract(tmp_path: Path) -> None:
    """--header-row states the line; a line that is not the header is refused (65) with
    what that line holds."""
    config = tmp_path / "c.yaml"
    config.write_text("input:\n  columns:\n    propertyType: Prop Type\n    bedrooms: Beds\n")
    path = str(SAMPLES / "mi_extract_windows.csv")
    dry = invoke(
        "run",
        path,
        "--config",
        str(config),
        "--header-row",
        "4",
        "--out",
        str(tmp_path / "a"),
        "--dry-run",
    )
    assert dry.exit_code == 0, dry.output
    wrong = invoke(
        "run", path, "--config", str(config), "--header-row", "5", "--out", str(tmp_path / "b")
    )
    assert wrong.exit_code == 65
    assert "which is not a column of the file" in wrong.output


@pytest.mark.parametrize("with_config", [True, False])
def test_no_borrower_data_reaches_any_file_of_the_run(
    tmp_path: Path, samples: ModuleType, with_config: bool
) -> None:
    """After init, run, both exports and the report, no surname, e-mail or birth date of
    the sample is in any file of DIR (the checkpoint and the log included); nor with no
    config at all."""
    path = str(SAMPLES / "mi_extract.xlsx")
    out = tmp_path / "run"
    config = tmp_path / "proposal.yaml"
    args = ["--config", str(config)] if with_config else []
    if with_config:
        assert invoke("init", path, "--out", str(config)).exit_code == 0
    ran = invoke("run", path, *args, "--out", str(out))
    if with_config:
        assert ran.exit_code == 0, ran.output
        assert "left out as personal data" in config.read_text()
        for fmt in ("xlsx", "csv"):
            assert invoke("export", str(out), "--format", fmt).exit_code == 0
        assert invoke("report", str(out)).exit_code == 0
    extract = samples.mi_extract()
    secrets = [
        *extract.surnames,
        *extract.emails,
        *(f"{d:%d/%m/%Y}" for d in extract.birth_dates),
        *(d.isoformat() for d in extract.birth_dates),
    ]
    files = [f for f in out.rglob("*") if f.is_file()]
    assert len(files) >= (8 if with_config else 1)
    for file in files:
        data = file.read_bytes()
        found = [s for s in secrets if s.encode() in data]
        assert found == [], f"{file.name} holds {found[:3]}"
