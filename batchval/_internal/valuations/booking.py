"""`run --book PATH`: rolling revaluation of a book larger than a night's budget.

The runner calls three steps (beside `valuations/runner`):

1. `plan`, once per DIR, after the ingest: each valid row's identity (the `--row-id`
   column's value, else the request's fingerprint) is looked up in the book. A row whose
   entry is younger than `--fresh-for DAYS` and whose request fingerprint is unchanged is
   carried; the others are ranked by `book.order` and the night's budget (`--max-calls`,
   `--max-credits` at the valuation's price, the daily limit) takes the requests from the
   top. The rest are deferred. `risk` (the default): never valued, largest `loan_balance`
   first; then changed requests, likewise; then stale loans with a revaluation trigger
   tonight (`valuations/picking`: the fall, age and large-loan age triggers, and with an
   `index` the market fall), largest balance first; then stale loans whose LTV is above
   the lowest of `book.ltv_watch`, highest LTV first; then the other stale loans by
   balance x days since their valuation, largest first. `staleness`: never valued, then
   changed (each largest balance first), then stale rows, highest last `indexed_ltv`
   first, then oldest valuation first. The order, each row with its reason, is written
   to `picks.parquet` (a dry run's beside a run's: `dry_run_picks.parquet`). The plan
   is kept in the checkpoint (`store/book`), so that a resumed run sends what the first
   invocation planned, with the same keys.
2. `settle`, after sending: a stop of the budget's own (`max_credits`, `daily_limit`)
   defers the requests never sent, and the run is complete (exit 0). A request that was
   sent stays pending: it may have been charged, so only a replay with its key may
   finish it (exit 75, as without a book).
3. `write`, after the run's outputs: rows not valued tonight that have a book entry are
   added to results.parquet (`source = book`), and the book is read again and replaced
   with tonight's valuations in it (`valuations/book`): atomically on a local path, by
   compare-and-swap at a URL. A run that lost that swap to another run (two nights at
   once) stops with `book_changed` (75): its answers are kept in its run, and the same
   command again merges them into the book as it then is. The summary's `book` section
   counts the rows and forecasts when the whole book is fresh at this budget.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import hashlib
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from batchval._internal import logs
from batchval._internal.api import DAILY_PAID_CALLS, VALUATION_CREDITS
from batchval._internal.contract import TRIGGERS, Revaluation, refresh_revaluation
from batchval._internal.input import (
    HousePriceIndex,
    LenderColumnError,
    PostcodeAuthorities,
    find_lender_columns,
    month_number,
)
from batchval._internal.outcome import RunRefusedError, StopInfo, StopReason
from batchval._internal.place import VersionedFile, refusal_of, versioned_file, write_table_atomic
from batchval._internal.settings import Settings
from batchval._internal.store import CARRY, SEND, BookStore, Checkpoint, unsent_postcodes_apart
from batchval._internal.valuations.api_index import BOOK_META, HeldIndex
from batchval._internal.valuations.book import (
    REQUEST_IDENTITY,
    BookEntry,
    BookError,
    BookMismatchError,
    age_profile,
    book_index,
    carry_into_results,
    read_book,
    write_book,
)
from batchval._internal.valuations.index_reads import IndexReads, loans_frame
from batchval._internal.valuations.picking import REASONS, Risk, Risks

log = logs.get_logger()

# Stops that mean "tonight's budget is spent", not "the run could not do its work".
BUDGET_STOPS = frozenset({StopReason.MAX_CREDITS, StopReason.DAILY_LIMIT})
_LAST = math.inf  # ranks a missing balance or LTV after every known one

# The order in which rows that need a valuation are sent (lower first), and each tier's
# reason in picks.parquet.
NEVER_VALUED, CHANGED, TRIGGERED, WATCHED, STALE = 0, 1, 2, 3, 4
TIER_REASONS: tuple[str, ...] = REASONS  # by tier
# A row's place in the queue: its tier, then two figures within it (lower first).
_Rank = tuple[float, float, float]


def request_fingerprint(request_json: str) -> str:
    """SHA-256 of the canonical request JSON: the same request on any day, unlike the
    Idempotency-Key, which holds the run id."""
    return hashlib.sha256(request_json.encode()).hexdigest()


def night_budget(settings: Settings, reads: int = 0) -> int:
    """The most valuations one night may ask for, after `reads` street analyses of the
    index (each a call, at `run.street_credits`: `night_reads`)."""
    run = settings.run
    limits = [DAILY_PAID_CALLS - reads]
    if run.max_calls is not None:
        limits.append(run.max_calls - reads)
    if run.max_credits is not None:
        limits.append((run.max_credits - reads * run.street_credits) // VALUATION_CREDITS)
    return max(0, min(limits))


def night_reads(settings: Settings, wanted: int) -> int:
    """How many of `wanted` reads of the index a night's budget takes: they come first,
    as far as the calls (`--max-calls`, the daily limit) and `--max-credits` reach."""
    run = settings.run
    limits = [wanted, DAILY_PAID_CALLS]
    if run.max_calls is not None:
        limits.append(run.max_calls)
    if run.max_credits is not None and run.street_credits:
        limits.append(run.max_credits // run.street_credits)
    return max(0, min(limits))


@dataclasses.dataclass(frozen=True, slots=True)
class _Row:
    number: int
    key: str
    identity: str
    fingerprint: str
    rank: _Rank | None  # None: carried


@dataclasses.dataclass(frozen=True, slots=True)
class Written:
    """What `BookRun.write` did, for its `section`: the book's entries once replaced (None:
    not replaced), the rows carried into results.parquet, and the columns the section reads
    of results.parquet as the book left it (None: the book was not read again)."""

    entries: int | None = None
    carried: int = 0
    picture: pa.Table | None = None


class BookRun:
    """One invocation's book: its plan, its budget stop and its writes."""

    def __init__(
        self,
        file: VersionedFile,
        settings: Settings,
        checkpoint: Checkpoint,
        now: Callable[[], dt.datetime],
        index: HousePriceIndex | None = None,
        picks_to: Path | None = None,
        directory: PostcodeAuthorities | None = None,
    ) -> None:
        self.file = file
        self._index = index  # the `index`'s, for the `risk` order
        self._directory = directory  # `index.postcodes`: where a loan finds its authority
        # `index.source: api`: the index the book holds and the night's reads of it, and
        # what their answers gave once kept.
        self.index_reads: IndexReads | None = None
        self._kept: dict[str, int] = {}
        self._picks_to = picks_to  # where the plan's order is written
        self.picked: dict[str, int] = {}  # the plan's picks within the budget, by reason
        self.lost: StopInfo | None = None  # the book's swap lost to another run's
        self.settings = settings
        self._checkpoint = checkpoint
        self._store = BookStore(checkpoint)
        # Every row's pass-through values as `write` read them, for the index (`for_index`).
        self._passthrough: pa.Table | None = None
        self._now = now
        self.identity = settings.run.row_id or REQUEST_IDENTITY
        api = settings.api
        who = "embedded" if api is None else f"{api.base_url}\n{api.client_id}"
        self.api = hashlib.sha256(who.encode()).hexdigest()  # never the secret
        self.budget = night_budget(settings)

    @classmethod
    def start(
        cls,
        settings: Settings,
        checkpoint: Checkpoint,
        now: Callable[[], dt.datetime],
        env: Mapping[str, str] | None = None,
        *,
        index: HousePriceIndex | None = None,
        picks_to: Path | None = None,
        directory: PostcodeAuthorities | None = None,
    ) -> BookRun | None:
        """With a --book (`run.book`: a path, or an s3:// URL whose store the settings and
        `env`, os.environ by default, give), this DIR's book run, planned (once: for its
        input and settings; its order written to `picks_to`); None without one. `index`,
        the `index`'s, tells the `risk` order each stale loan's market fall and LTV."""
        if settings.run.book is None:
            return None
        from batchval._internal.store import ObjectStoreError

        try:
            file = versioned_file(
                settings.run.book, settings.storage.env(os.environ if env is None else env)
            )
        except ObjectStoreError as exc:
            raise refusal_of(exc) from None
        booked = cls(file, settings, checkpoint, now, index, picks_to, directory)
        booked.plan(
            f"{checkpoint.get('input_fingerprint')}:{checkpoint.get('settings_fingerprint')}"
        )
        return booked

    # --- 1. the plan ---------------------------------------------------------------------

    def plan(self, planned_for: str) -> None:
        """Decide each row's night, unless this DIR's plan was made for the same input
        and settings. Raises RunRefusedError (65) for a book that cannot be used or an
        identity on two rows."""
        order = self.settings.book
        planned_for = json.dumps(
            [planned_for, self.file.location, self.identity, self.settings.run.fresh_for_days]
            + ([] if order.order == "staleness" else [order.order, list(order.ltv_watch)])
        )
        if self._store.planned_for() == planned_for:
            self.index_reads = IndexReads.load(self._checkpoint.database)
            if self.index_reads is not None:
                self.budget = night_budget(self.settings, len(self.index_reads.reads))
            return
        book, _ = self._read()
        index = book_index(book)
        api = self.settings.index.source == "api"
        held = held_index(book) if api else None
        if held is not None:  # the index the book holds tells the risk order
            self._index = held.house_price_index()
        loans: tuple[list[str | None], list[str | None], list[int | None]] = ([], [], [])
        modes = [] if book is None else book.column("mode").drop_null().unique().to_pylist()
        if len(modes) == 1 and self._checkpoint.get("mode") is None:
            # A night that only carries gets no answer to learn its mode from: the book's
            # is the same API's and account's (`read_book`), so it is tonight's too.
            self._checkpoint.set("mode", str(modes[0]))
        passthrough = passthrough_table(self._checkpoint)
        identities = self._identities(passthrough)
        balances = self._balances(passthrough)
        fresh_for = dt.timedelta(days=self.settings.run.fresh_for_days)
        now = self._now()
        risks = Risks(
            passthrough,
            self.settings.input.columns,
            self.settings.lender.revaluation,
            now.date(),
            self._index,
        )
        watch = order.ltv_watch[0] if order.ltv_watch else math.inf
        seen: dict[str, int] = {}
        rows: list[_Row] = []
        for batch in self._store.keyed_requests():
            for number, key, request in batch:
                fingerprint = request_fingerprint(request)
                identity = fingerprint if identities is None else identities[number]
                if identities is not None and not identity:
                    raise RunRefusedError(
                        StopReason.INPUT_UNUSABLE,
                        f"--row-id {self.identity}: row {number} has none; a book needs one "
                        "on every row it values",
                    )
                if identities is not None and identity in seen:
                    raise RunRefusedError(
                        StopReason.INPUT_UNUSABLE,
                        f"--row-id {self.identity}: {identity!r} is on rows {seen[identity]} "
                        f"and {number}; a book keeps one valuation a {self.identity}, so each "
                        "row needs its own",
                    )
                seen[identity] = number
                entry, balance = index.get(identity), balances.get(number)
                at_risk = None
                if order.order != "staleness":
                    risk = functools.partial(risks.of, number)
                    at_risk = functools.partial(_at_risk, risk, watch, balance, now)
                rank = _rank(entry, fingerprint, balance, now, fresh_for, at_risk)
                rows.append(_Row(number, key, identity, fingerprint, rank))
                if api:
                    _add_loan(loans, request, entry)
        if held is not None:
            self._plan_reads(held, loans_frame(*loans), now.date())
        self._save(rows, planned_for)

    def _plan_reads(self, held: HeldIndex, loans: pl.DataFrame, today: dt.date) -> None:
        """The night's reads of the API's index (`index_reads`), first in the budget:
        the valuations get what they leave."""
        reads = IndexReads.plan(
            held,
            loans,
            self._directory,
            today,
            credits=self.settings.run.street_credits,
            room=functools.partial(night_reads, self.settings),
        )
        reads.save(self._checkpoint.database)
        self.index_reads = reads
        self.budget = night_budget(self.settings, len(reads.reads))

    def _save(self, rows: list[_Row], planned_for: str) -> None:
        ranks: dict[str, _Rank] = {}  # a request takes its most urgent row
        for row in rows:
            if row.rank is not None and (row.key not in ranks or row.rank < ranks[row.key]):
                ranks[row.key] = row.rank
        order = sorted(ranks, key=lambda key: (ranks[key], key))
        deferred = order[self.budget :]
        self._write_picks(rows, order)
        carried = {row.key for row in rows} - set(ranks)
        self._store.save_plan(
            [
                (r.number, r.identity, r.fingerprint, CARRY if r.rank is None else SEND)
                for r in rows
            ],
            carried,
            deferred,
            planned_for,
        )
        log.info(
            "valuations.booking.planned",
            rows=len(rows),
            carried=len(carried),
            to_value=len(order),
            budget=self.budget,
            deferred=len(deferred),
        )

    def _write_picks(self, rows: Sequence[_Row], order: Sequence[str]) -> None:
        """The plan's order, row by row (`picks_to`): its place in the night's queue (a
        request's rows share it), row number, identity, why it is there (`REASONS`) and
        whether the budget takes it tonight; the picks within it counted by reason."""
        place = {key: at for at, key in enumerate(order, start=1)}
        sent = sorted(
            (place[r.key], r.number, r.identity, TIER_REASONS[int(r.rank[0])])
            for r in rows
            if r.rank is not None
        )
        picked = [at <= self.budget for at, *_ in sent]
        self.picked = {
            reason: sum(
                1 for (_, _, _, why), p in zip(sent, picked, strict=True) if p and why == reason
            )
            for reason in REASONS
        }
        if self._picks_to is None:
            return
        table = pa.table(
            {
                "position": pa.array([s[0] for s in sent], pa.int64()),
                "row_number": pa.array([s[1] for s in sent], pa.int64()),
                "identity": pa.array([s[2] for s in sent], pa.string()),
                "reason": pa.array([s[3] for s in sent], pa.string()),
                "picked": pa.array(picked, pa.bool_()),
            }
        )
        write_table_atomic(self._picks_to, table)

    def _read(self) -> tuple[pa.Table | None, str | None]:
        from batchval._internal.store import ObjectStoreError

        try:
            return read_book(self.file, self.identity, self.api)
        except BookMismatchError as exc:
            raise RunRefusedError(StopReason.REFUSED, str(exc)) from None
        except BookError as exc:
            raise RunRefusedError(StopReason.INPUT_UNUSABLE, str(exc)) from None
        except ObjectStoreError as exc:
            raise refusal_of(exc) from None

    def _identities(self, passthrough: pa.Table) -> dict[int, str] | None:
        """Row number -> the row-id value as text (None: the request is the identity)."""
        column = self.settings.run.row_id
        if column is None:
            return None
        if column not in passthrough.column_names[1:]:
            raise RunRefusedError(
                StopReason.INPUT_UNUSABLE,
                f"--row-id {column}: no such pass-through column in the input (it has "
                f"{', '.join(passthrough.column_names[1:]) or 'none'})",
            )
        numbers = passthrough.column("row_number").to_pylist()
        values = passthrough.column(column).to_pylist()
        return {n: "" if v is None else str(v) for n, v in zip(numbers, values, strict=True)}

    def _balances(self, passthrough: pa.Table) -> dict[int, float]:
        """Row number -> loan balance, where the input has one that is a number."""
        try:
            found = find_lender_columns(passthrough.column_names[1:], self.settings.input.columns)
        except LenderColumnError:
            return {}
        column = found.get("loan_balance")
        if column is None:
            return {}
        numbers = passthrough.column("row_number").to_pylist()
        values = passthrough.column(column).to_pylist()
        return {n: float(v) for n, v in zip(numbers, values, strict=True) if _is_number(v)}

    # --- 2. after sending ----------------------------------------------------------------

    def settle(
        self, stop: StopInfo | None, refused: Mapping[str, int] | None = None
    ) -> StopInfo | None:
        """The run's stop once the budget's own stop has deferred what was never sent and
        what the API refused without valuing (`refused`: key -> this invocation's sends,
        `sending/pool.Declines`): a 429 `daily_limit` values nothing, so a later night may
        ask again under its own key. A request whose outcome is unknown stays pending."""
        if stop is None or stop.reason not in BUDGET_STOPS:
            return stop
        deferred = self._store.defer_unsent(refused)
        log.info(
            "valuations.booking.deferred_by_budget", reason=stop.reason.value, requests=deferred
        )
        return None if self._checkpoint.counts().complete else stop

    # --- 3. the outputs ------------------------------------------------------------------

    def postcodes_read(self) -> Callable[[], Sequence[tuple[int, str | None]]]:
        """The read of the rows not valued tonight and their requests' postcodes
        (`BookStore.unsent_postcodes`: a join of a million rows' requests, seconds), for
        another thread to make while this one writes the book: by a read-only connection
        of its own when this one holds nothing uncommitted (always, once the sending is
        over), else made now by this one."""
        database = self._checkpoint.database
        if not database.settled:
            found = self._store.unsent_postcodes()
            return lambda: found
        return functools.partial(unsent_postcodes_apart, database.path.parent)

    def for_index(self, found: Sequence[tuple[int, str | None]]) -> Unvalued:
        """What an index needs of the rows not valued tonight (`Unvalued`), once `write`
        has read the pass-through values: `found`, as `postcodes_read` reads them."""
        assert self._passthrough is not None, "for_index before write"
        return _unvalued([n for n, _ in found], [p for _, p in found], self._passthrough)

    def write(self, results: Path, run_id: str) -> Written:
        """Carry the unsent rows' entries into results.parquet and replace the book; a
        swap lost to another run sets `lost`. Then results.parquet is the book's: an index
        may rewrite it (`valuations/indexing`) while `section` counts the night from the
        checkpoint alone."""
        from batchval._internal.store import ObjectStoreError

        passthrough = passthrough_table(self._checkpoint)
        if self.settings.index.on:
            self._passthrough = passthrough
        try:
            old, version = self._read()
        except RunRefusedError as exc:  # the store at the book's URL, gone since the plan
            self.lost = StopInfo(exc.reason, f"the book was not read again: {exc.detail}")
            return Written()
        # Before the book is replaced: what each loan revalued tonight had before, too.
        valued = self._store.valued_rows()
        unsent = self._store.unsent_rows()
        carried = carry_into_results(
            results,
            old,
            unsent,
            passthrough,
            valued=valued,
            refresh=self._refresh(passthrough.column_names[1:]),
        )
        try:
            held = self._held_text(old)
            entries = write_book(
                self.file,
                old,
                version,
                results,
                valued,
                run_id=run_id,
                identity=self.identity,
                api=self.api,
                metadata=None if held is None else {BOOK_META: held},
            )
        except ObjectStoreError as exc:
            refusal = refusal_of(exc)
            self.lost = StopInfo(refusal.reason, f"the book was not written: {refusal.detail}")
            entries = None
        if entries is None and self.lost is None:
            self.lost = StopInfo(
                StopReason.BOOK_CHANGED,
                f"another run replaced the book {self.file.location} while this one wrote "
                "it; this run's valuations are kept in its DIR: run the same command again "
                "to merge them into the book as it is now",
            )
        if self.lost is None:
            log.info(
                "valuations.booking.written",
                path=self.file.location,
                entries=entries,
                carried=carried,
            )
        else:
            log.warning(
                "valuations.booking.not_written", path=self.file.location, why=self.lost.detail
            )
        return Written(entries, carried, _picture(results))

    def section(self, written: Written) -> dict[str, Any]:
        """The summary's `book` section of what `write` did: the night's rows by what they
        got (the checkpoint's count of them, seconds on a book of a million), the book's
        age profile and portfolio (results.parquet as `write` left it) and its forecast."""
        if written.picture is None:
            return {"path": self.file.location, "written": False}
        now = self._now()
        sources = self._store.row_sources()
        sources["carried"] = written.carried
        profile = age_profile(written.picture.column("valued_at").to_pylist(), now)
        return {
            "path": self.file.location,
            "written": self.lost is None,
            "identity": self.identity,
            "fresh_for_days": self.settings.run.fresh_for_days,
            "budget_calls": self.budget,
            **({} if self.index_reads is None else {"index_reads": self._reads_said()}),
            "rows": sources,
            "entries": written.entries,
            "age_profile": profile,
            **self._forecast(now, sum(sources.values())),
            "portfolio": _portfolio(written.picture),
        }

    def kept_index(self) -> HousePriceIndex | None:
        """`index.source: api`: the index the book holds with tonight's reads kept in it
        (each read's answer, `IndexReads.absorb`); None for another source."""
        if self.index_reads is None:
            return None
        if not self._kept:  # once: the runner asks before the book is written, `write` too
            self._kept = self.index_reads.absorb(self._checkpoint.database, self._now().date())
        return self.index_reads.held.house_price_index()

    def _held_text(self, old: pa.Table | None) -> str | None:
        """The API's index the book keeps: tonight's reads kept in the one the night was
        planned with (`index.source: api`), else the book's as it was."""
        if self.kept_index() is not None:
            assert self.index_reads is not None
            return self.index_reads.held.text()
        text = None if old is None else (old.schema.metadata or {}).get(BOOK_META.encode())
        return None if text is None else text.decode()

    def _reads_said(self) -> dict[str, Any]:
        """The summary's `book.index_reads`: the reads due, those the budget took first
        and the credits they were counted at, and what their answers gave."""
        assert self.index_reads is not None
        reads = self.index_reads
        return {
            "due": reads.wanted,
            "read": len(reads.reads),
            "credits_counted": reads.cost,
            "outcomes": self._kept,
            "authorities_held": len(reads.held.house_price_index().levels),
        }

    def _refresh(self, names: Sequence[str]) -> Callable[[pa.Table], pa.Table] | None:
        """How carried rows get tonight's revaluation triggers: their loans' figures as of
        tonight, by the run's policy (`contract/lender.refresh_revaluation`)."""
        try:
            found = find_lender_columns(names, self.settings.input.columns)
        except LenderColumnError:  # refused when the input was read; nothing to make
            return None
        revaluation = Revaluation(self.settings.lender.revaluation, self._now().date())
        return lambda rows: refresh_revaluation(rows, revaluation, found)

    def _forecast(self, now: dt.datetime, loans: int) -> dict[str, Any]:
        """When every row will have been valued at this budget, and whether the budget
        keeps the whole book within --fresh-for once it has caught up."""
        waiting = self._store.deferred_requests()
        needed = math.ceil(loans / max(self.settings.run.fresh_for_days, 1))
        fresh_by = now.date()
        if waiting and self.budget:
            fresh_by += dt.timedelta(days=math.ceil(waiting / self.budget))
        return {
            "deferred_requests": waiting,
            # None: a budget of nothing never values what waits.
            "fresh_by": None if waiting and not self.budget else fresh_by.isoformat(),
            "calls_a_night_to_stay_fresh": needed,
            "budget_keeps_up": self.budget >= needed,
        }


def held_index(book: pa.Table | None) -> HeldIndex:
    """The API's index the book holds (`api_index.BOOK_META`; none yet: empty). Raises
    RunRefusedError (65) for a book whose held index cannot be read."""
    text = None if book is None else (book.schema.metadata or {}).get(BOOK_META.encode())
    try:
        return HeldIndex.from_text(text)
    except (ValueError, KeyError, TypeError) as exc:
        raise RunRefusedError(
            StopReason.INPUT_UNUSABLE, f"the book's index (index.source api) cannot be read: {exc}"
        ) from None


def _add_loan(
    loans: tuple[list[str | None], list[str | None], list[int | None]],
    request: str,
    entry: BookEntry | None,
) -> None:
    """A loan for the index's reads: its request's postcode, its book entry's authority
    and `indexedTo` (as a `month_number`)."""
    postcode = json.loads(request).get("postcode")
    loans[0].append(postcode if isinstance(postcode, str) else None)
    loans[1].append(None if entry is None else entry.local_authority)
    month = None if entry is None else entry.indexed_to
    loans[2].append(None if not month else month_number(int(month[:4]), int(month[5:7])))


# What an index needs of a night's rows not valued tonight (`BookRun.for_index`): their row
# numbers (`int64`) and the postcodes their requests ask for (`string`, `store/book`), in
# row order, and every row's pass-through values (`passthrough_table`).
Unvalued = tuple[pa.Array, pa.Array, pa.Table]


def _unvalued(
    numbers: Sequence[int], postcodes: Sequence[str | None], passthrough: pa.Table
) -> Unvalued:
    """Arrays, not a million tuples: what the index reads, held compactly until it does."""
    return pa.array(numbers, pa.int64()), pa.array(postcodes, pa.string()), passthrough


def passthrough_table(checkpoint: Checkpoint) -> pa.Table:
    """Every row's pass-through values, with `row_number` first."""
    schema = checkpoint.passthrough_schema() or pa.schema([])
    parts: list[pa.Table] = []
    for first, batch in checkpoint.passthrough_batches():
        numbers = pa.array(range(first, first + batch.num_rows), pa.int64())
        parts.append(pa.Table.from_batches([batch]).add_column(0, "row_number", numbers))
    if not parts:
        return pa.schema([pa.field("row_number", pa.int64()), *schema]).empty_table()
    return pa.concat_tables(parts)


# The columns of results.parquet the book's section reads (`age_profile`, `_portfolio`):
# held while an index rewrites the file beside it, so not every column of a million rows.
_PICTURE = ("valued_at", "indexed_ltv", "estimate", "revaluation_basis", *TRIGGERS)


def _picture(results: Path) -> pa.Table:
    with pq.ParquetFile(results) as file:
        names = set(file.schema_arrow.names)
        return file.read(columns=[name for name in _PICTURE if name in names])


def _portfolio(picture: pa.Table) -> dict[str, Any] | None:
    """The whole picture's LTVs, carried rows with tonight's (summary.json's `portfolio`
    counts tonight's valuations only). A balance is indexed_ltv x estimate."""
    if "indexed_ltv" not in picture.column_names:
        return None
    pairs = [
        (ltv, estimate)
        for ltv, estimate in zip(
            picture.column("indexed_ltv").to_pylist(),
            picture.column("estimate").to_pylist(),
            strict=True,
        )
        if ltv is not None and estimate
    ]
    balance = sum(ltv * estimate for ltv, estimate in pairs)
    estimates = sum(estimate for _, estimate in pairs)
    totals: dict[str, Any] = {
        "rows": len(pairs),
        "sum_balance": round(balance, 2),
        "sum_estimate": estimates,
        "weighted_ltv": sum(ltv * ltv * e for ltv, e in pairs) / balance if balance else None,
        "aggregate_ltv": balance / estimates if estimates else None,
    }
    triggers = _triggers(picture)
    return totals if triggers is None else {**totals, "revaluation": triggers}


def _rank(
    entry: BookEntry | None,
    fingerprint: str,
    balance: float | None,
    now: dt.datetime,
    fresh_for: dt.timedelta,
    at_risk: Callable[[BookEntry, float], _Rank] | None = None,
) -> _Rank | None:
    """Where a row stands in the night's queue (lower first); None when it is carried. A
    stale loan stands by `at_risk` (the `risk` order's, given its entry and the row's
    largest-balance-first rank) when given, else by its last LTV, then its age."""
    largest_first = -balance if balance is not None else _LAST
    if entry is None:
        return (NEVER_VALUED, largest_first, 0.0)
    if entry.fingerprint != fingerprint:
        return (CHANGED, largest_first, 0.0)
    valued_at = entry.valued_at
    if valued_at is not None and now - valued_at < fresh_for:
        return None
    if at_risk is not None:
        return at_risk(entry, largest_first)
    ltv = -entry.indexed_ltv if entry.indexed_ltv is not None else _LAST
    return (STALE, ltv, valued_at.timestamp() if valued_at is not None else -_LAST)


def _at_risk(
    risk: Callable[[BookEntry], Risk],
    watch: float,
    balance: float | None,
    now: dt.datetime,
    entry: BookEntry,
    largest_first: float,
) -> _Rank:
    """A stale loan's place in a `risk` night: a trigger tonight first, largest balance
    first; then an LTV above `watch` (the lowest watched), highest first; then balance x
    days since its valuation, largest first. `risk` tells its trigger and LTV."""
    found = risk(entry)
    if found.trigger:
        return (TRIGGERED, largest_first, 0.0)
    if found.ltv is not None and found.ltv > watch:
        return (WATCHED, -found.ltv, largest_first)
    valued_at = entry.valued_at
    days = math.inf if valued_at is None else (now - valued_at).total_seconds() / 86_400
    weight = -(balance * days) if balance is not None and balance > 0 else _LAST
    return (STALE, weight, largest_first)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _triggers(picture: pa.Table) -> dict[str, Any] | None:
    """The whole picture's revaluation triggers, carried rows with tonight's: the loans
    each flags and their balance (indexed_ltv x estimate), as `portfolio.revaluation`."""
    if "revaluation_basis" not in picture.column_names:
        return None
    frame = pl.from_arrow(
        picture.select(["revaluation_basis", "indexed_ltv", "estimate", *TRIGGERS])
    )
    assert isinstance(frame, pl.DataFrame)
    balance = (pl.col("indexed_ltv") * pl.col("estimate")).fill_null(0)
    found: dict[str, Any] = {
        "basis": {
            b: int((frame.get_column("revaluation_basis") == b).sum())
            for b in ("last_valuation", "origination")
        }
    }
    fired = {name: pl.col(name).fill_null(False) for name in TRIGGERS}
    fired["any"] = pl.any_horizontal(*fired.values())
    for name, flag in fired.items():
        chosen = frame.filter(flag)
        found[name.removeprefix("trigger_")] = {
            "loans": chosen.height,
            "balance": round(float(chosen.select(balance.sum()).item()), 2),
        }
    return found
