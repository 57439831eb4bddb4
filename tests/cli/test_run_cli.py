"""`batchval run` and `batchval status` against the sandbox over loopback.

The sandbox runs in this test process (a uvicorn thread). The CLI runs in this process too
(the `batchval` fixture: the exit code, stdout and stderr the process would give), with the
BATCHVAL_* environment pointing at the sandbox; it is a process of its own only where the
behaviour is the process's: a signal, `kill -9`, the lock a second run meets.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest
from support import (
    BATCHVAL,
    LIVE,
    POOR,
    ROOT,
    InProcess,
    assert_accounted,
    assert_paid_once,
    before_midnight,
    clear_of_midnight,
    env_for,
    outputs,
    portfolio,
    run_cli,
    wait_until,
)

from batchval._internal.api import record_of_text
from batchval._internal.sandbox.config import Faults, RateLimit, SandboxConfig
from batchval._internal.sandbox.server import RunningSandbox


@pytest.mark.slow
def test_full_run_completes(served: RunningSandbox, tmp_path: Path, batchval: InProcess) -> None:
    """A live run values every row; duplicates are charged once; the outputs add up."""
    source = portfolio(tmp_path / "book.csv", 60, duplicates=10)
    out = tmp_path / "out"
    done = batchval("run", str(source), "--out", str(out), env=env_for(served))
    assert done.returncode == 0, done.stderr
    assert "complete" in done.stdout
    results, problems, summary = outputs(out)
    assert (results.height, problems.height) == (60, 0)
    assert summary["requests"]["unique"] == 50
    assert summary["credits_charged"]["total"] == 500
    assert served.sandbox.ledger.credits_charged() == 500
    assert set(results["mode"].to_list()) == {"live"}
    assert results["loan_id"].to_list() == [f"LN-{n:05d}" for n in range(60)]
    assert_paid_once(served, out)
    # Each answer read once, as it was settled in the sending's group commits: its record.
    with contextlib.closing(sqlite3.connect(out / "checkpoint.sqlite")) as db:
        kept = db.execute("SELECT answer, record FROM requests WHERE state = 'done'").fetchall()
    assert len(kept) == 50
    assert all(record == record_of_text(answer) for answer, record in kept)
    again = batchval("run", str(source), "--out", str(out), env=env_for(served))
    assert again.returncode == 0
    assert served.sandbox.ledger.credits_charged() == 500


@pytest.mark.slow
def test_bad_rows_become_problems(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """Every bad-row kind of the sample file gets its problem; good rows are valued. The
    file is mostly bad rows (11 of 15), which a run refuses as a whole unless
    `run.max_refused_share` is 0."""
    out = tmp_path / "out"
    source = ROOT / "sample_inputs" / "bad_rows.csv"
    refused = batchval("run", str(source), "--out", str(tmp_path / "o"), env=env_for(served))
    assert refused.returncode == 65, refused.stderr
    config = tmp_path / "config.yaml"
    config.write_text("run: {max_refused_share: 0}\n", encoding="utf-8")
    done = batchval(
        "run", str(source), "--out", str(out), "--config", str(config), env=env_for(served)
    )
    assert done.returncode == 0, done.stderr
    results, problems, _ = outputs(out)
    for row in problems.iter_rows(named=True):
        assert row["loan_id"].startswith("BAD-"), row
        assert row["type"] == row["loan_id"].removeprefix("BAD-"), row
        assert row["stage"] == "input"
    assert all(loan.startswith("GOOD-") for loan in results["loan_id"].to_list())
    total = len(source.read_text(encoding="utf-8").splitlines()) - 1
    assert results.height + problems.height == total


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"", "empty"),
        (b"loan_id,postcode\nA,SW1A 2AA\n", "propertyType"),
        (b"\x00\x01\x02PAR1garbage", ""),
    ],
    ids=["empty", "missing-column", "garbage"],
)
@pytest.mark.slow
def test_unusable_input_exits_65(
    served: RunningSandbox, tmp_path: Path, content: bytes, says: str, batchval: InProcess
) -> None:
    """A file that cannot be used exits 65 with one line and sends nothing."""
    source = tmp_path / "book.csv"
    source.write_bytes(content)
    done = batchval("run", str(source), "--out", str(tmp_path / "out"), env=env_for(served))
    assert done.returncode == 65, done.stderr
    assert says.lower() in done.stderr.lower()
    assert "Traceback" not in done.stderr
    assert served.sandbox.ledger.requests == []


def test_missing_input_exits_65(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """An input path that does not exist exits 65."""
    done = batchval(
        "run", str(tmp_path / "nope.csv"), "--out", str(tmp_path / "o"), env=env_for(served)
    )
    assert done.returncode == 65


@pytest.mark.parametrize(
    "args",
    [["--concurrency", "0"], ["--include", "photos"], ["--bogus"], ["--max-credits", "-1"]],
)
def test_bad_command_line_exits_64(
    served: RunningSandbox, tmp_path: Path, args: list[str], batchval: InProcess
) -> None:
    """Bad options exit 64 without a traceback."""
    source = portfolio(tmp_path / "book.csv", 3)
    done = batchval("run", str(source), "--out", str(tmp_path / "o"), *args, env=env_for(served))
    assert done.returncode == 64, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_partial_api_config_exits_64(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """Some but not all API variables is a configuration error, not a test-mode run."""
    env = env_for(served)
    del env["BATCHVAL_CLIENT_SECRET"]
    source = portfolio(tmp_path / "book.csv", 3)
    done = batchval("run", str(source), "--out", str(tmp_path / "o"), env=env)
    assert done.returncode == 64
    assert "BATCHVAL_CLIENT_SECRET" in done.stderr


@pytest.mark.slow
def test_daily_limit_then_midnight(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """At the daily limit: 75; again before midnight sends nothing; after midnight completes."""
    served.sandbox.account(LIVE.client_id).daily_limit = 20
    shift = clear_of_midnight(served)  # "before midnight" must stay before it
    env = env_for(served, BATCHVAL_CLOCK_OFFSET_SECONDS=str(shift))
    source = portfolio(tmp_path / "book.csv", 50)
    out = tmp_path / "out"
    # A process of its own where the sandbox judges its timing (`early_requests`): a client
    # sharing this interpreter reaches it late on a loaded machine.
    first = run_cli("run", str(source), "--out", str(out), env=env)
    assert first.returncode == 75, first.stderr
    assert outputs(out)[2]["stop"]["reason"] == "daily_limit"
    requests_before = len(served.sandbox.ledger.requests)
    second = batchval("run", str(source), "--out", str(out), env=env)
    assert second.returncode == 75
    assert len(served.sandbox.ledger.requests) == requests_before
    status = batchval("status", str(out), env=env)
    assert "daily limit" in status.stdout
    to_midnight = served.sandbox.clock.seconds_to_midnight() + 5
    served.sandbox.clock.advance(to_midnight)
    served.sandbox.account(LIVE.client_id).daily_limit = 100
    later = run_cli(
        "run",
        str(source),
        "--out",
        str(out),
        env=env_for(served, BATCHVAL_CLOCK_OFFSET_SECONDS=str(shift + to_midnight)),
    )
    assert later.returncode == 0, later.stderr
    assert served.sandbox.ledger.early_requests() == []
    assert_accounted(out, 50)
    assert_paid_once(served, out)


@pytest.mark.parametrize("config", [SandboxConfig(rate_limit=RateLimit(15.0, 5))])
@pytest.mark.slow
def test_short_term_limit_is_never_jumped(served: RunningSandbox, tmp_path: Path) -> None:
    """With a short-term limit, no request is sent before a Retry-After it was given (a
    process of its own: the sandbox in this one judges its timing)."""
    source = portfolio(tmp_path / "book.csv", 80)
    out = tmp_path / "out"
    done = run_cli("run", str(source), "--out", str(out), env=env_for(served))
    assert done.returncode == 0, done.stderr
    assert served.sandbox.ledger.deadlines, "the limit was never reached: the test proves nothing"
    assert served.sandbox.ledger.early_requests() == []
    assert_accounted(out, 80)


@pytest.mark.slow
def test_insufficient_credits_then_top_up(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """Credits run out: 77 with the rest untouched; after a top-up the run completes."""
    source = portfolio(tmp_path / "book.csv", 10)
    out = tmp_path / "out"
    first = batchval(
        "run", str(source), "--out", str(out), "--concurrency", "1", env=env_for(served, POOR)
    )
    assert first.returncode == 77, first.stderr
    results, problems, summary = outputs(out)
    assert (results.height, problems.height) == (2, 0)
    assert summary["rows"]["pending"] == 8
    assert "fix the account" in summary["next_action"]
    served.sandbox.top_up(POOR.client_id, 1_000)
    second = batchval("run", str(source), "--out", str(out), env=env_for(served, POOR))
    assert second.returncode == 0, second.stderr
    assert served.sandbox.ledger.keys_charged_twice() == []
    assert served.sandbox.ledger.credits_charged(POOR.client_id) == 100
    assert_accounted(out, 10)


@pytest.mark.slow
def test_blocked_account_exits_77(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A blocked account stops the run at once with 77, no problem rows."""
    served.sandbox.account(LIVE.client_id).blocked = True
    source = portfolio(tmp_path / "book.csv", 10)
    done = batchval("run", str(source), "--out", str(tmp_path / "out"), env=env_for(served))
    assert done.returncode == 77
    assert outputs(tmp_path / "out")[1].height == 0


@pytest.mark.slow
def test_wrong_secret_exits_77_and_is_never_shown(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """Refused credentials exit 77; the secret is in no output, log or file."""
    secret = "wrong-secret-do-not-print-0451"
    env = env_for(served, BATCHVAL_CLIENT_SECRET=secret)
    source = portfolio(tmp_path / "book.csv", 5)
    out = tmp_path / "out"
    done = batchval("run", str(source), "--out", str(out), env=env)
    assert done.returncode == 77, done.stderr
    assert secret not in done.stdout + done.stderr
    for path in out.iterdir():
        assert secret.encode() not in path.read_bytes(), path


@pytest.mark.slow
def test_secret_and_tokens_never_reach_outputs(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """After a full run, neither the secret nor a token is in the logs or any file."""
    source = portfolio(tmp_path / "book.csv", 5)
    out = tmp_path / "out"
    done = batchval("run", str(source), "--out", str(out), env=env_for(served))
    assert done.returncode == 0
    tokens = list(served.sandbox._tokens)
    assert tokens
    for needle in [LIVE.client_secret, *tokens]:
        assert needle not in done.stdout + done.stderr
        for path in out.iterdir():
            assert needle.encode() not in path.read_bytes(), path


@pytest.mark.slow
def test_dry_run_prices_without_network(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """--dry-run validates, writes problems, prints the cost and sends nothing."""
    source = portfolio(tmp_path / "book.csv", 40, duplicates=5)
    out = tmp_path / "out"
    done = batchval("run", str(source), "--out", str(out), "--dry-run", env=env_for(served))
    assert done.returncode == 0, done.stderr
    assert "35 calls" in done.stdout
    assert "350 credits" in done.stdout
    assert served.sandbox.ledger.requests == []
    assert (out / "problems.parquet").exists()
    assert not (out / "checkpoint.sqlite").exists()


@pytest.mark.slow
def test_changed_input_is_refused_unless_accepted(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """Another input in the same DIR exits 64; --accept-changes keeps paid answers."""
    source = portfolio(tmp_path / "book.csv", 10)
    out = tmp_path / "out"
    assert batchval("run", str(source), "--out", str(out), env=env_for(served)).returncode == 0
    portfolio(source, 12)
    refused = batchval("run", str(source), "--out", str(out), env=env_for(served))
    assert refused.returncode == 64
    assert "--accept-changes" in refused.stderr
    accepted = batchval(
        "run", str(source), "--out", str(out), "--accept-changes", env=env_for(served)
    )
    assert accepted.returncode == 0, accepted.stderr
    assert served.sandbox.ledger.credits_charged() == 120
    assert_accounted(out, 12)


@pytest.mark.slow
def test_a_refusal_of_changed_settings_names_what_changed(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """The refusal says which setting changed, with its old and new values, and the
    input's sha256 when the file changed; never the secret."""
    source = portfolio(tmp_path / "book.csv", 4)
    out = tmp_path / "out"
    assert batchval("run", str(source), "--out", str(out), env=env_for(served)).returncode == 0
    config = tmp_path / "c.yaml"
    config.write_text("run: {include: [commentary]}\ninput: {delimiter: ','}\n", "utf-8")
    refused = batchval("run", str(source), "--out", str(out), "--config", str(config),
                      env=env_for(served))  # fmt: skip
    assert refused.returncode == 64
    assert 'include: [] -> ["commentary"]' in refused.stderr
    assert 'delimiter: null -> ","' in refused.stderr
    assert "input sha256" not in refused.stderr  # the file did not change
    assert "encoding" not in refused.stderr  # nor did it
    portfolio(source, 5)
    refused = batchval("run", str(source), "--out", str(out), env=env_for(served))
    assert refused.returncode == 64
    assert "input sha256: " in refused.stderr
    assert env_for(served)["BATCHVAL_CLIENT_SECRET"] not in refused.stderr


@pytest.mark.slow
def test_run_id_is_kept(served: RunningSandbox, tmp_path: Path, batchval: InProcess) -> None:
    """--run-id names the run; another id for the same DIR is refused."""
    source = portfolio(tmp_path / "book.csv", 3)
    out = tmp_path / "out"
    first = batchval(
        "run", str(source), "--out", str(out), "--run-id", "night-1", env=env_for(served)
    )
    assert first.returncode == 0
    assert outputs(out)[2]["run_id"] == "night-1"
    other = batchval(
        "run", str(source), "--out", str(out), "--run-id", "night-2", env=env_for(served)
    )
    assert other.returncode == 64


@pytest.mark.slow
def test_max_credits(served: RunningSandbox, tmp_path: Path, batchval: InProcess) -> None:
    """--max-credits caps this invocation's spend; the rest stay pending (75)."""
    source = portfolio(tmp_path / "book.csv", 10)
    out = tmp_path / "out"
    done = batchval(
        "run", str(source), "--out", str(out), "--max-credits", "40", env=env_for(served)
    )
    assert done.returncode == 75
    assert served.sandbox.ledger.credits_charged() == 40
    assert outputs(out)[2]["rows"]["pending"] == 6


def streamed(tmp_path: Path) -> tuple[Path, list[str]]:
    """60 rows, the last 10 repeating the first 10, read in batches of 7."""
    config = tmp_path / "config.yaml"
    config.write_text("input: {batch_rows: 7}\n", encoding="utf-8")
    return portfolio(tmp_path / "book.csv", 60, duplicates=10), ["--config", str(config)]


@pytest.mark.slow
def test_a_run_sends_while_it_stores_its_input(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A fresh run stores its first rows, sends, and stores the rest as the requests run
    out: every row is valued and accounted, duplicates across batches charged once."""
    source, args = streamed(tmp_path)
    out = tmp_path / "out"
    done = batchval("run", str(source), "--out", str(out), *args, env=env_for(served))
    assert done.returncode == 0, done.stderr
    assert_accounted(out, 60)
    assert_paid_once(served, out)
    assert outputs(out)[2]["requests"]["unique"] == 50


@pytest.mark.slow
def test_a_run_stopped_while_storing_counts_every_row(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """Stopped before its input is all stored, a run stores the rest before it counts:
    every row is in the summary, and the next run finishes it."""
    source, args = streamed(tmp_path)
    out = tmp_path / "out"
    first = batchval(
        "run", str(source), "--out", str(out), *args, "--max-credits", "30", env=env_for(served)
    )
    assert first.returncode == 75, first.stderr
    summary = outputs(out)[2]
    # 3 calls value 6 rows: the first three and their repeats, stored after the stop.
    assert (summary["rows"]["total"], summary["rows"]["valued"]) == (60, 6)
    assert summary["rows"]["pending"] == 54
    again = batchval("run", str(source), "--out", str(out), *args, env=env_for(served))
    assert again.returncode == 0, again.stderr
    assert_accounted(out, 60)
    assert_paid_once(served, out)


def wait_for_calls(served: RunningSandbox, count: int, timeout: float = 30) -> None:
    ledger = served.sandbox.ledger
    wait_until(lambda: len(ledger.charges) >= count, timeout, f"{count} charges of the run")


@pytest.mark.slow
def test_second_run_on_the_same_dir_exits_75(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """While a run holds DIR, another exits 75 and sends nothing."""
    served.sandbox.set_faults(Faults(latency_ms=100))
    # About 7 s of sending: long enough for a second process to start on a loaded machine.
    source = portfolio(tmp_path / "book.csv", 150)
    out = tmp_path / "out"
    with subprocess.Popen(
        [BATCHVAL, "run", str(source), "--out", str(out), "--concurrency", "2"],
        env=env_for(served),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as first:
        wait_for_calls(served, 2)
        second = batchval("run", str(source), "--out", str(out), env=env_for(served))
        assert second.returncode == 75
        assert "dir_locked: another batchval run" in second.stderr
        assert first.wait(timeout=60) == 0
    # One call per row, all the first run's: the second sent nothing (no fault, no retry).
    assert len(served.sandbox.ledger.requests) == 150
    assert served.sandbox.ledger.keys_charged_twice() == []
    assert_accounted(out, 150)


@pytest.mark.slow
def test_sigterm_stops_gently_and_resumes(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """SIGTERM: in-flight calls finish, outputs are written, exit 75; then it completes."""
    served.sandbox.set_faults(Faults(latency_ms=50))
    source = portfolio(tmp_path / "book.csv", 200)
    out = tmp_path / "out"
    with subprocess.Popen(
        [BATCHVAL, "run", str(source), "--out", str(out), "--concurrency", "4"],
        env=env_for(served),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as running:
        wait_for_calls(served, 10)
        running.send_signal(signal.SIGTERM)
        _, stderr = running.communicate(timeout=30)
        assert running.returncode == 75, stderr
    summary = outputs(out)[2]
    assert summary["stop"]["reason"] == "signal"
    assert 0 < summary["rows"]["valued"] < 200
    served.sandbox.set_faults(Faults())
    done = batchval("run", str(source), "--out", str(out), env=env_for(served))
    assert done.returncode == 0, done.stderr
    assert_accounted(out, 200)
    assert_paid_once(served, out)


@pytest.mark.slow
def test_kill_9_then_resume_pays_once(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """kill -9 mid-run, then the same command: complete, nothing paid twice or lost."""
    served.sandbox.set_faults(Faults(latency_ms=30))
    source = portfolio(tmp_path / "book.csv", 300)
    out = tmp_path / "out"
    with subprocess.Popen(
        [BATCHVAL, "run", str(source), "--out", str(out), "--concurrency", "6"],
        env=env_for(served),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as running:
        wait_for_calls(served, 60)
        running.kill()
        running.wait(timeout=10)
    paid = len(served.sandbox.ledger.charges)
    assert 0 < paid < 300
    done = batchval("run", str(source), "--out", str(out), env=env_for(served))
    assert done.returncode == 0, done.stderr
    assert_accounted(out, 300)
    assert_paid_once(served, out)
    assert served.sandbox.ledger.credits_charged() == 3_000


@pytest.mark.slow
def test_status_reads_a_run(served: RunningSandbox, tmp_path: Path, batchval: InProcess) -> None:
    """status says what is done and what to do next; a DIR with no run exits 64."""
    source = portfolio(tmp_path / "book.csv", 4)
    out = tmp_path / "out"
    batchval("run", str(source), "--out", str(out), env=env_for(served))
    done = batchval("status", str(out), env=env_for(served))
    assert done.returncode == 0
    assert "complete" in done.stdout
    assert "4 valued" in done.stdout
    empty = batchval("status", str(tmp_path / "nothing"), env=env_for(served))
    assert empty.returncode == 64


@pytest.mark.slow
def test_embedded_sandbox_when_nothing_is_configured(tmp_path: Path, batchval: InProcess) -> None:
    """With no API configured the run uses the embedded sandbox and says so."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATCHVAL_")}
    source = portfolio(tmp_path / "book.csv", 5)
    out = tmp_path / "out"
    done = batchval("run", str(source), "--out", str(out), env=env)
    assert done.returncode == 0, done.stderr
    assert "TEST mode" in done.stderr
    results, _, summary = outputs(out)
    assert set(results["mode"].to_list()) == {"test"}
    assert summary["mode"] == "test"


@pytest.mark.slow
def test_sigterm_while_reading_exits_75(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A SIGTERM during a long ingest stops between batches with 75; the rerun completes."""
    source = portfolio(tmp_path / "book.csv", 4_000)
    config = tmp_path / "config.yaml"
    config.write_text("input: {batch_rows: 100}\n", encoding="utf-8")
    out = tmp_path / "out"
    args = ["run", str(source), "--out", str(out), "--config", str(config), "--max-credits", "0"]
    with subprocess.Popen(
        [BATCHVAL, *args], env=env_for(served), stderr=subprocess.PIPE, text=True
    ) as running:
        assert running.stderr is not None
        for line in running.stderr:
            if '"valuations.ingest.batch"' in line:
                running.send_signal(signal.SIGTERM)
                break
        _, stderr = running.communicate(timeout=60)
    assert running.returncode == 75, stderr
    assert "Traceback" not in stderr
    assert served.sandbox.ledger.requests == []
    assert "signal: interrupted by SIGTERM while reading the input" in stderr  # not the cap
    done = batchval(*args, env=env_for(served))
    assert done.returncode == 75  # --max-credits 0: read everything, send nothing
    assert outputs(out)[2]["rows"]["total"] == 4_000


@pytest.mark.slow
@pytest.mark.parametrize("during", [".batchval.lock", "checkpoint.sqlite"])
def test_sigterm_within_one_long_read_is_honoured_at_once(
    served: RunningSandbox, tmp_path: Path, during: str
) -> None:
    """SIGTERM while the input is being opened (once DIR's lock is there), or while its
    one batch of 600,000 rows is being read (once the checkpoint is there): seconds of
    work either way, and 75 at once, the read left behind, not after it: no row stored,
    no batch logged, the process ended cleanly (issue 54, part 3)."""
    source = portfolio(tmp_path / "book.csv", 600_000)
    config = tmp_path / "config.yaml"
    config.write_text("input: {batch_rows: 1000000}\n", encoding="utf-8")
    out = tmp_path / "out"
    args = ["run", str(source), "--out", str(out), "--config", str(config), "--max-credits", "0"]
    with subprocess.Popen(
        [BATCHVAL, *args], env=env_for(served), stderr=subprocess.PIPE, text=True
    ) as running:
        wait_until(lambda: (out / during).exists(), 60, f"the run to make {during}")
        running.send_signal(signal.SIGTERM)
        _, stderr = running.communicate(timeout=120)
    assert running.returncode == 75, stderr
    assert "interrupted by SIGTERM while reading the input" in stderr
    assert '"valuations.ingest.batch"' not in stderr
    assert "Traceback" not in stderr
    assert "Fatal Python error" not in stderr
    if during == "checkpoint.sqlite":  # the run's memory made, and no row in it
        with contextlib.closing(sqlite3.connect(out / during)) as db:
            assert db.execute("SELECT COUNT(*) FROM rows").fetchone() == (0,)
    assert served.sandbox.ledger.requests == []


@pytest.mark.slow
def test_lender_extract_with_its_mapping(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """The lender-style extract (other names, codes, BOM, semicolons) values with its config."""
    source = ROOT / "sample_inputs" / "lender_extract.csv"
    out = tmp_path / "out"
    config = ROOT / "configs" / "lender_extract.yaml"
    done = batchval(
        "run", str(source), "--out", str(out), "--config", str(config), env=env_for(served)
    )
    assert done.returncode == 0, done.stderr
    results, problems, _ = outputs(out)
    assert problems.height == 0, problems.to_dicts()[:3]
    assert results.height == 300
    assert {"Account No", "Branch Code"} <= set(results.columns)
    assert results["commentary"].null_count() == 0  # the config asks for commentary
    assert_paid_once(served, out)


@pytest.mark.slow
def test_wait_for_midnight_carries_on(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """With --wait-for-midnight, the run sleeps through the daily limit and completes."""
    shift = before_midnight(served, 8)  # the sandbox's day ends 8 s from now
    served.sandbox.account(LIVE.client_id).daily_limit = 5
    source = portfolio(tmp_path / "book.csv", 8)
    out = tmp_path / "out"
    done = batchval(
        "run",
        str(source),
        "--out",
        str(out),
        "--wait-for-midnight",
        "--concurrency",
        "1",
        env=env_for(served, BATCHVAL_CLOCK_OFFSET_SECONDS=str(shift)),
    )
    assert done.returncode == 0, done.stderr
    assert "engine.sending.daily_limit.sleeping" in done.stderr
    assert sorted(served.sandbox.ledger.calls_per_day().values()) == [3, 5]
    assert served.sandbox.ledger.early_requests() == []
    assert_accounted(out, 8)
