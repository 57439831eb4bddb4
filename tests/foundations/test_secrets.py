"""Nothing secret leaves (issue 35): whatever a page at the auth or base URL echoes of
the request, no client secret, token or store key, in any form, reaches a file, an
object, a printed line or a traceback, for run, check, status, report and export."""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
import urllib.parse
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from objects_server import S3Server
from secrets_scan import Secret, assert_clean, forms, in_process, scan
from support import LIVE, StoreServer, env_for, portfolio

from batchval._internal import redaction
from batchval._internal.sandbox.server import RunningSandbox

# A client secret with every character an encoding changes: `+`, `/`, `"`, a space, `%`.
ODD_SECRET = 'Zq+7/x"w 9%Yk=/+Ab'


class _Echo(http.server.BaseHTTPRequestHandler):
    """Answers every call 200 with a page that shows the request: its headers (a page
    that reflects them) and its body (a proxy that echoes a posted form)."""

    content_type = "text/html; charset=utf-8"
    seen: list[str]

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8", "replace")
        self.seen.append(str(self.headers) + body)
        # What was sent first, so that even the 200 characters of text kept hold it.
        shown = f"{body}\n{self.headers}\n{self.command} {self.path}\n"
        if "html" in self.content_type:
            shown = f"<html><body><pre>{shown}</pre></body></html>"
        data = (shown * 3).encode()
        self.send_response(200)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def log_message(self, *_args: Any) -> None:
        pass


@contextlib.contextmanager
def echoing(content_type: str) -> Iterator[tuple[str, list[str]]]:
    """A page on 127.0.0.1 that echoes each request: its URL and what it was sent."""
    seen: list[str] = []
    handler = type("Echo", (_Echo,), {"content_type": content_type, "seen": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def every_command(
    commands: Iterable[list[str]],
    env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> list[str]:
    """Each command in turn, in-process: none a defect (70); what they printed."""
    printed: list[str] = []
    for args in commands:
        code, stdout, stderr = in_process(*args, env=env, monkeypatch=monkeypatch, capsys=capsys)
        assert code != 70, (args, stderr)
        printed += [stdout, stderr]
    return printed


def a_user_s_commands(source: Path, place: str, *exports: list[str]) -> list[list[str]]:
    """What a user runs on a file and its place: run, check, status, report, and `export`
    with each of `exports`' options."""
    return [
        ["run", str(source), "--out", place],
        ["check", str(source)],
        ["status", place],
        ["report", place],
        *(["export", place, *options] for options in exports),
    ]


def tokens_of(served: RunningSandbox) -> list[Secret]:
    return list(served.sandbox._tokens)


# --- the redactor's forms ---------------------------------------------------------------


def test_the_redactor_masks_every_form_the_scanner_knows() -> None:
    """Each form `secrets_scan.forms` lists (raw, URL-encoded both ways and either hex case,
    JSON-escaped, HTTP Basic) is masked, and so is a URL's password and any bearer token."""
    redactor = redaction.Redactor()
    redactor.add(ODD_SECRET, user="client-1")
    for name, form in forms(ODD_SECRET, "client-1").items():
        text = f"before {form.decode()} after"
        assert redactor.scrub(text) == "before [redacted] after", name
    said = redactor.scrub("via http://me:pa55@proxy:3128/ with Authorization: Bearer eyJ.x-y")
    assert said == "via http://me:[redacted]@proxy:3128/ with Authorization: Bearer [redacted]"
    assert scan([ODD_SECRET], texts=[redactor.scrub(json.dumps({"d": ODD_SECRET}))]) == []


def test_a_secret_too_short_to_be_one_masks_nothing() -> None:
    """A one-letter "secret" (a test's token) would mangle every word: it is not masked."""
    assert redaction.Redactor(["t"]).scrub('{"status": "ok"}') == '{"status": "ok"}'


def test_the_scanner_finds_each_form(tmp_path: Path) -> None:
    """The scanner is not blind: each form is found, in a file, in Parquet metadata and
    values (compressed), and in a printed text."""
    import pyarrow as pa

    table = pa.table({"note": [f"x{ODD_SECRET}x"]}).replace_schema_metadata(
        {"k": urllib.parse.quote_plus(ODD_SECRET)}
    )
    pq.write_table(table, tmp_path / "t.parquet", compression="zstd")
    (tmp_path / "s.json").write_text(json.dumps({"d": ODD_SECRET}), encoding="utf-8")
    hits = scan([(ODD_SECRET, "client-1")], paths=[tmp_path], texts=["Basic " + "x"])
    assert {hit.form for hit in hits} >= {"raw", "quote_plus", "json"}
    assert any("metadata" in hit.where for hit in hits)
    assert any("column note" in hit.where for hit in hits)


# --- the auth URL at a page that echoes the posted form ----------------------------------


@pytest.mark.parametrize("content_type", ["text/html; charset=utf-8", "text/plain"])
def test_an_echoing_token_url_leaks_nothing_locally(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    content_type: str,
) -> None:
    """The auth URL at a page that answers 200 with the posted form: run stops, check
    fails, status, report and export read the DIR, and the secret (with +, / and ") is
    nowhere: not in DIR's files (SQLite and Parquet read), not in any printed line, not in
    a traceback."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    with echoing(content_type) as (url, seen):
        env = {
            "BATCHVAL_BASE_URL": url + "/partners/v1",
            "BATCHVAL_AUTH_URL": url,
            "BATCHVAL_CLIENT_ID": "client-1",
            "BATCHVAL_CLIENT_SECRET": ODD_SECRET,
        }
        source = portfolio(tmp_path / "book.csv", 3)
        out = tmp_path / "out"
        commands = a_user_s_commands(source, str(out), ["--format", "csv"], ["--format", "json"])
        printed = every_command(commands, env, monkeypatch, capsys)
        assert any(urllib.parse.quote_plus(ODD_SECRET) in sent for sent in seen)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["stop"] is not None
    assert_clean([(ODD_SECRET, "client-1")], paths=[out, tmp_path / "state"], texts=printed)


def test_an_echoing_token_url_leaks_nothing_at_a_url(
    store_server: StoreServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The same at an s3:// or az:// place: no secret or store key in any published object (the
    shipped log among them) or printed line."""
    place = store_server.url(f"secrets-{tmp_path.name}")
    with echoing("text/plain") as (url, _seen):
        env = {
            "BATCHVAL_BASE_URL": url + "/partners/v1",
            "BATCHVAL_AUTH_URL": url,
            "BATCHVAL_CLIENT_ID": "client-1",
            "BATCHVAL_CLIENT_SECRET": ODD_SECRET,
            "XDG_STATE_HOME": str(tmp_path / "state"),
            **store_server.env(),
        }
        source = portfolio(tmp_path / "book.csv", 3)
        exported = ["--format", "csv", "--out", str(tmp_path / "exported")]
        commands = a_user_s_commands(source, place, exported)
        printed = every_command(commands, env, monkeypatch, capsys)
    secrets: list[Secret] = [(ODD_SECRET, "client-1"), *store_server.secrets]
    assert_clean(
        secrets,
        paths=[tmp_path],
        texts=printed,
        objects=[place],
        env=store_server.env(),
    )


# --- the base URL at a page that reflects the request's headers --------------------------


@pytest.mark.parametrize("at", ["local", "s3"])
def test_a_header_reflecting_base_url_leaks_no_token(
    served: RunningSandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
    at: str,
) -> None:
    """The base URL at a page that shows the request's headers (`Authorization: Bearer
    ...` among them): the live token, the client secret, the store's key, in any form,
    are nowhere: no file, object, printed line or traceback."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    store: dict[str, str] = {}
    secrets: list[Secret] = [(LIVE.client_secret, LIVE.client_id)]
    place = str(tmp_path / "out")
    if at == "s3":
        s3: S3Server = request.getfixturevalue("s3_server")
        store, place = s3.env(), s3.url(f"reflect-{tmp_path.name}")
        secrets.append(s3.secret_access_key)
    with echoing("text/plain") as (url, seen):
        env = {**env_for(served, LIVE, BATCHVAL_BASE_URL=url + "/partners/v1"), **store}
        source = portfolio(tmp_path / "book.csv", 3)
        exported = ["--format", "json", "--out", str(tmp_path / "exported")]
        commands = a_user_s_commands(source, place, exported)
        printed = every_command(commands, env, monkeypatch, capsys)
        assert any("Bearer" in sent for sent in seen), "no token was sent to the page"
    assert tokens_of(served), "no token was issued"
    secrets += tokens_of(served)
    assert_clean(
        secrets,
        paths=[tmp_path],
        texts=printed,
        objects=[place] if at == "s3" else [],
        env=store,
    )


# --- credentials inside a URL -------------------------------------------------------------


def test_a_password_in_the_base_url_is_kept_out_of_manifest_and_metadata(
    served: RunningSandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`http://user:pw@host/...` as the base and auth URL: the run completes, and the
    password is in neither manifest.json nor the Parquet metadata, nor anywhere else."""
    with_password = served.base_url.replace("http://", "http://me:pr0xy-pa55@")
    auth = served.auth_url.replace("http://", "http://me:pr0xy-pa55@")
    env = env_for(served, LIVE, BATCHVAL_BASE_URL=with_password, BATCHVAL_AUTH_URL=auth)
    out = tmp_path / "out"
    code, stdout, stderr = in_process(
        "run",
        str(portfolio(tmp_path / "book.csv", 3)),
        "--out",
        str(out),
        env=env,
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert code == 0, stderr
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["settings"]["api"]["base_url"].startswith("http://me:[redacted]@")
    metadata = pq.read_schema(out / "results.parquet").metadata
    assert b"me:[redacted]@" in metadata[b"batchval.manifest"]
    assert_clean(["pr0xy-pa55"], paths=[out], texts=[stdout, stderr])


def test_a_yaml_error_in_a_config_holding_a_secret_prints_no_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A config whose secret's line breaks the YAML: exit 64 naming line and column, and
    the secret is not printed."""
    config = tmp_path / "bad.yaml"
    config.write_text(
        f"api:\n  client_id: me\n  client_secret: {ODD_SECRET}: oops\n", encoding="utf-8"
    )
    code, stdout, stderr = in_process(
        "check", "--config", str(config), env={}, monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 64
    assert "line 3, column" in stdout + stderr
    assert_clean([ODD_SECRET], texts=[stdout, stderr])


@pytest.mark.parametrize("where", ["config", "environment"])
def test_a_defect_of_split_says_no_secret_in_its_line_or_traceback(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    where: str,
) -> None:
    """`split` knows the secrets of its config and of the environment: a defect whose
    message holds them (URL-encoded) prints its line and writes its traceback without."""
    state = tmp_path / "state"
    config = tmp_path / "c.yaml"
    env = {"XDG_STATE_HOME": str(state)}
    api = {"base_url": "http://h/p", "auth_url": "http://h", "client_id": "me"}
    if where == "config":
        config.write_text(json.dumps({"api": {**api, "client_secret": ODD_SECRET}}), "utf-8")
    else:
        config.write_text(json.dumps({"api": api}), "utf-8")
        env["BATCHVAL_CLIENT_SECRET"] = ODD_SECRET

    def fail(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("form=" + urllib.parse.quote_plus(ODD_SECRET))

    monkeypatch.setattr("batchval._internal.admin.split_input", fail)
    source = portfolio(tmp_path / "book.csv", 2)
    out = str(tmp_path / "shards")
    args = ["split", str(source), "--shards", "2", "--out", out, "--config", str(config)]
    code, stdout, stderr = in_process(*args, env=env, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 70, stderr
    assert "form=[redacted]" in stderr
    assert list(state.rglob("*.traceback"))
    assert_clean([(ODD_SECRET, "me")], paths=[state], texts=[stdout, stderr])
