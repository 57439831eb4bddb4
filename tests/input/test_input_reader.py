"""Opening and streaming input files (batchval._internal.input.reader)."""

from __future__ import annotations

import gzip
import json
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from batchval._internal.input import (
    InputError,
    InputOptions,
    InputSource,
    ReadAs,
    open_input,
    stream,
)
from batchval._internal.input.layout import Header
from batchval._internal.outcome import SettingsError

HEADER = ["loan_id", "postcode", "property_type", "bedrooms", "floor_area_sqm", "notes"]
ROWS = [
    ["L1", "SW1A 1AA", "flat", "2", "", "first"],
    ["L2", "m1 1ae", "Semi-Detached", "3", "85.5", ""],
    ["L3", "EH1 1AA", "detached", "4", "", "in Scotland"],
]


def write_csv(
    path: Path,
    rows: list[list[str]],
    *,
    header: list[str] = HEADER,
    delimiter: str = ",",
    encoding: str = "utf-8",
    compress: bool = False,
) -> Path:
    """Writes rows as delimited text (no quoting needed by the test data)."""
    text = "".join(delimiter.join(r) + "\n" for r in [header, *rows])
    data = text.encode(encoding)
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def read_all(source: InputSource) -> list[dict[str, Any]]:
    """Every checked row, with its pass-through values under "passthrough"."""
    return [
        {**row, "passthrough": given}
        for batch in source.batches()
        for row, given in zip(batch.checked.to_dicts(), batch.passthrough.to_pylist(), strict=True)
    ]


def loan_ids(rows: list[dict[str, Any]]) -> list[str]:
    return [r["passthrough"]["loan_id"] for r in rows]


def fault(path: Path, options: InputOptions | None = None) -> str:
    """The InputError's message for a file that cannot be used."""
    with pytest.raises(InputError) as caught:
        read_all(open_input(path, options or InputOptions()))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    return message


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("delimiter", [",", ";", "\t", "|"])
def test_delimiter_is_detected(tmp_path: Path, delimiter: str, compress: bool) -> None:
    """Comma, semicolon, tab and pipe files are read with no config, plain or gzipped."""
    path = write_csv(tmp_path / "homes.txt", ROWS, delimiter=delimiter, compress=compress)
    source = open_input(path, InputOptions())
    assert source.columns == HEADER
    rows = read_all(source)
    assert loan_ids(rows) == ["L1", "L2", "L3"]
    assert [r["rule"] for r in rows] == [None, None, "outside-coverage"]


def test_explicit_delimiter(tmp_path: Path) -> None:
    """A delimiter given in the options is used as it is."""
    path = write_csv(tmp_path / "homes.csv", ROWS, delimiter=";")
    rows = read_all(open_input(path, InputOptions(delimiter=";")))
    assert loan_ids(rows) == ["L1", "L2", "L3"]


def test_utf8_bom_leaves_first_column_clean(tmp_path: Path) -> None:
    """A UTF-8 byte-order mark does not stick to the first column's name."""
    path = tmp_path / "homes.csv"
    path.write_bytes(b"\xef\xbb\xbf" + write_csv(tmp_path / "x.csv", ROWS).read_bytes())
    source = open_input(path, InputOptions())
    assert source.columns[0] == "loan_id"
    assert loan_ids(read_all(source)) == ["L1", "L2", "L3"]


def test_latin1_with_encoding_option(tmp_path: Path) -> None:
    """A latin-1 file reads right when the options say so, and is refused when they say
    UTF-8, naming --encoding."""
    rows = [["L1", "SW1A 1AA", "flat", "2", "", "Café Rosé"]]
    path = write_csv(tmp_path / "homes.csv", rows, encoding="latin-1")
    read = read_all(open_input(path, InputOptions(encoding="latin-1")))
    assert read[0]["passthrough"]["notes"] == "Café Rosé"
    assert "--encoding" in fault(path, InputOptions(encoding="utf-8"))


def test_cp1252_gzip_is_transcoded(tmp_path: Path) -> None:
    """A gzipped cp1252 file (Excel on Windows) reads right."""
    rows = [["L1", "SW1A 1AA", "flat", "2", "", "£250 – ‘quoted’"]]
    path = write_csv(tmp_path / "homes.csv.gz", rows, encoding="cp1252", compress=True)
    read = read_all(open_input(path, InputOptions(encoding="cp1252")))
    assert read[0]["passthrough"]["notes"] == "£250 – ‘quoted’"


def test_parquet_numbers_are_read_as_text(tmp_path: Path) -> None:
    """Parquet int and float columns validate as their values (3.0 is the integer 3); a
    pass-through column keeps its type."""
    path = tmp_path / "homes.parquet"
    table = pa.table(
        {
            "loan_id": pa.array([1001, 1002, 1003], pa.int64()),
            "postcode": ["SW1A 1AA", "M1 1AE", "LS1 4AP"],
            "propertyType": ["flat", "detached", "terraced"],
            "bedrooms": pa.array([2.0, None, 3.5], pa.float64()),
            "floorAreaSqm": pa.array([None, 85.0, 70.25], pa.float32()),
            "yearBuilt": pa.array([1930, None, 2001], pa.int32()),
        }
    )
    pq.write_table(table, path, row_group_size=2)
    rows = read_all(open_input(path, InputOptions()))
    assert [r["passthrough"] for r in rows] == [
        {"loan_id": 1001},
        {"loan_id": 1002},
        {"loan_id": 1003},
    ]
    assert rows[0]["request_json"] == (
        '{"bedrooms":2,"postcode":"SW1A 1AA","propertyType":"flat","yearBuilt":1930}'
    )
    assert rows[1]["request_json"] == (
        '{"floorAreaSqm":85,"postcode":"M1 1AE","propertyType":"detached"}'
    )
    assert (rows[2]["field"], rows[2]["rule"]) == ("bedrooms", "not_an_integer")
    assert [r["row_number"] for r in rows] == [1, 2, 3]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_batches_of_batch_rows_with_continuous_row_numbers(tmp_path: Path, fmt: str) -> None:
    """2500 rows with batch_rows=1000 stream as 3 batches numbered 1 to 2500."""
    rows = [[f"L{i}", "SW1A 1AA", "flat", str(i % 5), "", ""] for i in range(2500)]
    path = write_csv(tmp_path / "homes.csv", rows)
    if fmt == "parquet":
        csv = pl.read_csv(path, infer_schema=False)
        path = tmp_path / "homes.parquet"
        csv.write_parquet(path, row_group_size=1000)
    batches = list(open_input(path, InputOptions(batch_rows=1000)).batches())
    assert [b.checked.height for b in batches] == [1000, 1000, 500]
    assert [b.passthrough.num_rows for b in batches] == [1000, 1000, 500]
    numbers = pl.concat([b.checked for b in batches])["row_number"]
    assert numbers.dtype == pl.UInt64
    assert numbers.to_list() == list(range(1, 2501))


def test_blank_lines_are_skipped_and_not_counted(tmp_path: Path) -> None:
    """Blank and delimiter-only lines are not rows: the next row takes the next number."""
    path = tmp_path / "homes.csv"
    lines = [",".join(HEADER), ",".join(ROWS[0]), "", ",,,,,", " , ,,,,", ",".join(ROWS[1])]
    path.write_text("\r\n".join(lines) + "\r\n\r\n")
    rows = read_all(open_input(path, InputOptions()))
    assert [(r["row_number"], i) for r, i in zip(rows, loan_ids(rows), strict=True)] == [
        (1, "L1"),
        (2, "L2"),
    ]


def test_passthrough_default_is_every_other_column(tmp_path: Path) -> None:
    """With no passthrough config, every column not used for a field rides along."""
    source = open_input(write_csv(tmp_path / "homes.csv", ROWS), InputOptions())
    assert source.passthrough == ["loan_id", "notes"]
    assert source.field_columns == {
        "postcode": "postcode",
        "propertyType": "property_type",
        "bedrooms": "bedrooms",
        "floorAreaSqm": "floor_area_sqm",
    }
    first = read_all(source)[0]
    assert first["passthrough"] == {"loan_id": "L1", "notes": "first"}


def test_passthrough_explicit_subset(tmp_path: Path) -> None:
    """A configured passthrough keeps the named columns, in the config's order, then the
    lender columns it does not name (the loan id here)."""
    options = InputOptions(passthrough=("notes", "POSTCODE"))
    source = open_input(write_csv(tmp_path / "homes.csv", ROWS), options)
    assert source.passthrough == ["notes", "postcode", "loan_id"]
    first = read_all(source)[0]
    assert list(first["passthrough"].items()) == [
        ("notes", "first"),
        ("postcode", "SW1A 1AA"),
        ("loan_id", "L1"),
    ]


def test_passthrough_naming_a_missing_column_is_the_configs_fault(tmp_path: Path) -> None:
    """A passthrough listing a column the file does not have: a SettingsError (exit 64)
    naming it and the columns the file has."""
    options = InputOptions(passthrough=("loan_id", "branch"))
    with pytest.raises(SettingsError, match=r"'branch', which is not a column.*'notes'"):
        open_input(write_csv(tmp_path / "homes.csv", ROWS), options)


def test_columns_found_by_name_case_and_spaces(tmp_path: Path) -> None:
    """API names and snake_case names match in any case, with stray spaces."""
    header = ["Loan", " PostCode ", "PROPERTY_TYPE", "floorAreaSqm"]
    path = write_csv(tmp_path / "homes.csv", [["1", "SW1A 1AA", "flat", "50"]], header=header)
    source = open_input(path, InputOptions())
    assert source.field_columns == {
        "postcode": " PostCode ",
        "propertyType": "PROPERTY_TYPE",
        "floorAreaSqm": "floorAreaSqm",
    }
    assert read_all(source)[0]["request_json"] is not None


def test_configured_columns_override_names(tmp_path: Path) -> None:
    """options.columns maps any column to a field, ahead of a column named like it."""
    header = ["Post Code", "postcode", "Type", "Beds"]
    path = write_csv(tmp_path / "homes.csv", [["M1 1AE", "XX", "flat", "1"]], header=header)
    options = InputOptions(
        columns={"postcode": "Post Code", "propertyType": "type", "bedrooms": "Beds"}
    )
    source = open_input(path, options)
    assert source.field_columns["postcode"] == "Post Code"
    assert source.passthrough == ["postcode"]
    assert json.loads(read_all(source)[0]["request_json"])["postcode"] == "M1 1AE"


def truncated_parquet(path: Path) -> Path:
    pq.write_table(pa.table({"postcode": ["SW1A 1AA"] * 100, "propertyType": ["flat"] * 100}), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def binary_garbage(path: Path) -> Path:
    path.write_bytes(b"\x00\x01" + random.Random(0).randbytes(4096))
    return path


INPUT_ERRORS: list[tuple[str, Callable[[Path], Path], InputOptions, str]] = [
    ("missing file", lambda d: d / "nope.csv", InputOptions(), "no such file"),
    ("a directory", lambda d: d, InputOptions(), "directory"),
    ("empty file", lambda d: _bytes(d, b""), InputOptions(), "empty"),
    (
        "header only",
        lambda d: _bytes(d, b"postcode,propertyType,bedrooms\n"),
        InputOptions(),
        "no data rows",
    ),
    (
        "header and blank lines",
        lambda d: _bytes(d, b"postcode,propertyType,bedrooms\n\n,,\n"),
        InputOptions(),
        "no data rows",
    ),
    (
        "duplicate headers",
        lambda d: _bytes(d, b"postcode,propertyType,bedrooms,bedrooms\nSW1A 1AA,flat,1,2\n"),
        InputOptions(),
        "duplicate column names: 'bedrooms'",
    ),
    (
        "missing required column",
        lambda d: _bytes(d, b"postcode,bedrooms\nSW1A 1AA,2\n"),
        InputOptions(),
        "required column missing: propertyType",
    ),
    (
        "neither bedrooms nor area",
        lambda d: _bytes(d, b"postcode,propertyType\nSW1A 1AA,flat\n"),
        InputOptions(),
        "bedrooms or floorAreaSqm",
    ),
    (
        "two columns for one field",
        lambda d: _bytes(d, b"postcode,propertyType,property_type,beds\nx,y,z,1\n"),
        InputOptions(),
        "all look like propertyType",
    ),
    (
        "mapping names a missing column",
        lambda d: write_csv(d / "homes.csv", ROWS),
        InputOptions(columns={"reference": "Case Number"}),
        "'Case Number', which is not a column",
    ),
    (
        "truncated parquet",
        lambda d: truncated_parquet(d / "homes.parquet"),
        InputOptions(),
        "Parquet",
    ),
    ("binary garbage", lambda d: binary_garbage(d / "homes.csv"), InputOptions(), "binary"),
    ("zip archive", lambda d: _bytes(d, b"PK\x03\x04rest"), InputOptions(), "not a workbook"),
    (
        "wrong explicit delimiter",
        lambda d: write_csv(d / "homes.csv", ROWS, delimiter=";"),
        InputOptions(delimiter=","),
        "has semicolons",
    ),
    (
        "unterminated quote",
        lambda d: _bytes(d, b'postcode,propertyType,bedrooms\nSW1A 1AA,"flat,2\n'),
        InputOptions(),
        "cannot be read",
    ),
]


def _bytes(directory: Path, data: bytes) -> Path:
    path = directory / "homes.csv"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    ("make", "options", "expected"),
    [case[1:] for case in INPUT_ERRORS],
    ids=[case[0] for case in INPUT_ERRORS],
)
def test_unusable_file_is_one_line_input_error(
    tmp_path: Path, make: Callable[[Path], Path], options: InputOptions, expected: str
) -> None:
    """A file that cannot be used raises InputError: one line, naming file and fault."""
    assert expected in fault(make(tmp_path), options)


def test_open_reads_the_whole_table_once_so_damage_is_refused_before_a_call(
    tmp_path: Path,
) -> None:
    """open_input reads every row once (the search for rows that are not loans), so a CSV
    file damaged in its middle, plain or gzip, with its encoding given or found, is refused
    when it is opened, before anything is sent."""
    rows = [[f"L{i}", "SW1A 1AA", "flat", "2", "", "x" * 80] for i in range(5000)]
    rows[2500][5] = "caf\udce9"  # a byte that is not UTF-8, written as it is
    path = tmp_path / "homes.csv"
    text = ",".join(HEADER) + "\n" + "".join(",".join(row) + "\n" for row in rows)
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    given = InputOptions(batch_rows=500, encoding="utf-8")
    with pytest.raises(InputError, match="cannot be read after data row"):
        open_input(path, given)
    rng = random.Random(1)
    rows = [[f"L{i}", "SW1A 1AA", "flat", "2", "", rng.randbytes(40).hex()] for i in range(5000)]
    gzipped = write_csv(tmp_path / "homes.csv.gz", rows, compress=True)
    data = gzipped.read_bytes()
    gzipped.write_bytes(data[: len(data) * 2 // 3])
    for options in (given, InputOptions(batch_rows=500)):
        with pytest.raises(InputError, match="cannot be read"):
            open_input(gzipped, options)


@pytest.mark.parametrize("short", [4, 19_000])
def test_a_short_row_reads_with_its_missing_fields_empty(tmp_path: Path, short: int) -> None:
    """A row with fewer fields than the header reads in its place, the rest empty, in the
    first block or far past it (where polars reads on from the row pyarrow refused)."""
    rows = [[f"L{i}", "SW1A 1AA", "flat", "2", "", "x" * 40] for i in range(20_000)]
    rows[short] = [f"L{short}", "SW1A 1AA", "flat"]
    path = write_csv(tmp_path / "homes.csv", rows)
    assert path.stat().st_size > stream.BLOCK_BYTES
    read = read_all(open_input(path, InputOptions(batch_rows=1000)))
    assert [r["row_number"] for r in read] == list(range(1, 20_001))
    assert loan_ids(read) == [f"L{i}" for i in range(20_000)]
    assert [(r["row_number"], r["rule"]) for r in read if r["rule"]] == [
        (short + 1, "area_or_bedrooms_required")
    ]
    assert read[short]["passthrough"] == {"loan_id": f"L{short}", "notes": None}


def test_a_long_row_past_the_first_block_says_where(tmp_path: Path) -> None:
    """A row with more fields than the header, far into the file, is refused after the
    rows read before it (polars, reading on from pyarrow, stops at its chunk's start)."""
    rows = [[f"L{i}", "SW1A 1AA", "flat", "2", "", "x" * 40] for i in range(20_000)]
    rows[19_000].append("extra")
    path = write_csv(tmp_path / "homes.csv", rows)
    message = fault(path, InputOptions(batch_rows=1000))
    found = re.search(r"cannot be read after data row (\d+): found more fields", message)
    assert found is not None
    assert 1000 <= int(found.group(1)) <= 19_000


@pytest.mark.parametrize(
    ("cell", "read"), [('"5"" pipe"', '5" pipe'), ('5" pipe', None), ('"ab"cd', "abcd")]
)
def test_quote_marks_past_the_first_block(tmp_path: Path, cell: str, read: str | None) -> None:
    """A doubled quote mark in a quoted field reads as one; a stray quote mark is refused
    as polars refuses it; text after a closing quote is kept (pyarrow's reading, where
    polars refused the file)."""
    rows = [[f"L{i}", "SW1A 1AA", "flat", "2", "", "x" * 40] for i in range(20_000)]
    rows[19_000][5] = cell
    path = write_csv(tmp_path / "homes.csv", rows)
    if read is None:
        assert "stray or unclosed quote mark" in fault(path)
        return
    notes = [r["passthrough"]["notes"] for r in read_all(open_input(path, InputOptions()))]
    assert notes[19_000] == read
    assert len(notes) == 20_000


@pytest.mark.slow
def test_parquet_memory_does_not_grow_with_the_file(tmp_path: Path) -> None:
    """Streaming a Parquet file of many row groups, Arrow holds a row group's worth, not
    the file (pyarrow's pre-buffering would keep every chunk read until the end)."""
    rng = random.Random(2)
    rows = 200_000
    table = pa.table(
        {
            "postcode": ["SW1A 1AA"] * rows,
            "propertyType": ["flat"] * rows,
            "bedrooms": [2] * rows,
            "notes": [rng.randbytes(24).hex() for _ in range(rows)],
        }
    )
    path = tmp_path / "homes.parquet"
    pq.write_table(table, path, row_group_size=10_000)
    before = pa.total_allocated_bytes()
    held = read = 0
    for batch in open_input(path, InputOptions(batch_rows=5_000)).batches():
        held = max(held, pa.total_allocated_bytes() - before)
        read += batch.checked.height
    assert read == rows
    assert held < path.stat().st_size / 4


def test_invalid_utf8_mid_file_is_input_error(tmp_path: Path) -> None:
    """With UTF-8 given, a byte that is not UTF-8 after the head is found while streaming,
    as InputError; with no encoding given, the file is found to be cp1252 and read."""
    rows = [[f"L{i}", "SW1A 1AA", "flat", "2", "", "x" * 40] for i in range(3000)]
    path = write_csv(tmp_path / "homes.csv", rows)
    path.write_bytes(path.read_bytes() + b"L9,SW1A 1AA,flat,2,,caf\xe9\n")
    assert "cannot be read after data row" in fault(path, InputOptions(encoding="utf-8"))
    source = open_input(path, InputOptions())
    assert source.read_as == ReadAs("csv", "cp1252", encoding_detected=True, header=Header(1))
    assert read_all(source)[-1]["passthrough"]["notes"] == "café"


# --- per-row include ---------------------------------------------------------------

C, R = "commentary", "rebuildCost"


def includes(rows: list[dict[str, Any]]) -> list[list[str] | str | None]:
    """Each row's include as sent, or its rule when it is a problem."""
    return [
        json.loads(r["request_json"]).get("include") if r["rule"] is None else r["rule"]
        for r in rows
    ]


def include_parquet(path: Path, column: pa.Array, name: str = "include") -> Path:
    n = len(column)
    table = pa.table(
        {
            "loan_id": [f"L{i}" for i in range(n)],
            "postcode": ["SW1A 1AA"] * n,
            "propertyType": ["flat"] * n,
            "bedrooms": [2] * n,
            name: column,
        }
    )
    pq.write_table(table, path)
    return path


LIST_ITEMS: list[list[str | None] | None] = [
    [R, C],
    [C, R, C],
    None,
    [],
    [None, C],
    [" rebuildCost "],
    ["photos"],
]


@pytest.mark.parametrize(
    "kind",
    [
        pa.list_(pa.string()),
        pa.large_list(pa.large_string()),
        pa.list_(pa.large_string()),
        pa.large_list(pa.string()),
        pa.list_(pa.dictionary(pa.int32(), pa.string())),
    ],
    ids=str,
)
def test_parquet_list_include_column_is_read_as_items(tmp_path: Path, kind: pa.DataType) -> None:
    """A Parquet list of text is the row's items; null or an empty list is the run's include."""
    if pa.types.is_dictionary(kind.value_type):
        column = pc.cast(pa.array(LIST_ITEMS), kind)
    else:
        column = pa.array(LIST_ITEMS, kind)
    path = include_parquet(tmp_path / "homes.parquet", column)
    source = open_input(path, InputOptions(include=(R,)))
    rows = read_all(source)
    assert includes(rows) == [[C, R], [C, R], [R], [R], [C], [R], "invalid_include"]
    assert rows[0]["request_json"] == rows[1]["request_json"], "order and repeats do not count"
    assert "include item 'photos' is not one of" in rows[6]["detail"]
    assert source.passthrough == ["loan_id"]


def test_parquet_text_include_column_is_split_like_csv(tmp_path: Path) -> None:
    """A Parquet string include column holds items separated by ; or , as a CSV cell does."""
    column = pa.array(["rebuildCost; commentary", "commentary,commentary", None, "photos"])
    rows = read_all(open_input(include_parquet(tmp_path / "homes.parquet", column), InputOptions()))
    assert includes(rows) == [[C, R], [C], None, "invalid_include"]


def test_parquet_list_include_under_a_mapped_name(tmp_path: Path) -> None:
    """A list column named otherwise is the include column when the config maps it."""
    path = include_parquet(tmp_path / "homes.parquet", pa.array([[R], [C, R]]), name="extras")
    source = open_input(path, InputOptions(columns={"include": "extras"}))
    assert source.field_columns["include"] == "extras"
    assert includes(read_all(source)) == [[R], [C, R]]
    assert "has nested columns 'extras'" in fault(path)


def test_parquet_list_include_named_in_passthrough_rides_along_joined(tmp_path: Path) -> None:
    """A list include column the config passes through is echoed as its items joined by ;."""
    path = include_parquet(tmp_path / "homes.parquet", pa.array([[R, C], None, []]))
    source = open_input(path, InputOptions(passthrough=("loan_id", "include")))
    rows = read_all(source)
    assert [r["passthrough"]["include"] for r in rows] == [f"{R};{C}", None, ""]
    assert includes(rows) == [[C, R], None, None]


@pytest.mark.parametrize(
    ("column", "expected"),
    [
        (pa.array([[1, 2]], pa.list_(pa.int64())), "the include column 'include' is list<"),
        (pa.array([{"a": "commentary"}]), "the include column 'include' is struct<"),
        (
            pa.array([[["commentary"]]], pa.list_(pa.list_(pa.string()))),
            "the include column 'include' is list<",
        ),
    ],
)
def test_parquet_include_column_that_is_not_text_is_refused(
    tmp_path: Path, column: pa.Array, expected: str
) -> None:
    """An include column of numbers, structs or nested lists makes the file unusable."""
    path = include_parquet(tmp_path / "homes.parquet", column)
    message = fault(path)
    assert expected in message
    assert "must be text" in message


def test_other_nested_columns_are_refused_beside_a_list_include(tmp_path: Path) -> None:
    """A list include column does not let another nested column through."""
    path = tmp_path / "homes.parquet"
    table = pa.table(
        {
            "postcode": ["SW1A 1AA"],
            "propertyType": ["flat"],
            "bedrooms": [2],
            "include": pa.array([[C]]),
            "tags": pa.array([["a"]]),
        }
    )
    pq.write_table(table, path)
    assert "has nested columns 'tags' (list<" in fault(path)


@pytest.mark.parametrize(
    ("delimiter", "cell", "expected"),
    [
        (",", '"commentary, rebuildCost"', [C, R]),
        (",", "rebuildCost;commentary", [C, R]),
        (";", '"rebuildCost;commentary"', [C, R]),
        (";", "commentary,rebuildCost", [C, R]),
        ("\t", "commentary; commentary", [C]),
        (",", "", [R]),
        (",", "photos", "invalid_include"),
    ],
)
def test_csv_include_cells(tmp_path: Path, delimiter: str, cell: str, expected: object) -> None:
    """A CSV include cell is read whatever the file's delimiter, quoted or not."""
    header = ["loan_id", "postcode", "property_type", "bedrooms", "Include"]
    path = write_csv(
        tmp_path / "homes.csv",
        [["L1", "SW1A 1AA", "flat", "2", cell]],
        header=header,
        delimiter=delimiter,
    )
    source = open_input(path, InputOptions(include=(R,)))
    assert source.field_columns["include"] == "Include"
    assert includes(read_all(source)) == [expected]


def test_csv_include_column_mapped_from_the_config(tmp_path: Path) -> None:
    """input.columns maps another column to include; it is then not passed through."""
    header = ["loan_id", "postcode", "property_type", "bedrooms", "Extras Wanted"]
    rows = [["L1", "SW1A 1AA", "flat", "2", "commentary"], ["L2", "SW1A 1AA", "flat", "2", ""]]
    path = write_csv(tmp_path / "homes.csv", rows, header=header)
    source = open_input(path, InputOptions(columns={"include": "extras wanted"}))
    assert source.passthrough == ["loan_id"]
    assert includes(read_all(source)) == [[C], None]
