"""`run --book`: a book larger than a night's budget, kept fresh night after night
(booking, valuations/book, store/book), at the command line in this process (the `batchval`
fixture; a process of its own for `kill -9`) against the served sandbox."""

from __future__ import annotations

import csv
import datetime as dt
import json
import shutil
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from support import (
    BATCHVAL,
    LIVE,
    InProcess,
    Ran,
    clear_of_midnight,
    env_for,
    outputs,
    wait_until,
)

from batchval._internal.sandbox.config import Faults
from batchval._internal.sandbox.server import RunningSandbox

# End to end: the CLI as a process against the sandbox (`make test-fast` leaves it out).
pytestmark = [pytest.mark.slow, pytest.mark.dates]

DAY = 86_400
ROWS = 300
POSTCODES = ["SW1A 2AA", "M1 1AE", "LS6 2AB", "CF10 1AA", "BS1 4DJ", "NE1 7RU"]


def loan_book(path: Path, rows: int = ROWS, *, repeat: int | None = None) -> Path:
    """`rows` loans, each its own request (its reference), balances all different and
    not in row order; `repeat`: the last row has that row's loan id again."""
    with path.open("w", newline="", encoding="utf-8") as stream:
        out = csv.writer(stream)
        out.writerow(
            ["loan_id", "postcode", "property_type", "bedrooms", "reference", "loan_balance"]
        )
        for n in range(rows):
            loan = n if repeat is None or n < rows - 1 else repeat
            balance = 100_000 + (n * 7_919) % rows * 1_000
            out.writerow(
                [
                    f"LN-{loan:05d}",
                    POSTCODES[n % 6],
                    "terraced",
                    1 + n % 5,
                    f"CASE-{n:05d}",
                    balance,
                ]
            )
    return path


class Nights:
    """Night after night against one sandbox: each night a new --out DIR, the run's
    clock and the sandbox's moved on a day, so that the daily run id (and the keys)
    change as they would."""

    def __init__(self, served: RunningSandbox, tmp_path: Path, batchval: InProcess) -> None:
        self.served = served
        self.batchval = batchval
        self.tmp = tmp_path
        self.source = loan_book(tmp_path / "loans.csv")
        self.book = tmp_path / "book.parquet"
        self.night = 0
        self.shift = 0  # seconds both clocks were moved on to keep a night off midnight

    def clear_of_midnight(self) -> None:
        """Keep tonight's run within one UTC day of the sandbox's (support.clear_of_midnight)."""
        self.shift += clear_of_midnight(self.served)

    def args(self, out: Path) -> list[str]:
        return [
            "run",
            str(self.source),
            "--out",
            str(out),
            "--book",
            str(self.book),
            "--row-id",
            "loan_id",
            "--max-credits",
            "1000",
        ]

    def env(self) -> dict[str, str]:
        offset = (self.night - 1) * DAY + self.shift  # as far as the sandbox's clock has moved
        return env_for(self.served, BATCHVAL_CLOCK_OFFSET_SECONDS=str(offset))

    def next(self) -> Path:
        """Move both clocks to the next night; its --out DIR."""
        if self.night:
            self.served.sandbox.clock.advance(DAY)
        self.night += 1
        return self.tmp / f"night-{self.night}"

    def run(self) -> tuple[Path, Ran]:
        out = self.next()
        return out, self.batchval(*self.args(out), env=self.env())

    def charges(self) -> int:
        return len(self.served.sandbox.ledger.valuations_created(LIVE.client_id))

    def run_and_reconcile(self) -> tuple[Path, Ran]:
        """A night whose credits this time are what the account was charged that night,
        and whose balance is the account's."""
        ledger = self.served.sandbox.ledger
        before = ledger.credits_charged(LIVE.client_id)
        out, done = self.run()
        summary = outputs(out)[2]
        charged = ledger.credits_charged(LIVE.client_id) - before
        assert summary["credits_charged"]["this_invocation"] == charged, done.stdout
        assert summary["charges"]["uncertain_calls"] == 0
        if charged:
            balance = self.served.sandbox.balances()[LIVE.client_id]
            assert summary["last_known_balance"] == balance
        return out, done

    def posts(self) -> int:
        return sum(1 for r in self.served.sandbox.ledger.requests if r.method == "POST")


def _valued(out: Path) -> set[str]:
    results, _, _ = outputs(out)
    return set(results.filter(pl.col("source") == "api")["loan_id"].to_list())


def _book_section(out: Path) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return dict(summary["book"])


def test_four_nights_value_the_whole_book_once(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """100 valuations a night: night 1 the 100 largest balances (200 deferred, exit 0),
    nights 2 and 3 the rest, each row charged once; night 4 sends nothing and its results
    are the whole book, carried."""
    nights = Nights(served, tmp_path, batchval)
    loans = pl.read_csv(nights.source)
    largest = set(loans.sort("loan_balance", descending=True).head(100)["loan_id"].to_list())

    out, done = nights.run_and_reconcile()
    assert done.returncode == 0, done.stderr
    assert _valued(out) == largest
    book = _book_section(out)
    assert book["rows"] == {
        "valued": 100,
        "carried": 0,
        "deferred": 200,
        "problems": 0,
        "pending": 0,
    }
    today = dt.datetime.fromisoformat(outputs(out)[2]["started_at"]).date()
    assert book["fresh_by"] == (today + dt.timedelta(days=2)).isoformat()
    assert nights.charges() == 100
    assert pq.read_table(nights.book).num_rows == 100
    assert "deferred" in done.stdout
    assert "exit 0" in done.stdout

    seen = set(largest)
    for night in (2, 3):
        out, done = nights.run_and_reconcile()
        assert done.returncode == 0, done.stderr
        valued = _valued(out)
        assert len(valued) == 100
        assert not valued & seen
        seen |= valued
        assert _book_section(out)["rows"]["carried"] == 100 * (night - 1)
        assert nights.charges() == 100 * night
    assert seen == set(loans["loan_id"].to_list())
    assert served.sandbox.ledger.keys_charged_twice() == []

    posts = nights.posts()
    out, done = nights.run_and_reconcile()
    assert done.returncode == 0, done.stderr
    assert nights.posts() == posts  # night 4 sent nothing
    results, problems, summary = outputs(out)
    assert results.height == ROWS
    assert problems.height == 0
    assert set(results["source"].to_list()) == {"book"}
    assert results["credits_charged"].sum() == 0
    assert summary["book"]["age_profile"]["within_30_days"] == ROWS
    # Carried rows keep the valuation they were given, and the night it was given.
    book_file = pl.read_parquet(nights.book).sort("identity")
    carried = results.sort("loan_id")
    assert carried["valuation_id"].to_list() == book_file["valuation_id"].to_list()
    assert carried["valued_at"].to_list() == book_file["valued_at"].to_list()


def test_stale_rows_get_the_budget_first(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """Once the whole book is valued, 50 entries set 40 days back are the next night's
    valuations, the highest last LTV first when the budget is short."""
    nights = Nights(served, tmp_path, batchval)
    for _ in range(3):
        _, done = nights.run()
        assert done.returncode == 0, done.stderr
    table = pq.read_table(nights.book)
    stale_ids = set(table.column("identity").to_pylist()[::6])  # 50 of the 300
    assert len(stale_ids) == 50
    stale = pc.is_in(table.column("identity"), value_set=pa.array(sorted(stale_ids)))
    shifted = pc.subtract(table.column("valued_at"), pa.scalar(dt.timedelta(days=40)))
    kind = table.schema.field("valued_at").type
    valued_at = pc.if_else(stale, shifted.cast(kind), table.column("valued_at"))
    at = table.schema.get_field_index("valued_at")
    written = table.set_column(at, table.schema.field("valued_at"), valued_at)
    pq.write_table(written, nights.book)

    out, done = nights.run()
    assert done.returncode == 0, done.stderr
    assert _valued(out) == stale_ids
    assert _book_section(out)["rows"]["carried"] == ROWS - 50
    # Each loan revalued tonight says what its replaced entry held; a carried one does not.
    results, _, _ = outputs(out)
    entries = {
        r["identity"]: (r["estimate"], r["valued_at"])
        for r in pl.from_arrow(written).iter_rows(named=True)  # type: ignore[union-attr]
    }
    for row in results.iter_rows(named=True):
        if row["source"] == "api":
            assert (row["previous_estimate"], row["previous_valued_at"]) == entries[row["loan_id"]]
        else:
            assert row["previous_estimate"] is None
    assert results.schema["previous_estimate"] == pl.Int64

    # In the `staleness` order, a budget of 20 takes the 20 highest LTVs of the 50 (they
    # are stale again: the book is rewritten from the night before's).
    ltv = dict(
        zip(
            table.column("identity").to_pylist(),
            table.column("indexed_ltv").to_pylist(),
            strict=True,
        )
    )
    pq.write_table(table.set_column(at, table.schema.field("valued_at"), valued_at), nights.book)
    out = nights.next()
    done = batchval(
        *nights.args(out), "--max-calls", "20", "--book-order", "staleness", env=nights.env()
    )
    assert done.returncode == 0, done.stderr
    highest = sorted(stale_ids, key=lambda loan: -ltv[loan])[:20]
    assert _valued(out) == set(highest)
    assert _book_section(out)["rows"]["deferred"] == 30


def test_a_killed_book_run_leaves_the_old_book(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """SIGKILL while a night is sending: the book is the night before's, whole; the same
    command again finishes the night and no key is charged twice."""
    nights = Nights(served, tmp_path, batchval)
    _, done = nights.run()
    assert done.returncode == 0, done.stderr
    before = nights.book.read_bytes()
    served.sandbox.set_faults(Faults(latency_ms=100))
    out = nights.next()
    charged = nights.charges()
    with subprocess.Popen(
        [BATCHVAL, *nights.args(out), "--concurrency", "2"],
        env=nights.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as killed:
        wait_until(
            lambda: nights.charges() >= charged + 5,
            60,
            "five charges to kill after",
            process=killed,
        )
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
    assert nights.book.read_bytes() == before
    assert pq.read_table(nights.book).num_rows == 100
    served.sandbox.set_faults(Faults())

    done = batchval(*nights.args(out), env=nights.env())
    assert done.returncode == 0, done.stderr
    assert served.sandbox.ledger.keys_charged_twice() == []
    assert nights.charges() == 200  # the night's 100, each once
    results, _, _ = outputs(out)
    charged_ids = {c.resource for c in served.sandbox.ledger.valuations_created(LIVE.client_id)}
    assert charged_ids <= set(results["valuation_id"].to_list())
    assert results.height == 200
    assert pq.read_table(nights.book).num_rows == 200


def _repeated(path: Path) -> Path:
    return loan_book(path, 10, repeat=3)


def _blank(path: Path) -> Path:
    source = loan_book(path, 4)
    source.write_text(source.read_text().replace("LN-00002,", ",", 1))
    return source


@pytest.mark.parametrize(
    ("loans", "said"),
    [(_repeated, "'LN-00003' is on rows 4 and 10"), (_blank, "row 3 has none")],
    ids=["a loan id on two rows", "a row without a loan id"],
)
def test_a_row_id_missing_or_on_two_rows_is_refused(
    served: RunningSandbox,
    tmp_path: Path,
    batchval: InProcess,
    loans: Callable[[Path], Path],
    said: str,
) -> None:
    """Two rows with one --row-id value, or a valid row with an empty one: exit 65
    naming the rows, no book written, nothing sent."""
    source = loans(tmp_path / "loans.csv")
    book = tmp_path / "book.parquet"
    args = ["run", str(source), "--out", str(tmp_path / "out"), "--book", str(book)]
    done = batchval(*args, "--row-id", "loan_id", env=env_for(served))
    assert done.returncode == 65
    assert said in done.stderr
    assert not book.exists()
    assert served.sandbox.ledger.requests == []


def test_the_request_is_the_identity_without_a_row_id(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """Without --row-id a changed request is a new identity: the next night values only
    the changed row; status shows the book's ages."""
    source = loan_book(tmp_path / "loans.csv", 6)
    book = tmp_path / "book.parquet"
    first = batchval(
        "run", str(source), "--out", str(tmp_path / "n1"), "--book", str(book), env=env_for(served)
    )
    assert first.returncode == 0, first.stderr
    text = source.read_text().replace("CASE-00002", "CASE-00002-B")
    source.write_text(text)
    served.sandbox.clock.advance(DAY)
    out = tmp_path / "n2"
    env = env_for(served, BATCHVAL_CLOCK_OFFSET_SECONDS=str(DAY))
    second = batchval("run", str(source), "--out", str(out), "--book", str(book), env=env)
    assert second.returncode == 0, second.stderr
    results, _, _ = outputs(out)
    assert results.filter(pl.col("source") == "api")["reference"].to_list() == ["CASE-00002-B"]
    assert pq.read_table(book).num_rows == 7  # the old request's entry is kept
    status = batchval("status", str(out), env=env_for(served))
    assert status.returncode == 0
    assert "book ages: 6 within 30 days" in status.stdout


def test_results_say_api_without_a_book(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A run without --book marks every result `source = api`."""
    source = loan_book(tmp_path / "loans.csv", 3)
    done = batchval("run", str(source), "--out", str(tmp_path / "out"), env=env_for(served))
    assert done.returncode == 0, done.stderr
    results, _, summary = outputs(tmp_path / "out")
    assert results["source"].to_list() == ["api"] * 3
    assert "book" not in summary
    shutil.rmtree(tmp_path / "out")


def test_the_daily_limit_met_early_defers_the_rest(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """The account's daily limit (40) met before the night's budget (100): the 40 are
    valued, and the rest of the plan is deferred at once, the requests never sent and
    those the API answered 429 `daily_limit` alike (a 429 values nothing: docs/api.md):
    the night is complete, exit 0, nothing pending. The next night values them, a budget
    of them, under its own keys, each loan charged once."""
    served.sandbox.account(LIVE.client_id).daily_limit = 40
    nights = Nights(served, tmp_path, batchval)
    nights.clear_of_midnight()  # a count restarting midway would value more than 40
    out, done = nights.run()
    assert done.returncode == 0, done.stderr
    summary = outputs(out)[2]
    assert summary["stop"] is None
    rows = summary["book"]["rows"]
    assert rows["valued"] == nights.charges() == 40
    limited = served.sandbox.ledger.requests_by_status()[429]
    assert limited > 0  # some calls in flight met the limit
    assert rows["pending"] == 0
    assert rows["deferred"] == ROWS - 40
    assert pq.read_table(nights.book).num_rows == 40  # tonight's valuations are kept

    served.sandbox.account(LIVE.client_id).daily_limit = None
    out, again = nights.run()  # the next night: a budget of the deferred, a new run id
    assert again.returncode == 0, again.stderr
    assert _book_section(out)["rows"]["valued"] == 100
    assert nights.charges() == 140
    assert served.sandbox.ledger.keys_charged_twice() == []


def test_book_options_need_a_book(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """--row-id without --book is a usage error (64) and sends nothing."""
    source = loan_book(tmp_path / "loans.csv", 3)
    done = batchval(
        "run",
        str(source),
        "--out",
        str(tmp_path / "out"),
        "--row-id",
        "loan_id",
        env=env_for(served),
    )
    assert done.returncode == 64
    assert "go with --book" in done.stderr
    assert served.sandbox.ledger.requests == []


def test_a_dry_run_prices_tonights_share(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """With a book, --dry-run prices only what tonight would send: fresh loans are
    carried, and the budget caps the rest; nothing is sent and the book is unchanged."""
    source = loan_book(tmp_path / "loans.csv", 12)
    book = tmp_path / "book.parquet"
    args = ["run", str(source), "--book", str(book), "--row-id", "loan_id"]
    first = batchval(*args, "--out", str(tmp_path / "n1"), "--max-calls", "5", env=env_for(served))
    assert first.returncode == 0, first.stderr
    before, posts = book.read_bytes(), len(served.sandbox.ledger.requests)
    capped = batchval(
        *args, "--out", str(tmp_path / "d1"), "--max-calls", "5", "--dry-run", env=env_for(served)
    )
    assert capped.returncode == 0, capped.stderr
    assert "would make 5 calls costing 50 credits" in capped.stdout
    whole = batchval(*args, "--out", str(tmp_path / "d2"), "--dry-run", env=env_for(served))
    assert "would make 7 calls costing 70 credits" in whole.stdout
    assert len(served.sandbox.ledger.requests) == posts
    assert book.read_bytes() == before
