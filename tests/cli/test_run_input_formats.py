"""A lender's own file at the command line (in this process: the `batchval` fixture): an
Excel workbook (--sheet) and a Windows CSV (cp1252, found from its bytes; --encoding),
valued, priced, checked and split, and a cp1252 run stopped at the daily limit and resumed
by the same command."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import polars as pl
import pytest
import xlsxwriter
from support import (
    LIVE,
    InProcess,
    assert_accounted,
    assert_paid_once,
    env_for,
    input_read,
    outputs,
)

from batchval._internal.sandbox.server import RunningSandbox

POSTCODES = ["SW1A 2AA", "M1 1AE", "LS6 2AB", "CF10 1AA", "BS1 4DJ", "NE1 7RU"]


def lender_workbook(path: Path, rows: int) -> Path:
    """A lender's workbook: a cover sheet first, then the loans with typed cells."""
    book = xlsxwriter.Workbook(str(path))
    dated = book.add_format({"num_format": "dd/mm/yyyy"})
    book.add_worksheet("Cover").write(0, 0, "Mortgage book extract, November 2026")
    loans = book.add_worksheet("Loans")
    header = ["Loan Ref", "postcode", "property_type", "bedrooms", "Balance", "Completed"]
    loans.write_row(0, 0, header)
    for n in range(rows):
        loans.write_row(n + 1, 0, [1000 + n, POSTCODES[n % 6], "terraced", float(1 + n % 5)])
        loans.write_number(n + 1, 4, 100_000 + n * 1_000.5)
        loans.write_datetime(n + 1, 5, dt.datetime(2019, 3, 15) + dt.timedelta(days=n), dated)
    book.close()
    return path


def windows_csv(path: Path, rows: int) -> Path:
    """A Windows "Save as CSV": cp1252, balances written £412,500.00, and a note."""
    lines = ["Loan Ref,postcode,property_type,bedrooms,Balance,Note"]
    for n in range(rows):
        lines.append(
            f'L{n:04d},{POSTCODES[n % 6]},flat,{1 + n % 4},"£{412_500 + n:,}.00",'
            f'"£{412_500 + n:,}.00 – O’Neil"'
        )
    path.write_bytes(("\r\n".join(lines) + "\r\n").encode("cp1252"))
    return path


@pytest.mark.slow
def test_a_workbook_is_valued_from_the_sheet_named(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """run --sheet values the sheet named; pass-through cells keep their types in
    results.parquet; summary.json and manifest.json name the sheet."""
    source = lender_workbook(tmp_path / "book.xlsx", 12)
    out = tmp_path / "out"
    done = batchval("run", str(source), "--out", str(out), "--sheet", "Loans", env=env_for(served))
    assert done.returncode == 0, done.stderr
    assert "input: sheet 'Loans' of the workbook" in done.stdout
    results, problems, summary = outputs(out)
    assert (results.height, problems.height) == (12, 0)
    assert results.schema["Loan Ref"] == pl.Int64
    assert results.schema["Balance"] == pl.Float64
    assert results.schema["Completed"] == pl.Date
    first = results.sort("row_number").row(0, named=True)
    assert (first["Loan Ref"], first["Completed"]) == (1000, dt.date(2019, 3, 15))
    assert summary["input_read"] == input_read(format="excel", sheet="Loans")
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["input"]["sheet"] == "Loans"
    assert_accounted(out, 12)


@pytest.mark.slow
def test_the_commands_that_read_input_take_sheet(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """--dry-run, check, split and streets --dry-run read the sheet named; without it the
    first sheet (a cover here) is refused naming the sheet with a table, and an unknown
    sheet is refused naming the sheets."""
    source = lender_workbook(tmp_path / "book.xlsx", 6)
    env = env_for(served)
    dry = batchval("run", str(source), "--out", str(tmp_path / "dry"), "--dry-run",
                  "--sheet", "Loans", env=env)  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert "dry run: 6 rows, 0 with problems" in dry.stdout
    check = batchval("check", str(source), "--sheet", "Loans", env=env)
    assert check.returncode == 0, check.stdout + check.stderr
    split = batchval("split", str(source), "--shards", "2", "--out", str(tmp_path / "shards"),
                    "--sheet", "Loans", env=env)  # fmt: skip
    assert split.returncode == 0, split.stderr
    shards = pl.read_parquet(tmp_path / "shards" / "*.parquet")
    assert shards.height == 6
    assert shards.schema["Completed"] == pl.Date
    streets = batchval("streets", str(source), "--out", str(tmp_path / "streets"), "--dry-run",
                      "--sheet", "Loans", env=env)  # fmt: skip
    assert streets.returncode == 0, streets.stderr
    cover = batchval("run", str(source), "--out", str(tmp_path / "cover"), "--dry-run", env=env)
    assert cover.returncode == 65
    assert "first sheet 'Cover' holds no table (a cover sheet?); the sheets that do: 'Loans'" in (
        cover.stderr
    )
    unknown = batchval("run", str(source), "--out", str(tmp_path / "x"), "--sheet", "loans",
                      env=env)  # fmt: skip
    assert unknown.returncode == 65
    assert "has no sheet 'loans'; its sheets: 'Cover', 'Loans' (--sheet NAME)" in unknown.stderr


@pytest.mark.slow
def test_a_windows_csv_stopped_at_the_daily_limit_resumes(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A cp1252 file is read as cp1252 with no setting and says so; stopped at the daily
    limit (75), the same command resumes it (never refused as a changed setting) and
    completes, each row paid once: the £ note as written, the balance read as money."""
    served.sandbox.account(LIVE.client_id).daily_limit = 10
    source = windows_csv(tmp_path / "book.csv", 25)
    out = tmp_path / "out"
    first = batchval("run", str(source), "--out", str(out), env=env_for(served))
    assert first.returncode == 75, first.stderr
    assert "input: read as cp1252, found from its bytes" in first.stdout
    summary = outputs(out)[2]
    assert summary["stop"]["reason"] == "daily_limit"
    assert summary["input_read"]["encoding"] == "cp1252"
    assert summary["input_read"]["encoding_detected"] is True
    to_midnight = served.sandbox.clock.seconds_to_midnight() + 5
    served.sandbox.clock.advance(to_midnight)
    served.sandbox.account(LIVE.client_id).daily_limit = 100
    later_env = env_for(served, BATCHVAL_CLOCK_OFFSET_SECONDS=str(to_midnight))
    again = batchval("run", str(source), "--out", str(out), env=later_env)
    assert again.returncode == 0, again.stderr
    assert "refused" not in again.stderr
    results, problems, summary = outputs(out)
    assert summary["invocations"] == 2
    assert problems.height == 0
    ordered = results.sort("row_number")
    assert ordered["Note"].to_list()[:2] == ["£412,500.00 – O’Neil", "£412,501.00 – O’Neil"]
    assert ordered["Balance"].to_list()[:2] == [412_500.0, 412_501.0]
    assert_accounted(out, 25)
    assert_paid_once(served, out)


@pytest.mark.slow
def test_encoding_on_the_command_line(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """--encoding reads the file so (over the config), an unknown one is a usage error
    (64), and UTF-8 named for a cp1252 file is refused (65) naming --encoding."""
    source = windows_csv(tmp_path / "book.csv", 3)
    env = env_for(served)
    config = tmp_path / "config.yaml"
    config.write_text("input: {encoding: utf-8}\n", encoding="utf-8")
    named = batchval("run", str(source), "--out", str(tmp_path / "a"), "--dry-run",
                    "--config", str(config), "--encoding", "cp1252", env=env)  # fmt: skip
    assert named.returncode == 0, named.stderr
    unknown = batchval("run", str(source), "--out", str(tmp_path / "b"), "--encoding", "ebcdic-x",
                      env=env)  # fmt: skip
    assert unknown.returncode == 64
    assert "unknown encoding 'ebcdic-x'" in unknown.stderr
    wrong = batchval("run", str(source), "--out", str(tmp_path / "c"), "--config", str(config),
                    env=env)  # fmt: skip
    assert wrong.returncode == 65
    assert "is not utf-8 text (byte 0xa3" in wrong.stderr
    assert "--encoding cp1252" in wrong.stderr
    check = batchval("check", str(source), "--encoding", "nope", env=env)
    assert check.returncode == 64


@pytest.mark.slow
def test_init_reads_a_workbook_and_takes_sheet_and_encoding(
    tmp_path: Path, batchval: InProcess
) -> None:
    """init proposes a config from a workbook's sheet (--sheet) and says to run with it;
    an unknown encoding is a usage error (64)."""
    source = lender_workbook(tmp_path / "book.xlsx", 6)
    proposal = tmp_path / "book.yaml"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATCHVAL_")}
    done = batchval("init", str(source), "--sheet", "Loans", "--out", str(proposal), env=env)
    assert done.returncode == 0, done.stderr
    assert f"next: batchval run {source} --sheet Loans --config {proposal}" in done.stdout
    wrong = batchval("init", str(source), "--encoding", "klingon", "--out", str(proposal),
                    "--force", env=env)  # fmt: skip
    assert wrong.returncode == 64
    assert "unknown encoding 'klingon'" in wrong.stderr
