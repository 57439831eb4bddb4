"""Small files that would take the machine (issue 54, part 3): a workbook that declares a
sheet of every cell over three rows, one whose few bytes unpack to a text longer than any
Excel writes or to more than batchval reads, a config of a MiB or of YAML aliases that
expand to billions of values. Each is read as it is, or refused naming what is too large
(65 for an input, 64 for a config), without being inflated whole. Their time and memory
are figures of `make bench`, not asserted here."""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import xlsxwriter

from batchval._internal.input import InputError, InputOptions, excel, open_input
from batchval._internal.input.config_file import CONFIG_MOST_ALIASES
from batchval._internal.outcome import SettingsError
from batchval._internal.settings import load_settings

ROWS: list[list[object]] = [
    ["postcode", "property_type", "bedrooms"],
    ["SW1A 1AA", "flat", 2],
    ["M1 1AE", "flat", 3],
]


def rules(path: Path) -> list[str | None]:
    """Each data row's problem rule (None: a request), as the run would read the file."""
    source = open_input(path, InputOptions())
    return [r for b in source.batches() for r in b.checked.get_column("rule").to_list()]


def workbook(path: Path, rows: list[list[object]] = ROWS) -> Path:
    with xlsxwriter.Workbook(str(path)) as book:
        sheet = book.add_worksheet("Loans")
        for r, row in enumerate(rows):
            sheet.write_row(r, 0, row)
    return path


def rewritten(
    source: Path, target: Path, part: str, change: Callable[[bytes], Iterator[bytes]]
) -> Path:
    """`source` with its `part` written again, streamed, from what `change` makes of it."""
    with zipfile.ZipFile(source) as given, zipfile.ZipFile(target, "w") as out:
        for item in given.infolist():
            data = given.read(item.filename)
            if item.filename != part:
                out.writestr(item, data, zipfile.ZIP_DEFLATED)
                continue
            info = zipfile.ZipInfo(part)
            info.compress_type = zipfile.ZIP_DEFLATED
            with out.open(info, "w", force_zip64=True) as stream:
                for piece in change(data):
                    stream.write(piece)
    return target


SHEET = "xl/worksheets/sheet1.xml"
STRINGS = "xl/sharedStrings.xml"


def test_a_declared_dimension_of_every_cell_is_not_believed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A1:XFD1048576 over three rows: read whole as the three rows they are, and, streamed,
    its rows are not padded to the dimension."""

    def claim(data: bytes) -> Iterator[bytes]:
        yield re.sub(rb'<dimension ref="[^"]*"/>', b'<dimension ref="A1:XFD1048576"/>', data)

    path = rewritten(workbook(tmp_path / "a.xlsx"), tmp_path / "dim.xlsx", SHEET, claim)
    assert b"XFD1048576" in zipfile.ZipFile(path).read(SHEET)
    assert excel._cells(path, "Loans") is not None
    assert excel._cells(path, "Loans") < 1000  # type: ignore[operator]
    assert rules(path) == [None, None]
    monkeypatch.setattr(excel, "CELL_LIMIT", 0)  # streamed
    assert rules(path) == [None, None]


def test_a_shared_string_longer_than_excel_writes_is_refused_naming_its_line(
    tmp_path: Path,
) -> None:
    """40,000 characters (Excel stops at 32,767): 65, the sheet and line it is used on;
    32,767 exactly is read."""
    base = workbook(tmp_path / "a.xlsx", [["postcode", "property_type", "bedrooms", "note"],
                                          ["SW1A 1AA", "flat", 2, "x"]])  # fmt: skip

    # The first shared string is the first heading; make a row's note the long one instead.
    def note(length: int) -> Callable[[bytes], Iterator[bytes]]:
        def change(data: bytes) -> Iterator[bytes]:
            yield data.replace(b"<si><t>x</t></si>", b"<si><t>" + b"n" * length + b"</t></si>")

        return change

    long = rewritten(base, tmp_path / "long.xlsx", STRINGS, note(40_000))
    with pytest.raises(
        InputError, match=r"40,000 characters or more \(on line 2 of sheet 'Loans'\)"
    ):
        open_input(long, InputOptions())
    most = rewritten(base, tmp_path / "most.xlsx", STRINGS, note(32_767))
    assert rules(most) == [None]


def test_a_sheets_inline_text_over_the_limit_is_refused_naming_its_line(tmp_path: Path) -> None:
    def inline(data: bytes) -> Iterator[bytes]:
        cell = (
            b'<c r="D3" t="inlineStr"><is><t xml:space="preserve">'
            + b" q" * 20_000
            + b"</t></is></c>"
        )
        yield data.replace(
            b"</row></sheetData>", b'</row><row r="3">' + cell + b"</row></sheetData>"
        )

    path = rewritten(workbook(tmp_path / "a.xlsx"), tmp_path / "inline.xlsx", SHEET, inline)
    with pytest.raises(
        InputError, match=r"sheet 'Loans' holds a text of 40,000 characters or more on line 3"
    ):
        open_input(path, InputOptions())


def test_a_workbooks_strings_or_sheet_over_what_batchval_reads_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """By the archive's own directory, before anything is unpacked (the limits lowered
    here: a real one is 256 MiB of strings, 2 GiB a sheet)."""
    path = workbook(tmp_path / "a.xlsx")
    monkeypatch.setattr(excel, "SHARED_STRINGS_LIMIT", 10)
    with pytest.raises(InputError, match="its shared strings take 0 MiB unpacked, more than"):
        open_input(path, InputOptions())
    monkeypatch.setattr(excel, "SHARED_STRINGS_LIMIT", 1 << 30)
    monkeypatch.setattr(excel, "SHEET_LIMIT", 10)
    with pytest.raises(InputError, match="sheet 'Loans' takes 0 MiB unpacked"):
        open_input(path, InputOptions())


def test_a_config_over_a_mib_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "big.yaml"
    config.write_text("# " + "x" * (1024 * 1024) + "\nrun: {}\n", encoding="utf-8")
    with pytest.raises(SettingsError, match="over 1,024 KiB"):
        load_settings(config, {})


def test_a_config_of_many_aliases_or_a_bomb_of_few_is_refused(tmp_path: Path) -> None:
    many = tmp_path / "many.yaml"
    refs = ", ".join(["*n"] * (CONFIG_MOST_ALIASES + 1))
    many.write_text(f"x: &n 1\ny: [{refs}]\n", encoding="utf-8")
    with pytest.raises(SettingsError, match=f"{CONFIG_MOST_ALIASES + 1} YAML aliases"):
        load_settings(many, {})
    bomb = tmp_path / "bomb.yaml"
    levels = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        levels.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    bomb.write_text("\n".join(levels) + "\n", encoding="utf-8")
    with pytest.raises(SettingsError, match="expands to more than 100,000 values"):
        load_settings(bomb, {})


def test_a_config_with_a_few_aliases_is_read(tmp_path: Path) -> None:
    """Anchors a person writes (one value named and used twice) are fine."""
    config = tmp_path / "ok.yaml"
    config.write_text(
        "input:\n  columns: &cols {postcode: Post Code}\nrun:\n  concurrency: &n 4\n"
        "  max_credits: *n\n",
        encoding="utf-8",
    )
    settings = load_settings(config, {})
    assert settings.input.columns["postcode"] == "Post Code"
