"""`streets`: read -> postcodes -> checkpoint -> send -> write, for one invocation.

The composition root of `batchval streets`, beside `runner` (which it follows step for
step, and reuses: the input reader and its postcode rules, the checkpoint and its lock,
the sending phase with its pool, pacing, breaker, budget and waits, the writer's atomic
files, the run's summary and stop line). What differs is what is sent: each distinct
postcode of the input once (`run/streets`), read again only when its free 30-day window
has passed or `--refresh` asks (docs/api.md, 4.3).

A DIR holds one command's outputs: `streets` refuses a DIR that holds a `run`, and `run`
one that holds street analyses (`store/streets`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from batchval.api.vocabulary import DAILY_PAID_CALLS
from batchval.command import EmbeddedApi, chosen_api, file_fingerprint, final_stop
from batchval.files import write_json_atomic
from batchval.ingest import read_batches, refusal
from batchval.input import InputError, InputSource, open_input
from batchval.input.validate import check_postcodes
from batchval.invocation import NotedSignals, locked_dir
from batchval.outcome import ExitCode, RunRefusedError, StopInfo, StopReason
from batchval.output.charges import write_charges
from batchval.output.names import CHARGES_NAME, LOG_NAME, PROBLEMS_NAME
from batchval.output.street_files import (
    HOMES_NAME,
    STREETS_NAME,
    write_homes,
    write_street_problems,
    write_streets,
)
from batchval.output.summary import SUMMARY_NAME, DryRunSummary, RunSummary
from batchval.run.sending import Sending, SendOutcome
from batchval.run.streets import StreetJob, call_credits
from batchval.settings import Settings, api_identity
from batchval.store.checkpoint import CHECKPOINT_NAME, Checkpoint, CheckpointVersionError
from batchval.store.streets import COMMAND, StreetStore

log = structlog.get_logger()


@dataclasses.dataclass(frozen=True, slots=True)
class StreetsRequest:
    input_path: Path
    out_dir: Path
    settings: Settings
    refresh: bool = False
    join: bool = False
    dry_run: bool = False
    progress_bar: bool = False


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
            f"streets ({s.mode} mode): {s.status}",
            f"rows: {c.rows} total, {c.valued_rows} with their street, "
            f"{c.input_problems + c.api_problem_rows} problems, {c.pending_rows} pending",
            f"postcodes: {c.requests} distinct, {c.requests_done} read, "
            f"{c.requests_problem} problems, {c.requests_pending} pending; "
            f"{self.read} read this time",
            f"credits: {s.credits.this_invocation} this time, {s.credits.total} in all"
            + (f"; last known balance {balance}" if balance is not None else ""),
        ]
        if s.problems_by_type:
            lines.append(
                "problems by type: " + ", ".join(f"{k} {v}" for k, v in s.problems_by_type.items())
            )
        if s.stop is not None:
            lines.append(f"stopped: {s.stop.line()}")
        lines.append(f"exit {int(s.exit_code)}; next: {s.next_action}")
        return "\n".join(lines)


class Streets:
    def __init__(
        self,
        request: StreetsRequest,
        *,
        embedded_api: EmbeddedApi | None = None,
    ) -> None:
        self.request = request
        self.settings = request.settings
        self._embedded_api = embedded_api
        self._signals = NotedSignals()  # a signal received outside the sending phase
        self._now: Callable[[], dt.datetime] = request.settings.run.now  # with the test seam

    def run(self) -> StreetsSummary | DryRunSummary:
        """One invocation; returns its summary (also written to DIR/summary.json).
        Raises RunRefusedError when it ends before sending."""
        with self._signals:
            return self._run()

    def _run(self) -> StreetsSummary | DryRunSummary:
        with locked_dir(self.request.out_dir, LOG_NAME, "streets"):
            return self._run_locked()

    def _open(self) -> InputSource:
        try:
            return open_input(self.request.input_path, self.settings.input, postcode_only=True)
        except InputError as exc:
            raise RunRefusedError(StopReason.INPUT_UNUSABLE, str(exc)) from None

    def _checkpoint(self) -> StreetStore:
        try:
            checkpoint = Checkpoint.open(self.request.out_dir)
        except CheckpointVersionError as exc:
            raise RunRefusedError(StopReason.REFUSED, str(exc)) from None
        if checkpoint.get("run_id") is not None:
            checkpoint.close()
            raise RunRefusedError(
                StopReason.REFUSED,
                f"{self.request.out_dir} holds a `batchval run` (its problems.parquet and "
                "summary.json would be overwritten): give streets a --out DIR of its own",
            )
        return StreetStore(checkpoint)

    def _run_locked(self) -> StreetsSummary | DryRunSummary:
        started, started_mono = self._now(), time.monotonic()
        for leftover in self.request.out_dir.glob(".*.tmp-*"):
            leftover.unlink(missing_ok=True)  # an output write cut short by a kill
        source = self._open()
        if self.request.dry_run:
            return self._dry_run(source)
        store = self._checkpoint()
        checkpoint = store.database
        try:
            refreshed = self._prepare(store, source, started)
            # Most postcodes refused (a wrong column, say): no call; the summary says why.
            refused = self._refusal(store, source)
            invocation = checkpoint.start_invocation(started.isoformat())
            assumed = call_credits(self.settings.run.street_credits, store)
            try:
                sent = SendOutcome(refused) if refused else self._send(store)
            except Exception as exc:  # a defect: keep what was done, say so, exit 70
                log.error("streets.internal_error", exc_info=True, file_only=True)
                detail = f"{type(exc).__name__}: {exc}; the traceback is in {LOG_NAME}"
                sent = SendOutcome(StopInfo(StopReason.INTERNAL_ERROR, detail))
            counts = store.counts()
            stop = final_stop(counts, sent.stop, "postcode")
            code = ExitCode.COMPLETE if stop is None else stop.reason.exit_code
            outputs = self._write(store)
            checkpoint.end_invocation(
                invocation,
                ended_at=self._now().isoformat(),
                exit_code=int(code),
                calls=sent.calls,
                rate_limited=sent.rate_limited,
                **checkpoint.money(invocation).invocation_figures(),
            )
            summary = StreetsSummary(
                run=RunSummary.of_run(
                    checkpoint,
                    invocation=invocation,
                    calls=sent.calls,
                    rate_limited=sent.rate_limited,
                    status="complete" if code is ExitCode.COMPLETE else "incomplete",
                    exit_code=code,
                    run_id=COMMAND,
                    mode=store.get("mode") or "unknown",
                    counts=counts,
                    problems_by_type=store.problem_types(),
                    stop=stop,
                    input=str(self.request.input_path),
                    started_at=started.isoformat(),
                    finished_at=self._now().isoformat(),
                    seconds=round(time.monotonic() - started_mono, 3),
                ),
                read=store.read_since(started),  # HTTP calls are `calls`
                refreshed=refreshed,
                credits_assumed=assumed,
                outputs=outputs,
            )
            write_json_atomic(self.request.out_dir / SUMMARY_NAME, summary.to_json())
            return summary
        finally:
            checkpoint.close()

    # --- before sending --------------------------------------------------------------

    def _prepare(self, store: StreetStore, source: InputSource, started: dt.datetime) -> int:
        """Read the input when it is new or changed (reads are kept), settle answers a
        killed run stored, and make pending what must be read again. Returns how many
        postcodes were made pending again."""
        input_fp = file_fingerprint(self.request.input_path)
        settings_fp = self.settings.fingerprint()
        same = store.get("input_fingerprint") == input_fp
        if not (
            same and store.get("settings_fingerprint") == settings_fp and store.ingest_complete
        ):
            store.restart_ingest()
            self._ingest(store, source)
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
        again = store.expire(self._now())
        if self.request.refresh:
            again += store.refresh(started)
        if again:
            log.info("streets.read_again", postcodes=again, refresh=self.request.refresh)
        return again

    def _refusal(self, store: StreetStore, source: InputSource) -> StopInfo | None:
        return refusal(store, source, self.settings.run.max_refused_share, command=COMMAND)

    def _ingest(self, store: StreetStore, source: InputSource) -> None:
        total = 0
        batches = read_batches(
            source,
            interrupted=lambda: self._signals.received,
            check=check_postcodes,
            command="streets",
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
            store.add_rows(rows, batch.passthrough)
            total += len(rows)
            log.info("streets.ingest.batch", rows=total)

    # --- sending -----------------------------------------------------------------------

    def _send(self, store: StreetStore) -> SendOutcome:
        """Read what is pending (`Sending.phase`: not after a signal, not before a kept
        daily limit's `not_before`, which is the account's whichever product met it)."""
        if not store.queue.any_pending():
            return SendOutcome()
        run = self.settings.run
        sending = Sending(
            checkpoint=store.database,
            api=lambda: chosen_api(
                self.settings.api,
                self._embedded_api,
                event="streets.embedded_sandbox",
                what="reading street analyses",
            ),
            run=run,
            now=self._now,
            progress_bar=self.request.progress_bar,
            signals=self._signals,
            job_for=lambda client: StreetJob(
                client, store, now=self._now, assumed_credits=run.street_credits
            ),
            counts=store.counts,
            wait_option="run.wait_for_midnight",
        )
        return sending.phase()

    def _write(self, store: StreetStore) -> tuple[str, ...]:
        out = self.request.out_dir
        write_streets(store, out / STREETS_NAME)
        write_street_problems(store, out / PROBLEMS_NAME)
        write_charges(store.database.charge_lines(), out / CHARGES_NAME)
        names = [STREETS_NAME, PROBLEMS_NAME, CHARGES_NAME]
        if self.request.join or self.settings.run.street_join:
            write_homes(store, out / HOMES_NAME)
            names.append(HOMES_NAME)
        return tuple(names)

    # --- dry run ----------------------------------------------------------------------

    def _dry_run(self, source: InputSource) -> DryRunSummary:
        """Price without the network: the distinct postcodes with no read in the last 30
        days (all of them with --refresh, whose repeats are free but sent) at the assumed
        price. Writes problems.parquet only in a DIR that holds no checkpoint."""
        held = (self.request.out_dir / CHECKPOINT_NAME).is_file()
        with tempfile.TemporaryDirectory(prefix="batchval-dry-") as scratch:
            store = StreetStore(Checkpoint.open(Path(scratch)))
            try:
                store.restart_ingest()
                self._ingest(store, source)
                store.finish_ingest()
                if not held:
                    write_street_problems(store, self.request.out_dir / PROBLEMS_NAME)
                counts, problems = store.counts(), store.problem_types()
                stop = self._refusal(store, source)
                postcodes = [] if stop else store.asked_postcodes()
            finally:
                store.database.close()
        unread, assumed = len(postcodes), self.settings.run.street_credits
        if held:
            real = self._checkpoint()
            try:
                unread = real.unread_postcodes(self._now(), postcodes)
                assumed = call_credits(assumed, real)
            finally:
                real.database.close()
        return DryRunSummary(
            rows=counts.rows,
            rows_with_problems=counts.input_problems,
            problems_by_type=problems,
            calls=len(postcodes) if self.request.refresh else unread,
            credits=unread * assumed,
            daily_limit=DAILY_PAID_CALLS,
            stop=stop,
        )
