"""Nothing secret in any encoding (issue 54, part 1): a hostile proxy between batchval and
the sandbox echoes the client secret and the token back in every form a gateway or an
API might (base64, URL-safe base64, hex, URL-encoded twice, HTML references, lower and
upper case, JSON `\\u` escapes, split by a tab or across a problem's title and detail,
straddling the 200-character cut, `Bearer <token>` base64'd, the token in a field of a
paid answer), at the token URL and at the API. A scan of every file of DIR (Parquet
decoded, SQLite read as bytes), the exports, the run's state, the bucket and every
printed line finds none of them, nor any 12 characters in a row of either, raw, as hex
or as base64 at any alignment."""

from __future__ import annotations

import base64
import json
import secrets
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import pytest
from hostile import Echo, Rules, serve_proxy
from objects_server import S3Server
from secrets_scan import Secret, assert_clean, in_process
from support import make_config, portfolio

from batchval._internal.sandbox.config import Account, SandboxConfig
from batchval._internal.sandbox.server import RunningSandbox

CLIENT_ID = "forms-" + secrets.token_hex(4)
# Random, so that a run of it found anywhere can only be a leak; `+` and `/` for the
# characters that encodings change.
SECRET = secrets.token_urlsafe(24) + "+/" + secrets.token_urlsafe(6)
PROBLEM = "application/problem+json"
INVALID = "https://api.example.test/problems/invalid-request"


@pytest.fixture
def config() -> SandboxConfig:
    """The tests' sandbox, with an account whose secret is random."""
    config = make_config()
    config.accounts.append(Account(CLIENT_ID, SECRET))
    return config


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def url_b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


def twice(text: str) -> str:
    return urllib.parse.quote(urllib.parse.quote(text, safe=""), safe="")


def references(text: str) -> str:
    return "".join(f"&#x{ord(c):x};" for c in text)


def problem(status: int, title: str, detail: str, kind: str = INVALID) -> Echo:
    """A problem document whose words are made of what the proxy saw."""

    def answer(secret: str, token: str) -> tuple[int, str, bytes]:
        body = {"type": kind, "title": title, "detail": detail, "status": status}
        filled = {
            k: v.format(s=secret, t=token) if isinstance(v, str) else v for k, v in body.items()
        }
        return status, PROBLEM, json.dumps(filled).encode()

    return answer


def made(status: int, content_type: str, text: Callable[[str, str], str]) -> Echo:
    return lambda s, t: (status, content_type, text(s, t).encode())


def u_escaped(secret: str, token: str) -> tuple[int, str, bytes]:
    """A problem whose detail is the secret with every character a JSON `\\u` escape."""
    escaped = "".join(f"\\u{ord(c):04x}" for c in secret)
    body = f'{{"type":"{INVALID}","title":"Problem","status":400,"detail":"{escaped}"}}'
    return 400, PROBLEM, body.encode()


# At the token URL, one each time a token is asked for: refused with the secret as its
# error code (base64) and its words; refused with a standard code and the secret in HTML
# references; an unknown 500 page that quotes the form URL-encoded twice.
def refused(error: str, words: Callable[[str], str]) -> Echo:
    """The token URL's refusal, its code and words made of the secret."""
    text = lambda s, t: json.dumps({"error": error or b64(s), "error_description": words(s)})  # noqa: E731
    return made(401 if not error else 400, "application/json", text)


TOKEN_ECHOES: list[Echo] = [
    refused("", lambda s: s),
    refused("invalid_client", references),
    made(500, "text/plain", lambda s, t: "form was client_secret=" + twice(s)),
]

# At POST /valuations, one a call: a row's problem, a retried problem, an unknown page.
API_ECHOES: list[Echo] = [
    lambda s, t: problem(400, "Invalid " + b64(s), t.encode().hex())(s, t),
    lambda s, t: problem(400, "Refused: " + s[:10], s[10:] + " was refused")(s, t),
    lambda s, t: problem(400, "Too long", "x " * 95 + s)(s, t),
    lambda s, t: problem(400, t.lower(), s[:12] + "\t" + s[12:])(s, t),
    lambda s, t: problem(400, twice(t), references(s))(s, t),
    lambda s, t: problem(400, b64("Bearer " + t), url_b64(s))(s, t),
    lambda s, t: problem(400, "Problem", s.upper() + " " + s.encode().hex().upper())(s, t),
    u_escaped,
    lambda s, t: problem(503, "Unavailable", t.upper(), "https://x.test/data-unavailable")(s, t),
    made(500, "text/plain", lambda s, t: f"upstream said {url_b64(t)} for {s}"),
]


def paid_echo(secret: str, token: str) -> dict[str, str]:
    """Fields a paid answer carries: the token raw and base64'd, `Bearer` too, the secret's hex."""
    return {
        "note": token,
        "trace": b64(token),
        "auth": b64("Bearer " + token),
        "debug": secret.encode().hex(),
    }


@pytest.mark.parametrize("at", ["local", "s3"])
def test_secrets_echoed_in_every_form_are_nowhere(
    served: RunningSandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
    at: str,
) -> None:
    state = tmp_path / "state"
    store: dict[str, str] = {}
    place = str(tmp_path / "out")
    found: list[Secret] = [(SECRET, CLIENT_ID)]
    if at == "s3":
        s3: S3Server = request.getfixturevalue("s3_server")
        store, place = s3.env(), s3.url(f"forms-{tmp_path.name}")
        found.append(s3.secret_access_key)
    rules = Rules(token_echoes=list(TOKEN_ECHOES), api_echoes=list(API_ECHOES), paid_echo=paid_echo)
    source = portfolio(tmp_path / "book.csv", 24)
    printed: list[str] = []
    with serve_proxy(served.auth_url, rules) as proxy:
        env = {
            "BATCHVAL_BASE_URL": proxy.base_url,
            "BATCHVAL_AUTH_URL": proxy.url,
            "BATCHVAL_CLIENT_ID": CLIENT_ID,
            "BATCHVAL_CLIENT_SECRET": SECRET,
            "XDG_STATE_HOME": str(state),
            **store,
        }

        def command(*args: str) -> int:
            code, stdout, stderr = in_process(
                *args, env=env, monkeypatch=monkeypatch, capsys=capsys
            )
            assert code != 70, stderr
            printed.extend([stdout, stderr])
            return code

        # Refused twice at the token URL (77), then a token, and every echo met on the way.
        codes = [command("run", str(source), "--out", place) for _ in range(3)]
        assert codes == [77, 77, 0]
        assert not rules.token_echoes, "an echo of the token URL was never given"
        assert not rules.api_echoes, "an echo of the API was never given"
        assert proxy.counts["echo"] >= len(TOKEN_ECHOES) + len(API_ECHOES)
        command("status", place)
        command("report", place)
        for fmt in ("csv", "json", "xlsx"):
            command("export", place, "--format", fmt, "--out", str(tmp_path / f"exported-{fmt}"))
    tokens = list(served.sandbox._tokens)
    assert tokens, "no token was issued"
    assert any(t in proxy.seen_token for t in tokens)
    assert_clean(
        [*found, *tokens],
        paths=[tmp_path],
        texts=printed,
        objects=[place] if at == "s3" else [],
        env=store,
        with_runs=True,
    )
