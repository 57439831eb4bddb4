"""One scanner for secrets in everything a case leaves behind (issue 35, part 5).

`scan(secrets, paths=..., texts=..., objects=...)` searches every file under the given
paths (binary too: SQLite and its WAL byte for byte; Parquet decoded, its key-value
metadata and every value; a zip such as an .xlsx member by member), every printed text
and every object at each given `s3://` URL, for each secret in every form
`batchval._internal.redaction` masks: raw, lower and upper case, URL-encoded (`quote`,
`quote_plus`, either hex case, twice), JSON-escaped, HTML character references, hex,
base64 and URL-safe base64, and base64 of `id:secret` (HTTP Basic) when the id is given.
With `runs=True`, also any `RUN_CHARS` characters in a row of a secret, raw (in any case),
as hex or as base64 at any of its three alignments: nothing of a secret left half masked.
It returns the hits, each with where it was; `assert_clean` fails on any, naming them all.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import json
import re
import urllib.parse
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

# A secret is a text, or a text and the id it goes with in HTTP Basic.
Secret = str | tuple[str, str | None]


@dataclasses.dataclass(frozen=True, slots=True)
class Hit:
    where: str  # a file's path (and the member or the column), `printed #n`, an object's URL
    secret: str  # the secret found, cut short so that the report is not itself a leak
    form: str  # raw, quote, quote_plus, lower hex, json, basic


def forms(secret: str, user: str | None = None) -> dict[str, bytes]:
    """Each form of `secret` the redaction masks, by name (forms equal to another dropped)."""
    quoted = urllib.parse.quote(secret, safe="")
    found = {
        "raw": secret,
        "quote": urllib.parse.quote(secret),
        "quote safe=''": quoted,
        "quote_plus": urllib.parse.quote_plus(secret),
        "lower hex": re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), quoted),
        "json": json.dumps(secret)[1:-1],
        "json, not ascii": json.dumps(secret, ensure_ascii=False)[1:-1],
        "json, slash escaped": json.dumps(secret)[1:-1].replace("/", "\\/"),
    }
    data = secret.encode()
    found |= {
        "lower case": secret.lower(),
        "upper case": secret.upper(),
        "quote twice": urllib.parse.quote(quoted, safe=""),
        "html escape": html.escape(secret),
        "html decimal references": "".join(f"&#{ord(c)};" for c in secret),
        "html hex references": "".join(f"&#x{ord(c):X};" for c in secret),
        "hex": data.hex(),
        "upper hex": data.hex().upper(),
        "base64": base64.b64encode(data).decode().rstrip("="),
        "url-safe base64": base64.urlsafe_b64encode(data).decode().rstrip("="),
    }
    if user is not None:
        found["basic"] = base64.b64encode(f"{user}:{secret}".encode()).decode()
    unique: dict[str, bytes] = {}
    for name, text in found.items():
        if text.encode() not in unique.values():
            unique[name] = text.encode()
    return unique


RUN_CHARS = 12  # a run of a secret this long, found anywhere, is a leak (`runs`)


def runs(secret: str) -> dict[str, bytes]:
    """Every `RUN_CHARS`-character run of `secret`, by name: raw (looked for in lower case,
    in a blob in lower case), hex (the same) and base64 at each alignment, standard and
    URL-safe (only the characters that hold the run's bits alone)."""
    found: dict[str, bytes] = {}
    for at in range(len(secret) - RUN_CHARS + 1):
        run = secret[at : at + RUN_CHARS].encode()
        found[f"run {at} (any case)"] = run.lower()
        found[f"run {at}, hex (any case)"] = run.hex().encode()
        for shift, skip in ((0, 0), (1, 2), (2, 3)):
            encoded = base64.b64encode(bytes(shift) + run).rstrip(b"=")
            core = encoded[skip : len(encoded) - (1 if (shift + len(run)) % 3 else 0)]
            found[f"run {at}, base64 shifted {shift}"] = core
            found[f"run {at}, url-safe base64 shifted {shift}"] = core.translate(_URL_SAFE)
    return found


_URL_SAFE = bytes.maketrans(b"+/", b"-_")
# The runs looked for in a blob in lower case (`runs`).
_ANY_CASE = "(any case)"


def _blobs_of_file(path: Path) -> Iterator[tuple[str, bytes]]:
    data = path.read_bytes()
    yield str(path), data
    if data[:4] == b"PAR1":  # compressed pages: read back what they hold
        parquet = pq.ParquetFile(io.BytesIO(data))
        metadata = parquet.schema_arrow.metadata or {}
        yield f"{path} (metadata)", b"\n".join(k + b"=" + v for k, v in metadata.items())
        for name, values in parquet.read().to_pydict().items():
            yield f"{path} (column {name})", json.dumps(values, default=str).encode()
            yield f"{path} (column {name}, unescaped)", "\n".join(map(str, values)).encode()
    elif data[:2] == b"PK":  # an .xlsx: its members are deflated
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for member in archive.namelist():
                yield f"{path} ({member})", archive.read(member)


def _blobs_of_objects(url: str, env: Mapping[str, str]) -> Iterator[tuple[str, bytes]]:
    from batchval._internal.store.objects import ObjectStore

    store = ObjectStore.from_url(url, env)
    for key in store.list(""):
        found = store.get(key)
        if found is not None:
            yield f"{url.rstrip('/')}/{key}", found[0]


def scan(
    secrets: Iterable[Secret],
    *,
    paths: Iterable[Path] = (),
    texts: Iterable[str] = (),
    objects: Iterable[str] = (),
    env: Mapping[str, str] | None = None,
    with_runs: bool = False,
) -> list[Hit]:
    """Every place any of `secrets`, in any form, is found: files under `paths` (each a
    file or a folder, walked), `texts` (printed lines), objects under each URL of
    `objects` (read with `env`'s store settings); with `with_runs`, every run (`runs`)."""
    needles: list[tuple[str, str, bytes]] = []
    for secret in secrets:
        text, user = (secret, None) if isinstance(secret, str) else secret
        if text:
            needles += [(text, name, form) for name, form in forms(text, user).items()]
            if with_runs:
                needles += [(text, name, form) for name, form in runs(text).items()]
    blobs: list[tuple[str, bytes]] = []
    for root in paths:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in files:
            blobs += _blobs_of_file(path)
    blobs += [(f"printed #{n}", text.encode()) for n, text in enumerate(texts)]
    for url in objects:
        blobs += _blobs_of_objects(url, {} if env is None else env)
    hits: list[Hit] = []
    for where, blob in blobs:
        lower = blob.lower()
        hits += [
            Hit(where, secret[:4] + "…", name)
            for secret, name, form in needles
            if form in (lower if name.endswith(_ANY_CASE) else blob)
        ]
    return hits


def assert_clean(secrets: Iterable[Secret], **where: object) -> None:
    """`scan` finds nothing; otherwise fail naming every hit."""
    hits = scan(secrets, **where)  # type: ignore[arg-type]
    assert not hits, "secrets found:\n" + "\n".join(
        f"  {hit.where}: {hit.secret} ({hit.form})" for hit in hits
    )


def in_process(
    *args: str, env: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> tuple[int, str, str]:
    """`support.run_in_process`, the store's variables too: no AWS_ variable of this
    process, and `env`'s AWS_ and XDG_ ones set."""
    from support import run_in_process  # support imports this module: here, not above

    return run_in_process(
        *args,
        env=env,
        monkeypatch=monkeypatch,
        capsys=capsys,
        cleared=("BATCHVAL_", "AWS_"),
        taken=("BATCHVAL_", "AWS_", "XDG_"),
    )
