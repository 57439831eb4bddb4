"""`batchval check` at the command line (in this process: the `batchval` fixture): one line
per check, a final line, the right exit code, and never a charge."""

from __future__ import annotations

import datetime as dt
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hostile import (
    NO_SUCH_HOST,
    HostileProxy,
    Rules,
    closed_port_url,
    no_such_name,
    serve_proxy,
    serve_tls,
)
from support import LIVE, TEST, InProcess, Ran, env_for, portfolio

from batchval._internal.admin.check import _ask_api
from batchval._internal.api import PartnerClient
from batchval._internal.api.auth import Credentials
from batchval._internal.outcome import ExitCode
from batchval._internal.sandbox.app import API_PREFIX
from batchval._internal.sandbox.server import RunningSandbox
from batchval._internal.settings import ApiSettings


def lines(done: Ran) -> list[str]:
    return done.stdout.strip().splitlines()


def failing(done: Ran, name: str) -> str:
    """The one FAIL line, which must be the check named, and the final line repeats it."""
    shown = lines(done)
    fails = [line for line in shown if line.startswith("FAIL")]
    assert len(fails) == 1, shown
    assert fails[0].startswith(f"FAIL  {name}: "), shown
    assert shown[-1].startswith(f"check: {name}: "), shown
    assert done.stderr.strip().splitlines()[-1] == f"batchval: {shown[-1]}"
    return fails[0]


@pytest.fixture
def proxy(served: RunningSandbox) -> Iterator[HostileProxy]:
    with serve_proxy(served.auth_url) as running:
        yield running


@pytest.mark.slow
def test_good_sandbox_passes_and_costs_nothing(served: RunningSandbox, batchval: InProcess) -> None:
    """Against a good live-like sandbox: every check ok, exit 0, no valuation, no charge."""
    done = batchval("check", env=env_for(served, LIVE))
    assert done.returncode == 0, done.stderr
    shown = lines(done)
    assert [line.split(":")[0] for line in shown] == [
        "ok    settings",
        "ok    token",
        "ok    api",
        "ok    mode",
        "ok    balance",
        "check",
    ]
    assert "live: the token answer's scope is partners:read" in shown[3]
    assert "unknown until the first paid call" in shown[4]
    assert shown[-1] == "check: ok (exit 0)"
    assert served.sandbox.ledger.charges == []
    assert served.sandbox.ledger.credits_charged() == 0
    assert LIVE.client_secret not in done.stdout + done.stderr


@pytest.mark.slow
def test_test_credentials_say_test_mode(served: RunningSandbox, batchval: InProcess) -> None:
    """The sandbox's test credential is reported as test mode, never charged."""
    done = batchval("check", env=env_for(served, TEST))
    assert done.returncode == 0, done.stderr
    shown = lines(done)
    assert shown[3].startswith("ok    mode: test: the token answer's scope is partners:test")
    assert "documented test credential" in shown[3]
    assert shown[4] == "ok    balance: none: test mode is never charged"


@pytest.mark.slow
def test_wrong_credentials_exit_77(served: RunningSandbox, batchval: InProcess) -> None:
    """A secret the token URL refuses: exit 77, one line naming the refusal."""
    wrong = Credentials(LIVE.client_id, "not-the-secret")
    done = batchval("check", env=env_for(served, wrong))
    assert done.returncode == 77, done.stdout + done.stderr
    line = failing(done, "token")
    assert "credentials refused" in line
    assert "401" in line
    assert "not-the-secret" not in done.stdout + done.stderr


@pytest.mark.parametrize(
    "base", ["/partners/v2", API_PREFIX + "/valuations"], ids=["other-version", "too-deep"]
)
@pytest.mark.slow
def test_wrong_base_url_exits_64(served: RunningSandbox, base: str, batchval: InProcess) -> None:
    """A base URL where the API's path is not served: exit 64 naming the URL."""
    env = env_for(served, LIVE, BATCHVAL_BASE_URL=served.auth_url + base)
    done = batchval("check", env=env)
    assert done.returncode == 64, done.stdout + done.stderr
    line = failing(done, "api")
    assert "wrong address" in line
    assert served.auth_url + base in line


@pytest.mark.slow
def test_wrong_token_url_exits_64(served: RunningSandbox, batchval: InProcess) -> None:
    """A token URL that answers 404: exit 64, the auth URL named."""
    env = env_for(served, LIVE, BATCHVAL_AUTH_URL=served.auth_url + "/nope")
    done = batchval("check", env=env)
    assert done.returncode == 64, done.stdout + done.stderr
    assert "wrong address" in failing(done, "token")


@pytest.mark.slow
def test_html_site_at_the_base_url_exits_64(
    served: RunningSandbox, proxy: HostileProxy, batchval: InProcess
) -> None:
    """A web site (an HTML page with 200) where the API should be: exit 64."""
    proxy.rules = Rules(html_share=1.0, html_status=200)
    env = env_for(served, LIVE, BATCHVAL_BASE_URL=proxy.url + API_PREFIX)
    done = batchval("check", env=env)
    assert done.returncode == 64, done.stdout + done.stderr
    assert "text/html" in failing(done, "api")


@pytest.mark.slow
def test_unreachable_host_exits_75(batchval: InProcess) -> None:
    """Nothing listens at the address: exit 75 (try again later), one line."""
    root = closed_port_url()
    env = {
        "BATCHVAL_BASE_URL": root + API_PREFIX,
        "BATCHVAL_AUTH_URL": root,
        "BATCHVAL_CLIENT_ID": LIVE.client_id,
        "BATCHVAL_CLIENT_SECRET": LIVE.client_secret,
        "PATH": "/usr/bin:/bin",
    }
    done = batchval("check", env=env)
    assert done.returncode == 75, done.stdout + done.stderr
    line = failing(done, "token")
    assert "unreachable" in line
    assert f"connection refused by {root.removeprefix('http://')}" in line


@pytest.mark.parametrize("setting", ["BATCHVAL_BASE_URL", "BATCHVAL_AUTH_URL"])
@pytest.mark.slow
def test_a_host_name_that_does_not_exist_exits_64(
    served: RunningSandbox, setting: str, batchval: InProcess
) -> None:
    """A base or token URL whose host name does not resolve at all: exit 64 within
    seconds, the host named, on the line of the check that met it."""
    if not no_such_name():
        pytest.skip(f"this resolver does not say 'no such name' for {NO_SUCH_HOST}")
    url = f"https://{NO_SUCH_HOST}" + (API_PREFIX if setting == "BATCHVAL_BASE_URL" else "")
    started = time.monotonic()
    done = batchval("check", env=env_for(served, LIVE, **{setting: url}))
    assert time.monotonic() - started < 20
    assert done.returncode == 64, done.stdout + done.stderr
    line = failing(done, "api" if setting == "BATCHVAL_BASE_URL" else "token")
    assert f"wrong address: GET {url}" in line or "wrong address: token request" in line
    assert f"the host name {NO_SUCH_HOST} does not resolve (no such name" in line
    assert f"check {setting}" in line


@pytest.mark.parametrize("case", ["self-signed", "another-host", "not-tls"])
@pytest.mark.slow
def test_tls_failure_is_named(
    served: RunningSandbox, tmp_path: Path, case: str, batchval: InProcess
) -> None:
    """The API's address speaks TLS with a certificate nobody trusts, or one for another
    host, or does not speak TLS: exit 75, "TLS failed" and OpenSSL's reason."""
    if case == "not-tls":
        env = env_for(served, LIVE, BATCHVAL_BASE_URL=served.base_url.replace("http", "https"))
        done, why = batchval("check", env=env), "wrong version number"
    else:
        if shutil.which("openssl") is None:
            pytest.skip("no openssl command to make a certificate with")
        with serve_tls(tmp_path) as tls:
            if case == "self-signed":
                env = env_for(served, LIVE, BATCHVAL_BASE_URL=tls.url + API_PREFIX)
                why = "certificate verify failed: self-signed certificate"
            else:  # trusted, but made for reach.test, not for localhost
                base = f"https://localhost:{tls.port}{API_PREFIX}"
                env = env_for(
                    served, LIVE, BATCHVAL_BASE_URL=base, SSL_CERT_FILE=str(tls.certificate)
                )
                why = "Hostname mismatch, certificate is not valid for 'localhost'"
            done = batchval("check", env=env)
    assert done.returncode == 75, done.stdout + done.stderr
    line = failing(done, "api")
    assert "unreachable: " in line
    assert "TLS failed with " in line
    assert why in line, line


@pytest.mark.slow
def test_partly_configured_api_exits_64(served: RunningSandbox, batchval: InProcess) -> None:
    """A client id without the rest of the API settings is a config error: 64."""
    env = env_for(served, LIVE)
    del env["BATCHVAL_CLIENT_SECRET"], env["BATCHVAL_AUTH_URL"]
    done = batchval("check", env=env)
    assert done.returncode == 64, done.stdout + done.stderr
    assert "partly configured" in failing(done, "settings")


@pytest.mark.slow
def test_embedded_sandbox_and_input_price(tmp_path: Path, batchval: InProcess) -> None:
    """With no API configured: says it would use the embedded sandbox in test mode, checks
    it, and prices INPUT as `run --dry-run` does."""
    source = portfolio(tmp_path / "book.csv", 12, duplicates=2)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = batchval("check", str(source), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    shown = lines(done)
    assert "embedded sandbox in TEST mode" in shown[0]
    assert shown[3].startswith("ok    mode: test: the embedded sandbox")
    dry = batchval("run", str(source), "--out", str(tmp_path / "dry"), "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert "would make 10 calls costing 100 credits" in dry.stdout
    assert shown[5] == (
        "ok    input: 12 rows; 10 distinct requests: 100 credits (£1.00 live), "
        "1 day(s) at 5000 calls a day"
    )


@pytest.mark.slow
def test_unusable_input_exits_65(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """An input that cannot be used fails the input check with 65, after the API checks."""
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    done = batchval("check", str(empty), env=env_for(served, LIVE))
    assert done.returncode == 65, done.stdout + done.stderr
    assert "empty" in failing(done, "input")


API = ApiSettings("https://api.example/partners/v1", "https://api.example", "id", "secret")


def _daily_limit_api(retry_after: str | None) -> PartnerClient:
    """An API whose every GET is refused with 429 daily_limit."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/oauth2/token":
            return httpx.Response(200, json={"access_token": "t", "expires_in": 1800})
        headers = {"Content-Type": "application/problem+json"}
        if retry_after is not None:
            headers["Retry-After"] = retry_after
        problem = {
            "type": "https://api.example/errors/rate-limited",
            "title": "Rate limited",
            "status": 429,
            "detail": "daily limit",
            "code": "daily_limit",
        }
        return httpx.Response(429, headers=headers, json=problem)

    return PartnerClient(
        base_url=API.base_url,
        auth_url=API.auth_url,
        credentials=Credentials(API.client_id, API.client_secret),
        http=httpx.AsyncClient(transport=httpx.MockTransport(handler)),
    )


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("clock", "retry_after", "after"),
    [
        # A clock a minute ahead of the API's: the API's midnight, not the next one.
        ("2026-03-02T00:00:30.5", "30", "2026-03-02T00:01:01+00:00"),
        ("2026-03-01T23:58:30", "30", "2026-03-01T23:59:00+00:00"),
        ("2026-03-01T15:30:00", None, "2026-03-02T00:00:00+00:00"),
    ],
)
async def test_a_daily_limit_says_when_a_run_may_start(
    clock: str, retry_after: str | None, after: str
) -> None:
    """check reads a daily-limit answer as a run does (sending/midnight), on the run's clock,
    and says when, rounded up to the second: exit 75."""
    now = dt.datetime.fromisoformat(clock).replace(tzinfo=dt.UTC)
    async with _daily_limit_api(retry_after) as client:
        finding = await _ask_api(client, API, lambda: now)
    assert finding.code is ExitCode.RESUMABLE
    assert f"run after {after} " in finding.text, finding.text
