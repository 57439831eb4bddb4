"""`streets`: read -> postcodes -> checkpoint -> send -> write, for one invocation.

The composition root of `batchval streets`, beside `valuations/runner` and like it a product on
the command skeleton (`command.invoke`: the lock, the invocation's order, the exit code,
the run's summary and stop line). It reuses the input reader and its postcode rules, the
checkpoint, the sending phase with its pool, pacing, breaker, budget and waits, and the
writer's atomic files. What differs is what is sent: each distinct
postcode of the input once (`streets/job`), read again only when its free 30-day window
has passed or `--refresh` asks (docs/api.md, 4.3).

A DIR holds one command's outputs: `streets` refuses a DIR that holds a `run`, and `run`
one that holds street analyses (`store/streets`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from typing import Any

from batchval._internal import logs
from batchval._internal.api import DAILY_PAID_CALLS
from batchval._internal.contract import write_problems
from batchval._internal.input import InputSource, check_postcodes
from batchval._internal.money import write_charges
from batchval._internal.outcome import ExitCode, RunRefusedError, StopInfo, StopReason
from batchval._internal.place import CHARGES_NAME, PROBLEMS_NAME, removed_line
from batchval._internal.runs import (
    DryRunSummary,
    FrontDoor,
    Invocation,
    Lines,
    RunSummary,
    chosen_api,
    invoke,
    opened,
)
from batchval._internal.sending import Sending, SendOutcome, read_batches, refusal
from batchval._internal.settings import api_identity
from batchval._internal.store import CHECKPOINT_NAME, COMMAND, Counts, Database, StreetStore
from batchval._internal.streets.files import (
    HOMES_NAME,
    STREETS_NAME,
    write_homes,
    write_streets,
)
from batchval._internal.streets.job import StreetJob, call_credits

log = logs.get_logger()


@dataclasses.dataclass(frozen=True, slots=True)
class StreetsRequest(Invocation):
    """An invocation of `streets`: what every product is asked, and streets' own options."""

    refresh: bool = False
    join: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class StreetsSummary:
    """The run's summary (`Counts` over postcodes: a postcode is a distinct request), with
    what only streets has. summary.json: the run's keys, plus `command` and `postcodes`."""

    run: RunSummary
    read: int  # postcodes read (an analysis or a problem) in this invocation
    refreshed: int  # postcodes --refresh or an expired window made pending again
    credits_assumed: int  # what one read was taken to cost for --max-credits
    outputs: tuple[str, ...]

    @property
    def exit_code(self) -> ExitCode:
        return self.run.exit_code

    @property
    def stop(self) -> StopInfo | None:
        return self.run.stop

    def to_json(self) -> dict[str, Any]:
        c = self.run.counts
        return {
            "command": COMMAND,
            **self.run.to_json(),
            "postcodes": {
                "distinct": c.requests,
                "read": c.requests_done,
                "problems": c.requests_problem,
                "pending": c.requests_pending,
                "read_this_invocation": self.read,
                "to_read_again": self.refreshed,
            },
            "street_credits_assumed": self.credits_assumed,
            "outputs": list(self.outputs),
        }

    def render(self) -> str:
        s, c = self.run, self.run.counts
        balance = s.last_known_balance
        lines = [
            f"streets {s.heading}: {s.status}",
            f"rows: {c.rows} total, {c.valued_rows} with their street, "
            f"{c.input_problems + c.api_problem_rows} problems, {c.pending_rows} pending",
            f"postcodes: {c.requests} distinct, {c.requests_done} read, "
            f"{c.requests_problem} problems, {c.requests_pending} pending; "
            f"{self.read} read this time",
            f"credits: {s.credits.this_invocation} this time, {s.credits.total} in all"
            + (f"; API credits left {balance}" if balance is not None else ""),
        ]
        if s.problems_by_type:
            lines.append(
                "problems by type: " + ", ".join(f"{k} {v}" for k, v in s.problems_by_type.items())
            )
        lines += [line for line in [removed_line(s.removed)] if line]
        if s.stop is not None:
            lines.append(f"stopped: {s.stop.line()}")
        lines.append(f"exit {int(s.exit_code)}; next: {s.next_action}")
        return "\n".join(lines)


class Streets(FrontDoor[StreetsRequest]):
    """`streets` on the command skeleton (`command.Product`): the input read for its
    postcodes only, a dry run priced at the assumed price, and a DIR admitted when it
    holds no `run`; the reading itself is `StreetReading`'s."""

    name = COMMAND
    pending = "postcode"
    postcode_only = True  # the input read for its postcodes alone

    def run(self) -> StreetsSummary | DryRunSummary:
        """One invocation; returns its summary (also written to DIR/summary.json).
        Raises RunRefusedError when it ends before sending."""
        with self.entered():
            return invoke(self)

    # --- the product's steps before its checkpoint (`command.Product`) ------------------

    def admit(self, database: Database, started: dt.datetime) -> StreetReading:
        return StreetReading(self, self._store(database), started)

    def _store(self, database: Database) -> StreetStore:
        if database.get("run_id") is not None:
            raise RunRefusedError(
                StopReason.REFUSED,
                f"{self.request.place.local} holds a `batchval run` (its problems.parquet and "
                "summary.json would be overwritten): give streets a --out DIR of its own",
            )
        return StreetStore(database)

    def refusal(self, store: StreetStore, source: InputSource) -> StopInfo | None:
        return refusal(store, source, self.settings.run.max_refused_share, command=COMMAND)

    def ingest(self, store: StreetStore, source: InputSource) -> None:
        total = 0
        batches = read_batches(
            source,
            interrupted=lambda: self.signals.received,
            check=check_postcodes,
            command=COMMAND,
            lender=False,  # the postcodes alone are read: no LTV is made
        )
        for batch in batches:
            checked = batch.checked
            rows = list(
                zip(
                    checked.get_column("row_number").to_list(),
                    checked.get_column("postcode").to_list(),
                    checked.get_column("field").to_list(),
                    checked.get_column("rule").to_list(),
                    checked.get_column("detail").to_list(),
                    strict=True,
                )
            )
            store.add_rows(rows, batch.stored())
            total += len(rows)
            log.info("streets.ingest.batch", rows=total)

    # --- dry run ----------------------------------------------------------------------

    def dry_run(self, source: InputSource) -> DryRunSummary:
        """Price without the network: the distinct postcodes with no read in the last 30
        days (all of them with --refresh, whose repeats are free but sent) at the assumed
        price. Writes problems.parquet only in a DIR that holds no checkpoint."""
        held = (self.request.place.local / CHECKPOINT_NAME).is_file()
        with Database.scratch() as scratch:
            store = StreetStore(scratch)
            store.restart_ingest()
            self.ingest(store, source)
            store.finish_ingest()
            if not held:
                write_problems(store, self.request.place.local / PROBLEMS_NAME)
            counts, problems = store.counts(), store.problem_types()
            stop = self.refusal(store, source)
            postcodes = [] if stop else store.asked_postcodes()
        unread, assumed = len(postcodes), self.settings.run.street_credits
        if held:
            # Read-only and unlocked, as `run --dry-run`: a read in progress goes on.
            database = opened(Database.open_read_only, self.request.place.local)
            try:
                if database is not None:
                    real = self._store(database)
                    unread = real.unread_postcodes(self.now(), postcodes)
                    assumed = call_credits(assumed, real)
            finally:
                if database is not None:
                    database.close()
        return DryRunSummary(
            rows=counts.rows,
            rows_with_problems=counts.input_problems,
            problems_by_type=problems,
            calls=len(postcodes) if self.request.refresh else unread,
            credits=unread * assumed,
            daily_limit=DAILY_PAID_CALLS,
            stop=stop,
            problems_file=None if held else PROBLEMS_NAME,
        )


class StreetReading:
    """One invocation of `streets` on DIR's open checkpoint (`command.Steps`): the input
    read into the street store, the postcodes to read again, the street job, the three
    files (four with --join) and the summary's `postcodes` section."""

    def __init__(self, streets: Streets, store: StreetStore, started: dt.datetime) -> None:
        self._streets = streets
        self.request, self.settings = streets.request, streets.settings
        self._now: Callable[[], dt.datetime] = streets.now
        self.store = store
        self.refreshed = 0  # postcodes made pending again
        self.assumed = 0  # what one read is taken to cost, before this invocation's charges
        self.outputs: tuple[str, ...] = ()
        self.started = started

    # --- before sending --------------------------------------------------------------

    def prepare(self, source: InputSource) -> None:
        """Read the input when it is new or changed (reads are kept), settle answers a
        killed run stored, and make pending what must be read again. Counts the
        postcodes made pending again."""
        store, started = self.store, self.started
        input_fp = self._streets.input_fingerprint()
        settings_fp = self.settings.fingerprint()
        same = store.get("input_fingerprint") == input_fp
        if not (
            same and store.get("settings_fingerprint") == settings_fp and store.ingest_complete
        ):
            store.restart_ingest()
            self._streets.ingest(store, source)
            store.set("input_fingerprint", input_fp)
            store.set("settings_fingerprint", settings_fp)
            store.finish_ingest()
        # Answers a killed run stored but never read: read now, never asked again.
        StreetJob(None, store, now=self._now).settle_stored()
        identity = api_identity(self.settings.api)  # the runner's: never the secret
        held = store.get("api_identity")
        if held is not None and held != identity and store.get("mode") == "test":
            # Test figures are fake: other credentials read every postcode again.
            log.warning("streets.test_answers_forgotten", postcodes=store.forget_reads())
        store.set("api_identity", identity)
        if self.settings.run.live and store.get("mode") is None:
            # --live: a test-mode answer stops (money/modes)
            store.set("mode", "rehearsal" if self.settings.run.rehearsal else "live")
        again = store.expire(self._now())
        if self.request.refresh:
            again += store.refresh(started)
        if again:
            log.info("streets.read_again", postcodes=again, refresh=self.request.refresh)
        self.refreshed = again

    def plan(self, source: InputSource) -> StopInfo | None:
        """Most postcodes refused (a wrong column, say): no call; the summary says why."""
        refused = self._streets.refusal(self.store, source)
        self.assumed = call_credits(self.settings.run.street_credits, self.store)
        return refused

    # --- sending -----------------------------------------------------------------------

    def send(self) -> SendOutcome:
        """Read what is pending (`Sending.phase`: not after a signal, not before a kept
        daily limit's `not_before`, which is the account's whichever product met it)."""
        store, streets = self.store, self._streets
        if not store.queue.any_pending():
            return SendOutcome()
        run = self.settings.run
        sending = Sending(
            database=store.database,
            api=lambda: chosen_api(
                self.settings.api,
                streets.embedded_api,
                event="streets.embedded_sandbox",
                what="reading street analyses",
            ),
            run=run,
            now=self._now,
            progress_bar=self.request.progress_bar,
            signals=streets.signals,
            job_for=lambda client: StreetJob(
                client, store, now=self._now, assumed_credits=run.street_credits
            ),
            counts=store.counts,
            wait_option="run.wait_for_midnight",
        )
        return sending.phase()

    def settle(self, sent: SendOutcome) -> SendOutcome:
        return sent

    def counts(self) -> Counts:
        return self.store.counts()

    # --- the end -------------------------------------------------------------------------

    def write_outputs(self) -> Lines:
        out, store = self.request.place.local, self.store
        write_streets(store, out / STREETS_NAME)
        write_problems(store, out / PROBLEMS_NAME)
        write_charges(store.database.charges.lines(), out / CHARGES_NAME)
        names = [STREETS_NAME, PROBLEMS_NAME, CHARGES_NAME]
        if self.request.join or self.settings.run.street_join:
            write_homes(store, out / HOMES_NAME)
            names.append(HOMES_NAME)
        self.outputs = tuple(names)
        return Lines(
            run_id=COMMAND,
            mode=store.get("mode") or "unknown",
            problems_by_type=store.problem_types(),
        )

    def summary(self, run: RunSummary) -> StreetsSummary:
        return StreetsSummary(
            run=run,
            read=self.store.read_since(self.started),  # HTTP calls are `calls`
            refreshed=self.refreshed,
            credits_assumed=self.assumed,
            outputs=self.outputs,
        )

    def close(self) -> None:
        pass  # the store is the checkpoint's, which the skeleton closes
