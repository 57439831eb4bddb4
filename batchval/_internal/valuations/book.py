"""The book file of `run --book PATH`: the latest valuation of every row identity.

One Parquet file, one row an identity (the `--row-id` column's value as text, or the
request fingerprint when there is no row id), replaced at the end of each invocation that
gets as far as its outputs: atomically on a local path (a kill before then leaves the old
file whole), by compare-and-swap at a URL, where a run that lost a race to another
replaces nothing (`place/versioned`). Its columns are `BOOK_KEYS`, then every fixed
column of results.parquet (`contract/schemas.RESULT_TAIL`) that the valuation or the
lender arithmetic gives, by the same names and types: a row carried from the book into
results.parquet takes them by name. The three columns results.parquet has and the book
has not: `row_number` and the pass-through columns (tonight's input gives them), `source`
and `credits_charged` (a carried row is `book` and cost nothing tonight).

Entries are never dropped: an identity that left the input keeps its entry, so that a
loan that comes back is not valued again while its valuation is fresh.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import operator
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from batchval._internal.contract import RESULT_COLUMNS
from batchval._internal.place import COMPRESSION, Column, VersionedFile, atomic_file

BOOK_VERSION = "1"
IDENTITY_META = "batchval.book_identity"  # the --row-id column, or `request`
API_META = "batchval.book_api"  # a hash of the API's address and client id: whose valuations
REQUEST_IDENTITY = "request"
# Result columns the book does not keep: tonight's own, or the input's.
NOT_KEPT = frozenset({"row_number", "source", "credits_charged"})


@dataclasses.dataclass(frozen=True, slots=True)
class BookKey:
    """What the book keeps beside the valuation, for the plan (`booking`)."""

    identity: str
    request_fingerprint: str
    run_id: str


BOOK_KEYS: tuple[Column[BookKey], ...] = (
    Column(
        "identity",
        pa.string(),
        "The row's identity: its --row-id value as text, or its request_fingerprint.",
        operator.attrgetter("identity"),
        nullable=False,
    ),
    Column(
        "request_fingerprint",
        pa.string(),
        "SHA-256 of the canonical request JSON (not the Idempotency-Key, which has the day).",
        operator.attrgetter("request_fingerprint"),
        nullable=False,
    ),
    Column(
        "run_id",
        pa.string(),
        "The run that valued the entry (day-YYYY-MM-DD by default).",
        operator.attrgetter("run_id"),
        nullable=False,
    ),
)


class BookError(Exception):
    """The book cannot be read (exit 65, like an input)."""


class BookMismatchError(BookError):
    """The book was kept by other settings: another --row-id, API or account (exit 64)."""


@dataclasses.dataclass(frozen=True, slots=True)
class BookEntry:
    """What the plan needs of an identity's entry."""

    fingerprint: str
    valued_at: dt.datetime | None
    indexed_ltv: float | None
    estimate: float | None = None
    indexed_to: str | None = None  # `YYYY-MM`
    local_authority: str | None = None


def read_book(file: VersionedFile, identity: str, api: str) -> tuple[pa.Table | None, str | None]:
    """The whole book (None when there is none yet) and its version, for `write_book`.
    Raises BookError when it cannot be read, was kept under another identity (a --row-id
    of another column), or holds another API's or account's valuations (test answers must
    never be carried into a live run's results)."""
    path = file.location
    try:
        found = file.read()
    except OSError as exc:
        raise BookError(f"the book {path} cannot be read: {exc}") from None
    if found is None:
        return None, None
    data, version = found
    try:
        table = pq.read_table(pa.BufferReader(data))
    except (OSError, pa.ArrowException) as exc:
        raise BookError(f"the book {path} cannot be read: {exc}") from None
    meta = table.schema.metadata or {}
    kept = meta.get(IDENTITY_META.encode(), b"").decode()
    missing = [c.name for c in BOOK_KEYS if c.name not in table.column_names]
    if missing or "valued_at" not in table.column_names:
        raise BookError(f"the book {path} is not a batchval book (no {missing or 'valued_at'})")
    if kept != identity:
        raise BookMismatchError(
            f"the book {path} keeps rows by {kept!r}, this run by {identity!r}: give "
            "the same --row-id, or a new --book"
        )
    if meta.get(API_META.encode(), b"").decode() != api:
        raise BookMismatchError(
            f"the book {path} holds valuations made with another API or account (client "
            "id); give this one a --book of its own"
        )
    return table, version


def book_index(table: pa.Table | None) -> dict[str, BookEntry]:
    """Identity -> entry, for the plan."""
    if table is None:
        return {}

    def column(name: str) -> list[Any]:
        if name not in table.column_names:
            return [None] * table.num_rows
        return list(table.column(name).to_pylist())

    return {
        identity: BookEntry(fingerprint, valued_at, figure, estimate, month, authority)
        for identity, fingerprint, valued_at, figure, estimate, month, authority in zip(
            column("identity"),
            column("request_fingerprint"),
            column("valued_at"),
            column("indexed_ltv"),
            column("estimate"),
            column("indexed_to"),
            column("local_authority"),
            strict=True,
        )
    }


def carry_into_results(
    results: Path,
    book: pa.Table | None,
    unsent: Sequence[tuple[int, str]],
    passthrough: pa.Table,
    *,
    valued: Sequence[tuple[int, str, str]] | None = None,
    refresh: Callable[[pa.Table], pa.Table] | None = None,
) -> int:
    """Complete a --book night's results.parquet, rewritten atomically once: a row for
    each input row not valued tonight whose identity has a book entry, `source = book`;
    and, with `valued` (row number, identity, request fingerprint of the rows valued
    tonight), `PREVIOUS_COLUMNS` from the entries tonight's valuations replace. Returns
    how many rows were carried.

    `unsent` is (row number, identity) in row order; `passthrough` is tonight's
    pass-through values with their `row_number` first. `refresh` makes the carried rows'
    figures that depend on tonight (their revaluation triggers) again."""
    carried = _carried(pq.read_schema(results), book, unsent, passthrough)
    if carried is not None and refresh is not None:
        carried = refresh(carried)
    if carried is None and valued is None:
        return 0
    table = pq.read_table(results)
    if carried is not None:
        table = pa.concat_tables([table, carried]).sort_by("row_number")
    if valued is not None:
        table = _with_previous(table, book, valued)
    with atomic_file(results) as file:
        pq.write_table(table, file, compression=COMPRESSION)
    return 0 if carried is None else carried.num_rows


def _carried(
    schema: pa.Schema,
    book: pa.Table | None,
    unsent: Sequence[tuple[int, str]],
    passthrough: pa.Table,
) -> pa.Table | None:
    """The carried rows, in results.parquet's `schema`; None when there are none."""
    if book is None or not unsent:
        return None
    numbers = pa.array([n for n, _ in unsent], pa.int64())
    at = pc.index_in(pa.array([i for _, i in unsent], pa.string()), book.column("identity"))
    found = pc.is_valid(at)
    numbers, at = numbers.filter(found), at.filter(found)
    if not len(numbers):
        return None
    return rows_of(schema, numbers, passthrough, "book", book.take(at))


def rows_of(
    schema: pa.Schema,
    numbers: pa.Array,
    passthrough: pa.Table,
    source: str,
    entries: pa.Table | None = None,
) -> pa.Table:
    """Rows of results.parquet's `schema` that tonight did not value, one a row number of
    `numbers`: their pass-through values (`passthrough`, `row_number` first, by position),
    `source`, no credit charged, each other column from `entries` (the book's, in the same
    order) where it has it, else null."""
    given = passthrough.take(pc.index_in(numbers, passthrough.column("row_number")))
    return rows_with(schema, numbers, given, source, entries)


def rows_with(
    schema: pa.Schema,
    numbers: pa.Array,
    given: pa.Table,
    source: str,
    entries: pa.Table | None = None,
) -> pa.Table:
    """`rows_of` with the rows' pass-through values already `given`, one a row number of
    `numbers`, in the same order."""
    columns: list[pa.Array] = []
    for i, field in enumerate(schema):
        if field.name == "row_number":
            values: Any = numbers
        elif 1 <= i < given.num_columns:  # the pass-through columns, by position
            values = given.column(i).combine_chunks()
        elif field.name == "source":
            values = pa.repeat(pa.scalar(source, field.type), len(numbers))
        elif field.name == "credits_charged":
            values = pa.repeat(pa.scalar(0, field.type), len(numbers))
        elif entries is not None and field.name in entries.column_names:
            values = entries.column(field.name).combine_chunks().cast(field.type)
        else:  # a column tonight has and the entry's night had not (an extra asked now)
            values = pa.nulls(len(numbers), field.type)
        columns.append(values)
    return pa.Table.from_arrays(columns, schema=schema)


# What a row valued tonight had before, from its book entry: results.parquet's last two
# columns on a --book run (docs/outputs.md, The book).
PREVIOUS_COLUMNS: tuple[tuple[str, str, str], ...] = (
    (
        "previous_estimate",
        "estimate",
        "On a --book run: the estimate of the book entry this row's valuation replaced "
        "(null: it had none, or the row was carried).",
    ),
    (
        "previous_valued_at",
        "valued_at",
        "On a --book run: when the book entry this row's valuation replaced was valued (UTC).",
    ),
)


def _with_previous(
    table: pa.Table, book: pa.Table | None, valued: Sequence[tuple[int, str, str]]
) -> pa.Table:
    """`table` with `PREVIOUS_COLUMNS`: for each row valued tonight whose identity had a
    book entry, that entry's figures; null elsewhere."""
    identity = {n: i for n, i, _ in valued}
    numbers = table.column("row_number").to_pylist()
    wanted = pa.array([identity.get(n) for n in numbers], pa.string())
    at = (
        pc.index_in(wanted, book.column("identity"))
        if book is not None
        else pa.nulls(len(wanted), pa.int32())
    )
    for name, source, description in PREVIOUS_COLUMNS:
        kind = table.schema.field(source).type
        values = (
            book.column(source).take(at).cast(kind)
            if book is not None and source in book.column_names
            else pa.nulls(len(wanted), kind)
        )
        field = pa.field(name, kind, metadata={"description": description})
        table = table.append_column(field, values)
    return table


def write_book(
    file: VersionedFile,
    old: pa.Table | None,
    version: str | None,
    results: Path,
    valued: Sequence[tuple[int, str, str]],
    *,
    run_id: str,
    identity: str,
    api: str,
    metadata: Mapping[str, str] | None = None,
) -> int | None:
    """Replace the book `old` (read at `version`), whole: tonight's valuations (`valued`:
    row number, identity, request fingerprint; read back from results.parquet) in place of
    their identities' entries, every other entry as it was. Returns the book's rows, or
    None when the file no longer holds `version` (another run replaced it since it was
    read): nothing is written then."""
    table = pq.read_table(results)
    at = pc.index_in(pa.array([n for n, *_ in valued], pa.int64()), table.column("row_number"))
    tonight = table.take(at)
    keys = {
        "identity": pa.array([i for _, i, _ in valued], pa.string()),
        "request_fingerprint": pa.array([f for *_, f in valued], pa.string()),
        "run_id": pa.array([run_id] * len(valued), pa.string()),
    }
    kept = [n for n in tonight.column_names if n in RESULT_COLUMNS and n not in NOT_KEPT]
    fields = [c.field() for c in BOOK_KEYS] + [tonight.schema.field(n) for n in kept]
    new = pa.Table.from_arrays(
        [*keys.values(), *(tonight.column(n) for n in kept)], schema=pa.schema(fields)
    )
    # An identity valued twice tonight (rows sharing one request) is kept once.
    new = new.take(_first_of_each(new.column("identity")))
    parts = [new]
    if old is not None:
        stays = pc.invert(pc.is_in(old.column("identity"), value_set=new.column("identity")))
        parts.append(old.filter(stays))
    book = pa.concat_tables(parts, promote_options="permissive").sort_by("identity")
    book = book.replace_schema_metadata(
        {
            **(metadata or {}),
            "batchval.file": "book",
            "batchval.book_version": BOOK_VERSION,
            IDENTITY_META: identity,
            API_META: api,
        }
    )
    buffer = io.BytesIO()
    pq.write_table(book, buffer, compression=COMPRESSION)
    if not file.swap(buffer.getvalue(), version):
        return None
    return int(book.num_rows)


def age_profile(valued_at: Sequence[dt.datetime | None], now: dt.datetime) -> dict[str, int]:
    """How many valuations are within 30, 90 and 180 days of `now`, and older."""
    profile = {"within_30_days": 0, "within_90_days": 0, "within_180_days": 0, "older": 0}
    for when in valued_at:
        days = (now - when).total_seconds() / 86_400 if when is not None else None
        if days is None or days > 180:
            profile["older"] += 1
        elif days > 90:
            profile["within_180_days"] += 1
        elif days > 30:
            profile["within_90_days"] += 1
        else:
            profile["within_30_days"] += 1
    return profile


def _first_of_each(values: pa.ChunkedArray) -> pa.Array:
    seen: set[Any] = set()
    first = []
    for i, value in enumerate(values.to_pylist()):
        if value not in seen:
            seen.add(value)
            first.append(i)
    return pa.array(first, pa.int64())
