"""A building society's monthly collateral report, made here from a seed, as a workbook
and as the CSV file Excel on Windows saves of its loan sheet: a disclaimer sheet first,
a banner with the reporting date, a merged group header over the column headings
(abbreviated as MI packs write them), the loans grouped by region, each group under a
heading and after it a subtotal (one in the lender's own words, one with no blank line
after it), a grand total, footnotes (`*`, `Note:`), a hidden column, an internal and a
long-text column, a customer's name, and a hidden row (a loan, which is read as one).

`Pack` keeps what a test checks against: every loan's line and balance, every line that
is not a loan, and the values of the columns no output may hold."""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import random
from pathlib import Path
from types import ModuleType

REPORTING_DATE = dt.date(2026, 10, 31)
BANNER = (
    "Harbour Building Society - Collateral Report",
    f"Reporting date: {REPORTING_DATE:%d/%m/%Y}",
)
GROUPS = ("Loan", "Security", "Balances", "Internal")
HEADINGS = (
    "Acc No",
    "Cust Nm",
    "Region",
    "Post Code",
    "Prop Type",
    "Beds",
    "Curr Bal",
    "Orig Valuation",
    "Orig Val Dt",
    "Risk Grade",
    "Officer Notes",
    "Internal Ref",
)
# The group header's merged cells: (first column, last column, words).
SPANS = ((0, 1, GROUPS[0]), (2, 5, GROUPS[1]), (6, 8, GROUPS[2]), (9, 11, GROUPS[3]))
HIDDEN_COLUMN = "Risk Grade"
KEPT_OUT = ("Cust Nm", "Risk Grade", "Officer Notes", "Internal Ref")
REGIONS = ("North West", "Wales", "Yorkshire", "South East")
# The subtotal of the second group is in the lender's own words, not English.
OWN_WORDS = "Cyfanswm {region}"
HEADER_LINE = len(BANNER) + 3  # a blank line after the banner, then the group header
FOOTNOTES = ("* Balances exclude arrears and fees", "Note: valuations are at origination")


@dataclasses.dataclass
class Pack:
    """The report's lines (cells typed; None empty), and what a test checks."""

    lines: list[list[object]] = dataclasses.field(default_factory=list)
    loans: dict[int, float] = dataclasses.field(default_factory=dict)  # line -> balance
    not_loans: dict[int, str] = dataclasses.field(default_factory=dict)  # line -> label
    secrets: list[str] = dataclasses.field(default_factory=list)  # kept-out columns' values
    hidden_line: int = 0

    def add(self, cells: dict[str, object]) -> int:
        self.lines.append([cells.get(h) for h in HEADINGS])
        return len(self.lines)

    @property
    def balance(self) -> float:
        return round(sum(self.loans.values()), 2)


def make_pack(seed: int, samples: ModuleType, loans_per_group: int = 6) -> Pack:
    rng = random.Random(seed)
    pack = Pack()
    pack.lines.extend([[text] for text in BANNER])
    pack.lines.append([])
    group_row: list[object] = [None] * len(HEADINGS)
    for first, _, words in SPANS:
        group_row[first] = words
    pack.lines.append(group_row)
    pack.lines.append(list(HEADINGS))
    assert len(pack.lines) == HEADER_LINE
    account = rng.randrange(10_000, 90_000)
    for g, region in enumerate(REGIONS):
        pack.not_loans[pack.add({"Acc No": region})] = region  # the group's heading
        group = 0.0
        for _ in range(loans_per_group):
            home = samples.make_home(rng, floor_area_share=0.0)
            account += rng.randrange(1, 40)
            balance = round(rng.uniform(40_000, 480_000), 2)
            secret = f"{rng.getrandbits(48):012x}"
            cells = {
                "Acc No": f"{account:08d}",
                "Cust Nm": f"Mx Borrower {secret[:4]}",
                "Region": region,
                "Post Code": home.postcode,
                "Prop Type": home.property_type,
                "Beds": home.bedrooms,
                "Curr Bal": balance,
                "Orig Valuation": round(balance / rng.uniform(0.5, 0.9), -3),
                "Orig Val Dt": dt.date(rng.randrange(2012, 2025), rng.randrange(1, 13), 15),
                "Risk Grade": f"RG-{secret[4:8]}",
                "Officer Notes": (
                    f"Called borrower {secret[8:]} about the remortgage; left a message "
                    "and will write again next month"
                ),
                "Internal Ref": f"INT-{secret}",
            }
            pack.secrets.extend([str(cells[c]) for c in KEPT_OUT])
            line = pack.add(cells)
            pack.loans[line] = balance
            group += balance
            if g == 1 and not pack.hidden_line:
                pack.hidden_line = line
        words = (OWN_WORDS if g == 1 else "Subtotal {region}").format(region=region)
        column = "Region" if g == 1 else "Acc No"
        pack.not_loans[pack.add({column: words, "Curr Bal": round(group, 2)})] = words
        if g != 2:  # no blank line after the third group's subtotal
            pack.lines.append([])
    pack.not_loans[pack.add({"Acc No": "Grand Total", "Curr Bal": pack.balance})] = "Grand Total"
    pack.lines.append([])
    for note in FOOTNOTES:
        pack.not_loans[pack.add({"Acc No": note})] = note
    return pack


def write_xlsx(pack: Pack, path: Path) -> Path:
    """The pack: a disclaimer sheet, the loans (`Collateral`), definitions."""
    import xlsxwriter

    with xlsxwriter.Workbook(str(path)) as book:
        book.set_properties({"created": dt.datetime(2026, 11, 2, 9, 0)})
        cover = book.add_worksheet("Disclaimer")
        cover.write_string(1, 1, "This report is confidential to Harbour Building Society.")
        cover.write_string(3, 1, "Figures are unaudited. See the Definitions sheet.")
        sheet = book.add_worksheet("Collateral")
        money = book.add_format({"num_format": "£#,##0.00"})
        day = book.add_format({"num_format": "dd/mm/yyyy"})
        bold = book.add_format({"bold": True})
        group_line = HEADER_LINE - 2
        for r, cells in enumerate(pack.lines):
            if r == group_line:
                for first, last, words in SPANS:
                    sheet.merge_range(r, first, r, last, words, bold)
                continue
            for c, cell in enumerate(cells):
                if cell is None:
                    continue
                if isinstance(cell, dt.date):
                    sheet.write_datetime(r, c, dt.datetime.combine(cell, dt.time()), day)
                elif isinstance(cell, float) and HEADINGS[c] in ("Curr Bal", "Orig Valuation"):
                    sheet.write_number(r, c, cell, money)
                elif isinstance(cell, int | float):
                    sheet.write_number(r, c, cell)
                else:
                    sheet.write_string(r, c, str(cell))
        hidden = HEADINGS.index(HIDDEN_COLUMN)
        sheet.set_column(hidden, hidden, None, None, {"hidden": True})
        sheet.set_row(pack.hidden_line - 1, None, None, {"hidden": True})
        notes = book.add_worksheet("Definitions")
        notes.write_string(0, 0, "Risk Grade: internal, not for distribution.")
        notes.write_string(1, 0, "Curr Bal: the balance at the reporting date.")
    return path


def write_windows_csv(pack: Pack, path: Path) -> Path:
    """The loan sheet as Excel on Windows saves it: cp1252, CRLF, every line as wide as
    the used range, cells as displayed (`£412,500.00`, `15/03/2019`)."""
    with path.open("w", encoding="cp1252", newline="") as handle:
        out = csv.writer(handle, lineterminator="\r\n")
        for cells in pack.lines:
            shown = []
            for c in range(len(HEADINGS)):
                cell = cells[c] if c < len(cells) else None
                if cell is None:
                    shown.append("")
                elif isinstance(cell, dt.date):
                    shown.append(f"{cell:%d/%m/%Y}")
                elif isinstance(cell, float) and HEADINGS[c] in ("Curr Bal", "Orig Valuation"):
                    shown.append(f"£{cell:,.2f}")
                else:
                    shown.append(str(cell))
            out.writerow(shown)
    return path
