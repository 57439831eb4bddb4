"""Make the bad-input corpus in this folder: tiny files, each one way an input goes wrong.

    .venv/bin/python tests/corpus/make_corpus.py

writes, beside this script, every input that `expected.yaml` names, including the
`directory.csv/` folder (an input path that is a directory). Running it again writes the
same bytes: the only draw is seeded, gzip is written with mtime 0, the zip with a fixed
date, and Parquet without compression (identical up to pyarrow's version stamp in the
footer). `tests/cli/test_corpus.py` runs `batchval run` on each input and checks the outcome
that `expected.yaml` gives it.

CSV rows are written as literal text, not through the csv module, so that every quote,
delimiter, blank line, line end and byte is exactly the one the case is about.
"""

from __future__ import annotations

import datetime as dt
import decimal
import gzip
import io
import random
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
SEED = 4

# Snake-case API field names (found with no config) and one pass-through column.
HEADER = "loan_id,postcode,property_type,bedrooms,floor_area_sqm,year_built,reference"
# The same with the two optional enumerated fields.
FULL = HEADER.replace("year_built,", "year_built,built_form,walls_energy_efficiency,")


def _bytes(name: str, data: bytes) -> None:
    (HERE / name).write_bytes(data)


def _text(name: str, text: str, *, encoding: str = "utf-8") -> None:
    _bytes(name, text.encode(encoding))


def _lines(*rows: str, end: str = "\n") -> str:
    return "".join(row + end for row in rows)


def _gzip(data: bytes) -> bytes:
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as stream:
        stream.write(data)
    return buffer.getvalue()


def _parquet_bytes(table: pa.Table) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="none")
    return buffer.getvalue()


def _parquet(name: str, table: pa.Table) -> None:
    _bytes(name, _parquet_bytes(table))


def _homes(n: int) -> pa.Table:
    """n valid homes, every one the same request but for bedrooms (for damaging)."""
    return pa.table(
        {
            "loan_id": [f"L{i}" for i in range(n)],
            "postcode": ["SW1A 2AA"] * n,
            "property_type": ["flat"] * n,
            "bedrooms": [i % 6 for i in range(n)],
        }
    )


# --- CSV files that cannot be used at all: exit 65, nothing sent --------------------------


def unusable_csv() -> None:
    _bytes("empty.csv", b"")
    _bytes("bom_only.csv", b"\xef\xbb\xbf")
    _text("header_only.csv", _lines(HEADER))
    _text("header_then_blank_lines.csv", _lines(HEADER, "", ",,,,,,", "   ", ", ,\t,"))
    _text("starts_with_blank_line.csv", _lines("", HEADER, "L1,SW1A 2AA,flat,2,,,"))
    _text(
        "semicolon_read_as_comma.csv",
        _lines("loan_id;postcode;property_type;bedrooms", "L1;SW1A 2AA;flat;2"),
    )
    # Excel's "sep=;" first line: the header is then not the first line.
    _text(
        "excel_sep_line.csv",
        _lines("sep=;", "postcode;property_type;bedrooms", "SW1A 2AA;flat;2"),
    )
    _text(
        "missing_property_type_column.csv",
        _lines("loan_id,postcode,bedrooms", "L1,SW1A 2AA,2", "L2,M1 1AE,3"),
    )
    _text(
        "missing_bedrooms_and_area_columns.csv",
        _lines("loan_id,postcode,property_type,year_built", "L1,SW1A 2AA,flat,1930"),
    )
    _text(
        "duplicate_headers.csv",
        _lines("loan_id,postcode,property_type,bedrooms,loan_id", "L1,SW1A 2AA,flat,2,L1-b"),
    )
    _text(
        "two_postcode_columns.csv",
        _lines("postcode,property_type,bedrooms, PostCode ", "SW1A 2AA,flat,2,M1 1AE"),
    )
    _text(
        "unclosed_quote.csv",
        _lines(
            "loan_id,postcode,property_type,bedrooms",
            "L1,SW1A 2AA,flat,2",
            'L2,"M1 1AE,terraced,3',
            "L3,LS6 2AB,flat,1",
        ),
    )
    _text(
        "more_fields_than_header.csv",
        _lines(
            "loan_id,postcode,property_type,bedrooms",
            "L1,SW1A 2AA,flat,2",
            "L2,M1 1AE,terraced,3,surplus,fields",
            "L3,LS6 2AB,flat,1",
        ),
    )
    # Classic Mac line ends (CR only): polars sees one long line.
    _text(
        "cr_line_endings.csv",
        _lines("postcode,property_type,bedrooms,loan_id", "SW1A 2AA,flat,2,L1", end="\r"),
    )
    _text(
        "utf16.csv",
        "\ufeff" + _lines("postcode,property_type,bedrooms", "SW1A 2AA,flat,2"),
        encoding="utf-16-le",
    )
    _bytes(
        "cp1252_undefined_byte.csv",
        _lines("postcode,property_type,bedrooms,note", "SW1A 2AA,flat,2,x").encode()[:-1]
        + b"\x81y\n",
    )
    garbage = random.Random(SEED).randbytes(512)
    _bytes("binary_garbage.csv", b"\x00\x01\x02\x03" + garbage)
    _bytes("not_really.parquet", b"PQ1\x00" + garbage[:200])
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w", compression=zipfile.ZIP_STORED) as archive:
        entry = zipfile.ZipInfo("xl/worksheets/sheet1.xml", date_time=(2026, 1, 1, 0, 0, 0))
        archive.writestr(entry, "<worksheet/>")
    _bytes("workbook.xlsx", zipped.getvalue())
    rows = (f"L{i},SW1A 2AA,flat,2,,,CASE-{i}" for i in range(400))
    whole = _gzip(_lines(HEADER, *rows).encode())
    _bytes("truncated.csv.gz", whole[: len(whole) // 2])
    # Valid UTF-8 through the first 64 KiB (all that is read before the run starts), then
    # one latin-1 byte: found while streaming, which is still before anything is sent.
    filler = _lines(HEADER, *(["L0,SW1A 2AA,flat,2,,,CASE-00000"] * 2500)).encode()
    _bytes("latin1_byte_after_head.csv.gz", _gzip(filler + b"L9,SW1A 2AA,flat,2,,,caf\xe9\n"))
    _bytes("parquet_in_gzip.parquet.gz", _gzip(_parquet_bytes(_homes(2))))
    (HERE / "directory.csv").mkdir(exist_ok=True)
    _text(
        "directory.csv/README",
        "An input path that is a directory, not a file: batchval must refuse it (exit 65).\n",
    )


# --- Parquet files that cannot be used: exit 65, nothing sent ------------------------------


def unusable_parquet() -> None:
    data = _parquet_bytes(_homes(40))
    _bytes("truncated.parquet", data[: len(data) // 2])
    damaged = bytearray(data)
    damaged[8 : len(data) // 3] = b"\xff" * (len(data) // 3 - 8)  # data pages, not the footer
    _bytes("corrupt_page.parquet", bytes(damaged))
    _parquet(
        "list_bedrooms.parquet",
        pa.table(
            {
                "postcode": ["SW1A 2AA", "M1 1AE"],
                "property_type": ["flat", "terraced"],
                "bedrooms": pa.array([[2], [3, 4]], type=pa.list_(pa.int64())),
            }
        ),
    )
    _parquet(
        "zero_rows.parquet",
        pa.table(
            {
                "postcode": pa.array([], type=pa.string()),
                "property_type": pa.array([], type=pa.string()),
                "bedrooms": pa.array([], type=pa.int64()),
            }
        ),
    )
    _parquet(
        "duplicate_columns.parquet",
        pa.Table.from_arrays(
            [pa.array(["SW1A 2AA"]), pa.array(["flat"]), pa.array([2]), pa.array(["x"])],
            names=["postcode", "property_type", "bedrooms", "postcode"],
        ),
    )
    _parquet(
        "binary_column_not_text.parquet",
        pa.table(
            {
                "postcode": ["SW1A 2AA", "M1 1AE"],
                "property_type": ["flat", "flat"],
                "bedrooms": [2, 3],
                "scan": pa.array([b"ok", b"\x89PNG\xff\x00"], type=pa.binary()),
            }
        ),
    )


# --- files that are used: each row valued or a problem (exit 0) ---------------------------


def encodings_and_framing() -> None:
    rows = ("L1,SW1A 2AA,flat,2,,,CASE-1", "L2,M1 1AE,terraced,3,,1930,CASE-2")
    _text("bom.csv", "\ufeff" + _lines(HEADER, *rows))
    latin = _lines(
        "loan_id,postcode,property_type,bedrooms,note",
        "L1,SW1A 2AA,flat,2,£250000 asked",
        "L2,M1 1AE,terraced,3,Café Rouge above",
    )
    _text("latin1.csv", latin, encoding="latin-1")
    _bytes(
        "latin1.csv.gz",
        _gzip(
            _lines("postcode,property_type,bedrooms,note", "SW1A 2AA,flat,2,£1 café").encode(
                "latin-1"
            )
        ),
    )
    _text(
        "cp1252.csv",
        _lines(
            "loan_id,postcode,property_type,bedrooms,note",
            "L1,SW1A 2AA,flat,2,€300k “firm”",
            "L2,M1 1AE,terraced,3,naïve – dash",
        ),
        encoding="cp1252",
    )
    _bytes("gzip.csv.gz", _gzip(_lines(HEADER, *rows, "L3,LS6 2AB,semi-detached,4,,,").encode()))
    _text(
        "crlf.csv",
        _lines(
            "postcode,property_type,bedrooms,loan_id",
            "SW1A 2AA,flat,2,L1",
            "",
            "M1 1AE,terraced,3,L2",
            end="\r\n",
        ),
    )
    _text(
        "quoted_fields.csv",
        _lines(
            "loan_id,postcode,property_type,bedrooms,note,reference",
            'L1,"SW1A 2AA",flat,2,"a note, with a comma","CASE, 1"',
            'L2,M1 1AE,terraced,3,"two\nlines","CASE ""2"""',
            'L3,LS6 2AB,flat,1,"",""',
            'L4,LS6 2AB,flat,2,"blank\n\nline inside","back\\slash\tand tab"',
        ),
    )
    _text(
        "quoted_header_newline.csv",
        _lines('"loan\nid",postcode,property_type,bedrooms', "L1,SW1A 2AA,flat,2", "L2,M1,flat,2"),
    )
    _text(
        "blank_lines_middle.csv",
        _lines(
            HEADER,
            "L1,SW1A 2AA,flat,2,,,",
            "",
            "L2,M1 1AE,terraced,,,,",
            "   ",
            ",,,,,,",
            "L3,LS6 2AB,flat,1,,,",
            "",
            "L4,,,,,,",
        ),
    )
    _text(
        "semicolon.csv",
        _lines(
            "loan_id;postcode;property_type;bedrooms;note",
            "L1;SW1A 2AA;flat;2;a, b and c",
            "L2;M1 1AE;terraced;;d",
        ),
    )
    _text(
        "tab.tsv",
        _lines(
            "loan_id\tpostcode\tproperty_type\tbedrooms", "L1\tSW1A 2AA\tflat\t2", "L2\tM1\tflat\t2"
        ),
    )
    _text(
        "pipe.csv",
        _lines("loan_id|postcode|property_type|bedrooms", "L1|SW1A 2AA|flat|2", "L2|M1 1AE|hut|2"),
    )
    _text(
        "trailing_delimiter.csv",
        _lines("postcode,property_type,bedrooms,", "SW1A 2AA,flat,2,", "M1 1AE,terraced,3,x"),
    )
    _text(
        "header_case_and_spaces.csv",
        _lines(
            " PostCode ,PROPERTY_TYPE,Bedrooms,FloorAreaSqm", "SW1A 2AA,Flat,2,", "M1 1AE,flat,,55"
        ),
    )
    _text(
        "extra_columns.csv",
        _lines(
            "loan_id,branch,postcode,property_type,bedrooms,broker,risk_grade",
            "L1,London,SW1A 2AA,flat,2,Acme,B",
            "L2,North,M1 1AE,terraced,3,,",
        ),
    )
    _text(
        "weird_column_names.csv",
        _lines(
            "*,^a$,row_number,type,estimate,postcode,property_type,bedrooms,",
            "s1,a1,r1,t1,e1,SW1A 2AA,flat,2,c1",
            "s2,a2,r2,t2,e2,EH1 1AA,flat,2,c2",
        ),
    )
    _text(
        "unicode_passthrough.csv",
        _lines(
            "loan_id,borrower_note,postcode,property_type,bedrooms",
            "L1,Zoë Brontë 🏠,SW1A 2AA,flat,2",
            "L2,東京 مرحبا Ωmega,M1 1AE,terraced,3",
        ),
    )
    _text(
        "fewer_fields_than_header.csv",
        _lines(
            "loan_id,postcode,property_type,bedrooms,reference",
            "L1,SW1A 2AA,flat,2,CASE-1",
            "L2,M1 1AE,terraced",
            "L3,LS6 2AB,flat,1",
        ),
    )
    _text(
        "lender_export.csv",
        _lines(
            "Account No;Post Code;Prop Type;Beds;Case Ref",
            "A1;sw1a2aa;S;3;X-1",
            "A2;M1 1AE;T;2;X-2",
            "A3;LS6 2AB;Q;2;X-3",
        ),
    )


def row_rules() -> None:
    _text(
        "formulas.csv",
        _lines(
            FULL,
            'F1,SW1A 2AA,flat,2,,,,,"=HYPERLINK(""http://x.example"",""open"")"',
            "F2,SW1A 2AA,flat,2,,,,,+cmd|' /C calc'!A0",
            "F3,SW1A 2AA,flat,2,,,,,@SUM(A1:A9)",
            "F4,SW1A 2AA,flat,2,,,,,-2+3",
            'F5,"=HYPERLINK(""http://x.example"")",flat,2,,,,,',
            "F6,=SW1A 2AA,flat,2,,,,,",
            "F7,SW1A 2AA,+flat,2,,,,,",
            "F8,SW1A 2AA,flat,@SUM(A1),,,,,",
            "F9,SW1A 2AA,flat,,=10*10,,,,",
            "F10,SW1A 2AA,flat,2,,=1930,,,",
            "F11,SW1A 2AA,flat,2,,,=detached,,",
            "F12,SW1A 2AA,flat,2,,,,@good,",
            "=cmd,SW1A 2AA,flat,3,,,,,CASE=1+1",
        ),
    )
    _text(
        "ranges.csv",
        _lines(
            FULL,
            "R1,SW1A 2AA,flat,21,,,,,",
            "R2,SW1A 2AA,flat,-1,,,,,",
            "R3,SW1A 2AA,flat,,9.9,,,,",
            "R4,SW1A 2AA,flat,,2000.1,,,,",
            "R5,SW1A 2AA,flat,2,,1499,,,",
            "R6,SW1A 2AA,flat,2,,2101,,,",
            "R7,M1 1AE,flat,0,,,,,",
            "R8,M1 1AE,terraced,20,300,,,,",
            "R9,M1 1AE,flat,,10,,,,",
            "R10,M1 1AE,flat,,2000,,,,",
            "R11,M1 1AE,flat,2,,1500,,,",
            "R12,M1 1AE,flat,2,,2100,,,",
            "R13,M1 1AE,terraced,20,,,,,",
        ),
    )
    _text(
        "enums.csv",
        _lines(
            FULL,
            "E1,SW1A 2AA,bungalow,2,,,,,",
            "E2,SW1A 2AA,flat,2,,,semi,,",
            "E3,SW1A 2AA,flat,2,,,,excellent,",
            "E4,SW1A 2AA,Semi-Detached,2,,,End Terrace,Very Good,",
            "E5,SW1A 2AA,TERRACED,2,,,enclosed mid-terrace,very_poor,",
            "E6,SW1A 2AA,D,2,,,,,",
        ),
    )
    # A lender's money and dates (input/lender_values): read as lenders write them, and
    # a row with one that cannot be read is a problem naming the column.
    _text(
        "lender_values.csv",
        _lines(
            "loan_id,postcode,property_type,bedrooms,Current Balance,Completion Date",
            'M1,SW1A 2AA,flat,2,"£412,500.00",15/03/2019',
            "M2,SW1A 2AA,flat,2,412500,2019-03-15",
            "M3,SW1A 2AA,flat,2,about 400k,15/03/2019",
            "M4,SW1A 2AA,flat,2,100,31/02/2019",
            "M5,SW1A 2AA,flat,2,,",
        ),
    )
    _text(
        "outside_coverage.csv",
        _lines(
            HEADER,
            "S1,EH1 1AA,flat,2,,,",
            "S2,G1 1AA,flat,2,,,",
            "S3,ab10 1aa,flat,2,,,",
            "S4,TD1 1AA,flat,2,,,",
            "S5,DG1 1AA,flat,2,,,",
            "S6,ZE1 0AA,flat,2,,,",
            "N1,BT1 1AA,flat,2,,,",
            "M1,IM1 1AA,flat,2,,,",
            "J1,JE2 3AA,flat,2,,,",
            "G1,GY1 1AA,flat,2,,,",
            "E1,CH1 1AA,flat,2,,,",
        ),
    )
    _text(
        "border_districts.csv",
        _lines(
            HEADER,
            "B1,TD15 1AA,detached,3,,,",
            "B2,td12 4aa,terraced,2,,,",
            "B3,TD9 0AA,flat,2,,,",
            "B4,DG16 5AA,semi_detached,3,,,",
        ),
    )
    _text(
        "unknown_postcode_area.csv",
        _lines(HEADER, "U1,QQ1 1AA,flat,2,,,", "U2,ZZ1 4AA,flat,2,,,", "U3,SW1A 2AA,flat,2,,,"),
    )
    _text(
        "postcode_forms.csv",
        _lines(
            HEADER,
            "P1,sw1a2aa,flat,1,,,",
            "P2,sw1a 2aa,flat,2,,,",
            "P3,  M1 1AE  ,flat,3,,,",
            "P4,m11ae,flat,4,,,",
            "P5,LS6  2AB,flat,1,,,",
            "P6,cf101aa,flat,2,,,",
            "P7,Bs1 4dJ,flat,3,,,",
            "P8,NE1\u00a07RU,flat,2,,,",
        ),
    )
    _text(
        "invalid_postcodes.csv",
        _lines(
            HEADER,
            "I1,SW1A,flat,2,,,",
            "I2,12345,flat,2,,,",
            "I3,SW1A 1A,flat,2,,,",
            "I4,not a postcode,flat,2,,,",
            "I5,SW1A-2AA,flat,2,,,",
            "I6,SW1A\u200b2AA,flat,2,,,",
            "I7,ＳＷ１Ａ ２ＡＡ,flat,2,,,",
            "I8,SW1A 2AA,flat,2,,,",
        ),
    )
    # Letters that str.upper() turns into ASCII: not postcodes, whatever they become.
    _text(
        "postcode_lookalikes.csv",
        _lines(HEADER, "K1,ß1 1AA,flat,2,,,", "K2,ſw1a 2aa,flat,2,,,", "K3,SW1A 2AA,flat,2,,,"),
    )
    _text(
        "reference_postcode.csv",
        _lines(
            HEADER,
            'C1,SW1A 2AA,flat,2,,,"Flat 2, 10 Downing St, SW1A 2AA"',
            "C2,SW1A 2AA,flat,2,,,ref m11ae",
            "C3,SW1A 2AA,flat,2,,,CASE-SW1A",
            "C4,SW1A 2AA,flat,2,,,Zoë at LS6 2AB",
            "C5,SW1A 2AA,flat,2,,,LN/77/B",
        ),
    )
    _text(
        "reference_length.csv",
        _lines(
            HEADER,
            "T1,SW1A 2AA,flat,2,,," + "R" * 64,
            "T2,SW1A 2AA,flat,2,,," + "R" * 65,
            "T3,SW1A 2AA,flat,3,,," + "é" * 64,
            "T4,SW1A 2AA,flat,3,,," + "é" * 65,
            "T5,SW1A 2AA,flat,2,,,  " + "S" * 64 + "  ",
        ),
    )
    _text(
        "duplicate_rows.csv",
        _lines(
            HEADER,
            "D1,SW1A 2AA,flat,2,,,CASE-1",
            "D2,SW1A 2AA,flat,2,,,CASE-1",
            "D3,M1 1AE,terraced,3,,,",
            "D4,SW1A 2AA,flat,2,,,CASE-1",
            "D5,M1 1AE,terraced,3,,,",
            "D6,SW1A 2AA,flat,2,,,CASE-2",
            "D7,QQ1 1AA,flat,2,,,",
            "D8,QQ1 1AA,flat,2,,,",
        ),
    )
    _text(
        "duplicates_after_normalising.csv",
        _lines(
            HEADER,
            "N1,SW1A 2AA,flat,2,,,",
            "N2,sw1a2aa,Flat,2.0,,,",
            "N3, SW1A  2AA ,FLAT, 2 ,,,",
            "N4,SW1A 2AA,flat,2,,,  ",
        ),
    )
    _text(
        "bedrooms_text.csv",
        _lines(
            HEADER,
            "B1,SW1A 2AA,flat,three,,,",
            "B2,SW1A 2AA,flat,3.5,,,",
            "B3,SW1A 2AA,flat,3.0,,,",
            "B4,SW1A 2AA,flat,NaN,,,",
            "B5,SW1A 2AA,flat, 4 ,,,",
            "B6,SW1A 2AA,flat,1e1,,,",
            'B7,SW1A 2AA,flat,"2,5",,,',
            "B8,SW1A 2AA,flat,2,,1930.0,",
            "B9,SW1A 2AA,flat,2,,c.1930,",
        ),
    )
    _text(
        "floor_area_text.csv",
        _lines(
            HEADER,
            "A1,SW1A 2AA,flat,,85 sqm,,",
            "A2,SW1A 2AA,flat,,inf,,",
            "A3,SW1A 2AA,flat,,NaN,,",
            "A4,SW1A 2AA,flat,,85.5,,",
            'A5,SW1A 2AA,flat,,"1,000",,',
            "A6,SW1A 2AA,flat,2,ninety,,",
        ),
    )
    _text(
        "whitespace_only.csv",
        _lines(
            HEADER,
            "W1,   ,flat,2,,,",
            "W2,SW1A 2AA,\t,2,,,",
            "W3,SW1A 2AA,flat,  ,   ,,",
            "W4,SW1A 2AA,flat,2,, ,   ",
        ),
    )
    _text(
        "required_missing.csv",
        _lines(HEADER, "Q1,,flat,2,,,", "Q2,SW1A 2AA,,2,,,", "Q3,SW1A 2AA,flat,,,,", "Q4,,,,,,"),
    )
    _text(
        "floor_area_required.csv",
        _lines(
            HEADER,
            "A1,SW1A 2AA,flat,7,,,",
            "A2,SW1A 2AA,detached,0,,,",
            "A3,SW1A 2AA,terraced,13,,,",
            "A4,SW1A 2AA,flat,7,140,,",
            "A5,SW1A 2AA,flat,6,,,",
        ),
    )


def parquet_used() -> None:
    _parquet(
        "typed_columns.parquet",
        pa.table(
            {
                "loan_id": pa.array([1001, 1002, 1003], type=pa.int64()),
                "postcode": ["SW1A 2AA", "m11ae", "LS6 2AB"],
                "property_type": pa.array(["flat", "terraced", "flat"]).dictionary_encode(),
                "bedrooms": pa.array([2, None, 1], type=pa.int8()),
                "floor_area_sqm": pa.array([None, 72.5, None], type=pa.float32()),
                "year_built": pa.array([1930.0, None, 1999.0], type=pa.float64()),
                "opened": pa.array([True, False, None]),
            }
        ),
    )
    _parquet(
        "exotic_types.parquet",
        pa.table(
            {
                "postcode": pa.array(["SW1A 2AA", "M1 1AE"], type=pa.large_string()),
                "property_type": pa.array(["flat", "flat"]).dictionary_encode(),
                "bedrooms": pa.array([2, 3], type=pa.uint64()),
                "floor_area_sqm": pa.array([decimal.Decimal("55.5"), None], pa.decimal128(6, 1)),
                "opened": pa.array([dt.date(2024, 1, 2), None], type=pa.date32()),
                "stamp": pa.array(
                    [dt.datetime(2024, 1, 2, 3, 4, 5), None], type=pa.timestamp("ms", tz="UTC")
                ),
                "blob": pa.array([b"abc", b"d\xc3\xa9f"], type=pa.binary()),
                "nothing": pa.nulls(2),
            }
        ),
    )
    # Precision above 38 digits: Arrow's decimal256.
    _parquet(
        "decimal256_column.parquet",
        pa.table(
            {
                "postcode": ["SW1A 2AA", "M1 1AE"],
                "property_type": ["flat", "flat"],
                "bedrooms": [2, 3],
                "balance": pa.array([decimal.Decimal("1.5"), None], type=pa.decimal256(40, 1)),
            }
        ),
    )
    _parquet(
        "empty_column_name.parquet",
        pa.Table.from_arrays(
            [
                pa.array(["SW1A 2AA", "EH1 1AA"]),
                pa.array(["flat", "flat"]),
                pa.array([2, 2]),
                pa.array(["a", "b"]),
            ],
            names=["postcode", "property_type", "bedrooms", ""],
        ),
    )
    _parquet(
        "string_bedrooms.parquet",
        pa.table(
            {
                "postcode": ["SW1A 2AA", "SW1A 2AA", "SW1A 2AA", "SW1A 2AA"],
                "property_type": ["flat", "flat", "flat", "flat"],
                "bedrooms": ["three", "3.5", "3.0", ""],
            }
        ),
    )
    _parquet(
        "float_bedrooms.parquet",
        pa.table(
            {
                "postcode": ["SW1A 2AA", "M1 1AE", "LS6 2AB", "NE1 7RU"],
                "property_type": ["flat", "flat", "flat", "flat"],
                "bedrooms": pa.array([2.0, 2.5, float("nan"), 21.0], type=pa.float64()),
            }
        ),
    )
    _parquet(
        "null_rows.parquet",
        pa.table(
            {
                "postcode": ["SW1A 2AA", None, None, "M1 1AE"],
                "property_type": ["flat", None, "flat", "terraced"],
                "bedrooms": pa.array([2, None, 2, 3], type=pa.int64()),
            }
        ),
    )
    _parquet(
        "parquet_named_csv.csv",
        pa.table(
            {
                "postcode": ["SW1A 2AA", "EH1 1AA"],
                "property_type": ["flat", "flat"],
                "bedrooms": [2, 2],
            }
        ),
    )


def per_row_include() -> None:
    """Extras asked for row by row: text cells, a Parquet list, and Unicode normal forms."""
    _text(
        "include_column.csv",
        _lines(
            "loan_id,postcode,property_type,bedrooms,include",
            "I1,SW1A 2AA,flat,2,commentary;rebuildCost",
            'I2,SW1A 2AA,flat,2,"rebuildCost, commentary, rebuildCost"',
            "I3,M1 1AE,terraced,3,",
            "I4,M1 1AE,terraced,3,rebuildCost",
            "I5,LS6 2AB,flat,1,commentary",
            "I6,LS6 2AB,flat,1,photos",
            "I7,LS6 2AB,flat,1,rebuildcost",
            "I8,LS6 2AB,flat,1, ; ",
        ),
    )
    _parquet(
        "include_list.parquet",
        pa.table(
            {
                "loan_id": [f"X{i}" for i in range(1, 7)],
                "postcode": ["SW1A 2AA", "SW1A 2AA", "M1 1AE", "M1 1AE", "LS6 2AB", "LS6 2AB"],
                "property_type": ["flat", "flat", "terraced", "terraced", "flat", "flat"],
                "bedrooms": [2, 2, 3, 3, 1, 1],
                "extras": pa.array(
                    [
                        ["rebuildCost", "commentary"],
                        ["commentary", "rebuildCost", "commentary"],
                        None,
                        [],
                        ["photos"],
                        ["Commentary"],
                    ],
                    type=pa.list_(pa.string()),
                ),
            }
        ),
    )
    _parquet(
        "include_list_of_numbers.parquet",
        pa.table(
            {
                "postcode": ["SW1A 2AA"],
                "property_type": ["flat"],
                "bedrooms": [2],
                "include": pa.array([[1, 2]], type=pa.list_(pa.int64())),
            }
        ),
    )
    # One reference typed precomposed (NFC) and decomposed (NFD): one request, one key.
    _text(
        "reference_normal_forms.csv",
        _lines(
            HEADER,
            "U1,SW1A 2AA,flat,2,,,Zo\u00eb Bront\u00eb",
            "U2,SW1A 2AA,flat,2,,,Zoe\u0308 Bronte\u0308",
        ),
    )


def main() -> None:
    unusable_csv()
    unusable_parquet()
    encodings_and_framing()
    row_rules()
    parquet_used()
    per_row_include()


if __name__ == "__main__":
    main()
