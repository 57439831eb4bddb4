"""The committee's report (issue 33): the MI sample of a lender's extract, run in-process
against the embedded sandbox, reported, and read in headless Chromium as its readers
would: the first screen, the loans named, the operation last, and the page printed on A4.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import polars as pl
import pytest
from embedded_cli import SAMPLES, invoke
from programs import Chromium, console_messages

from batchval._internal.contract.lender import amounts
from batchval._internal.contract.places import authority_name

# Printed on A4 portrait with the page's own 14 mm margins: 182 mm of width, in CSS
# pixels (96 to the inch).
A4_POINTS = 595.28
PRINTED_WIDTH_PX = round(182 / 25.4 * 96)

# Run at the end of the page (the page itself has no script): with `print`, the page's
# print rules are applied as if printing; then it measures and writes what it found
# into a <pre id=probe> that --dump-dom shows.
PROBE = """<script>
(() => {
  if (%(print)s) {
    for (const sheet of document.styleSheets) for (const rule of sheet.cssRules) {
      if (rule.media && rule.media.mediaText === "print") {
        const style = document.createElement("style");
        style.textContent = [...rule.cssRules].map((r) => r.cssText).join("\\n");
        document.head.appendChild(style);
      }
    }
  }
  const seen = [];
  for (const el of document.querySelectorAll("h1, h2, p, .card")) {
    const box = el.getBoundingClientRect();
    if (box.bottom <= innerHeight) seen.push(el.innerText.replace(/\\s+/g, " "));
  }
  const overflowing = [];
  for (const table of document.querySelectorAll("table, .cards, svg")) {
    const room = table.parentElement.clientWidth;
    const width = table.scrollWidth || table.getBoundingClientRect().width;
    if (width > room + 1) overflowing.push(`${table.tagName} ${width} > ${room}`);
  }
  const probe = document.createElement("pre");
  probe.id = "probe";
  probe.textContent = JSON.stringify({seen, overflowing, page: document.body.scrollWidth});
  document.body.appendChild(probe);
})();
</script>"""


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The MI extract from init to report, as its tutorial goes."""
    here = tmp_path_factory.mktemp("committee")
    book = here / "book.xlsx"
    book.write_bytes((SAMPLES / "mi_extract.xlsx").read_bytes())
    config = here / "book.yaml"
    assert invoke("init", str(book), "--out", str(config)).exit_code == 0
    out = here / "runs"
    ran = invoke("run", str(book), "--config", str(config), "--out", str(out))
    assert ran.exit_code == 0, ran.output
    assert invoke("report", str(out)).exit_code == 0
    return out


def probed(
    chromium: Chromium, out: Path, tmp_path: Path, *, width: int, height: int, print_rules: bool
) -> Any:
    page = out / "report.html"
    probe = tmp_path / f"probe-{width}.html"
    text = page.read_text(encoding="utf-8")
    script = PROBE % {"print": "true" if print_rules else "false"}
    probe.write_text(text.replace("</body>", script + "</body>"), encoding="utf-8")
    shown = chromium(
        probe, tmp_path / f"profile-{width}", f"--window-size={width},{height}", "--dump-dom"
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert console_messages(shown.stderr) == []
    found = re.search(r'<pre id="probe">(.*?)</pre>', shown.stdout, re.S)
    assert found is not None, shown.stdout[-2000:]
    return json.loads(found.group(1).replace("&amp;", "&").replace("&quot;", '"'))


def short(amount: float) -> str:
    return f"£{amount / 1_000_000:,.2f} m" if amount >= 1_000_000 else f"£{amount:,.0f}"


@pytest.mark.slow  # a browser: make test, not test-fast
def test_the_first_screen_answers_the_committees_first_questions(
    reported: Path, tmp_path: Path, samples: ModuleType, chromium: Chromium
) -> None:
    """On a laptop's first screen: the book's name, the valuation date and the index
    month, test mode, loans in the book and valued, the balance valued and not valued,
    the weighted LTV and the loans over 100 %, each figure the files' own."""
    seen = " | ".join(
        probed(chromium, reported, tmp_path, width=1280, height=800, print_rules=False)["seen"]
    )
    results = pl.read_parquet(reported / "results.parquet")
    problems = pl.read_parquet(reported / "problems.parquet")
    summary = json.loads((reported / "summary.json").read_text())
    assert "Revaluation of" in seen
    assert "book.xlsx" in seen
    valued_on = results.get_column("valued_at").max()
    assert isinstance(valued_on, dt.datetime)
    assert f"valued on {valued_on.day} {valued_on:%b %Y}" in seen
    month = results.get_column("indexed_to").mode().sort()[-1]
    assert f"estimates indexed to {pl.Series([month]).str.to_date('%Y-%m')[0]:%B %Y}" in seen
    assert "Test mode" in seen
    assert "automated valuation model" in seen
    assert f"loans in the book {samples.MI_LOANS}" in seen
    share = results.height / samples.MI_LOANS * 100
    assert f"loans valued {results.height} ({share:.1f} %)" in seen
    valued = sum(a or 0 for a in amounts(results.get_column("Current Balance").to_arrow()))
    unvalued = sum(a or 0 for a in amounts(problems.get_column("Current Balance").to_arrow()))
    assert summary["portfolio"]["balance_not_valued"] == pytest.approx(unvalued, abs=0.01)
    whole = valued + unvalued
    assert f"balance valued {short(valued)} ({valued / whole * 100:.1f} %)" in seen
    assert f"balance not valued {short(unvalued)} ({unvalued / whole * 100:.1f} %)" in seen
    assert f"weighted LTV {summary['portfolio']['weighted_ltv'] * 100:.1f} %" in seen
    over = results.filter(pl.col("indexed_ltv") > 1).height
    assert over > 0
    assert f"loans over 100 % LTV {over}" in seen
    assert "The operation" not in seen  # the operator's part comes last


def test_loans_and_places_are_named_for_a_reader(reported: Path, samples: ModuleType) -> None:
    """Problems grouped by what to do, each loan by its loan id and line; the loans over
    100 % likewise; local authorities by their ONS names; the operation after them."""
    page = (reported / "report.html").read_text(encoding="utf-8")
    problems = pl.read_parquet(reported / "problems.parquet")
    for loan, line in problems.select("Account No", "source_row").iter_rows():
        assert f"{loan} (line {line})" in page
    assert "<h3>Not valued: outside England and Wales" in page
    assert "<h3>Correct the input and run again" in page
    results = pl.read_parquet(reported / "results.parquet")
    highest = results.sort("indexed_ltv", descending=True).row(0, named=True)
    assert f"<td>{highest['Account No']}</td><td>{highest['source_row']}</td>" in page
    codes = results.get_column("local_authority").unique()
    named = [c for c in codes if authority_name(c) != c]
    assert named, "the sandbox's codes hold some real ones"
    shown = re.findall(r"<tr><td>([^<]+)</td><td>([EW]\d{8})</td>", page)
    assert shown
    assert all(name == authority_name(code) for name, code in shown)
    assert any(name != code for name, code in shown)
    operation = page.index("The operation")
    assert page.index("Loans not valued") < operation
    assert page.index("Loans to look at") < operation
    assert page.index("Calls over time") > operation
    assert page.index("API credits left") > operation


@pytest.mark.slow  # a browser: make test, not test-fast
def test_the_page_prints_on_a4_with_no_table_cut(
    reported: Path, tmp_path: Path, chromium: Chromium
) -> None:
    """Printed as a browser's "Save as PDF" does, the page is A4 portrait; laid out at A4's
    printed width with the print rules, no table, set of cards or chart is wider than the
    column that holds it."""
    pdf = tmp_path / "report.pdf"
    printed = chromium(
        reported / "report.html",
        tmp_path / "profile-pdf",
        f"--print-to-pdf={pdf}",
        "--no-pdf-header-footer",
    )
    assert printed.returncode == 0, printed.stderr[-2000:]
    boxes = re.findall(rb"/MediaBox\s*\[\s*0 0 ([\d.]+) ([\d.]+)\s*\]", pdf.read_bytes())
    assert boxes, "a PDF with pages"
    for width, height in boxes:
        assert float(width) == pytest.approx(A4_POINTS, abs=2)
        assert float(height) > float(width)  # portrait
    found = probed(
        chromium, reported, tmp_path, width=PRINTED_WIDTH_PX, height=1100, print_rules=True
    )
    assert found["overflowing"] == []
    assert found["page"] <= PRINTED_WIDTH_PX


@pytest.mark.slow  # a browser: make test, not test-fast
def test_the_width_check_sees_a_table_too_wide(tmp_path: Path, chromium: Chromium) -> None:
    """The check above can fail: a table of long unbreakable cells at a fixed width is
    wider than its column."""
    out = tmp_path / "wide"
    out.mkdir()
    cells = "".join(f"<td style='white-space:nowrap'>{'W' * 60}</td>" for _ in range(4))
    (out / "report.html").write_text(
        f"<html><body><section><table><tr>{cells}</tr></table></section></body></html>"
    )
    found = probed(chromium, out, tmp_path, width=PRINTED_WIDTH_PX, height=600, print_rules=True)
    assert found["overflowing"]
