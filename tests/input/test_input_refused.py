"""A run that values little is not a success (input/refused): the rule itself, then `run`,
`run --dry-run`, `run --book`, `status`, `check` and `streets` at the command line (in this
process: the `batchval` fixture) against the served sandbox, where the exit code is the
behaviour."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import polars as pl
import pytest
from support import InProcess, env_for, outputs

from batchval._internal.input import PROBLEM_RULES
from batchval._internal.input.refused import (
    DEFAULT_MAX_REFUSED_SHARE,
    FIXES,
    RefusedKind,
    mostly_refused,
)
from batchval._internal.outcome import ExitCode, StopReason
from batchval._internal.sandbox.server import RunningSandbox

GOOD = ("SW1A 2AA", "terraced")
UNMAPPED = ("SW1A 2AA", "Q")  # a lender's code with no `values` entry
SCOTTISH = ("EH1 1AA", "terraced")  # outside England and Wales
NOT_A_POSTCODE = ("12 High Street", "terraced")


def homes(path: Path, *groups: tuple[int, tuple[str, str]]) -> Path:
    """A CSV of loans: `(n, (postcode, property type))` groups, in order; each row its
    own request (its reference)."""
    with path.open("w", newline="", encoding="utf-8") as stream:
        out = csv.writer(stream)
        out.writerow(["loan_id", "postcode", "property_type", "bedrooms", "reference"])
        n = 0
        for count, (postcode, kind) in groups:
            for _ in range(count):
                out.writerow([f"LN-{n:05d}", postcode, kind, 3, f"CASE-{n:05d}"])
                n += 1
    return path


def config(path: Path, text: str) -> list[str]:
    path.write_text(text, encoding="utf-8")
    return ["--config", str(path)]


def said(stderr: str) -> list[str]:
    """batchval's own lines on stderr (the JSON log lines off a terminal aside)."""
    return [line for line in stderr.splitlines() if line.startswith("batchval:")]


def valuations_posted(served: RunningSandbox) -> int:
    requests = served.sandbox.ledger.requests
    return sum(1 for r in requests if r.method == "POST" and r.path.endswith("/valuations"))


# --- the rule ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rows", "refused", "share", "stops"),
    [
        (42, 42, 0.5, True),
        (1000, 2, 0.5, False),
        (10, 5, 0.5, False),  # exactly half: more than the share is refused
        (10, 6, 0.5, True),
        (10, 3, 0.25, True),
        (10, 10, 0.0, False),  # 0 turns the rule off
        (10, 10, 1.0, False),
    ],
)
def test_more_than_the_share_refused_stops(
    rows: int, refused: int, share: float, stops: bool
) -> None:
    """The run stops exactly when the refused rows are more than the share (0: never)."""
    kinds = [RefusedKind("propertyType", "not_in_list", refused, "propertyType 'Q' ...")]
    stop = mostly_refused(rows, refused, kinds, share, source="book.csv")
    assert (stop is not None) is stops
    if stop is not None:
        assert stop.reason is StopReason.INPUT_MOSTLY_REFUSED
        assert stop.reason.exit_code is ExitCode.INPUT
        assert stop.needs_a_person


def test_the_detail_names_the_commonest_problems_and_the_fix() -> None:
    """The detail counts the rows, names the top kinds (field, rule, rows) and the rest,
    and tells the fix of the commonest with its first row's words."""
    kinds = [
        RefusedKind("propertyType", "not_in_list", 30, "propertyType 'Q' is not one of ..."),
        RefusedKind("postcode", "outside-coverage", 8, None),
        RefusedKind("bedrooms", "out_of_range", 2, None),
        RefusedKind(None, "area_or_bedrooms_required", 1, None),
    ]
    stop = mostly_refused(42, 41, kinds, 0.5, source="book.csv")
    assert stop is not None
    assert "refused 41 of 42 rows of book.csv (98%)" in stop.detail
    named = "propertyType not_in_list 30, postcode outside-coverage 8, bedrooms out_of_range 2"
    assert named in stop.detail
    assert "other 1" in stop.detail
    assert "input.values.propertyType" in stop.detail
    assert "propertyType 'Q'" in stop.detail


@pytest.mark.parametrize("rule", list(PROBLEM_RULES))
def test_every_rule_has_a_fix(rule: str) -> None:
    """Each validation rule says what a person changes when it refuses most of a file."""
    assert rule in FIXES
    assert FIXES[rule].format(field="bedrooms")


def test_the_default_is_at_least_half() -> None:
    """The default share is one no healthy lender's file comes near: half or more."""
    assert 0.5 <= DEFAULT_MAX_REFUSED_SHARE < 1


# --- run, as a process -------------------------------------------------------------------


@pytest.mark.slow
def test_every_row_refused_exits_65_and_sends_nothing(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """Every row refused: exit 65, one line naming the problem types and the fix,
    problems.parquet with every row, summary.json with the stop, no call made."""
    source = homes(tmp_path / "book.csv", (42, UNMAPPED))
    out = tmp_path / "out"
    done = batchval("run", str(source), "--out", str(out), env=env_for(served))
    assert done.returncode == 65, done.stderr
    lines = said(done.stderr)
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("batchval: input_mostly_refused: ")
    assert "propertyType not_in_list 42" in lines[0]
    assert "input.values.propertyType" in lines[0]
    results, problems, summary = outputs(out)
    assert (results.height, problems.height) == (0, 42)
    assert set(problems["type"].to_list()) == {"not_in_list"}
    assert summary["exit_code"] == 65
    assert summary["stop"]["reason"] == "input_mostly_refused"
    assert summary["calls"]["total"] == 0
    assert served.sandbox.ledger.requests == []


def test_a_lender_column_s_refusals_count_in_the_first_invocation_too(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """4 of 10 rows refused by a request rule and 2 more by a loan balance that is no
    amount: 6 of 10, over the half, on the first invocation as on the next (the first
    once counted 4, sent, and the next refused the same file)."""
    source = tmp_path / "book.csv"
    with source.open("w", newline="", encoding="utf-8") as file:
        out = csv.writer(file)
        out.writerow(["loan_id", "postcode", "property_type", "bedrooms", "loan_balance"])
        for n in range(10):
            kind = "castle" if n < 4 else "flat"
            balance = "about 400k" if n in (4, 5) else "150000"
            out.writerow([f"L{n}", "SW1A 2AA", kind, 2, balance])
    out_dir = tmp_path / "out"
    for _ in range(2):
        done = batchval("run", str(source), "--out", str(out_dir), env=env_for(served))
        assert done.returncode == 65, done.stderr
        assert "refused 6 of 10 rows" in done.stderr
    assert valuations_posted(served) == 0


@pytest.mark.slow
def test_refused_rows_after_good_ones_are_refused_before_any_call(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """The verdict is on the whole input, read before any call, though a run stores and
    sends its first rows before it has stored the rest: good rows first, mostly refused
    after, in batches of 10, exit 65 with nothing sent and every row accounted."""
    source = homes(tmp_path / "book.csv", (20, GOOD), (40, UNMAPPED))
    out = tmp_path / "out"
    args = config(tmp_path / "config.yaml", "input: {batch_rows: 10}\n")
    done = batchval("run", str(source), "--out", str(out), *args, env=env_for(served))
    assert done.returncode == 65, done.stderr
    assert valuations_posted(served) == 0
    results, problems, summary = outputs(out)
    assert (results.height, problems.height) == (0, 40)
    assert summary["rows"]["total"] == 60
    assert summary["rows"]["pending"] == 20


@pytest.mark.slow
def test_a_few_bad_rows_in_a_good_file_complete(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """2 bad rows in 1,000 are problems of a complete run: exit 0, the rest valued."""
    source = homes(tmp_path / "book.csv", (499, GOOD), (2, UNMAPPED), (499, GOOD))
    out = tmp_path / "out"
    done = batchval("run", str(source), "--out", str(out), env=env_for(served))
    assert done.returncode == 0, done.stderr
    results, problems, summary = outputs(out)
    assert (results.height, problems.height) == (998, 2)
    assert summary["stop"] is None


@pytest.mark.parametrize(
    ("share", "code"), [(None, 0), ("0.25", 65), ("0.3", 0), ("0", 0), ("1", 0)]
)
@pytest.mark.slow
def test_the_share_setting_is_honoured(
    served: RunningSandbox, tmp_path: Path, share: str | None, code: int, batchval: InProcess
) -> None:
    """`run.max_refused_share` decides the line (3 rows in 10 refused); 0 turns it off."""
    source = homes(tmp_path / "book.csv", (7, GOOD), (3, UNMAPPED))
    args = (
        [] if share is None else config(tmp_path / "c.yaml", f"run: {{max_refused_share: {share}}}")
    )
    done = batchval("run", str(source), "--out", str(tmp_path / "out"), *args, env=env_for(served))
    assert done.returncode == code, done.stderr
    assert valuations_posted(served) == (0 if code else 7)


@pytest.mark.slow
def test_off_values_the_rest(served: RunningSandbox, tmp_path: Path, batchval: InProcess) -> None:
    """With the rule off, a mostly refused file is valued as far as it can be (exit 0)."""
    source = homes(tmp_path / "book.csv", (1, GOOD), (9, UNMAPPED))
    args = config(tmp_path / "c.yaml", "run: {max_refused_share: 0}")
    done = batchval("run", str(source), "--out", str(tmp_path / "out"), *args, env=env_for(served))
    assert done.returncode == 0, done.stderr
    results, problems, _ = outputs(tmp_path / "out")
    assert (results.height, problems.height) == (1, 9)


@pytest.mark.parametrize("share", ["1.5", "-0.1", "half"])
@pytest.mark.slow
def test_a_share_out_of_range_is_a_config_error(
    served: RunningSandbox, tmp_path: Path, share: str, batchval: InProcess
) -> None:
    """A share that is not a number from 0 to 1 is refused as a config error (64)."""
    source = homes(tmp_path / "book.csv", (3, GOOD))
    args = config(tmp_path / "c.yaml", f"run: {{max_refused_share: {share}}}")
    done = batchval("run", str(source), "--out", str(tmp_path / "out"), *args, env=env_for(served))
    assert done.returncode == 64, done.stderr
    assert "max_refused_share" in done.stderr


@pytest.mark.slow
def test_homes_outside_england_and_wales_count(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """Rows refused as outside England and Wales (Scottish postcodes) count like any
    other refusal."""
    source = homes(tmp_path / "book.csv", (4, GOOD), (6, SCOTTISH))
    out = tmp_path / "out"
    done = batchval("run", str(source), "--out", str(out), env=env_for(served))
    assert done.returncode == 65, done.stderr
    (line,) = said(done.stderr)
    assert "postcode outside-coverage 6" in line
    assert "England and Wales" in line
    assert served.sandbox.ledger.requests == []


@pytest.mark.slow
def test_the_dry_run_says_the_same_and_exits_the_same(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """--dry-run of a mostly refused file: exit 65, the run's line, 0 calls priced,
    problems.parquet written, nothing sent."""
    source = homes(tmp_path / "book.csv", (42, UNMAPPED))
    real = batchval("run", str(source), "--out", str(tmp_path / "real"), env=env_for(served))
    dry = batchval(
        "run", str(source), "--out", str(tmp_path / "dry"), "--dry-run", env=env_for(served)
    )
    assert dry.returncode == real.returncode == 65, dry.stderr
    assert said(dry.stderr) == said(real.stderr)
    assert "would make 0 calls" in dry.stdout
    assert pl.read_parquet(tmp_path / "dry" / "problems.parquet").height == 42
    assert served.sandbox.ledger.requests == []


@pytest.mark.parametrize(
    "groups",
    [[(10, UNMAPPED)], [(4, GOOD), (6, UNMAPPED)]],
    ids=["nothing-pending", "rows-pending"],
)
@pytest.mark.slow
def test_status_exits_65(
    served: RunningSandbox,
    tmp_path: Path,
    groups: list[tuple[int, tuple[str, str]]],
    batchval: InProcess,
) -> None:
    """`status DIR` of a refused run exits 65 with the stop, whether or not rows wait."""
    source = homes(tmp_path / "book.csv", *groups)
    out = tmp_path / "out"
    assert batchval("run", str(source), "--out", str(out), env=env_for(served)).returncode == 65
    status = batchval("status", str(out), "--json", env=env_for(served))
    assert status.returncode == 65, status.stdout + status.stderr
    assert json.loads(status.stdout)["stop"]["reason"] == "input_mostly_refused"


@pytest.mark.slow
def test_a_corrected_config_runs_in_the_same_dir(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """Nothing was sent from a refused DIR: the same command with the corrected mapping
    values every row there, without --accept-changes; status then exits 0."""
    source = homes(tmp_path / "book.csv", (10, UNMAPPED))
    out = tmp_path / "out"
    assert batchval("run", str(source), "--out", str(out), env=env_for(served)).returncode == 65
    fixed = config(tmp_path / "c.yaml", "input: {values: {propertyType: {Q: terraced}}}")
    done = batchval("run", str(source), "--out", str(out), *fixed, env=env_for(served))
    assert done.returncode == 0, done.stderr
    results, problems, summary = outputs(out)
    assert (results.height, problems.height) == (10, 0)
    assert summary["invocations"] == 2
    assert batchval("status", str(out), env=env_for(served)).returncode == 0


@pytest.mark.slow
def test_a_dir_that_sent_still_refuses_a_change(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A DIR from which calls were made keeps refusing changed settings (64) without
    --accept-changes, even after a later invocation was refused for its input."""
    source = homes(tmp_path / "book.csv", (10, GOOD))
    out = tmp_path / "out"
    assert batchval("run", str(source), "--out", str(out), env=env_for(served)).returncode == 0
    homes(source, (2, GOOD), (10, UNMAPPED))
    accepted = batchval(
        "run", str(source), "--out", str(out), "--accept-changes", env=env_for(served)
    )
    assert accepted.returncode == 65, accepted.stderr
    fixed = config(tmp_path / "c.yaml", "input: {values: {propertyType: {Q: terraced}}}")
    refused = batchval("run", str(source), "--out", str(out), *fixed, env=env_for(served))
    assert refused.returncode == 64, refused.stderr
    assert "--accept-changes" in refused.stderr


@pytest.mark.slow
def test_a_book_run_is_refused_before_its_plan(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """`run --book` of a mostly refused file: exit 65, nothing sent, no book written."""
    source = homes(tmp_path / "book.csv", (3, GOOD), (7, UNMAPPED))
    book = tmp_path / "book.parquet"
    args = ["--book", str(book), "--row-id", "loan_id"]
    done = batchval("run", str(source), "--out", str(tmp_path / "out"), *args, env=env_for(served))
    assert done.returncode == 65, done.stderr
    assert not book.exists()
    assert served.sandbox.ledger.requests == []
    dry = batchval(
        "run", str(source), "--out", str(tmp_path / "dry"), "--dry-run", *args, env=env_for(served)
    )
    assert dry.returncode == 65, dry.stderr


@pytest.mark.slow
def test_check_fails_the_input_with_65(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """`check INPUT` says the run would refuse a mostly refused input, and exits 65."""
    source = homes(tmp_path / "book.csv", (42, UNMAPPED))
    done = batchval("check", str(source), env=env_for(served))
    assert done.returncode == 65, done.stdout + done.stderr
    assert "input_mostly_refused" in done.stdout


@pytest.mark.slow
def test_streets_of_mostly_bad_postcodes_exits_65(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """`streets` of a file whose postcodes are mostly refused reads none: exit 65, and
    its dry run and status say the same."""
    source = homes(tmp_path / "book.csv", (2, GOOD), (8, NOT_A_POSTCODE))
    out = tmp_path / "out"
    done = batchval("streets", str(source), "--out", str(out), env=env_for(served))
    assert done.returncode == 65, done.stderr
    (line,) = said(done.stderr)
    assert "postcode invalid_postcode 8" in line
    assert served.sandbox.ledger.requests == []
    assert pl.read_parquet(out / "problems.parquet").height == 8
    assert batchval("status", str(out), env=env_for(served)).returncode == 65
    dry = batchval(
        "streets", str(source), "--out", str(tmp_path / "dry"), "--dry-run", env=env_for(served)
    )
    assert dry.returncode == 65, dry.stderr
