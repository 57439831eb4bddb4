"""The rows of a lender's table that are not loans (input/layout.find_not_loans), wherever
they stand: subtotals after each group (labelled in any language, or not at all), group
headings, grand totals, footnotes; and the loans that only look like them.

Books are made here at random, from a seed, in many shapes (the columns in any order, with
or without a loan id, amounts shown to the penny or to the pound, a blank line after a
subtotal or none), as CSV files Excel on Windows writes and as workbooks: what is set
aside is exactly what the book's maker put there that is not a loan."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest
import xlsxwriter
from test_input_reader import read_all

from batchval._internal.input import InputOptions, open_input
from batchval._internal.input.layout import NotLoan
from batchval._internal.input.options import Corrections
from batchval._internal.outcome import SettingsError
from batchval._internal.settings import load_settings

REGIONS = ["North West", "Wales", "South East", "East Midlands", "London", "Yorkshire"]
POSTCODES = ["M1 1AE", "CF10 1AA", "BN1 1AA", "NG1 1AA", "SW1A 1AA", "LS1 1AA"]
# Subtotal labels: English (read as a total by their word), a lender's own word in another
# language or none at all (set aside by their balance, the group's sum).
LABELLED = ["Subtotal {region}", "{region} total", "*** SUB-TOTAL ***", "Total for {region}"]
UNLABELLED = ["Cyfanswm {region}", "Zwischensumme", "小計", "Σ {region}", ""]
NOTES = ["* Balances exclude arrears", "Note: figures unaudited", "(1) Valuation at origination"]


@dataclasses.dataclass
class Book:
    """A table as its maker wrote it: every line (the header first), the lines that are
    loans and those that are not (with the reasons expected, a set when either will do)."""

    columns: list[str]
    lines: list[list[object]] = dataclasses.field(default_factory=list)
    loans: list[int] = dataclasses.field(default_factory=list)
    not_loans: dict[int, set[str]] = dataclasses.field(default_factory=dict)
    balances: float = 0.0
    hidden_line: int | None = None  # a loan's line the workbook hides

    def add(
        self,
        cells: dict[str, object],
        *,
        loan: bool,
        reasons: frozenset[str] | set[str] = frozenset(),
    ) -> int:
        self.lines.append([cells.get(c, "") for c in self.columns])
        line = len(self.lines)  # the header is line 1
        if loan:
            self.loans.append(line)
        elif reasons:
            self.not_loans[line] = set(reasons)
        return line


def make_book(seed: int) -> Book:
    """A regional book: groups of loans, each maybe under a heading and after it a
    subtotal, maybe a blank line; a loan with an id but no postcode; a grand total and
    footnotes."""
    rng = random.Random(seed)
    with_id = rng.random() < 0.7
    columns = ["Region", "Post Code", "Property Type", "Bedrooms", "Curr Bal", "Internal Score"]
    if with_id:
        columns.append("Acc No")
    rng.shuffle(columns)
    book = Book(columns)
    book.lines.append(list(columns))
    first = next(c for c in columns if c != "Curr Bal")  # where a label is written
    account = 1000
    subtotals = 0
    for g, region in enumerate(rng.sample(REGIONS, rng.randint(2, 5))):
        if rng.random() < 0.4:  # a heading: the region's name alone, in a first column
            book.add({first: region}, loan=False, reasons={"one_value"})
        group = 0.0
        for i in range(rng.randint(1, 6)):
            account += 1
            balance = round(rng.uniform(20_000, 600_000), 2)
            cells: dict[str, object] = {
                "Acc No": f"{account:08d}",
                "Region": region,
                "Post Code": POSTCODES[(g + i) % len(POSTCODES)],
                "Property Type": rng.choice(["flat", "detached", "terraced"]),
                "Bedrooms": rng.randint(1, 5),
                "Curr Bal": balance,
                "Internal Score": rng.randint(1, 99),
            }
            if with_id and i == 1:  # no postcode, the balance of the loan above: a loan
                above = book.lines[-1][columns.index("Curr Bal")]
                cells["Post Code"], cells["Curr Bal"] = "", above
                balance = float(str(above))
            line = book.add(cells, loan=True)
            if book.hidden_line is None and i == 0 and g == 1:
                book.hidden_line = line
            group += balance
        book.balances += group
        if rng.random() < 0.85:
            labelled = rng.random() < 0.5
            words = rng.choice(LABELLED if labelled else UNLABELLED).format(region=region)
            where = rng.choice([c for c in columns if c not in ("Post Code", "Curr Bal")])
            cells = {where: words, "Curr Bal": round(group, 2)}
            if words and not labelled and where == "Acc No" and any(ch.isdigit() for ch in words):
                where = "Region"
            expected = {"label"} if labelled else {"subtotal", "total"}
            book.add(cells, loan=False, reasons=expected)
            subtotals += 1
            if rng.random() < 0.5:
                book.lines.append([""] * len(columns))  # a blank line: no row at all
    if rng.random() < 0.7:
        words = rng.choice(["Grand total", "Cyfanswm cyffredinol", ""])
        cells = {first: words, "Curr Bal": round(book.balances, 2)}
        reasons = {"label"} if "total" in words.lower() else {"total", "subtotal"}
        if not words:
            reasons |= {"only_amounts"}
        book.add(cells, loan=False, reasons=reasons)
    for note in rng.sample(NOTES, rng.randint(0, 3)):
        book.add({rng.choice(columns): note}, loan=False, reasons={"label"})
    return book


def shown(value: object, *, pounds: bool) -> str:
    """A cell as a CSV holds it: an amount displayed (`£1,234,568` or `1,234,567.89`)."""
    if isinstance(value, float):
        return f"£{value:,.0f}" if pounds else f"{value:,.2f}"
    return str(value)


def write_csv(book: Book, path: Path, *, pounds: bool) -> Path:
    """As Excel on Windows saves it: cp1252 where it can, CRLF, amounts as displayed."""
    text = "".join(
        ",".join(_quoted(shown(cell, pounds=pounds)) for cell in line) + "\r\n"
        for line in book.lines
    )
    encoding = "cp1252"
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError:
        data = text.encode("utf-8")
    path.write_bytes(data)
    return path


def _quoted(cell: str) -> str:
    return f'"{cell}"' if "," in cell else cell


def write_xlsx(book: Book, path: Path) -> Path:
    """As a workbook: numbers as numbers, a loan's row and the internal column hidden."""
    with xlsxwriter.Workbook(str(path)) as workbook:
        sheet = workbook.add_worksheet("Loans")
        for r, line in enumerate(book.lines):
            for c, cell in enumerate(line):
                if cell != "":
                    sheet.write(r, c, cell)
        if book.hidden_line is not None:
            sheet.set_row(book.hidden_line - 1, None, None, {"hidden": True})
        hidden = book.columns.index("Internal Score")
        sheet.set_column(hidden, hidden, None, None, {"hidden": True})
    return path


def check(book: Book, path: Path) -> None:
    source = open_input(path, InputOptions())
    found = {n.line: n for n in source.read_as.not_loans}
    assert sorted(found) == sorted(book.not_loans), (
        [(n.line, n.reason, n.label) for n in found.values()],
        book.not_loans,
    )
    for line, expected in book.not_loans.items():
        assert found[line].reason in expected, (found[line], expected)
    rows = read_all(source)
    assert len(rows) == len(book.loans)
    lines = [line for b in source.batches() if b.lines is not None for line in b.lines.to_pylist()]
    assert lines == book.loans


SEEDS = range(24)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("pounds", [False, True])
def test_a_windows_csv_sets_aside_exactly_what_is_no_loan(
    tmp_path: Path, seed: int, pounds: bool
) -> None:
    """Amounts to the penny, or as displayed to the pound (each within a pound a row)."""
    book = make_book(seed)
    check(book, write_csv(book, tmp_path / "book.csv", pounds=pounds))


@pytest.mark.parametrize("seed", SEEDS[::3])
def test_a_workbook_sets_aside_exactly_what_is_no_loan_and_reads_hidden_rows(
    tmp_path: Path, seed: int
) -> None:
    book = make_book(seed)
    check(book, write_xlsx(book, tmp_path / "book.xlsx"))


def test_the_books_made_hold_every_shape_the_rules_name() -> None:
    """The seeds cover what they are for: every reason, with and without a loan id."""
    books = [make_book(seed) for seed in SEEDS]
    reasons = {r for b in books for expected in b.not_loans.values() for r in expected}
    assert {"label", "subtotal", "total", "one_value"} <= reasons
    assert {"Acc No" in b.columns for b in books} == {True, False}
    assert any(["" for _ in b.columns] in b.lines for b in books)


COLUMNS = ["Acc No", "Post Code", "Property Type", "Bedrooms", "Curr Bal"]


def written(path: Path, lines: list[list[str]]) -> Path:
    path.write_text("".join(",".join(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_a_loan_with_no_postcode_stays_a_loan_whatever_its_balance(tmp_path: Path) -> None:
    """A loan id makes a row a loan: no postcode and the group's sum as balance or not."""
    path = written(
        tmp_path / "book.csv",
        [
            COLUMNS,
            ["00000001", "SW1A 1AA", "flat", "2", "100000"],
            ["00000002", "", "flat", "2", "100000"],
            ["00000003", "", "", "", "200000"],
            ["00000004", "", "", "", ""],
        ],
    )
    source = open_input(path, InputOptions())
    assert source.read_as.not_loans == ()
    assert [r["rule"] for r in read_all(source)] == [None, "required", "required", "required"]


def test_a_footnote_is_never_a_loan_id(tmp_path: Path) -> None:
    """A footnote in the loan-id column, with or without a digit, is a note; the total
    after it is still a total."""
    path = written(
        tmp_path / "book.csv",
        [
            COLUMNS,
            ["00000001", "SW1A 1AA", "flat", "2", "100000"],
            ["00000002", "M1 1AE", "flat", "2", "50000"],
            ["* Balances exclude arrears", "", "", "", ""],
            ["(2) Valued 2019", "", "", "", ""],
            ["", "", "", "", "150000"],
        ],
    )
    source = open_input(path, InputOptions())
    assert [(n.line, n.reason) for n in source.read_as.not_loans] == [
        (4, "label"),
        (5, "label"),
        (6, "total"),
    ]


def test_corrections_keep_a_line_and_set_aside_a_pattern(tmp_path: Path) -> None:
    """`keep` (a line) makes a row a loan again; `set_aside` (a pattern, any case) sets a
    row aside that the rules keep."""
    path = written(
        tmp_path / "book.csv",
        [
            COLUMNS,
            ["00000001", "SW1A 1AA", "flat", "2", "100000"],
            ["Subtotal", "", "", "", "100000"],
            ["TEST-LOAN-9", "M1 1AE", "flat", "2", "1"],
        ],
    )
    assert [n.line for n in open_input(path, InputOptions()).read_as.not_loans] == [3]
    options = InputOptions(not_loans=Corrections(set_aside=("^test-loan",), keep=(3,)))
    source = open_input(path, options)
    assert source.read_as.not_loans == (NotLoan(4, "set_aside", "TEST-LOAN-9"),)
    assert len(read_all(source)) == 2


@pytest.mark.parametrize(
    ("section", "said"),
    [
        ({"set_aside": "Total"}, "a list"),
        ("Total", r"\{set_aside"),
        ({"keep": [0]}, "not a line number"),
        ({"keep": ["("]}, "not a regular expression"),
        ({"sideline": [3]}, "keep, set_aside"),
    ],
)
def test_bad_corrections_are_refused(tmp_path: Path, section: object, said: str) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(f"input:\n  not_loans: {section}\n", encoding="utf-8")
    with pytest.raises(SettingsError, match=said):
        load_settings(config, {})
