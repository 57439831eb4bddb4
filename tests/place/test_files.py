"""Files replaced whole (batchval/_internal/place/files.py): JSON, text, any bytes, Parquet."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from batchval._internal.place import files
from batchval._internal.place.files import (
    atomic_file,
    write_json_atomic,
    write_parquet,
    write_table_atomic,
    write_text_atomic,
)


def test_json_is_written_atomically(tmp_path: Path) -> None:
    """summary-style JSON replaces the old file whole; unserialisable data leaves it be."""
    path = tmp_path / "summary.json"
    write_json_atomic(path, {"exit_code": 0, "note": "£10"})
    assert json.loads(path.read_text("utf-8")) == {"exit_code": 0, "note": "£10"}
    with pytest.raises(TypeError):
        write_json_atomic(path, {"when": dt.datetime.now(dt.UTC)})
    assert json.loads(path.read_text("utf-8")) == {"exit_code": 0, "note": "£10"}
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_text_replaces_the_old_file(tmp_path: Path) -> None:
    """Text is written as UTF-8 and takes the old file's place, leaving no temporary."""
    path = tmp_path / "run.prom"
    path.write_text("old\n", "utf-8")
    write_text_atomic(path, "new £\n")
    assert path.read_bytes() == "new £\n".encode()
    assert [p.name for p in tmp_path.iterdir()] == ["run.prom"]


def test_a_block_that_fails_leaves_the_old_file(tmp_path: Path) -> None:
    """An atomic file written to a hidden temporary beside its name replaces it only when
    its block ends without error; a failure removes the temporary."""
    path = tmp_path / "results.csv"
    path.write_bytes(b"old")

    def killed_mid_write() -> None:
        with atomic_file(path) as file:
            file.write(b"half")
            assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".results.csv.tmp-")]
            assert path.read_bytes() == b"old"  # mid-write, readers still see the old file
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        killed_mid_write()
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["results.csv"]
    with atomic_file(path) as file:
        file.write(b"new")
    assert path.read_bytes() == b"new"


@pytest.mark.parametrize("ahead", [False, True])
@pytest.mark.parametrize(("group_bytes", "groups"), [(1, 3), (32 << 20, 1)])
def test_parquet_tables_are_gathered_into_row_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, group_bytes: int, groups: int, ahead: bool
) -> None:
    """The tables handed over become row groups of about ROW_GROUP_BYTES, in order,
    compressed with zstd, whether each is written while the next is made or not; the rows
    written are counted."""
    monkeypatch.setattr(files, "ROW_GROUP_BYTES", group_bytes)
    schema = pa.schema([("n", pa.int64())])
    tables = [pa.table({"n": [n, n + 1]}, schema=schema) for n in (1, 3, 5)]
    path = tmp_path / "out.parquet"
    assert write_parquet(path, schema, iter(tables), ahead=ahead) == 6
    meta = pq.ParquetFile(path).metadata
    assert meta.num_row_groups == groups
    assert meta.row_group(0).column(0).compression == "ZSTD"
    assert pq.read_table(path)["n"].to_pylist() == [1, 2, 3, 4, 5, 6]


def test_a_parquet_file_dictionary_encodes_the_columns_it_is_asked_to(tmp_path: Path) -> None:
    """`dictionary` names the columns given a dictionary; the table read back is the same."""
    table = pa.table({"n": [1, 2, 1], "s": ["a", "b", "a"]})
    path = tmp_path / "out.parquet"
    assert write_parquet(path, table.schema, [table], dictionary=["s"]) == 3
    group = pq.ParquetFile(path).metadata.row_group(0)
    assert [group.column(i).dictionary_page_offset is not None for i in (0, 1)] == [False, True]
    assert pq.read_table(path).equals(table)


def test_a_parquet_file_whose_tables_fail_while_written_ahead_is_not_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table that cannot be made, while the group before it is being written: the old
    file stays as it was, and no temporary is left."""
    monkeypatch.setattr(files, "ROW_GROUP_BYTES", 1)
    schema = pa.schema([("n", pa.int64())])
    path = tmp_path / "out.parquet"
    path.write_bytes(b"old")

    def tables() -> Iterator[pa.Table]:
        yield pa.table({"n": [1]}, schema=schema)
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        write_parquet(path, schema, tables(), ahead=True)
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.parquet"]


def test_no_tables_still_make_a_file_with_the_schema(tmp_path: Path) -> None:
    """With nothing to write, the Parquet file is valid, with every column and no rows."""
    schema = pa.schema([("n", pa.int64()), ("s", pa.string())], metadata={b"k": b"v"})
    assert write_parquet(tmp_path / "empty.parquet", schema, []) == 0
    table = pq.read_table(tmp_path / "empty.parquet")
    assert table.num_rows == 0
    assert table.schema.equals(schema, check_metadata=True)


def test_one_table_is_written_whole(tmp_path: Path) -> None:
    """write_table_atomic writes one table, schema and values, and counts its rows."""
    table = pa.table({"column": ["estimate", None]})
    assert write_table_atomic(tmp_path / "verify.parquet", table) == 2
    assert pq.read_table(tmp_path / "verify.parquet").equals(table)
