"""`index.source: api` on a --book, night after night (issue 56, parts 1 and 2): each
authority's index read from a street analysis, held in the book, read afresh only when it
can have moved, counted in the night's budget before the valuations, and every loan with
a base within the held months rolled forward by it.

The nights span 35 sandbox days across one month's end, wherever today is: the sandbox's
clock (and the run's, by `BATCHVAL_CLOCK_OFFSET_SECONDS`) is first moved to the 20th of a
month, at noon; each night then moves both on. The sandbox is the referee of money.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from support import LIVE, InProcess, env_for, outputs

from batchval._internal.postcodes import normalise
from batchval._internal.sandbox import market
from batchval._internal.sandbox.server import RunningSandbox

pytestmark = [pytest.mark.slow, pytest.mark.dates]

DAY = 86_400
AREAS = ("M", "LS", "B", "L", "S", "NE", "BS", "CF", "NG", "LE", "CV", "OX")
LOANS = 240
OLD = 40  # loans originated five years back: before any month the API's index gives
STREET_CREDITS = 20
# A tenth of the book a night, after the reads: 24 valuations, and up to 40 reads.
MAX_CREDITS = 24 * 10 + 40 * STREET_CREDITS


def postcode_of(n: int) -> str:
    area = AREAS[n % len(AREAS)]
    district = 1 + (n // len(AREAS)) % 3
    return f"{area}{district} {1 + n % 9}AB"


def write_loans(path: Path, today: dt.date) -> Path:
    """`LOANS` loans over some 36 districts' authorities, each its own request (its
    reference), each originated within the last twelve months but the first `OLD`, five
    years back."""
    with path.open("w", newline="", encoding="utf-8") as file:
        out = csv.writer(file)
        out.writerow(["loan_id", "reference", "postcode", "property_type", "bedrooms",
                      "loan_balance", "origination_value", "origination_date"])  # fmt: skip
        for n in range(LOANS):
            back = 5 * 365 if n < OLD else 30 * (1 + n % 11)
            day = today - dt.timedelta(days=back)
            balance, value = 150_000 + 731 * n, 200_000 + 977 * n
            out.writerow([f"L{n:03d}", f"CASE-{n}", postcode_of(n), "semi_detached",
                          1 + n % 4, balance, value, day.isoformat()])  # fmt: skip
    return path


def write_directory(path: Path) -> Path:
    """An ONS Postcode Directory-shaped file: each loan's postcode and its authority."""
    with path.open("w", newline="", encoding="utf-8") as file:
        out = csv.writer(file)
        out.writerow(["pcds", "oslaua"])
        for n in range(LOANS):
            postcode = normalise(postcode_of(n))
            assert postcode is not None
            out.writerow([postcode, market.local_authority(postcode)])
    return path


class Nights:
    def __init__(self, served: RunningSandbox, tmp_path: Path, batchval: InProcess) -> None:
        self.served, self.batchval, self.tmp = served, batchval, tmp_path
        clock = served.sandbox.clock
        now = clock.now()
        # The 20th at noon (this month's, or the next's): no night near midnight, and 35
        # days on is before the month after next.
        month = now.date().replace(day=1)
        if now >= dt.datetime.combine(month.replace(day=20), dt.time(12), dt.UTC):
            month = (month + dt.timedelta(days=32)).replace(day=1)
        target = dt.datetime.combine(month.replace(day=20), dt.time(12), dt.UTC)
        self.start = target.date()
        self.offset = (target - now).total_seconds()
        clock.advance(self.offset)
        self.source = write_loans(tmp_path / "loans.csv", target.date())
        self.directory = write_directory(tmp_path / "postcodes.csv")
        self.book = tmp_path / "book.parquet"
        self.day = 0

    def run(self, day: int) -> tuple[Path, dict[str, Any], pl.DataFrame]:
        """The night `day` days after the first: its DIR, summary and results."""
        self.served.sandbox.clock.advance((day - self.day) * DAY)
        self.offset += (day - self.day) * DAY
        self.day = day
        out = self.tmp / f"night-{day}"
        ledger = self.served.sandbox.ledger
        before = ledger.credits_charged(LIVE.client_id)
        done = self.batchval(
            "run", str(self.source), "--out", str(out), "--book", str(self.book),
            "--row-id", "loan_id", "--index-source", "api",
            "--index-postcodes", str(self.directory), "--max-credits", str(MAX_CREDITS),
            env=env_for(self.served, BATCHVAL_CLOCK_OFFSET_SECONDS=str(self.offset)),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        self.said = done.stdout
        results, _, summary = outputs(out)
        charged = ledger.credits_charged(LIVE.client_id) - before
        assert charged <= MAX_CREDITS
        assert summary["credits_charged"]["this_invocation"] == charged
        assert summary["charges"]["uncertain_calls"] == 0
        return out, summary, results

    def street_reads(self) -> Counter[str]:
        """Charged street analyses by authority, all nights so far."""
        return Counter(
            market.local_authority(c.resource)
            for c in self.served.sandbox.ledger.charges
            if c.kind == "street-analysis" and c.credits
        )


def authority(postcode: str) -> str:
    found = normalise(postcode)
    assert found is not None
    return market.local_authority(found)


def test_the_api_s_index_held_in_the_book_rolls_every_loan_forward_for_35_days(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    nights = Nights(served, tmp_path, batchval)
    authorities = {authority(postcode_of(n)) for n in range(LOANS)}
    published = sorted(a for a in authorities if market.index_published(a))
    assert len(published) > 20
    assert authorities - set(published), "no unpublished authority: null priceIndex untried"

    # Night 1: every authority read once, first in the budget; every loan with a base
    # within the months read has an indexed value; an old base is base_before_index.
    _, summary, results = nights.run(0)
    reads = summary["book"]["index_reads"]
    assert reads["due"] == reads["read"] == len(authorities)
    assert reads["outcomes"]["read"] == len(published)
    assert reads["outcomes"]["unpublished"] == len(authorities - set(published))
    assert nights.street_reads() == Counter(dict.fromkeys(authorities, 1))
    valuations = (MAX_CREDITS - len(authorities) * STREET_CREDITS) // 10
    assert summary["book"]["budget_calls"] == valuations
    assert summary["book"]["portfolio"]["index"]["source"] == "api"
    split = f"index reads first: {len(authorities)} of {len(authorities)} due ("
    assert split in nights.said
    assert f"then up to {valuations} valuations" in nights.said
    assert "by the API's index to " in nights.said
    number = pl.col("loan_id").str.slice(1).cast(pl.Int64)
    rows = results.with_columns(
        authority=number.map_elements(lambda n: authority(postcode_of(n)), pl.String),
        old=number < OLD,
    )
    recent = rows.filter(pl.col("authority").is_in(published) & ~pl.col("old"))
    assert recent.height > 150
    assert recent.filter(pl.col("hpi_value").is_null()).height == 0
    assert set(recent["value_method"].to_list()) <= {"indexed", "avm"}
    old = rows.filter(
        pl.col("old") & (pl.col("value_method") != "avm") & pl.col("authority").is_in(published)
    )
    assert old.height > 0
    assert set(old["hpi_reason"].to_list()) == {"base_before_index"}
    first_month = summary["book"]["portfolio"]["index"]["index_month"]

    # The next nights, up to the month's end: nothing read again (held under 30 days,
    # no later month anywhere).
    turn = ((nights.start + dt.timedelta(days=12)).replace(day=1) - nights.start).days
    for day in (2, turn - 1):
        _, summary, _ = nights.run(day)
        assert summary["book"]["index_reads"]["read"] == 0
    assert nights.street_reads() == Counter(dict.fromkeys(authorities, 1))

    # Across the month's end and on to day 35: each authority read at most twice in
    # all; from the first night of the new month on, the indexed loans reach its month.
    for day in (turn, turn + 9, 35):
        _, summary, results = nights.run(day)
        month = summary["book"]["portfolio"]["index"]["index_month"]
        assert month > first_month, day
        # Every loan rolled forward is rolled to that month, and no valuation of the
        # night shows a later one.
        rolled = results.filter(
            pl.col("value_method").is_in(["indexed", "avm_indexed"])
            & (pl.col("hpi_from") < pl.col("hpi_to"))
        )
        assert rolled.height > 0
        assert set(rolled["hpi_to"].to_list()) == {month}, day
        assert results["indexed_to"].drop_nulls().max() <= month
    assert max(nights.street_reads().values()) <= 2
    assert served.sandbox.ledger.keys_charged_twice() == []


def test_a_budget_too_small_for_both_reads_the_index_first_and_never_passes_the_cap(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """--max-credits 100 at 20 credits a read: five reads (the lowest authorities by
    code), no valuation, nothing past the cap; the other authorities wait for a later
    night. A dry run before it calls nothing."""
    nights = Nights(served, tmp_path, batchval)
    args = ["run", str(nights.source), "--book", str(nights.book), "--row-id", "loan_id",
            "--index-source", "api", "--index-postcodes", str(nights.directory),
            "--max-credits", "100"]  # fmt: skip
    env = env_for(served, BATCHVAL_CLOCK_OFFSET_SECONDS=str(nights.offset))
    dry = batchval(*args, "--out", str(tmp_path / "dry"), "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert served.sandbox.ledger.requests == []
    priced = json.loads((tmp_path / "dry" / "dry_run.json").read_text(encoding="utf-8"))
    authorities = sorted({authority(postcode_of(n)) for n in range(LOANS)})
    due = {"due": len(authorities), "read": 5, "credits_counted": 100}
    assert priced["book"]["index_reads"] == due
    done = batchval(*args, "--out", str(tmp_path / "night"), env=env)
    assert done.returncode == 0, done.stderr
    ledger = served.sandbox.ledger
    assert ledger.credits_charged(LIVE.client_id) == 5 * STREET_CREDITS
    assert ledger.valuations_created(LIVE.client_id) == []
    assert nights.street_reads() == Counter(authorities[:5])
    summary = outputs(tmp_path / "night")[2]
    reads = summary["book"]["index_reads"]
    assert (reads["read"], reads["due"], summary["book"]["budget_calls"]) == (
        5,
        len(authorities),
        0,
    )
    assert summary["book"]["rows"]["deferred"] == LOANS


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ((), "index.source api holds the index in the book: give --book PATH"),
        (("--book", "b.parquet", "--index-file", "hpi.csv"), "say ukhpi for a file"),
    ],
)
def test_the_api_s_index_needs_a_book_and_no_file(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess, extra: tuple[str, ...], said: str
) -> None:
    source = write_loans(tmp_path / "loans.csv", dt.date(2027, 1, 20))
    done = batchval(
        "run", str(source), "--out", str(tmp_path / "out"), "--index-source", "api", *extra,
        env=env_for(served),
    )  # fmt: skip
    assert done.returncode == 64
    assert said in done.stderr
    assert served.sandbox.ledger.requests == []
