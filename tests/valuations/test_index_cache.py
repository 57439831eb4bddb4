"""The index's files at an `https://` (or `http://`) URL, read only with their sha256
(issue 55, in part): downloaded once into the cache (`BATCHVAL_CACHE_DIR`), read from
there without a request after; a download whose hash is not the one given is discarded and
stops the run before any call (65), a URL without its hash is refused (64), a download
that fails is 75; a local file given with another sha256 is 65. The files are served by a
small HTTP server on loopback that counts what it is asked."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import socket
import threading
from collections.abc import Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from support import ROOT, InProcess, env_for
from test_index_run import POSTCODES, book, index_config

import batchval
from batchval._internal.input.hpi import IndexOptions
from batchval._internal.outcome import SettingsError
from batchval._internal.sandbox.market import local_authority
from batchval._internal.sandbox.server import RunningSandbox
from batchval._internal.valuations.indexing import CACHE_VARIABLE, cache_folder, cached

SAMPLE = ROOT / "sample_inputs" / "ukhpi_sample.csv"
SHA256 = hashlib.sha256(SAMPLE.read_bytes()).hexdigest()
WRONG = "0" * 64


def directory_text() -> bytes:
    """A postcode directory of the book's postcodes, in the ONS Postcode Directory's
    columns."""
    lines = ["pcds,oslaua,lat"] + [f"{p},{local_authority(p)},51.5" for p in POSTCODES]
    return ("\n".join(lines) + "\n").encode()


@dataclasses.dataclass
class Web:
    """The files a loopback server serves by name, the paths it was asked for, and the
    status it answers with (200: the file)."""

    files: dict[str, bytes]
    port: int = 0
    status: int = HTTPStatus.OK
    asked: list[str] = dataclasses.field(default_factory=list)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"


@pytest.fixture
def web() -> Iterator[Web]:
    served = Web({"ukhpi.csv": SAMPLE.read_bytes(), "onspd.csv": directory_text()})

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.asked.append(self.path)
            body = served.files.get(self.path.lstrip("/").partition("?")[0])
            status = served.status if body is not None else HTTPStatus.NOT_FOUND
            self.send_response(status)
            data = body if body is not None and status == HTTPStatus.OK else b"no\n"
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # nothing on the test's stderr

    server = HTTPServer(("127.0.0.1", 0), Handler)
    served.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def env_of(served: RunningSandbox, tmp_path: Path) -> dict[str, str]:
    return env_for(served, **{CACHE_VARIABLE: str(tmp_path / "cache")})


def kept(tmp_path: Path) -> list[str]:
    """The names in the cache's index folder (none: nothing kept, not even a part)."""
    folder = tmp_path / "cache" / "index"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_a_url_is_downloaded_once_then_read_from_the_cache(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess, web: Web
) -> None:
    """Both files at URLs: the first run downloads each once, keeps them by their hash
    (the URL's suffix kept) and says so in the manifest; a second run, in a fresh DIR,
    asks the server nothing and reads the cached copies."""
    directory = hashlib.sha256(web.files["onspd.csv"]).hexdigest()
    source = book(tmp_path / "book.csv")
    args = ["--index-source", "ukhpi", "--index-file", web.url("ukhpi.csv"),
            "--index-sha256", SHA256.upper(), "--index-postcodes", web.url("onspd.csv"),
            "--index-postcodes-sha256", directory]  # fmt: skip
    first = batchval("run", str(source), "--out", str(tmp_path / "1"), *args,
                     env=env_of(served, tmp_path))  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert web.asked == ["/ukhpi.csv", "/onspd.csv"]
    assert kept(tmp_path) == sorted([f"{SHA256}.csv", f"{directory}.csv"])
    assert (tmp_path / "cache" / "index" / f"{SHA256}.csv").read_bytes() == SAMPLE.read_bytes()
    facts = json.loads((tmp_path / "1" / "manifest.json").read_text())["reference_data"]["index"]
    assert facts["file"]["url"] == web.url("ukhpi.csv")
    assert facts["file"]["fetched"] == "downloaded"
    assert facts["file"]["sha256"] == SHA256
    assert facts["postcodes"]["fetched"] == "downloaded"
    assert facts["postcodes"]["postcodes"] == len(POSTCODES)

    again = batchval("run", str(source), "--out", str(tmp_path / "2"), *args,
                     env=env_of(served, tmp_path))  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert len(web.asked) == 2  # nothing asked: the cache's copies
    facts = json.loads((tmp_path / "2" / "manifest.json").read_text())["reference_data"]["index"]
    assert (facts["file"]["fetched"], facts["postcodes"]["fetched"]) == ("cache", "cache")
    assert facts["file"]["cached_copy"] == str(tmp_path / "cache" / "index" / f"{SHA256}.csv")
    assert facts["file"]["latest_month"] == "2026-09"


def test_a_download_of_another_hash_is_discarded_before_any_call(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess, web: Web
) -> None:
    done = batchval(
        "run", str(book(tmp_path / "book.csv")), "--out", str(tmp_path / "out"),
        "--index-source", "ukhpi", "--index-file", web.url("ukhpi.csv"), "--index-sha256", WRONG,
        env=env_of(served, tmp_path),
    )  # fmt: skip
    assert done.returncode == 65, done.stderr
    assert "input_unusable" in done.stderr
    assert web.url("ukhpi.csv") in done.stderr
    assert f"sha256 is {SHA256}, not {WRONG}" in done.stderr
    assert served.sandbox.ledger.requests == []
    assert kept(tmp_path) == []  # the download discarded, no part left


def test_a_url_without_its_hash_is_refused(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess, web: Web
) -> None:
    done = batchval(
        "run", str(book(tmp_path / "book.csv")), "--out", str(tmp_path / "out"),
        "--index-source", "ukhpi", "--index-file", web.url("ukhpi.csv"),
        env=env_of(served, tmp_path),
    )  # fmt: skip
    assert done.returncode == 64, done.stderr
    assert "--index-sha256" in done.stderr
    assert "sha256sum" in done.stderr
    assert web.asked == []
    assert served.sandbox.ledger.requests == []


def _nothing_listens() -> int:
    with contextlib.closing(socket.socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.parametrize("failure", ["500", "refused"])
def test_a_download_that_fails_is_temporary_and_says_no_secret(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess, web: Web, failure: str
) -> None:
    """A server error, or nothing listening: 75 (the same command later tries again),
    naming the URL and what went wrong, but never the URL's password or query (a token);
    nothing kept, nothing sent."""
    web.status = HTTPStatus.INTERNAL_SERVER_ERROR
    port = web.port if failure == "500" else _nothing_listens()
    url = f"http://reader:hunter2pass@127.0.0.1:{port}/ukhpi.csv?sig=s3cretSignature"
    done = batchval(
        "run", str(book(tmp_path / "book.csv")), "--out", str(tmp_path / "out"),
        "--index-source", "ukhpi", "--index-file", url, "--index-sha256", SHA256,
        env=env_of(served, tmp_path),
    )  # fmt: skip
    assert done.returncode == 75, done.stderr
    assert "store_unavailable" in done.stderr
    assert f"127.0.0.1:{port}/ukhpi.csv" in done.stderr
    said = "HTTP 500 Internal Server Error" if failure == "500" else "connection refused"
    assert said in done.stderr
    assert "hunter2pass" not in done.stderr + done.stdout
    assert "s3cretSignature" not in done.stderr + done.stdout
    assert web.asked == (["/ukhpi.csv?sig=s3cretSignature"] if failure == "500" else [])
    assert served.sandbox.ledger.requests == []
    assert kept(tmp_path) == []


def test_a_local_file_is_checked_against_its_sha256(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """The config's file, the command line's hash: another hash is 65 naming both, before
    any call; the file's own passes (a dry run reads the index as a night does)."""
    source, config = book(tmp_path / "book.csv"), index_config(tmp_path, SAMPLE)
    done = batchval(
        "run", str(source), "--out", str(tmp_path / "out"), "--config", str(config),
        "--index-sha256", WRONG, env=env_of(served, tmp_path),
    )  # fmt: skip
    assert done.returncode == 65, done.stderr
    assert f"{SAMPLE}: its sha256 is {SHA256}, not {WRONG} as index.sha256 says" in done.stderr
    assert served.sandbox.ledger.requests == []
    priced = batchval(
        "run", str(source), "--out", str(tmp_path / "dry"), "--dry-run", "--config", str(config),
        "--index-sha256", SHA256, env=env_of(served, tmp_path),
    )  # fmt: skip
    assert priced.returncode == 0, priced.stderr
    assert kept(tmp_path) == []  # a local file is never copied into the cache


def test_the_python_api_takes_the_hashes_by_keyword(
    served: RunningSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, web: Web
) -> None:
    for name, value in env_of(served, tmp_path).items():
        if name.startswith("BATCHVAL_"):
            monkeypatch.setenv(name, value)
    source = book(tmp_path / "book.csv")
    given = batchval.Settings(
        index_source="ukhpi",
        index_file=web.url("ukhpi.csv"),
        index_sha256=SHA256,
        index_postcodes_sha256=SHA256,
    )
    with pytest.raises(batchval.RunError) as refused:
        batchval.run(source, out=tmp_path / "out", progress=False, settings=given)
    assert refused.value.exit_code == 64
    assert "index.postcodes_sha256 is given but index.postcodes is not" in str(refused.value)
    given = batchval.Settings(
        index_source="ukhpi", index_file=web.url("ukhpi.csv"), index_sha256=SHA256
    )
    done = batchval.run(source, out=tmp_path / "out", progress=False, settings=given, dry_run=True)
    assert done.exit_code == 0
    assert web.asked == ["/ukhpi.csv"]


@pytest.mark.parametrize(
    ("section", "refused"),
    [
        ({"source": "ukhpi", "file": "https://example.org/ukhpi.csv"}, "give index.sha256"),
        ({"source": "ukhpi", "file": "http://example.org/u.csv", "sha256": "abc"}, "64 hex"),
        ({"source": "ukhpi", "file": "u.csv", "sha256": "g" * 64}, "64 hex"),
        (
            {"source": "ukhpi", "file": "u.csv", "postcodes": "https://example.org/p.csv"},
            "give index.postcodes_sha256 (--index-postcodes-sha256)",
        ),
        ({"sha256": SHA256}, "index.sha256 is given but index.file is not"),
    ],
)
def test_the_settings_refuse_a_url_without_its_hash(section: dict[str, str], refused: str) -> None:
    with pytest.raises(SettingsError, match=r"sha256") as found:
        IndexOptions.of(section)
    assert refused in str(found.value)


def test_the_settings_keep_a_hash_in_lower_case_and_show_no_token() -> None:
    url = "https://reader:pw@example.org/ukhpi.csv?sv=2024&sig=s3cret"
    options = IndexOptions.of({"source": "ukhpi", "file": url, "sha256": f" {SHA256.upper()} "})
    assert options.sha256 == SHA256
    assert options.file == url  # fetched as given
    shown = options.to_json()
    assert shown["file"] == "https://reader:[redacted]@example.org/ukhpi.csv?[redacted]"
    assert shown["sha256"] == SHA256


def test_the_cache_folder_is_the_variable_s_else_xdg_s_else_home_s(tmp_path: Path) -> None:
    assert cache_folder({CACHE_VARIABLE: str(tmp_path)}) == tmp_path
    assert cache_folder({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "batchval"
    assert cache_folder({}) == Path.home() / ".cache" / "batchval"


def test_a_damaged_cached_copy_is_downloaded_again(tmp_path: Path, web: Web) -> None:
    env = {CACHE_VARIABLE: str(tmp_path / "cache")}
    copy = tmp_path / "cache" / "index" / f"{SHA256}.csv"
    copy.parent.mkdir(parents=True)
    copy.write_text("Date,RegionName,AreaCode,Index\n")  # not the file its name says
    path, digest, fetched = cached(web.url("ukhpi.csv"), SHA256, env, "index.sha256")
    assert (path, digest, fetched) == (copy, (SHA256, SAMPLE.stat().st_size), "downloaded")
    assert copy.read_bytes() == SAMPLE.read_bytes()
    assert cached(web.url("ukhpi.csv"), SHA256, env, "index.sha256")[2] == "cache"
    assert web.asked == ["/ukhpi.csv"]
