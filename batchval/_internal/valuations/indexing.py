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
import itertools
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO
from urllib.parse import urlsplit

import httpx
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from batchval._internal import logs
from batchval._internal.api import diagnose, tls_context
from batchval._internal.contract import (
    INDEX_DESCRIPTIONS,
    RESULT_COLUMNS,
    VALUE_METHODS,
    index_fields,
    index_inputs,
    index_table,
    loan_authorities,
    tracking,
)
from batchval._internal.input import (
    ONSPD_ATTRIBUTION,
    UKHPI_ATTRIBUTION,
    HousePriceIndex,
    IndexOptions,
    InputError,
    LenderColumnError,
    PostcodeAuthorities,
    file_digest,
    find_lender_columns,
    is_web,
    month_text,
    read_postcode_directory,
    read_ukhpi,
    shown,
)
from batchval._internal.outcome import RunRefusedError, StopReason
from batchval._internal.place import input_of, write_parquet
from batchval._internal.valuations.api_index import HeldIndex
from batchval._internal.valuations.book import rows_with
from batchval._internal.valuations.booking import Unvalued
from batchval._version import __version__

log = logs.get_logger()

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


# What `index.source: api` is, in the contract's words (docs/api.md, 2.5): not the UK HPI.
API_INDEX_WORDS = (
    "the national house price index for each local authority, as the API's street "
    "analyses give it (priceIndex), read through one postcode of the authority and held "
    "in the book month by month"
)


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
            "attribution": [UKHPI_ATTRIBUTION] if self.options.source == "ukhpi" else [],
        }
        if self.options.source == "api":
            found["description"] = API_INDEX_WORDS
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
        unvalued: Unvalued | None = None,
    ) -> tuple[int, dict[str, float | int | None]]:
        """results.parquet with the index columns added (`index_table`), replaced
        atomically once, its schema's metadata kept; returns its rows and how the index
        tracked tonight's estimates (`indexation.tracking`). With `unvalued` (a
        --book night's unsent rows, their row numbers and their requests' postcodes, and
        the checkpoint's pass-through table: `booking.Unvalued`), a row first for each loan
        the file has none for (`book.rows_of`, `source` index), in row order.

        The index is worked out from the columns it reads alone (`index_inputs`); the
        file is then streamed into its new self `CHUNK_ROWS` rows at a time, the
        unvalued rows made as they come, so that no whole copy of the results is held.
        The index's columns are worked out a piece at a time (`_pieces`), each while the
        rows before it are written."""
        source = pq.ParquetFile(results)
        try:
            schema = source.schema_arrow
            read = source.read(columns=index_inputs(schema.names, lender))
            added = _Unvalued.of(read.column("row_number"), unvalued, schema)
            in_order = _in_row_order(read.column("row_number"))
            loans = _loans(read, added, in_order)
            frame = loans.drop("_file")
            found = loan_authorities(frame, self.directory), self.index.frame()

            def piece(part: pl.DataFrame, at: int) -> tuple[pa.Table, pl.DataFrame]:
                return index_table(
                    part,
                    self.index,
                    lender=lender,
                    fall_share=fall_share,
                    found=(found[0].slice(at, part.height), found[1]),
                )

            valued: list[pl.DataFrame] = []
            pieces = _pieces(frame, piece, valued)
            chunks = _merged(source, schema, in_order, added, loans["_file"], pieces)
            out = pa.schema([*schema, *index_fields()], metadata=schema.metadata)
            first = next(chunks, None)
            coming = chunks if first is None else itertools.chain([first], chunks)
            encoded = _text_columns(out, first)
            rows = write_parquet(results, out, coming, dictionary=encoded, ahead=True)
            for _ in pieces:  # an empty file's one piece, which no chunk asked for
                pass
            return rows, tracking(self.index, pl.concat(valued))
        finally:
            source.close()


# The rows results.parquet is rewritten by, a chunk at a time; the index's columns are
# worked out this many chunks at a time.
CHUNK_ROWS = 65_536
PIECE_CHUNKS = 4


def _pieces(
    frame: pl.DataFrame,
    work: Callable[[pl.DataFrame, int], tuple[pa.Table, pl.DataFrame]],
    valued: list[pl.DataFrame],
) -> Iterator[pa.Table]:
    """The index's columns of the loans of `frame` (`work` of each piece and where it
    starts), `PIECE_CHUNKS` chunks at a time, in order (an empty `frame` is one piece);
    each piece's loans valued tonight put in `valued`. The next piece is worked out by a
    thread of its own while this one's rows are made and written (polars lets go of the
    interpreter's lock): on two cores, the index's seconds hide behind the write's."""
    size = PIECE_CHUNKS * CHUNK_ROWS
    starts = range(0, max(frame.height, 1), size)
    with ThreadPoolExecutor(1) as worker:
        coming = worker.submit(work, frame.slice(0, size), 0)
        for start in starts:
            columns, tonight = coming.result()
            if start + size < frame.height:
                coming = worker.submit(work, frame.slice(start + size, size), start + size)
            valued.append(tonight)
            yield columns


def _text_columns(schema: pa.Schema, first: pa.Table | None) -> list[str]:
    """The columns of text the rewrite dictionary-encodes: a dictionary of the numbers (a
    million distinct amounts, dates, ratios) is dropped by the writer once it outgrows its
    page, after the work of making it (the write took a third longer), and so is one of a
    text column whose values are mostly distinct (a loan's id) in the first chunk."""
    texts = [field.name for field in schema if pa.types.is_string(field.type)]
    if first is None:
        return texts
    kept = []
    for name in texts:
        column = first.column(name)
        given = len(column) - column.null_count
        if given < 2 or pc.count_distinct(column).as_py() <= given // 2:
            kept.append(name)
    return kept


@dataclasses.dataclass(frozen=True, slots=True)
class _Unvalued:
    """A --book night's loans that results.parquet has no row for: their row numbers and
    postcodes, in row order, and where their pass-through values are (`at`, in the same
    order). Only the index's inputs are taken for all of them at once; a chunk's whole rows
    are taken as the rewrite comes to it, while the chunk before is written."""

    numbers: pa.Array
    postcodes: pa.Array
    passthrough: pa.Table  # the checkpoint's pass-through values (`row_number` first), whole
    at: pa.Array  # each unvalued loan's row in `passthrough`
    schema: pa.Schema  # results.parquet's

    @classmethod
    def of(
        cls,
        have: pa.ChunkedArray,
        unvalued: Unvalued | None,
        schema: pa.Schema,
    ) -> _Unvalued | None:
        if unvalued is None:
            return None
        numbers, postcodes, passthrough = unvalued
        wanted = pc.invert(pc.is_in(numbers, have))
        numbers, postcodes = numbers.filter(wanted), postcodes.filter(wanted)
        if not len(numbers):
            return None
        if not _rising(numbers):
            order = pc.sort_indices(numbers)
            numbers, postcodes = numbers.take(order), postcodes.take(order)
        at = _places(numbers, passthrough.column("row_number"))
        # One copy of the pass-through's chunks, so that each chunk's take is a take from
        # arrays (a take from chunks joins them again each time).
        return cls(numbers, postcodes, passthrough.combine_chunks(), at, schema)

    def inputs(self, like: pa.Schema) -> pa.Table:
        """Their columns of `like` (the index's inputs of results.parquet): the
        pass-through ones from `given` (by position, as `book.rows_of` places them), the
        postcode their request asks for, `source` index, the rest null."""
        count = len(self.numbers)
        arrays: list[pa.Array | pa.ChunkedArray] = []
        for field in like:
            at = self.schema.get_field_index(field.name)
            if field.name == "row_number":
                arrays.append(self.numbers)
            elif 1 <= at < self.passthrough.num_columns:
                arrays.append(self.passthrough.column(at).take(self.at).cast(field.type))
            elif field.name == "input_postcode":
                arrays.append(self.postcodes.cast(field.type))
            elif field.name == "source":
                arrays.append(pa.repeat("index", count).cast(field.type))
            else:
                arrays.append(pa.nulls(count, field.type))
        return pa.Table.from_arrays(arrays, schema=like)

    def rows(self, start: int, count: int) -> pa.Table:
        """The whole rows of results.parquet's schema of `count` of them from `start`."""
        given = self.passthrough.take(self.at.slice(start, count))
        return rows_with(self.schema, self.numbers.slice(start, count), given, "index")


def _loans(read: pa.Table, added: _Unvalued | None, in_order: bool) -> pl.DataFrame:
    """The index's inputs of every loan, results.parquet's (`read`, `in_order` when its
    row numbers rise) and the unvalued ones, in row order, with `_file`: whether the row
    is the file's. Two runs in row order are merged, not sorted again."""
    mine = _frame(read.append_column("_file", pa.repeat(True, read.num_rows)))
    if not in_order:
        mine = mine.sort("row_number", maintain_order=True)
    if added is None:
        return mine
    extra = added.inputs(read.schema)
    return mine.merge_sorted(
        _frame(extra.append_column("_file", pa.repeat(False, extra.num_rows))), "row_number"
    )


def _frame(table: pa.Table) -> pl.DataFrame:
    frame = pl.from_arrow(table.replace_schema_metadata(None))
    assert isinstance(frame, pl.DataFrame)  # a Table always gives a DataFrame
    return frame


def _in_row_order(numbers: pa.ChunkedArray) -> bool:
    """Whether the row numbers rise from first to last (results.parquet is written so)."""
    return _rising(numbers.combine_chunks())


def _places(numbers: pa.Array, among: pa.ChunkedArray) -> pa.Array:
    """Each number's place in `among` (null where it is not there). The checkpoint numbers
    its pass-through rows one by one from the first: then a subtraction, not a look-up
    in a table of a million (a tenth of a second)."""
    whole = among.combine_chunks()
    if len(whole) and whole[-1].as_py() - whole[0].as_py() == len(whole) - 1 and _rising(whole):
        places = pc.subtract(numbers, whole[0])
        bounds = pc.min_max(places)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if low is None or (low >= 0 and high < len(whole)):  # all inside (as a night's are)
            return places
        inside = pc.and_(pc.greater_equal(places, 0), pc.less(places, len(whole)))
        return pc.if_else(inside, places, None)
    return pc.index_in(numbers, whole)


def _rising(numbers: pa.Array) -> bool:
    if len(numbers) < 2:
        return True
    rising = pc.greater(numbers.slice(1), numbers.slice(0, len(numbers) - 1))
    return bool(pc.all(rising).as_py())


def _merged(
    source: pq.ParquetFile,
    schema: pa.Schema,
    in_order: bool,
    added: _Unvalued | None,
    from_file: pl.Series,
    pieces: Iterator[pa.Table],
) -> Iterator[pa.Table]:
    """results.parquet's rows and the unvalued ones, merged in row order (`from_file`
    says whose each row is), `CHUNK_ROWS` at a time, each chunk with its index columns
    (`pieces`, of `PIECE_CHUNKS` chunks each). A file not in row order (never written so)
    is read whole and sorted."""
    plain = schema.remove_metadata()
    batches: Iterator[pa.Table]
    if in_order:
        batches = (pa.Table.from_batches([b]) for b in source.iter_batches(batch_size=CHUNK_ROWS))
    else:
        batches = iter([source.read().sort_by("row_number")])
    held: list[pa.Table] = []  # the file's rows read but not yet written
    held_rows = unvalued_at = 0
    columns = pa.table({})
    for start in range(0, len(from_file), CHUNK_ROWS):
        if start % (PIECE_CHUNKS * CHUNK_ROWS) == 0:
            columns = next(pieces)
        mine = int(from_file.slice(start, CHUNK_ROWS).sum())
        count = min(CHUNK_ROWS, len(from_file) - start)
        while held_rows < mine:
            batch = next(batches)
            held.append(batch)
            held_rows += batch.num_rows
        whole = pa.concat_tables(held) if held else plain.empty_table()
        parts = [whole.slice(0, mine).replace_schema_metadata(None)]
        rest = whole.slice(mine)
        held, held_rows = [rest], rest.num_rows
        if count > mine:
            assert added is not None
            parts.append(added.rows(unvalued_at, count - mine).replace_schema_metadata(None))
            unvalued_at += count - mine
        if mine and count > mine:
            chunk = _interleaved(parts[0], parts[1], from_file.slice(start, count))
        else:
            chunk = pa.concat_tables(parts)
        at = start % (PIECE_CHUNKS * CHUNK_ROWS)
        for field in columns.schema:
            chunk = chunk.append_column(field, columns.column(field.name).slice(at, count))
        yield chunk


# A chunk whose rows change hands (the file's, the unvalued) this many times or fewer is
# joined from slices of the two; more, and the two are sorted together.
RUNS_SLICED = 512


def _interleaved(mine: pa.Table, theirs: pa.Table, from_file: pl.Series) -> pa.Table:
    """The rows of `mine` (results.parquet's) and `theirs` (the unvalued), each in row
    order, interleaved as `from_file` says whose each row is. A few runs of each (a night
    values a few loans in a chunk of the book) are joined as slices of the two, one copy of
    the chunk (a quarter of a sort's time, which takes every column in a new order); many
    runs are sorted."""
    runs = from_file.rle().struct.unnest()
    if runs.height > RUNS_SLICED:
        return pa.concat_tables([mine, theirs]).sort_by("row_number")
    parts, taken = [], {True: 0, False: 0}
    for length, file in runs.iter_rows():
        parts.append((mine if file else theirs).slice(taken[file], length))
        taken[file] += length
    return pa.concat_tables(parts).combine_chunks()


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
    if not options.on:
        return None
    began = time.monotonic()
    try:
        index, read = HeldIndex().house_price_index(), None  # api: the book's, once read
        if options.file is not None:
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
    # Read before the input is: tests/bench/indexed.py counts these seconds to the index.
    log.info(
        "run.index.read",
        authorities=len(index.levels),
        postcodes=None if directory is None else directory.frame.height,
        seconds=round(time.monotonic() - began, 3),
    )
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
            httpx.Client(
                verify=tls_context(), timeout=_TIMEOUT, follow_redirects=True, headers=headers
            ) as http,
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
