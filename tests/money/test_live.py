"""`--live` and `run.live` (money/live): `run`, `streets` and `verify` refuse with 64 before
anything is sent unless a live API is configured; in-process, against the served sandbox
where credentials are needed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import LIVE, TEST, env_for, portfolio, run_in_process

from batchval._internal.api import Credentials
from batchval._internal.api.auth import AccessToken
from batchval._internal.money import live
from batchval._internal.outcome import ExitCode, RunRefusedError
from batchval._internal.sandbox.server import RunningSandbox
from batchval._internal.settings import ApiSettings, load_settings

COMMANDS = ("run", "streets", "verify")


def _args(command: str, book: Path, out: Path) -> list[str]:
    if command == "verify":
        return ["verify", str(out)]
    return [command, str(book), "--out", str(out)]


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> Any:
    def call(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
        return run_in_process(*args, env=env or {}, monkeypatch=monkeypatch, capsys=capsys)

    return call


@pytest.mark.parametrize("command", COMMANDS)
def test_live_without_an_api_refuses_64_and_names_the_api(
    cli: Any, tmp_path: Path, command: str
) -> None:
    """No API configured: 64, `refused`, the message names the API and the embedded
    sandbox; DIR is never made (no summary, no checkpoint), so nothing was valued."""
    book, out = portfolio(tmp_path / "book.csv", 3), tmp_path / "out"
    code, stdout, stderr = cli(*_args(command, book, out), "--live")
    assert code == ExitCode.USAGE
    assert stdout == ""
    assert "batchval: refused: --live (run.live): no API is configured" in stderr
    assert "BATCHVAL_BASE_URL" in stderr
    assert "embedded sandbox is test mode" in stderr
    assert not out.exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_run_live_in_the_config_is_the_flag(cli: Any, tmp_path: Path, command: str) -> None:
    book, out = portfolio(tmp_path / "book.csv", 3), tmp_path / "out"
    config = tmp_path / "live.yaml"
    config.write_text(yaml.safe_dump({"run": {"live": True}}))
    code, _, stderr = cli(*_args(command, book, out), "--config", str(config))
    assert code == ExitCode.USAGE
    assert "no API is configured" in stderr
    assert not out.exists()


def test_run_live_must_be_a_boolean(tmp_path: Path) -> None:
    config = tmp_path / "live.yaml"
    config.write_text("run: {live: 'yes'}\n")
    with pytest.raises(ValueError, match=r"run\.live must be true or false"):
        load_settings(config, {})
    config.write_text("run: {live: false}\n")
    assert load_settings(config, {}, live=True).run.live  # the flag only turns it on
    assert not load_settings(config, {}).run.live


def test_a_dry_run_under_live_refuses_the_missing_api_as_the_run_would(
    cli: Any, tmp_path: Path
) -> None:
    """A nightly recipe tried dry fails where the real one would: no API, 64; nothing
    priced, no dry_run.json."""
    book, out = portfolio(tmp_path / "book.csv", 3), tmp_path / "out"
    code, _, stderr = cli("run", str(book), "--out", str(out), "--live", "--dry-run")
    assert code == ExitCode.USAGE
    assert "no API is configured" in stderr
    assert not out.exists()


def test_a_dry_run_under_live_fetches_no_token(
    cli: Any, served: RunningSandbox, tmp_path: Path
) -> None:
    """A dry run promises no network: with an API configured it prices, and the token
    URL is not asked (so test credentials are found by the real run, or by `check`)."""
    book, out = portfolio(tmp_path / "book.csv", 3), tmp_path / "out"
    args = ("run", str(book), "--out", str(out), "--live", "--dry-run")
    code, stdout, _ = cli(*args, env=env_for(served, TEST))
    assert code == ExitCode.COMPLETE, stdout
    assert "would make 3 calls" in stdout
    assert served.sandbox._tokens == {}
    assert served.sandbox.ledger.requests == []


def _valued(cli: Any, served: RunningSandbox, tmp_path: Path, credentials: Credentials) -> Path:
    """A DIR valued with `credentials` (for verify), the ledger emptied after it."""
    book, out = portfolio(tmp_path / "book.csv", 3), tmp_path / "out"
    code, stdout, stderr = cli(
        "run", str(book), "--out", str(out), env=env_for(served, credentials)
    )
    assert code == ExitCode.COMPLETE, stdout + stderr
    served.sandbox.ledger.requests.clear()
    served.sandbox._tokens.clear()
    return out


def _refused_live(
    cli: Any, served: RunningSandbox, tmp_path: Path, command: str, credentials: Credentials
) -> tuple[str, Path, list[str]]:
    """`command --live` under `credentials`, refused 64 with one token fetched (free) and no
    call to the API: its stderr, DIR and DIR's files before it."""
    book = portfolio(tmp_path / "book.csv", 3)
    out = _valued(cli, served, tmp_path, credentials) if command == "verify" else tmp_path / "out"
    before = sorted(p.name for p in out.iterdir()) if out.exists() else []
    code, stdout, stderr = cli(
        *_args(command, book, out), "--live", env=env_for(served, credentials)
    )
    assert code == ExitCode.USAGE, stdout + stderr
    assert len(served.sandbox._tokens) == 1
    assert served.sandbox.ledger.requests == []
    return stderr, out, before


@pytest.mark.parametrize("command", COMMANDS)
def test_live_with_test_credentials_refuses_64_and_sends_nothing(
    cli: Any, served: RunningSandbox, tmp_path: Path, command: str
) -> None:
    """An API whose token comes back with the test scope is not live: one token fetched
    (free), then 64 naming the test credentials; no call to the API, nothing charged, no
    summary written."""
    stderr, out, before = _refused_live(cli, served, tmp_path, command, TEST)
    assert "batchval: refused: --live (run.live): client id 'sandbox-test' has test" in stderr
    assert "partners:test" in stderr
    assert served.sandbox.ledger.credits_charged() == 0
    assert (sorted(p.name for p in out.iterdir()) if out.exists() else []) == before


@pytest.mark.parametrize("command", ["run", "streets", "verify"])
def test_live_against_batchvals_sandbox_refuses_64_and_sends_nothing(
    cli: Any, served: RunningSandbox, tmp_path: Path, command: str
) -> None:
    """The sandbox's token says it is batchval's sandbox: its figures are fake whatever
    the scope, so even its live-scope login is refused, one token fetched, nothing sent."""
    stderr, _, _ = _refused_live(cli, served, tmp_path, command, LIVE)
    assert "is batchval's sandbox (its token says so): fake figures, never live" in stderr
    assert "--rehearsal" in stderr


@pytest.fixture
def rehearsal(served: RunningSandbox) -> Iterator[RunningSandbox]:
    """The served sandbox as `batchval sandbox --rehearsal` serves it, for one test."""
    served.sandbox.config.rehearsal = True
    try:
        yield served
    finally:
        served.sandbox.config.rehearsal = False


def test_live_against_a_rehearsal_runs_in_rehearsal_mode(
    cli: Any, rehearsal: RunningSandbox, tmp_path: Path
) -> None:
    """Started with --rehearsal: run values and is charged (the sandbox's fake credits),
    streets reads, verify reads back, each exits 0, and what they write says `rehearsal`,
    never `live`."""
    served = rehearsal
    book, out = portfolio(tmp_path / "book.csv", 3), tmp_path / "out"
    env = env_for(served, LIVE)
    code, stdout, stderr = cli("run", str(book), "--out", str(out), "--live", env=env)
    assert code == ExitCode.COMPLETE, stdout + stderr
    assert "(rehearsal mode, new run)" in stdout
    assert json.loads((out / "summary.json").read_text())["mode"] == "rehearsal"
    assert json.loads((out / "manifest.json").read_text())["mode"] == "rehearsal"
    assert served.sandbox.ledger.credits_charged(LIVE.client_id) == 30
    code, stdout, stderr = cli("verify", str(out), "--live", env=env)
    assert code == ExitCode.COMPLETE, stdout + stderr
    streets = tmp_path / "streets"
    code, stdout, stderr = cli("streets", str(book), "--out", str(streets), "--live", env=env)
    assert code == ExitCode.COMPLETE, stdout + stderr
    assert json.loads((streets / "summary.json").read_text())["mode"] == "rehearsal"
    code, stdout, stderr = cli("report", str(out), env=env)
    assert "<b>Rehearsal</b>" in (out / "report.html").read_text()


def test_a_rehearsal_with_test_credentials_is_still_refused(
    cli: Any, rehearsal: RunningSandbox, tmp_path: Path
) -> None:
    book, out = portfolio(tmp_path / "book.csv", 3), tmp_path / "out"
    code, _, stderr = cli(
        "run", str(book), "--out", str(out), "--live", env=env_for(rehearsal, TEST)
    )
    assert code == ExitCode.USAGE
    assert "has test credentials" in stderr


def test_a_token_url_that_refuses_is_the_run_s_own_stop(
    cli: Any, served: RunningSandbox, tmp_path: Path
) -> None:
    """--live refuses only what it knows is not live: credentials the token URL refuses
    are the run's `credentials_refused` (77), as without --live."""
    book, out = portfolio(tmp_path / "book.csv", 3), tmp_path / "out"
    wrong = Credentials(LIVE.client_id, "not-the-secret")
    code, stdout, stderr = cli(
        "run", str(book), "--out", str(out), "--live", env=env_for(served, wrong)
    )
    assert code == ExitCode.ACCOUNT, stdout + stderr
    assert "credentials_refused" in stderr
    assert served.sandbox.ledger.credits_charged() == 0


def test_a_token_answer_without_a_scope_is_let_through(monkeypatch: pytest.MonkeyPatch) -> None:
    """The API's description shows no scope in the token answer: none named is not a
    refusal (the answers' mode then says test or live)."""
    api = ApiSettings("https://api.example/partners/v1", "https://auth.example", "id", "secret")

    async def no_scope(_: ApiSettings) -> AccessToken:
        return AccessToken("t", 0.0)  # another API's answer: no scope, no sandbox's mark

    monkeypatch.setattr(live, "live_token", no_scope)
    assert live.insist_on_live(api) == "live"
    with pytest.raises(RunRefusedError, match="no API is configured"):
        live.insist_on_live(None)


@pytest.mark.parametrize("command", ["run", "streets"])
def test_a_test_answer_under_live_stops_the_run_unkept(
    cli: Any, served: RunningSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """Test credentials whose token names no scope pass the check; the first answer, in
    test mode, stops the run (64, mode_mixed) and is not kept: a --live night never ends 0
    on fake figures."""

    async def no_scope(_: ApiSettings) -> AccessToken:
        return AccessToken("t", 0.0)  # another API's answer: no scope, no sandbox's mark

    monkeypatch.setattr(live, "live_token", no_scope)
    book, out = portfolio(tmp_path / "book.csv", 3), tmp_path / "out"
    code, stdout, stderr = cli(
        command, str(book), "--out", str(out), "--live", env=env_for(served, TEST)
    )
    assert code == ExitCode.USAGE, stdout + stderr
    assert "mode_mixed" in stderr
    assert "answered in test mode (test credentials)" in stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rows"]["valued"] == 0
    assert summary["mode"] == "live"  # the DIR's: no test answer was kept
    assert served.sandbox.ledger.credits_charged() == 0
