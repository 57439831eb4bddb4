"""One scanner for secrets in everything a case leaves behind (issue 35, part 5).

`scan(secrets, paths=..., texts=..., objects=...)` searches every file under the given
paths (binary too: SQLite and its WAL byte for byte; Parquet decoded, its key-value
metadata and every value; a zip such as an .xlsx member by member), every printed text
and every object at each given `s3://` URL, for each secret in every form
`batchval.redaction` masks: raw, URL-encoded (`quote`, `quote_plus`, either hex case),
JSON-escaped, and base64 of `id:secret` (HTTP Basic) when the id is given. It returns
the hits, each with where it was; `assert_clean` fails on any, naming them all.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import re
import urllib.parse
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import pyarrow.parquet as pq

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
    if user is not None:
        found["basic"] = base64.b64encode(f"{user}:{secret}".encode()).decode()
    unique: dict[str, bytes] = {}
    for name, text in found.items():
        if text.encode() not in unique.values():
            unique[name] = text.encode()
    return unique


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
    from batchval.store.objects import ObjectStore

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
) -> list[Hit]:
    """Every place any of `secrets`, in any form, is found: files under `paths` (each a
    file or a folder, walked), `texts` (printed lines), objects under each URL of
    `objects` (read with `env`'s store settings)."""
    needles: list[tuple[str, str, bytes]] = []
    for secret in secrets:
        text, user = (secret, None) if isinstance(secret, str) else secret
        if text:
            needles += [(text, name, form) for name, form in forms(text, user).items()]
    blobs: list[tuple[str, bytes]] = []
    for root in paths:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in files:
            blobs += _blobs_of_file(path)
    blobs += [(f"printed #{n}", text.encode()) for n, text in enumerate(texts)]
    for url in objects:
        blobs += _blobs_of_objects(url, {} if env is None else env)
    return [
        Hit(where, secret[:4] + "…", name)
        for where, blob in blobs
        for secret, name, form in needles
        if form in blob
    ]


def assert_clean(secrets: Iterable[Secret], **where: object) -> None:
    """`scan` finds nothing; otherwise fail naming every hit."""
    hits = scan(secrets, **where)  # type: ignore[arg-type]
    assert not hits, "secrets found:\n" + "\n".join(
        f"  {hit.where}: {hit.secret} ({hit.form})" for hit in hits
    )
