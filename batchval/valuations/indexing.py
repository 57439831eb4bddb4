"""`index.source: ukhpi`: every loan of results.parquet rolled forward by the UK House
Price Index (`contract/indexation`), after the night's valuations and the book's carried
rows are in it. The index and the postcode directory are read before anything is sent, so
that a file that cannot be used stops the run (65) without a call.

A file at an `https://` or `http://` URL comes with its sha256 (the settings refuse one
without, 64) and is downloaded once: streamed to a temporary file in the cache folder
(`cache_folder`), hashed as it comes, and kept under `index/<sha256>` (the URL's suffix
after it) only when its hash is the one given; a later run with the same hash reads that
copy and asks nothing. A download whose hash differs is discarded (65, naming the URL and
both hashes); one that fails (no connection, an HTTP error status) is 75, to be tried
again. A file anywhere else given with its sha256 is checked against it (65)."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO
from urllib.parse import urlsplit

import httpx
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import structlog

from batchval.api.network import diagnose
from batchval.contract.indexation import VALUE_METHODS, indexed_results
from batchval.contract.schemas import INDEX_DESCRIPTIONS, RESULT_COLUMNS
from batchval.engine.files import write_table_atomic
from batchval.engine.place import input_of
from batchval.input.hpi import (
    ONSPD_ATTRIBUTION,
    UKHPI_ATTRIBUTION,
    HousePriceIndex,
    IndexOptions,
    PostcodeAuthorities,
    file_digest,
    is_web,
    month_text,
    read_postcode_directory,
    read_ukhpi,
    shown,
)
from batchval.input.lender import LenderColumnError, find_lender_columns
from batchval.input.options import InputError
from batchval.outcome import RunRefusedError, StopReason
from batchval.valuations.book import rows_of
from batchval.version import __version__

log = structlog.get_logger()

# The folder a file fetched over the web is kept in: this variable's, else
# `$XDG_CACHE_HOME/batchval`, else `~/.cache/batchval` (`cache_folder`).
CACHE_VARIABLE = "BATCHVAL_CACHE_DIR"
# A download's patience: a connection within 15 s, then no minute without a byte (a file
# of a gigabyte takes what it takes).
_TIMEOUT = httpx.Timeout(60.0, connect=15.0)
_CHUNK = 1 << 20
_SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,8}")


@dataclasses.dataclass(frozen=True, slots=True)
class Read:
    """Where one file of the index was read from: its place as the settings give it
    (`hpi.shown`), its sha256 and size, and for a URL of the web whether it was
    `downloaded` or read from the `cache`, and the copy read."""

    given: str
    digest: tuple[str, int]
    fetched: str | None = None
    copy: Path | None = None

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {"path": self.given}
        if self.fetched is not None:
            found.update(url=self.given, fetched=self.fetched, cached_copy=str(self.copy))
        return found


@dataclasses.dataclass(frozen=True, slots=True)
class Indexing:
    """The index a run rolls its loans forward by, and where postcodes find their
    authority."""

    options: IndexOptions
    index: HousePriceIndex
    directory: PostcodeAuthorities | None
    # Where each file was read from (None: as the options name it, read as it is).
    file_read: Read | None = None
    postcodes_read: Read | None = None

    @property
    def latest_month(self) -> str | None:
        """The index's newest month (`YYYY-MM`)."""
        latest = self.index.latest
        return None if latest is None else month_text(latest)

    def facts(self) -> dict[str, Any]:
        """What the manifest says of the files read, and the attributions their licence
        asks for."""
        found: dict[str, Any] = {
            "source": self.options.source,
            "file": {**self._read(self.file_read, self.options.file), **self.index.to_json()},
            "attribution": [UKHPI_ATTRIBUTION],
        }
        if self.directory is not None:
            found["postcodes"] = {
                **self._read(self.postcodes_read, self.options.postcodes),
                "sha256": self.directory.sha256,
                "bytes": self.directory.size,
                "postcodes": self.directory.frame.height,
                "repeated": self.directory.repeated,
            }
            found["attribution"].append(ONSPD_ATTRIBUTION)
        return found

    @staticmethod
    def _read(read: Read | None, given: str | None) -> dict[str, Any]:
        return {"path": None if given is None else shown(given)} if read is None else read.to_json()

    def add_columns(
        self,
        results: Path,
        lender: Mapping[str, str],
        fall_share: float,
        unvalued: tuple[Sequence[tuple[int, str | None]], pa.Table] | None = None,
    ) -> dict[str, float | int | None]:
        """results.parquet with the index columns added (`indexed_results`), read and
        replaced atomically once, its schema's metadata kept. With `unvalued` (a --book
        night's unsent rows, each a row number and its request's postcode, and the
        checkpoint's pass-through table), a row first for each loan the file has none for
        (`with_unvalued_rows`). How the index tracked tonight's estimates
        (`indexation.tracking`) is returned."""
        table = pq.read_table(results)
        postcodes: dict[int, str | None] = {}
        if unvalued is not None:
            table, postcodes = with_unvalued_rows(table, *unvalued)
        indexed = indexed_results(
            table,
            self.index,
            lender=lender,
            fall_share=fall_share,
            directory=self.directory,
            postcodes=postcodes,
        )
        write_table_atomic(results, indexed.table.replace_schema_metadata(table.schema.metadata))
        log.info("run.indexed", rows=indexed.table.num_rows, latest=self.latest_month)
        return indexed.tracking


def coverage(
    results: Path,
    balance: str | None,
    latest: str | None,
    tracked: Mapping[str, float | int | None] | None = None,
) -> dict[str, Any]:
    """The loans of results.parquet by `value_method`, each with their loan balance (the
    `balance` column's; 0 without one), and the balance-weighted LTV on the indexed values:
    sum(balance x hpi_ltv) / sum(balance) over the loans with both; with how the index
    tracked tonight's estimates (`tracked`, as `estimate_vs_index`). summary.json's
    `portfolio.index` (`book.portfolio.index` on a book night)."""
    names = ["value_method", "hpi_ltv", *([balance] if balance else [])]
    frame = pl.read_parquet(results, columns=names)
    amount = pl.col(balance).cast(pl.Float64, strict=False) if balance else pl.lit(0.0)
    frame = frame.with_columns(amount=amount.fill_null(0.0))
    sums = {
        method: {"loans": int(loans), "balance": round(float(total), 2)}
        for method, loans, total in frame.group_by("value_method")
        .agg(pl.len(), pl.col("amount").sum())
        .iter_rows()
    }
    rolled = frame.filter(pl.col("hpi_ltv").is_not_null() & (pl.col("amount") > 0))
    weight = float(rolled["amount"].sum())
    weighted = float((rolled["amount"] * rolled["hpi_ltv"]).sum()) / weight if weight else None
    return {
        "index_month": latest,
        "coverage": {m: sums.get(m, {"loans": 0, "balance": 0.0}) for m in VALUE_METHODS},
        "hpi_weighted_ltv": weighted,
        "estimate_vs_index": dict(tracked or {}),
    }


def load(options: IndexOptions, env: Mapping[str, str]) -> Indexing | None:
    """The index the settings name, or None (`index.source: none`); a file that cannot be
    used, or whose sha256 is not the one given, is the run's refusal (`input_unusable`,
    65), and a download that fails `store_unavailable` (75), before any call."""
    if not options.on or options.file is None:
        return None
    try:
        with local_copy(options.file, options.sha256, env, "index.sha256") as (path, read):
            index = read_ukhpi(path, read.digest)
        directory, found = None, None
        if options.postcodes is not None:
            with local_copy(
                options.postcodes, options.postcodes_sha256, env, "index.postcodes_sha256"
            ) as (path, found):
                directory = read_postcode_directory(
                    path, options.postcode_column, options.authority_column, found.digest
                )
    except InputError as exc:
        raise RunRefusedError(StopReason.INPUT_UNUSABLE, f"index: {exc}") from None
    return Indexing(options, index, directory, read, found)


@contextlib.contextmanager
def local_copy(
    source: str, sha256: str | None, env: Mapping[str, str], setting: str
) -> Iterator[tuple[Path, Read]]:
    """The file `source` names on this machine, and where it was read from: an http(s)
    URL's copy in the cache (`cached`), else the path or the object store's copy
    (`place.input_of`), checked against `sha256` when given (`setting` names it in the
    refusal, 65)."""
    if is_web(source):
        if sha256 is None:  # the settings refuse it (64): never read unhashed
            raise RunRefusedError(StopReason.REFUSED, f"index: {shown(source)} needs {setting}")
        path, digest, fetched = cached(source, sha256, env, setting)
        yield path, Read(shown(source), digest, fetched, path)
        return
    with input_of(source, env) as path:
        digest = file_digest(path)
        if sha256 is not None and digest[0] != sha256:
            raise RunRefusedError(
                StopReason.INPUT_UNUSABLE,
                f"index: {shown(source)}: its sha256 is {digest[0]}, not {sha256} as "
                f"{setting} says",
            )
        yield path, Read(shown(source), digest)


def cache_folder(env: Mapping[str, str]) -> Path:
    """batchval's cache: `$BATCHVAL_CACHE_DIR`, else `$XDG_CACHE_HOME/batchval`, else
    `~/.cache/batchval`."""
    if given := env.get(CACHE_VARIABLE):
        return Path(given)
    return Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "batchval"


def cached(
    url: str, sha256: str, env: Mapping[str, str], setting: str
) -> tuple[Path, tuple[str, int], str]:
    """The copy of the file at `url` kept in the cache by its `sha256` (its digest, and
    `cache` or `downloaded`): read without a request when the cache holds it whole, else
    downloaded (`_download`). A kept copy whose bytes are no longer its hash's is
    downloaded again."""
    folder = cache_folder(env) / "index"
    suffix = PurePosixPath(urlsplit(url).path).suffix
    kept = folder / (sha256 + (suffix if _SUFFIX.fullmatch(suffix) else ""))
    if kept.is_file():
        digest = file_digest(kept)
        if digest[0] == sha256:
            log.info("run.index.cached", url=shown(url), copy=str(kept))
            return kept, digest, "cache"
        log.warning("run.index.cache_damaged", copy=str(kept), sha256=digest[0])
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(dir=folder, prefix=".download-")
    except OSError as exc:
        raise _unwritable(folder, exc) from None
    partial = Path(name)
    try:
        with os.fdopen(handle, "wb") as out:
            digest = _download(url, sha256, out, setting)
        os.replace(partial, kept)
    except OSError as exc:
        raise _unwritable(folder, exc) from None
    finally:
        partial.unlink(missing_ok=True)
    log.info("run.index.downloaded", url=shown(url), bytes=digest[1], copy=str(kept))
    return kept, digest, "downloaded"


def _download(url: str, sha256: str, out: BinaryIO, setting: str) -> tuple[str, int]:
    """The file at `url` streamed into `out`, hashed as it comes (never held whole); its
    digest, when its sha256 is `sha256`. No answer, or an HTTP error status, is
    `store_unavailable` (75); another hash `input_unusable` (65)."""
    where = shown(url)
    digest, size = hashlib.sha256(), 0
    headers = {"User-Agent": f"batchval/{__version__}"}
    try:
        with (
            httpx.Client(timeout=_TIMEOUT, follow_redirects=True, headers=headers) as http,
            http.stream("GET", url) as answer,
        ):
            if not answer.is_success:
                status = f"HTTP {answer.status_code} {answer.reason_phrase}".strip()
                raise RunRefusedError(
                    StopReason.STORE_UNAVAILABLE,
                    f"index: {where}: {status}, nothing kept (the same command tries again)",
                )
            for chunk in answer.iter_bytes(_CHUNK):
                digest.update(chunk)
                size += len(chunk)
                out.write(chunk)
    except httpx.InvalidURL as exc:
        raise RunRefusedError(StopReason.REFUSED, f"index: {where} is not a URL: {exc}") from None
    except httpx.HTTPError as exc:
        found = diagnose(exc)
        said = found.kind.value + (f" ({found.detail})" if found.detail else "")
        raise RunRefusedError(
            StopReason.STORE_UNAVAILABLE,
            f"index: {where}: {said.replace(url, where)}, nothing kept (the same command "
            "tries again)",
        ) from None
    if digest.hexdigest() != sha256:
        raise RunRefusedError(
            StopReason.INPUT_UNUSABLE,
            f"index: {where}: the download's sha256 is {digest.hexdigest()}, not {sha256} as "
            f"{setting} says: it is discarded (is the hash the file's, or has the file at the "
            "URL changed?)",
        )
    return sha256, size


def _unwritable(folder: Path, exc: OSError) -> RunRefusedError:
    return RunRefusedError(
        StopReason.REFUSED,
        f"index: the cache folder {folder} cannot be written ({exc.strerror or exc}): set "
        f"{CACHE_VARIABLE} to a folder batchval may write",
    )


def result_lender_columns(results: Path, configured: Mapping[str, str]) -> dict[str, str]:
    """Lender field -> the results.parquet column that holds it (none when the columns
    cannot be told apart: refused when the input was read)."""
    fixed = {*RESULT_COLUMNS, *INDEX_DESCRIPTIONS}
    names = [n for n in pq.read_schema(results).names if n not in fixed]  # the input's
    try:
        return find_lender_columns(names, configured)
    except LenderColumnError:
        return {}


def with_unvalued_rows(
    table: pa.Table, unsent: Sequence[tuple[int, str | None]], passthrough: pa.Table
) -> tuple[pa.Table, dict[int, str | None]]:
    """A --book night's results with a row for each loan of `unsent` (row number, its
    request's postcode) that has none yet (left for a later night with no book entry to
    carry): its pass-through values, `source` `index`, no valuation (`book.rows_of`); the
    index columns give it its value. In row order, the schema's metadata kept; with the
    rows added (row number -> postcode). `passthrough` is the checkpoint's, `row_number`
    first, as `booking.passthrough_table` gives it."""
    have = set(table.column("row_number").to_pylist())
    wanted = [(n, postcode) for n, postcode in unsent if n not in have]
    if not wanted:
        return table, {}
    numbers = pa.array([n for n, _ in wanted], pa.int64())
    added = rows_of(table.schema, numbers, passthrough, "index")
    whole = pa.concat_tables([table, added]).sort_by("row_number")
    return whole.replace_schema_metadata(table.schema.metadata), dict(wanted)
