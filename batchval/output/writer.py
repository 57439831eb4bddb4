"""Writing DIR's outputs from the checkpoint: results.parquet, problems.parquet, JSON.

Atomic: each file is written to a hidden temporary beside it (`.results.parquet.tmp-PID`,
hidden so that dataset readers of DIR skip it), flushed and fsynced, then moved onto its
name with `os.replace` and the directory fsynced. A reader sees the old file or the new
one, never half of one; a crash or `kill -9` mid-write leaves the old file as it was (and
at worst a stale temporary, which a later write of the same file never reads).

Streamed: the checkpoint hands out rows in batches; each batch is built column by column
from the answers' JSON (a tuple per row, transposed, then one Arrow conversion per
column), and batches are gathered into Parquet row groups: memory stays flat however long
the input. An answer that strays from the spec (a number where a string belongs, 2.5
where a whole number does) never stops the write: that column of that batch is converted
again value by value; text is kept as text, and a number that cannot fit is null.

Credits: rows with identical requests share one call and one charge. Every such row gets
the valuation, but only the first of them (in row order) carries `credits_charged`, the
others 0, so that the column sums to what was charged. That takes a set of the charged
keys seen so far: about 100 bytes per distinct charged request.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from batchval.output.schemas import (
    COMMENTARY_JSON_TYPE,
    REBUILD_COST_JSON_TYPE,
    problems_schema,
    results_schema,
)
from batchval.store.checkpoint import Checkpoint

COMPRESSION = "zstd"
# Memory, not speed, sets these two. Rows are turned from JSON into Arrow a batch at a
# time (parsed JSON takes about 10 kB a row with commentary); batches are gathered, as
# Arrow, into row groups of about ROW_GROUP_BYTES (some 90,000 rows without commentary,
# 15,000 with): big enough for readers, small enough to keep the process under 300 MB.
BATCH_ROWS = 5_000
ROW_GROUP_BYTES = 32 << 20
FLOOR_AREA_HINT = "Supply floorAreaSqm (a floor area column) for this row."

_EMPTY: Mapping[str, Any] = {}
_NANOSECONDS = pa.timestamp("ns", tz="UTC")
_CONVERSION_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError)
# The JSON objects are converted under the API's member names, then viewed as the columns'.
_JSON_TYPES = {"commentary": COMMENTARY_JSON_TYPE, "rebuild_cost": REBUILD_COST_JSON_TYPE}
# The request field an API problem type is about (the problem JSON may also name one).
_PROBLEM_FIELDS = {"floor-area-required": "floorAreaSqm", "outside-coverage": "postcode"}
_TELLS_TO_SUPPLY = re.compile(r"\b(?:supply|send|provide|add|give|include)\b[^.]*floor ?area", re.I)

_Row = tuple[Any, ...]


def write_results(checkpoint: Checkpoint, path: Path, passthrough: Sequence[str]) -> int:
    """Write every valued row to `path` (results.parquet), atomically; the rows written."""
    schema = results_schema(passthrough)
    charged: set[str] = set()  # keys whose charge a row already carries

    def tables() -> Iterator[pa.Table]:
        for batch in checkpoint.valued_rows(BATCH_ROWS):
            yield _table(batch, schema, passthrough, lambda row: _result(row, charged))

    return _write_parquet(path, schema, tables())


def write_problems(checkpoint: Checkpoint, path: Path, passthrough: Sequence[str]) -> int:
    """Write every row that got no valuation to `path` (problems.parquet), atomically;
    the rows written."""
    schema = problems_schema(passthrough)
    tables = (
        _table(batch, schema, passthrough, _problem)
        for batch in checkpoint.problem_rows(BATCH_ROWS)
    )
    return _write_parquet(path, schema, tables)


def write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    """Write `data` as indented UTF-8 JSON to `path`, atomically."""
    # Serialised first: a value JSON cannot hold fails before any file is touched.
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    with _replacing(path) as file:
        file.write(text.encode())


# --- files ---------------------------------------------------------------------------------


@contextlib.contextmanager
def _replacing(path: Path) -> Iterator[IO[bytes]]:
    """A new file that takes the place of `path` only if the block ends without error."""
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(temporary, "wb") as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        # Some file systems (and platforms) refuse fsync on a directory; the rename has
        # still happened, it is only less certain to survive a power cut.
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def _write_parquet(path: Path, schema: pa.Schema, tables: Iterable[pa.Table]) -> int:
    rows = 0
    with _replacing(path) as file, pq.ParquetWriter(file, schema, compression=COMPRESSION) as out:
        for group in _row_groups(tables):
            out.write_table(group)
            rows += group.num_rows
    return rows


def _row_groups(tables: Iterable[pa.Table]) -> Iterator[pa.Table]:
    """The tables gathered into row groups of about `ROW_GROUP_BYTES` of Arrow data."""
    gathered: list[pa.Table] = []
    size = 0
    for table in tables:
        gathered.append(table)
        size += table.nbytes
        if size >= ROW_GROUP_BYTES:
            yield pa.concat_tables(gathered)
            gathered, size = [], 0
    if gathered:
        yield pa.concat_tables(gathered)


# --- rows to columns -----------------------------------------------------------------------


def _table(
    batch: Sequence[_Row],
    schema: pa.Schema,
    passthrough: Sequence[str],
    fixed: Callable[[_Row], _Row],
) -> pa.Table:
    """One batch as a table: row_number, the pass-through values, then `fixed(row)`; every
    checkpoint row starts with (row_number, passthrough JSON)."""
    records = []
    for row in batch:
        given = json.loads(row[1]) if passthrough else _EMPTY
        records.append((row[0], *(given.get(name) for name in passthrough), *fixed(row)))
    columns: list[Sequence[Any]] = list(zip(*records, strict=True)) or [()] * len(schema)
    arrays = [_column(values, field) for values, field in zip(columns, schema, strict=True)]
    return pa.Table.from_arrays(arrays, schema=schema)


def _result(row: _Row, charged: set[str]) -> _Row:
    """The fixed result columns of (row_number, passthrough, key, answer), in order."""
    key: str = row[2]
    body = json.loads(row[3])
    figures = body.get("valuation") or _EMPTY
    price_range = figures.get("range") or _EMPTY
    location = body.get("location") or _EMPTY
    given = body.get("input") or _EMPTY
    credits = 0
    charge = body.get("charge")
    if charge and key not in charged:
        credits = charge.get("credits") or 0
        if credits:
            charged.add(key)
    return (
        body.get("id"),
        "test" if body.get("mode") == "test" else "live",
        body.get("valuedAt"),
        figures.get("estimate"),
        price_range.get("low"),
        price_range.get("high"),
        price_range.get("coverage"),
        figures.get("currency"),
        figures.get("indexedTo"),
        location.get("sector"),
        location.get("localAuthority"),
        body.get("dataQuality"),
        (body.get("model") or _EMPTY).get("version"),
        given.get("postcode"),
        given.get("propertyType"),
        given.get("bedrooms"),
        given.get("floorAreaSqm"),
        given.get("floorAreaSource"),
        given.get("yearBuilt"),
        given.get("builtForm"),
        given.get("wallsEnergyEfficiency"),
        body.get("reference"),
        body.get("commentary"),
        body.get("rebuildCost"),
        credits,
        key,
    )


def _problem(row: _Row) -> _Row:
    """The fixed problem columns of (row_number, passthrough, field, rule, detail,
    problem JSON, attempts, raw answer), in order."""
    _, _, field, rule, detail, problem_json, attempts, answer = row
    if rule is not None:
        return ("input", field, rule, None, None, detail, False, attempts, None, None)
    problem = json.loads(problem_json) if problem_json else _EMPTY
    type_name = problem.get("type")
    if isinstance(type_name, str):
        type_name = type_name.rsplit("/", 1)[-1]  # the name, should a full type URI come
    detail = problem.get("detail")
    if type_name == "floor-area-required" and not _TELLS_TO_SUPPLY.search(detail or ""):
        detail = f"{detail.rstrip()} {FLOOR_AREA_HINT}" if detail else FLOOR_AREA_HINT
    return (
        "api",
        problem.get("field") or _PROBLEM_FIELDS.get(type_name or ""),
        type_name,
        problem.get("code"),
        problem.get("status"),
        detail,
        problem.get("retryable") is True,
        attempts,
        problem.get("valuation_id"),
        answer,
    )


# --- columns to Arrow ----------------------------------------------------------------------


def _column(values: Sequence[Any], field: pa.Field) -> pa.Array:
    if pa.types.is_timestamp(field.type):
        return _timestamps(values, field.type)
    as_json = _JSON_TYPES.get(field.name)
    if as_json is not None and pa.types.is_struct(field.type):
        return _array(values, as_json).view(field.type)
    return _array(values, field.type)


def _array(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    try:
        if not pa.types.is_integer(kind):
            return pa.array(values, type=kind)
        # Told the type, pyarrow turns 2.5 into 2 without a word: only whole ints go fast.
        found = pa.array(values)
        if pa.types.is_integer(found.type) or pa.types.is_null(found.type):
            return found.cast(kind)
    except _CONVERSION_ERRORS:
        pass
    return pa.array([_coerce(value, kind) for value in values], type=kind)


def _coerce(value: Any, kind: pa.DataType) -> Any:
    """`value` made to fit `kind`, or None: the slow path, for values off the spec."""
    if value is None:
        return None
    if pa.types.is_struct(kind):
        if not isinstance(value, Mapping):
            return None
        return {f.name: _coerce(value.get(f.name), f.type) for f in kind}
    if pa.types.is_string(kind):
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if pa.types.is_boolean(kind):
        return value if isinstance(value, bool) else None
    if isinstance(value, bool):  # a bool is an int to Python, never a number to JSON
        return None
    if pa.types.is_integer(kind):
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # 250000.0 is a whole number to JSON
        return value if isinstance(value, int) and -(2**63) <= value < 2**63 else None
    if pa.types.is_floating(kind):
        return float(value) if isinstance(value, int | float) else None
    return None


def _timestamps(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    """RFC 3339 date-times (`Z` or an offset) as UTC instants, truncated to the unit."""
    try:
        return _array(values, pa.string()).cast(_NANOSECONDS).cast(kind, safe=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.array([_instant(value) for value in values], type=kind)


def _instant(value: Any) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        when = dt.datetime.fromisoformat(value.strip().upper())
    except ValueError:
        return None
    # pyarrow truncates to the column's unit; a date-time without an offset is taken as UTC.
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)
