"""A `--book` night's reads of the API's index (`index.source: api`): planned with the
book, sent before the night's valuations through the street analysis job and store
(`streets/job`, `store/streets`, in the run's own database), and kept in the book.

The plan (`IndexReads.plan`, once per DIR with the book's, kept in the database so that a
resumed invocation sends the same reads): each loan's local authority (its book entry's,
else the postcode directory's, else its sector's: `contract/indexation.authorities`), the
authorities' postcodes, the latest `indexedTo` the book's valuations show for each, and
the index the book holds (`api_index.HeldIndex`, in its schema metadata) decide the reads
(`HeldIndex.due`). Each read counts in the night's budget at `run.street_credits` before
it is sent, and the reads come first: what the budget leaves after them goes to
valuations (`split`).

After sending, each read's answer is kept in the held index (`absorb`): its months, or a
null `priceIndex`, or a 404; a read not answered (the run stopped first, an error the
pool gave up on) is tried on a later night. The night's index is the months held then
(`HeldIndex.house_price_index`), and the book is written with them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Callable, Sequence
from typing import Any

import polars as pl

from batchval._internal import logs
from batchval._internal.api import PartnerClient
from batchval._internal.contract import authorities
from batchval._internal.input import PostcodeAuthorities
from batchval._internal.store import Database, StreetStore
from batchval._internal.streets import StreetJob
from batchval._internal.valuations.api_index import HeldIndex, Read

log = logs.get_logger()

PLANNED_META = "book.index_reads"  # the database's meta: the plan (`IndexReads.text`)


@dataclasses.dataclass(slots=True)
class IndexReads:
    """The index the book held when the night was planned, and the night's reads."""

    held: HeldIndex
    reads: list[Read]
    credits: int  # what one read is counted at (`run.street_credits`)
    wanted: int = 0  # the reads due before the budget cut them

    @property
    def cost(self) -> int:
        return len(self.reads) * self.credits

    @classmethod
    def plan(
        cls,
        held: HeldIndex,
        loans: pl.DataFrame,
        directory: PostcodeAuthorities | None,
        today: dt.date,
        *,
        credits: int,
        room: Callable[[int], int],
    ) -> IndexReads:
        """The night's reads for the book's `loans` (`postcode`, normal form; `own`, the
        authority of its book entry; `indexed_to`, its book entry's, as `month_number`),
        as many of those due as `room` (reads wanted -> reads the budget takes) allows."""
        frame = loans.with_columns(
            authority=authorities(loans["postcode"], loans["own"], directory)
        ).filter(pl.col("authority").is_not_null() & pl.col("postcode").is_not_null())
        by_authority = frame.group_by("authority").agg(
            pl.col("postcode").unique(), pl.col("indexed_to").max()
        )
        postcodes = dict(by_authority.select("authority", "postcode").iter_rows())
        seen = {
            a: int(m)
            for a, m in by_authority.select("authority", "indexed_to").iter_rows()
            if m is not None
        }
        due = held.due(postcodes, seen, today)
        taken = due[: room(len(due))]
        log.info(
            "valuations.index_reads.planned",
            authorities=len(postcodes),
            due=len(due),
            reads=len(taken),
            credits=len(taken) * credits,
        )
        return cls(held, taken, credits, len(due))

    def text(self) -> str:
        return json.dumps(
            {
                "held": self.held.text(),
                "reads": [dataclasses.asdict(r) for r in self.reads],
                "credits": self.credits,
                "wanted": self.wanted,
            },
            sort_keys=True,
        )

    @classmethod
    def from_text(cls, text: str) -> IndexReads:
        data: dict[str, Any] = json.loads(text)
        return cls(
            HeldIndex.from_text(data["held"]),
            [Read(**r) for r in data["reads"]],
            int(data["credits"]),
            int(data.get("wanted", 0)),
        )

    def save(self, database: Database) -> None:
        database.set(PLANNED_META, self.text())

    @classmethod
    def load(cls, database: Database) -> IndexReads | None:
        text = database.get(PLANNED_META)
        return None if text is None else cls.from_text(text)

    def job(
        self, client: PartnerClient, database: Database, now: Callable[[], dt.datetime]
    ) -> StreetJob | None:
        """The street analysis job of the reads not answered yet (None when none is
        left): sent before the night's valuations (`Sending.before`)."""
        if not self.reads:
            return None
        store = StreetStore(database)
        store.ask_for_index([r.postcode for r in self.reads], now())
        if not store.queue.pending(0):
            return None
        return StreetJob(client, store, now=now, assumed_credits=self.credits)

    def absorb(self, database: Database, today: dt.date) -> dict[str, int]:
        """Each read's answer kept in the held index; the reads by what they gave
        (`read`, `unpublished`, `not_found`, `unanswered`)."""
        store, found = (
            StreetStore(database),
            dict.fromkeys(("read", "unpublished", "not_found", "unanswered"), 0),
        )
        for read in self.reads:
            outcome = store.outcome(read.postcode)
            kind = _absorb(self.held, read, outcome, today)
            found[kind] += 1
        log.info("valuations.index_reads.kept", **found)
        return found


def _absorb(
    held: HeldIndex,
    read: Read,
    outcome: tuple[str, str | None, bool | None, str | None] | None,
    today: dt.date,
) -> str:
    if outcome is None:
        return "unanswered"
    state, answer, charged, problem = outcome
    if state == "problem" and problem is not None:
        if json.loads(problem).get("type") == "not-found":
            held.absorb(read, None, on=today, charged=False, found=False)
            return "not_found"
        return "unanswered"  # a problem of the request, not the postcode's: tried again
    if state != "done" or answer is None:
        return "unanswered"
    data = json.loads(answer)
    price_index = data.get("priceIndex") if isinstance(data, dict) else None
    months = held.absorb(
        read,
        price_index if isinstance(price_index, dict) else None,
        on=today,
        charged=bool(charged),
    )
    return "read" if months else "unpublished"


def loans_frame(
    postcodes: Sequence[str | None], own: Sequence[str | None], indexed_to: Sequence[int | None]
) -> pl.DataFrame:
    """The book's loans as `IndexReads.plan` reads them."""
    return pl.DataFrame(
        {"postcode": postcodes, "own": own, "indexed_to": indexed_to},
        schema={"postcode": pl.String, "own": pl.String, "indexed_to": pl.Int32},
    )
