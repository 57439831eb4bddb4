"""A CSV's encoding found from its bytes when none is given (batchval._internal.input.sniff), and
what the reader makes of it."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchval._internal.input import InputError, InputOptions, ReadAs, open_input, sniff
from batchval._internal.input.layout import Header
from batchval._internal.input.sniff import detect_encoding

HEADER = "loan_id,postcode,property_type,bedrooms,note\n"


def written(path: Path, data: bytes, *, compress: bool = False) -> Path:
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


@pytest.mark.parametrize("compress", [False, True])
def test_a_windows_csv_is_read_as_cp1252_and_says_so(tmp_path: Path, compress: bool) -> None:
    """Excel on Windows' "CSV" (cp1252: £ is 0xA3, the dash and curly quote one byte too)
    is found to be cp1252 and read right, the source saying the encoding was found."""
    text = HEADER + 'L1,SW1A 1AA,flat,2,"£412,500.00"\nL2,SW1A 2AA,flat,3,O’Neil – £5\n'
    path = written(tmp_path / "loans.csv", text.encode("cp1252"), compress=compress)
    source = open_input(path, InputOptions())
    assert source.read_as == ReadAs("csv", "cp1252", encoding_detected=True, header=Header(1))
    values = [v for batch in source.batches() for v in batch.passthrough.to_pylist()]
    assert [v["note"] for v in values] == ["£412,500.00", "O’Neil – £5"]


def test_a_utf8_file_is_utf8_and_a_given_encoding_is_not_found(tmp_path: Path) -> None:
    """UTF-8 (with a £ of two bytes) is found to be UTF-8; an encoding given is used as it
    is, nothing found."""
    path = written(tmp_path / "loans.csv", (HEADER + "L1,SW1A 1AA,flat,2,£1\n").encode())
    assert open_input(path, InputOptions()).read_as == ReadAs(
        "csv", "utf-8", True, header=Header(1)
    )
    assert open_input(path, InputOptions(encoding="latin-1")).read_as == ReadAs(
        "csv", "iso8859-1", False, header=Header(1)
    )


def test_a_byte_past_the_head_decides(tmp_path: Path) -> None:
    """The whole file is looked at, not its head: a single cp1252 byte a megabyte in makes
    the file cp1252, so it is read the same way at every invocation."""
    rows = "".join(f"L{i},SW1A 1AA,flat,2,{'x' * 40}\n" for i in range(30_000))
    path = written(tmp_path / "loans.csv", (HEADER + rows).encode() + b"L,SW1A 1AA,flat,2,\xa3\n")
    assert path.stat().st_size > 1 << 20
    assert detect_encoding(path, compressed=False) == "cp1252"


@pytest.mark.parametrize("byte", [0x81, 0x8D, 0x8F, 0x90, 0x9D])
def test_a_byte_cp1252_leaves_undefined_is_refused_naming_encoding(
    tmp_path: Path, byte: int
) -> None:
    """A file that is neither UTF-8 nor cp1252 (one of the five bytes cp1252 gives no
    character) is refused, naming --encoding: it is some other encoding, and guessing
    which would be a guess."""
    data = (HEADER + "L1,SW1A 1AA,flat,2,").encode() + bytes([0xA3, byte]) + b"\n"
    path = written(tmp_path / "loans.csv", data)
    with pytest.raises(InputError) as caught:
        open_input(path, InputOptions())
    said = str(caught.value)
    assert f"is neither UTF-8 (byte 0xa3 at offset {len(data) - 3})" in said
    assert f"nor cp1252 (byte 0x{byte:02x} at offset {len(data) - 2} means nothing there)" in said
    assert "--encoding NAME" in said
    assert open_input(path, InputOptions(encoding="latin-1")).read_as.encoding == "iso8859-1"


def test_a_file_that_mixes_utf8_and_cp1252_is_refused(tmp_path: Path) -> None:
    """UTF-8 rows with a cp1252 row appended would be misread either way (as cp1252, every
    UTF-8 £ would read Â£): refused, naming --encoding."""
    data = (HEADER + "L1,SW1A 1AA,flat,2,£1\n").encode() + b"L2,SW1A 1AA,flat,2,\xa32\n"
    path = written(tmp_path / "loans.csv", data)
    with pytest.raises(InputError, match=r"mixes UTF-8 .* with another encoding .*--encoding"):
        open_input(path, InputOptions())


@settings(max_examples=60, deadline=None)
@given(text=st.text(st.characters(codec="cp1252", exclude_characters='\x00\r\n"')))
def test_any_cp1252_text_is_read_back_as_written(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    """Whatever cp1252 characters a cell holds, the file is found to be UTF-8 when its
    bytes are and cp1252 otherwise, and the cell comes back as its bytes read so (as
    written, when cp1252); but a file that is not UTF-8 and whose bytes also hold a
    well-formed UTF-8 sequence (cp1252's "Â£") is refused as mixed."""
    path = tmp_path_factory.mktemp("sniff") / "loans.csv"
    data = (HEADER + f'L1,SW1A 1AA,flat,2,"x{text}"\n').encode("cp1252")
    path.write_bytes(data)
    try:
        data.decode("utf-8")
        expected = "utf-8"
    except UnicodeDecodeError:
        expected = "cp1252"
    if expected == "cp1252" and re.search(
        rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}", data
    ):
        with pytest.raises(InputError, match="mixes UTF-8"):
            open_input(path, InputOptions())
        return
    # Listed: a long note would be left out by default (long free text, input/personal).
    source = open_input(path, InputOptions(passthrough=("note",)))
    assert source.read_as.encoding == expected
    cell = next(source.batches()).passthrough.column("note")[0].as_py()
    # cp1252 text whose bytes happen to be UTF-8 ("Â\xa0" is C2 A0) is UTF-8: no rule can
    # tell them apart, and a file that is UTF-8 is read as UTF-8.
    assert cell == f"x{text}".encode("cp1252").decode(expected)


PAD = b"a" * (sniff.DETECT_CHUNK - 1)  # what follows straddles the first two chunks


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (PAD + "£".encode() + b"\n\xa3\n", "mixes UTF-8 (a UTF-8 character at offset 1048575)"),
        (PAD + "£".encode() + b"\n\xa3\n", "another encoding (byte 0xa3 at offset 1048578)"),
        (PAD + b"\xa3\x81\n", "is neither UTF-8 (byte 0xa3 at offset 1048575)"),
        (PAD + b"\xa3\x81\n", "nor cp1252 (byte 0x81 at offset 1048576 means nothing there)"),
        (PAD + b"\xc2A\n", None),
    ],
)
def test_a_sequence_across_two_reads_is_seen_whole(
    tmp_path: Path, data: bytes, said: str | None
) -> None:
    """The file is read a MiB at a time: a character whose bytes straddle two reads is
    judged whole, and every offset named is the byte's place in the file."""
    path = written(tmp_path / "loans.csv", data)
    if said is None:
        assert detect_encoding(path, compressed=False) == "cp1252"
        return
    with pytest.raises(InputError) as caught:
        detect_encoding(path, compressed=False)
    assert said in str(caught.value)
