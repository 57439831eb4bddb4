"""`batchval streets` against the sandbox over loopback, the command line in this process (the
`batchval` fixture); a process of its own for `kill -9` and a terminal."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import pty
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import BATCHVAL, LIVE, POOR, TEST, InProcess, clear_of_midnight, env_for, wait_until

from batchval._internal.outcome import ExitCode, StopInfo, StopReason
from batchval._internal.place.place import Place
from batchval._internal.sandbox.config import Faults
from batchval._internal.sandbox.server import RunningSandbox
from batchval._internal.sending.sending import SendOutcome
from batchval._internal.settings import load_settings
from batchval._internal.store.checkpoint import Checkpoint
from batchval._internal.store.database import Database
from batchval._internal.streets.runner import StreetReading, Streets, StreetsRequest, StreetsSummary
from batchval._internal.streets.schema import CRIME, ENERGY, PRICE_INDEX, RENTAL, SOLD_PRICES, STOP

# Touches the calendar: `make test-dates` runs it at each hard instant (tests/clocks.py).
pytestmark = pytest.mark.dates

DAY = 86_400
# Rows 1-3 spell one postcode three ways; row 5 has a bad bedrooms value but a good
# postcode; row 6's postcode is not one; the sandbox holds nothing for unit ZZ (row 7, 9).
ROWS = [
    ("A", "sw1a2aa", "2"),
    ("B", "SW1A 2AA", "3"),
    ("C", " SW1A2AA ", "1"),
    ("D", "M1 1AE", "2"),
    ("E", "LS6 2AB", "many"),
    ("F", "not a postcode", "2"),
    ("G", "SW1A 2ZZ", "2"),
    ("H", "M1 1AE", "4"),
    ("I", "sw1a 2zz", "1"),
]


def homes(path: Path, rows: list[tuple[str, str, str]] = ROWS) -> Path:
    with path.open("w", newline="", encoding="utf-8") as stream:
        out = csv.writer(stream)
        out.writerow(["loan_id", "postcode", "property_type", "bedrooms"])
        out.writerows((loan, postcode, "flat", beds) for loan, postcode, beds in rows)
    return path


def street_charges(served: RunningSandbox) -> Counter[str]:
    return Counter(c.resource for c in served.sandbox.ledger.charges if c.kind == "street-analysis")


def summary(out: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return found


@pytest.mark.slow
def test_each_distinct_postcode_is_charged_once_and_not_again_within_30_days(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """Spellings of one postcode are read and charged once; a second run sends nothing;
    31 days on (sandbox clock and the run's clock) each postcode is read and charged again."""
    source, out = homes(tmp_path / "homes.csv"), tmp_path / "out"
    first = batchval("streets", str(source), "--out", str(out), env=env_for(served))
    assert first.returncode == 0, first.stderr
    assert street_charges(served) == {"SW1A 2AA": 1, "M1 1AE": 1, "LS6 2AB": 1}
    credits = served.sandbox.ledger.credits_charged()
    assert summary(out)["credits_charged"]["total"] == credits > 0
    streets = pl.read_parquet(out / "street_analysis.parquet")
    assert streets["postcode"].to_list() == ["LS6 2AB", "M1 1AE", "SW1A 2AA"]
    assert streets["rows"].to_list() == [1, 2, 3]
    assert int(streets["credits_charged"].sum()) == credits
    calls = len(served.sandbox.ledger.requests)
    again = batchval("streets", str(source), "--out", str(out), env=env_for(served))
    assert again.returncode == 0, again.stderr
    assert len(served.sandbox.ledger.requests) == calls
    assert summary(out)["calls"]["this_invocation"] == 0
    assert pl.read_parquet(out / "street_analysis.parquet").height == 3
    served.sandbox.clock.advance(31 * DAY)
    later_env = env_for(served, BATCHVAL_CLOCK_OFFSET_SECONDS=str(31 * DAY))
    later = batchval("streets", str(source), "--out", str(out), env=later_env)
    assert later.returncode == 0, later.stderr
    assert street_charges(served) == {"SW1A 2AA": 2, "M1 1AE": 2, "LS6 2AB": 2}
    # Both reads' charges, though the second overwrote each postcode's credits.
    assert summary(out)["credits_charged"]["total"] == served.sandbox.ledger.credits_charged()
    status = batchval("status", str(out), "--json", env=later_env)
    total = json.loads(status.stdout)["credits_charged"]["total"]
    assert total == served.sandbox.ledger.credits_charged() == 2 * credits
    # The charges ledger: one fresh line a charged read, the latest balance the account's.
    ledger = pl.read_parquet(out / "charges.parquet")
    assert ledger["kind"].to_list() == ["fresh"] * 6
    assert sorted(ledger["postcode"].to_list()) == sorted(2 * ["SW1A 2AA", "M1 1AE", "LS6 2AB"])
    assert int(ledger["credits"].sum()) == total
    assert summary(out)["last_known_balance"] == served.sandbox.balances()[LIVE.client_id]
    assert summary(out)["credits_charged"]["this_invocation"] == credits


@pytest.mark.slow
def test_refresh_reads_again_free(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """--refresh sends each postcode again within 30 days; the API gives it free."""
    source, out = homes(tmp_path / "homes.csv"), tmp_path / "out"
    assert batchval("streets", str(source), "--out", str(out), env=env_for(served)).returncode == 0
    credits = served.sandbox.ledger.credits_charged()
    calls = len(served.sandbox.ledger.requests)
    done = batchval("streets", str(source), "--out", str(out), "--refresh", env=env_for(served))
    assert done.returncode == 0, done.stderr
    # Three read, one 404, and the call without a token that proves the address first.
    assert len(served.sandbox.ledger.requests) == calls + 5
    assert served.sandbox.ledger.credits_charged() == credits
    assert pl.read_parquet(out / "street_analysis.parquet")["credits_charged"].sum() == 0


@pytest.mark.slow
def test_every_section_is_a_typed_column(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """street_analysis.parquet keeps every section as its nested Arrow type, with
    descriptions in the field metadata."""
    source, out = homes(tmp_path / "homes.csv"), tmp_path / "out"
    assert batchval("streets", str(source), "--out", str(out), env=env_for(served)).returncode == 0
    schema = pq.read_schema(out / "street_analysis.parquet")
    expected = {
        "sold_prices": SOLD_PRICES,
        "crime": CRIME,
        "transport": pa.list_(pa.field("item", STOP)),
        "rental": RENTAL,
        "energy": ENERGY,
        "price_index": PRICE_INDEX,
        "covered_postcodes": pa.list_(pa.string()),
        "generated_at": pa.timestamp("ms", tz="UTC"),
        "credits_charged": pa.int64(),
        "mode": pa.string(),
    }
    for name, kind in expected.items():
        assert schema.field(name).type == kind, name
    by_year = schema.field("sold_prices").type.field("by_year")
    assert by_year.metadata[b"description"] == b"Per year, oldest first."
    rows = pq.read_table(out / "street_analysis.parquet").to_pylist()
    assert {r["mode"] for r in rows} == {"live"}
    assert all(r["covered_postcodes"][0] == r["postcode"] for r in rows)


@pytest.mark.slow
def test_not_found_and_bad_postcodes_are_problems_naming_their_rows(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A 404 postcode is a problem on every input row that asked; a bad postcode is an
    input problem; a bad bedrooms value does not stop a good postcode's street."""
    source, out = homes(tmp_path / "homes.csv"), tmp_path / "out"
    assert (
        batchval(
            "streets", str(source), "--out", str(out), "--join", env=env_for(served)
        ).returncode
        == 0
    )
    problems = pl.read_parquet(out / "problems.parquet")
    found = problems.select("row_number", "loan_id", "stage", "field", "type").rows()
    assert found == [
        (6, "F", "input", "postcode", "invalid_postcode"),
        (7, "G", "api", "postcode", "not-found"),
        (9, "I", "api", "postcode", "not-found"),
    ]
    joined = pl.read_parquet(out / "homes_with_street.parquet")
    assert joined.height == len(ROWS)
    assert joined["loan_id"].to_list() == [row[0] for row in ROWS]
    has_street = joined["covered_postcodes"].is_not_null().to_list()
    assert has_street == [True, True, True, True, True, False, False, True, False]
    status = batchval("status", str(out), env=env_for(served))
    assert status.returncode == 0, status.stdout


@pytest.mark.slow
def test_max_credits_stops_with_75(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """--max-credits below the price of the reads stops the run, resumable."""
    source, out = homes(tmp_path / "homes.csv"), tmp_path / "out"
    done = batchval(
        "streets",
        str(source),
        "--out",
        str(out),
        "--max-credits",
        "30",
        "--concurrency",
        "1",
        env=env_for(served),
    )
    assert done.returncode == 75, done.stderr
    assert "max_credits" in done.stderr
    assert summary(out)["stop"]["reason"] == "max_credits"
    assert served.sandbox.ledger.credits_charged() <= 30


@pytest.mark.slow
def test_daily_limit_stops_with_75_and_not_before(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """At the daily limit: 75 and not_before; again before midnight sends nothing."""
    served.sandbox.account(LIVE.client_id).daily_limit = 1
    shift = clear_of_midnight(served)  # "before midnight" must stay before it
    env = env_for(served, BATCHVAL_CLOCK_OFFSET_SECONDS=str(shift))
    source, out = homes(tmp_path / "homes.csv"), tmp_path / "out"
    first = batchval("streets", str(source), "--out", str(out), "--concurrency", "1", env=env)
    assert first.returncode == 75, first.stderr
    stop = summary(out)["stop"]
    assert stop["reason"] == "daily_limit"
    assert stop["not_before"] is not None
    calls = len(served.sandbox.ledger.requests)
    second = batchval("streets", str(source), "--out", str(out), env=env)
    assert second.returncode == 75
    assert len(served.sandbox.ledger.requests) == calls
    assert batchval("status", str(out), env=env).returncode == 75


@pytest.mark.slow
def test_dry_run_prices_without_the_network(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """--dry-run sends nothing and prices the distinct postcodes not read in 30 days."""
    source, out = homes(tmp_path / "homes.csv"), tmp_path / "out"
    dry = batchval(
        "streets", str(source), "--out", str(tmp_path / "dry"), "--dry-run", env=env_for(served)
    )
    assert dry.returncode == 0, dry.stderr
    assert "would make 4 calls costing 80 credits" in dry.stdout
    assert served.sandbox.ledger.requests == []
    assert batchval("streets", str(source), "--out", str(out), env=env_for(served)).returncode == 0
    calls = len(served.sandbox.ledger.requests)
    priced = batchval("streets", str(source), "--out", str(out), "--dry-run", env=env_for(served))
    assert "would make 0 calls costing 0 credits" in priced.stdout
    later = env_for(served, BATCHVAL_CLOCK_OFFSET_SECONDS=str(31 * DAY))
    stale = batchval("streets", str(source), "--out", str(out), "--dry-run", env=later)
    assert "would make 4 calls costing 80 credits" in stale.stdout
    assert len(served.sandbox.ledger.requests) == calls


@pytest.mark.slow
def test_a_run_dir_and_a_streets_dir_refuse_each_other(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """One DIR holds one command's outputs: each refuses the other's with 64."""
    source = homes(tmp_path / "homes.csv", [("A", "SW1A 2AA", "2")])
    streets_dir, run_dir = tmp_path / "streets", tmp_path / "run"
    assert (
        batchval("streets", str(source), "--out", str(streets_dir), env=env_for(served)).returncode
        == 0
    )
    assert (
        batchval("run", str(source), "--out", str(streets_dir), env=env_for(served)).returncode
        == 64
    )
    assert batchval("run", str(source), "--out", str(run_dir), env=env_for(served)).returncode == 0
    refused = batchval("streets", str(source), "--out", str(run_dir), env=env_for(served))
    assert refused.returncode == 64
    assert "holds a `batchval run`" in refused.stderr


@pytest.mark.slow
def test_kill_9_then_resume_pays_once(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """kill -9 mid-run, then the same command: every postcode read, none charged twice."""
    served.sandbox.set_faults(Faults(latency_ms=40))
    letters = "ABDEFGHJLN"
    rows = [
        (f"L{n}", f"M1 {n % 9 + 1}{letters[n // 9 % 10]}{letters[n % 10]}", "2") for n in range(60)
    ]
    source, out = homes(tmp_path / "homes.csv", rows), tmp_path / "out"
    distinct = len({postcode for _, postcode, _ in rows})
    with subprocess.Popen(
        [BATCHVAL, "streets", str(source), "--out", str(out), "--concurrency", "3"],
        env=env_for(served),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as running:
        wait_until(
            lambda: sum(street_charges(served).values()) >= 10,
            30,
            "ten street analyses charged",
            process=running,
        )
        running.kill()
        running.wait(timeout=10)
    assert 0 < sum(street_charges(served).values()) < distinct
    done = batchval("streets", str(source), "--out", str(out), env=env_for(served))
    assert done.returncode == 0, done.stderr
    charges = street_charges(served)
    assert len(charges) == distinct
    assert set(charges.values()) == {1}
    streets = pl.read_parquet(out / "street_analysis.parquet")
    assert streets.height == distinct
    assert served.sandbox.ledger.credits_charged() == 20 * distinct
    # The killed invocation never recorded its credits: the running total has its reads.
    assert summary(out)["credits_charged"]["total"] == int(streets["credits_charged"].sum()) > 0


@pytest.mark.slow
def test_test_answers_are_read_again_under_live_credentials(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A DIR of test-mode street analyses read with live credentials reads every postcode
    again, live; a DIR never mixes fake and real figures."""
    source, out = homes(tmp_path / "homes.csv", [("A", "SW1A 2AA", "2")]), tmp_path / "out"
    test = batchval("streets", str(source), "--out", str(out), env=env_for(served, TEST))
    assert test.returncode == 0, test.stderr
    assert pl.read_parquet(out / "street_analysis.parquet")["mode"].to_list() == ["test"]
    live = batchval("streets", str(source), "--out", str(out), env=env_for(served))
    assert live.returncode == 0, live.stderr
    assert pl.read_parquet(out / "street_analysis.parquet")["mode"].to_list() == ["live"]
    assert street_charges(served)["SW1A 2AA"] == 2  # one counted test read, one live


@pytest.mark.slow
def test_unusable_input_exits_65_and_a_poor_account_77(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """An input without a postcode column exits 65; an account that cannot pay, 77."""
    bad = tmp_path / "bad.csv"
    bad.write_text("loan_id,property_type\nA,flat\n", encoding="utf-8")
    refused = batchval("streets", str(bad), "--out", str(tmp_path / "a"), env=env_for(served))
    assert refused.returncode == 65, refused.stderr
    assert "postcode" in refused.stderr
    source = homes(tmp_path / "homes.csv")
    poor = batchval(
        "streets",
        str(source),
        "--out",
        str(tmp_path / "b"),
        "--concurrency",
        "1",
        env=env_for(served, POOR),
    )
    assert poor.returncode == 77, poor.stderr
    assert summary(tmp_path / "b")["stop"]["reason"] == "insufficient_credits"


@pytest.mark.slow
def test_a_wrong_base_url_is_64_not_not_found_rows(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A base URL that answers every path with not-found (another API version) stops the
    run with wrong_address (64) before any row is blamed; the right URL then reads all."""
    source, out = homes(tmp_path / "homes.csv"), tmp_path / "out"
    wrong = env_for(served, BATCHVAL_BASE_URL=served.base_url.replace("/v1", "/v2"))
    done = batchval("streets", str(source), "--out", str(out), env=wrong)
    assert done.returncode == 64, done.stderr
    assert "wrong_address" in done.stderr
    problems = pl.read_parquet(out / "problems.parquet")
    assert "not-found" not in problems["type"].to_list()
    again = batchval("streets", str(source), "--out", str(out), env=env_for(served))
    assert again.returncode == 0, again.stderr
    assert sorted(street_charges(served)) == ["LS6 2AB", "M1 1AE", "SW1A 2AA"]


@pytest.mark.slow
def test_reads_past_their_window_stay_in_the_outputs_while_the_api_is_down(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """31 days on with the API down, the postcodes are pending again but their paid
    answers are still written (street_analysis and --join) and still stored."""
    source, out = homes(tmp_path / "homes.csv"), tmp_path / "out"
    first = batchval("streets", str(source), "--out", str(out), "--join", env=env_for(served))
    assert first.returncode == 0, first.stderr
    before = pl.read_parquet(out / "street_analysis.parquet")
    joined = pl.read_parquet(out / "homes_with_street.parquet")["mode"].drop_nulls()
    served.sandbox.clock.advance(31 * DAY)
    served.sandbox.set_faults(Faults(outage_seconds=600))
    config = tmp_path / "run.yaml"
    config.write_text("run:\n  outage_seconds: 1\n  max_attempts: 1\n", encoding="utf-8")
    later_env = env_for(served, BATCHVAL_CLOCK_OFFSET_SECONDS=str(31 * DAY))
    later = batchval(
        "streets",
        str(source),
        "--out",
        str(out),
        "--join",
        "--config",
        str(config),
        env=later_env,
    )
    assert later.returncode == 75, later.stderr
    assert summary(out)["postcodes"]["pending"] == 4  # the not-found one too
    # Calls were made (and failed): none of them read a postcode.
    assert summary(out)["calls"]["this_invocation"] > 0
    assert summary(out)["postcodes"]["read_this_invocation"] == 0
    assert "0 read this time" in later.stdout
    after = pl.read_parquet(out / "street_analysis.parquet")
    assert after.height == before.height == 3
    assert after["credits_charged"].to_list() == before["credits_charged"].to_list()
    again = pl.read_parquet(out / "homes_with_street.parquet")["mode"].drop_nulls()
    assert len(joined) > 0
    assert again.to_list() == joined.to_list()


@pytest.mark.slow
def test_a_complete_run_still_reports_a_stop_a_person_must_act_on(
    served: RunningSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batchval: InProcess
) -> None:
    """Every row done, yet a defect while sending: exit 70 with its stop, not 0."""
    source, out = homes(tmp_path / "homes.csv"), tmp_path / "out"
    assert batchval("streets", str(source), "--out", str(out), env=env_for(served)).returncode == 0
    defect = StopInfo(StopReason.INTERNAL_ERROR, "a defect met while sending")
    monkeypatch.setattr(StreetReading, "send", lambda self: SendOutcome(defect))
    settings = load_settings(None, env_for(served))
    found = Streets(StreetsRequest(input_path=source, place=Place(out), settings=settings)).run()
    assert isinstance(found, StreetsSummary)
    assert found.run.counts.complete
    assert found.exit_code is ExitCode.INTERNAL
    assert summary(out)["exit_code"] == 70
    assert summary(out)["stop"]["reason"] == "internal_error"
    assert batchval("status", str(out), env=env_for(served)).returncode == 70


@pytest.mark.slow
def test_batchval_log_json_gives_json_lines_on_a_terminal(
    served: RunningSandbox, tmp_path: Path
) -> None:
    """BATCHVAL_LOG_JSON=1 asks for JSON log lines even when stderr is a terminal."""
    source, out = homes(tmp_path / "homes.csv"), tmp_path / "out"
    leader, follower = pty.openpty()
    with subprocess.Popen(
        [BATCHVAL, "streets", str(source), "--out", str(out)],
        env=env_for(served, BATCHVAL_LOG_JSON="1"),
        stdout=subprocess.DEVNULL,
        stderr=follower,
    ) as running:
        os.close(follower)
        said = b""
        with contextlib.suppress(OSError):  # EIO once the process has closed the terminal
            while chunk := os.read(leader, 65536):
                said += chunk
        assert running.wait(timeout=60) == 0
    os.close(leader)
    events = []
    for line in said.decode("utf-8", "replace").splitlines():
        with contextlib.suppress(ValueError):
            found = json.loads(line.strip().strip("\r"))
            if isinstance(found, dict):
                events.append(str(found.get("event")))
    assert "streets.ingest.batch" in events


def test_the_api_identity_is_the_settings_one(
    served: RunningSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """streets keeps the identity `settings.api_identity` gives, as run does: one rule."""
    source, out = homes(tmp_path / "homes.csv"), tmp_path / "out"
    monkeypatch.setattr(
        "batchval._internal.streets.runner.api_identity", lambda api: f"who:{api.client_id}"
    )
    settings = load_settings(None, env_for(served))
    found = Streets(StreetsRequest(input_path=source, place=Place(out), settings=settings)).run()
    assert found.exit_code is ExitCode.COMPLETE
    checkpoint = Checkpoint(Database.open(out))
    try:
        assert checkpoint.get("streets.api_identity") == f"who:{LIVE.client_id}"
    finally:
        checkpoint.database.close()
