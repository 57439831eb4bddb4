"""`run`: read -> validate -> key -> checkpoint -> send -> write, for one invocation.

The composition root: a product on the command skeleton (`command.invoke`, which owns
the order of an invocation, the exit code and the summary), it builds each stage (the
input, the checkpoint, the sending, the writers) from the settings; no stage imports
another's room.
Callable in-process (`Runner(request).run()` returns the RunSummary), so that
tests need a subprocess only where the behaviour is the process's.
Re-running the same command with the same DIR resumes: the checkpoint remembers the run
id, every row and every answer, and only requests without an answer are sent again,
each with the key it had before.
"""

from __future__ import annotations

import contextvars
import dataclasses
import datetime as dt
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from batchval._internal import logs, redaction
from batchval._internal.api import WARN_OFFSET, PartnerClient
from batchval._internal.contract import Lending, write_problems
from batchval._internal.input import InputSource
from batchval._internal.money import OTHER_HOLDER, Evidence, Received, place_charges, write_charges
from batchval._internal.outcome import RunRefusedError, StopInfo, StopReason
from batchval._internal.place import (
    CHARGES_NAME,
    DRY_RUN_PICKS_NAME,
    DRY_RUN_PROBLEMS_NAME,
    PICKS_NAME,
    PROBLEMS_NAME,
    RESULTS_NAME,
    VERIFY_NAME,
    write_json_atomic,
)
from batchval._internal.runs import (
    DryRunSummary,
    EmbeddedApi,
    FrontDoor,
    Invocation,
    Lines,
    RunSummary,
    chosen_api,
    invoke,
    opened,
)
from batchval._internal.sending import Job, Sending, SendOutcome, daily_run_id
from batchval._internal.settings import Settings, api_identity, changed_settings
from batchval._internal.store import Checkpoint, Counts, Database
from batchval._internal.valuations import answers
from batchval._internal.valuations.booking import BookRun
from batchval._internal.valuations.indexing import (
    Indexing,
    coverage,
    result_lender_columns,
)
from batchval._internal.valuations.indexing import load as load_index
from batchval._internal.valuations.ingest import Ingest, price_input, refusal
from batchval._internal.valuations.lines import complete_action, own_lines
from batchval._internal.valuations.manifest import ANSWER_PATHS, MANIFEST_NAME, Manifest
from batchval._internal.valuations.metrics import RunMetrics, write_metrics
from batchval._internal.valuations.recovery import recoverable, recovery_job
from batchval._internal.valuations.valuing import ValuationJob
from batchval._internal.valuations.writer import not_valued, write_results

log = logs.get_logger()


@dataclasses.dataclass(frozen=True, slots=True)
class RunRequest(Invocation):
    """An invocation of `run`: what every product is asked (`runs/command.Invocation`),
    with the options only `run` takes."""

    run_id: str | None = None
    accept_changes: bool = False
    metrics_file: Path | None = None  # Prometheus text, during the run and at its end


class Runner(FrontDoor[RunRequest]):
    """`run` on the command skeleton (`command.Product`): it reads the input with every
    column, prices it in a dry run, and admits a DIR that holds no street analyses; the
    valuing itself is `Valuing`'s. Also --metrics-file, which only `run` writes."""

    name = "run"
    pending = "request"

    def __init__(self, request: RunRequest, *, embedded_api: EmbeddedApi | None = None) -> None:
        super().__init__(request, embedded_api=embedded_api)
        self._started = time.monotonic()
        self.statuses: Mapping[str, int] = {}  # this invocation's calls by status
        self._dry_index: Indexing | None = None  # a dry run's `index`, for its plan

    # --- the whole invocation ----------------------------------------------------------

    def run(self) -> RunSummary | DryRunSummary:
        """One invocation; returns its summary (also written to DIR/summary.json).
        Raises RunRefusedError when it ends before sending."""
        self._started = time.monotonic()
        try:
            with self.entered():
                summary = invoke(self)
        except RunRefusedError as exc:
            # dir_locked: the file is the holder's to write.
            if exc.reason is not StopReason.DIR_LOCKED:
                self.metrics(None, {}, 0, 0, int(exc.exit_code))
            raise
        if isinstance(summary, RunSummary):
            self.metrics(
                summary.counts,
                self.statuses,
                summary.rate_limited.this_invocation,
                summary.credits.this_invocation,
                int(summary.exit_code),
            )
        return summary

    def metrics(
        self,
        counts: Counts | None,
        statuses: Mapping[str, int],
        rate_limited: int,
        credits: int,
        exit_code: int | None,
    ) -> None:
        """Rewrite --metrics-file, if one was asked for (exit_code None: still running)."""
        if self.request.metrics_file is None:
            return
        rows = None
        if counts is not None:
            problems = counts.input_problems + counts.api_problem_rows
            rows = {
                "valued": counts.valued_rows,
                "problem": problems,
                "pending": counts.pending_rows,
            }
        figures = RunMetrics(
            rows, credits, statuses, rate_limited, time.monotonic() - self._started, exit_code
        )
        try:
            write_metrics(self.request.metrics_file, figures, now=self.now().timestamp())
        except OSError as exc:  # the metrics never decide the run's outcome
            log.warning("run.metrics.unwritable", path=str(exc.filename), error=exc.strerror)

    # --- the product's steps before its checkpoint (`command.Product`) ------------------

    def admit(self, database: Database, started: dt.datetime) -> Valuing:
        """DIR's database as run keeps it (`Checkpoint`: its rows, and requests to send)."""
        checkpoint = Checkpoint(database)
        _refuse_streets_outputs(checkpoint, self.request.place.local)
        return Valuing(self, checkpoint, started)

    def dry_run(self, source: InputSource) -> DryRunSummary:
        """Validate and price without the network, in a throwaway checkpoint. In a DIR
        that holds a run, only what that run still has to send is priced (its checkpoint
        read-only, never locked: a run in progress goes on undisturbed), and the problems
        are written beside the run's (`DRY_RUN_PROBLEMS_NAME`), never over them. The
        index's files are read as the night would read them (65 for one it cannot use)."""
        indexing = load_index(self.settings.index, self.settings.storage.env(os.environ))
        self._dry_index = indexing
        out = self.request.place.local
        database = opened(Database.open_read_only, out)
        if database is None:
            return self._price(source, self.request.run_id or "dry-run", PROBLEMS_NAME)
        try:
            return self._price_the_rest(source, Checkpoint(database))
        finally:
            database.close()

    def _price(
        self,
        source: InputSource,
        run_id: str,
        problems_name: str,
        settled: Callable[[list[str]], set[str]] | None = None,
    ) -> DryRunSummary:
        picks = PICKS_NAME if problems_name == PROBLEMS_NAME else DRY_RUN_PICKS_NAME
        planned: list[BookRun] = []

        def plan(checkpoint: Checkpoint) -> None:
            booked = BookRun.start(
                self.settings,
                checkpoint,
                self.now,
                index=None if self._dry_index is None else self._dry_index.index,
                picks_to=self.request.place.local / picks,
                directory=None if self._dry_index is None else self._dry_index.directory,
            )
            planned.extend([] if booked is None else [booked])

        priced = price_input(
            source,
            run_id=run_id,
            problems_path=self.request.place.local / problems_name,
            interrupted=lambda: self.signals.received,
            plan=plan,
            max_refused_share=self.settings.run.max_refused_share,
            settled=settled,
        )
        book = {"picks": planned[0].picked, "picks_file": picks} if planned else None
        reads = planned[0].index_reads if planned else None
        if book is not None and reads is not None:  # index.source api: read first
            book["index_reads"] = {
                "due": reads.wanted,
                "read": len(reads.reads),
                "credits_counted": reads.cost,
            }
        return dataclasses.replace(priced, problems_file=problems_name, book=book)

    def _price_the_rest(self, source: InputSource, held: Checkpoint) -> DryRunSummary:
        """What a resume of DIR's run would send: this input keyed with the run's id, less
        the requests the run holds an answer for. Refused as the run would refuse it."""
        out = self.request.place.local
        _refuse_streets_outputs(held, out)
        run_id, wanted = held.get("run_id"), self.request.run_id
        refuse_another_run_id(out, run_id, wanted)
        changed = changes(held, self.input_fingerprint(), self.settings)
        if (
            changed
            and not self.request.accept_changes
            and not held.database.invocations.never_sent()
        ):
            raise RunRefusedError(
                StopReason.REFUSED,
                f"{out} holds a run with a different {' and '.join(changed)}: the run would "
                "refuse it; use a new --out DIR for a new run, or --accept-changes to price "
                "carrying on this run with the change",
            )
        run_id = run_id or wanted or daily_run_id(self.now())
        return self._price(source, run_id, DRY_RUN_PROBLEMS_NAME, held.requests.settled)


def changes(held: Checkpoint, input_fp: str, settings: Settings) -> list[str]:
    """What differs from the run DIR holds (its checkpoint `held`): the input file, the
    request settings; a DIR begun by batchval 0.1 with these same settings has not changed."""
    stored_settings = held.get("settings_fingerprint")
    if stored_settings == settings.fingerprint_0_1():
        stored_settings = settings.fingerprint()
    return [
        what
        for what, stored, now in (
            ("input file", held.get("input_fingerprint"), input_fp),
            ("request settings", stored_settings, settings.fingerprint()),
        )
        if stored is not None and stored != now
    ]


def _refuse_streets_outputs(held: Checkpoint, out: Path) -> None:
    """One command a DIR (store/streets): a DIR of `batchval streets` is not run's."""
    if held.get("command") == "streets":
        raise RunRefusedError(
            StopReason.REFUSED,
            f"{out} holds `batchval streets` outputs: give run a --out DIR of its own",
        )


def refuse_another_run_id(out: Path, run_id: str | None, wanted: str | None) -> None:
    """A DIR keeps the run id it began with: another --run-id is refused (64)."""
    if run_id is not None and wanted is not None and wanted != run_id:
        raise RunRefusedError(
            StopReason.REFUSED,
            f"{out} holds run {run_id!r}; --run-id {wanted!r} differs "
            "(use a new --out DIR for a new run)",
        )


class Valuing:
    """One invocation of `run` on DIR's open checkpoint (`command.Steps`): fingerprints,
    run id and ingest; the refusal and the book's plan; the valuation job (after the
    read-back of paid answers that could not be read); the results, problems, charges,
    manifest and book."""

    def __init__(self, runner: Runner, checkpoint: Checkpoint, started: dt.datetime) -> None:
        self._runner = runner
        self.request, self.settings = runner.request, runner.settings
        self._now: Callable[[], dt.datetime] = runner.now
        self.checkpoint, self.started = checkpoint, started
        self.reading = Ingest.complete(checkpoint)
        self.run_id = ""  # the DIR's, once prepared
        self.booked: BookRun | None = None
        self.input_read: Mapping[str, Any] | None = None  # how the input was read
        self.indexing: Indexing | None = None  # `index`: read before anything is sent
        # What this invocation holds to class its charges: the API's clock as the answers
        # show it, and whether the run has met another holder of its keys (kept).
        self.evidence = Evidence(
            other_holder=checkpoint.get(OTHER_HOLDER),
            keep=lambda why: checkpoint.set(OTHER_HOLDER, why),
        )

    # --- before sending: fingerprints, run id, ingest -------------------------------

    def prepare(self, source: InputSource) -> None:
        """Refuse a DIR of another input, settings or run id (unless --accept-changes);
        keep the run id; read the input when it is new or changed; settle the answers a
        killed run stored."""
        checkpoint = self.checkpoint
        self.input_read = source.read_as.to_json()
        self.indexing = load_index(self.settings.index, self.settings.storage.env(os.environ))
        input_fp = self._runner.input_fingerprint()
        settings_fp = self.settings.fingerprint()
        api_fp = self._api_identity()
        stored_input = checkpoint.get("input_fingerprint")
        if checkpoint.get("settings_fingerprint") == self.settings.fingerprint_0_1():
            checkpoint.set("settings_fingerprint", settings_fp)  # 0.1's, of these settings
        changed = changes(checkpoint, input_fp, self.settings)
        if (
            changed
            and not self.request.accept_changes
            and checkpoint.database.invocations.never_sent()
        ):
            # Nothing to keep apart: no call was ever made from DIR (its input refused,
            # say), so the change is taken as --accept-changes takes it (the run id stays).
            log.info("run.changes_taken", changed=changed, because="nothing was ever sent")
        elif changed and not self.request.accept_changes:
            raise RunRefusedError(
                StopReason.REFUSED,
                f"{self.request.place.local} holds a run with a different {' and '.join(changed)}"
                f"{self._what_changed(stored_input, input_fp, settings_fp)}; "
                "use a new --out DIR for a new run, or --accept-changes to carry on this run "
                "with the change (answers already paid for are kept)",
            )
        run_id = checkpoint.get("run_id")
        wanted = self.request.run_id
        refuse_another_run_id(self.request.place.local, run_id, wanted)
        if run_id is None:
            run_id = wanted or daily_run_id(self._now())
            checkpoint.set("run_id", run_id)  # durable (synchronous=FULL) before any call
        stored_api = checkpoint.get("api_identity")
        if stored_api is not None and stored_api != api_fp and checkpoint.get("mode") == "test":
            # Accepted above: other credentials or another API. Test answers are fake:
            # every request is valued again, under keys of its own (a key the test
            # account used must not be replayed to another account), rather than mixed.
            forgotten = checkpoint.forget_requests()
            run_id = f"{daily_run_id(self._now())}-{api_fp[:8]}"
            checkpoint.set("run_id", run_id)
            log.warning("run.test_answers_forgotten", requests=forgotten, run_id=run_id)
        checkpoint.set("api_identity", api_fp)
        if self.settings.run.live and checkpoint.get("mode") is None:
            # --live: a test-mode answer (test credentials whose token named no scope)
            # stops the run as another mode's would (money/modes), and is not kept.
            checkpoint.set("mode", "rehearsal" if self.settings.run.rehearsal else "live")
        # A DIR begun before pass-through values were typed has none stored: read again.
        untyped = checkpoint.passthrough_schema() is None
        reading = Ingest.complete(checkpoint)
        if changed or not checkpoint.rows.complete or untyped:
            checkpoint.rows.restart()
            # Before any call: the calls of this DIR are this input's (the ingest may go on
            # while sending, `Ingest`).
            checkpoint.set("input_fingerprint", input_fp)
            checkpoint.set("settings_fingerprint", settings_fp)
            checkpoint.set("settings_shaping", json.dumps(self.settings.shaping()))
            reading = self._ingest(checkpoint, source, run_id)
        # Answers a killed run stored but never read: read now, never asked again.
        answers.settle_stored(checkpoint, self.evidence, Received(self._now()))
        self.run_id, self.reading = run_id, reading

    def _what_changed(self, stored_input: str | None, input_fp: str, settings_fp: str) -> str:
        """What changed, for the refusal: the input's sha256, old and new; each setting
        that differs from the one the DIR keeps, old and new (a DIR of a batchval that
        kept no settings can say only that they differ). No secret is among them."""
        said = []
        if stored_input is not None and stored_input != input_fp:
            said.append(f"input sha256: {stored_input[:12]}… -> {input_fp[:12]}…")
        stored = self.checkpoint.get("settings_fingerprint")
        if stored is not None and stored != settings_fp:
            kept = self.checkpoint.get("settings_shaping")
            said.extend(
                changed_settings(json.loads(kept), self.settings.shaping())
                if kept is not None
                else [
                    "one of mapping, include, API address, encoding, delimiter, "
                    "pass-through columns, sheet"
                ]
            )
        return f" ({'; '.join(said)})" if said else ""

    def _api_identity(self) -> str:
        """Which API and account answer this run (never the secret): a change of it under
        --accept-changes re-values test answers."""
        return api_identity(self.settings.api)

    def _ingest(self, checkpoint: Checkpoint, source: InputSource, run_id: str) -> Ingest:
        """The input read, or, but for a book run (whose plan needs every row), read up to
        its first request and stored on while sending (`Ingest`)."""
        return Ingest.begin(
            checkpoint,
            source,
            run_id,
            interrupted=lambda: self._runner.signals.received,
            stream=self.settings.run.book is None,
        )

    def plan(self, source: InputSource) -> StopInfo | None:
        """Most rows refused: no plan, no call. Else a book run's plan (`booking`)."""
        refused = refusal(self.reading, source, self.settings.run.max_refused_share)
        if refused is None:
            self.booked = BookRun.start(
                self.settings,
                self.checkpoint,
                self._now,
                index=None if self.indexing is None else self.indexing.index,
                picks_to=self.request.place.local / PICKS_NAME,
                directory=None if self.indexing is None else self.indexing.directory,
            )
        return refused

    # --- sending -------------------------------------------------------------------------

    def send(self) -> SendOutcome:
        """Send what is pending; first read back the paid answers that could not be read
        (`valuations/recovery`). Not from the embedded sandbox: a new one each invocation, it
        knows no earlier valuation."""
        checkpoint, reading, runner = self.checkpoint, self.reading, self._runner
        recover = self.settings.api is not None and bool(recoverable(checkpoint))
        reads = None if self.booked is None else self.booked.index_reads
        if not checkpoint.requests.any_pending() and not recover and not (reads and reads.reads):
            return SendOutcome()

        def before(client: PartnerClient) -> list[Job[Any] | None]:
            return [
                recovery_job(client, checkpoint) if recover else None,
                None if reads is None else reads.job(client, checkpoint.database, self._now),
            ]

        sending = Sending(
            database=checkpoint.database,
            api=lambda: chosen_api(
                self.settings.api, runner.embedded_api, event="run.embedded_sandbox", what="valuing"
            ),
            run=self.settings.run,
            now=self._now,
            progress_bar=self.request.progress_bar,
            signals=runner.signals,
            job_for=lambda client: ValuationJob(
                client,
                checkpoint,
                now=self._now,
                more=reading.more,
                evidence=self.evidence,
                warm=client.tokens.token,
            ),
            counts=reading.counts,
            before=before,
            on_metrics=lambda statuses, limited, credits: runner.metrics(
                reading.counts(), statuses, limited, credits, None
            ),
            api_clock=self.evidence.api_clock,
        )
        sent = sending.phase()
        runner.statuses = sent.statuses
        return sent

    def settle(self, sent: SendOutcome) -> SendOutcome:
        self.reading.finish()  # the rows not stored while sending: every row is counted
        # Before any figure is read: this invocation's fresh charges looked at again, with
        # the evidence of another holder met since, and where it started on the API's clock.
        database = self.checkpoint.database
        place_charges(database.charges, self.evidence, database.invocations.current)
        database.invocations.note_api_started(self.evidence.started())
        offset = self.evidence.api_clock.offset()
        if offset is not None and abs(offset.seconds) > WARN_OFFSET.total_seconds():
            # Said, never acted on: money is read on the API's clock (`money/charges`).
            log.warning(
                "valuations.clock.offset",
                seconds=round(offset.seconds, 1),
                detail=f"this machine's clock is {abs(offset.seconds):.0f} s "
                f"{'behind' if offset.seconds > 0 else 'ahead of'} the API's (its Date "
                "headers): keep it on NTP; the money figures do not depend on it",
            )
        if self.booked is not None:  # the budget's own stop leaves rows for a later night
            sent = dataclasses.replace(sent, stop=self.booked.settle(sent.stop, sent.declined))
        return sent

    def counts(self) -> Counts:
        return self.checkpoint.counts()

    # --- the end -------------------------------------------------------------------------

    def write_outputs(self) -> Lines:
        # The night's sending is over: tests/bench/indexed.py times the outputs from here.
        log.info("run.writing", out=str(self.request.place.local))
        kept = None if self.booked is None else self.booked.kept_index()
        if kept is not None and self.indexing is not None:  # index.source api: the book's
            self.indexing = dataclasses.replace(self.indexing, index=kept)
        portfolio, balance_at = self._write(self.started)
        results = self.request.place.local / RESULTS_NAME
        booked, indexing = self.booked, self.indexing
        # The index's work on a book night (the unvalued loans' postcodes read from the
        # checkpoint, then results.parquet rewritten: seconds each on a book of a million)
        # is done by a thread of its own while the book is written and counts its night
        # (as long): on two cores, the one hides the other.
        with ThreadPoolExecutor(1) as beside:
            run = contextvars.copy_context().run  # the log's bindings, the file modes
            postcodes = None
            if booked is not None and indexing is not None:
                postcodes = beside.submit(run, booked.postcodes_read())
            written = None if booked is None else booked.write(results, self.run_id)
            indexed = None
            if indexing is not None:
                indexed = beside.submit(run, self._index, results, postcodes)
            book = None if booked is None or written is None else booked.section(written)
            began = time.monotonic()
            found = None if indexed is None else indexed.result()
            waited = time.monotonic() - began
        if found is not None:
            covered, step = found
            # The step's own seconds, and how long the night waited for it once the book
            # was counted: tests/bench/indexed.py reads both from the log.
            log.info("run.indexed", waited=round(waited, 3), **step)
            if book is not None and book.get("portfolio"):
                book = {**book, "portfolio": {**book["portfolio"], "index": covered}}
            elif portfolio is not None:
                portfolio = {**portfolio, "index": covered}
        if balance_at is not None:  # after the book's carried rows joined the results
            unvalued = not_valued(self.checkpoint, results, balance_at)
            if portfolio is not None:
                portfolio = {**portfolio, **unvalued}
            if book is not None and book.get("portfolio"):
                book = {**book, "portfolio": {**book["portfolio"], **unvalued}}
        checkpoint = self.checkpoint
        return Lines(
            run_id=self.run_id,
            mode=checkpoint.get("mode") or "unknown",
            problems_by_type=checkpoint.problem_types(),
            portfolio=portfolio,
            book=book,
            own_lines=own_lines(portfolio, book),
            complete_action=complete_action(book),
            stop=None if self.booked is None else self.booked.lost,
        )

    def _index(
        self, results: Path, postcodes: Future[Sequence[tuple[int, str | None]]] | None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """results.parquet with its index columns, and on a book night a row for each loan
        not valued tonight (`postcodes`: their row numbers and postcodes, read before);
        the summary's `index` section, and the step's own figures for its log line."""
        assert self.indexing is not None
        indexing, began = self.indexing, time.monotonic()
        left = None
        if postcodes is not None:
            assert self.booked is not None
            left = self.booked.for_index(postcodes.result())
        lender = result_lender_columns(results, self.settings.input.columns)
        rows, tracked = indexing.add_columns(
            results, lender, self.settings.lender.revaluation.fall_share, left
        )
        covered = coverage(results, lender.get("loan_balance"), indexing.latest_month, tracked)
        covered["source"] = indexing.options.source
        seconds = round(time.monotonic() - began, 3)
        return covered, {"rows": rows, "latest": indexing.latest_month, "seconds": seconds}

    def _write(self, started: dt.datetime) -> tuple[Mapping[str, Any] | None, int | None]:
        """results.parquet, problems.parquet and manifest.json, the manifest also in both
        files' metadata; returns the portfolio's totals when the input has balances, and
        the balance's place among the pass-through columns."""
        out, checkpoint, run_id = self.request.place.local, self.checkpoint, self.run_id
        database = checkpoint.database
        answered = checkpoint.answer_values(*ANSWER_PATHS)
        manifest = Manifest.of_answers(
            answered,
            run_id=run_id,
            mode=checkpoint.get("mode") or "unknown",
            input_path=self.request.input_name or str(self.request.input_path),
            input_sha256=checkpoint.get("input_fingerprint"),
            settings=self.settings.to_json(),
            written_at=started.isoformat(),
            charges=database.charges.money(database.invocations.current).to_json(),
            input_read=self.input_read,
            index=None if self.indexing is None else self.indexing.facts(),
        )
        redactor = redaction.active()  # the client secret, every token, the store's keys
        metadata = manifest.metadata(redactor)
        lending = Lending.for_write(
            checkpoint.passthrough_schema(),
            self.settings.input.columns,
            self.settings.lender,
            as_of=started.date(),  # stale_index counts months back from the run's date
            model_versions=[version for version, *_ in answered],
        )
        include = self.settings.input.include
        (out / VERIFY_NAME).unlink(missing_ok=True)  # compared the results being replaced
        write_results(
            checkpoint, out / RESULTS_NAME, include=include, lending=lending, metadata=metadata
        )
        write_problems(checkpoint, out / PROBLEMS_NAME, metadata=metadata)
        write_charges(database.charges.lines(), out / CHARGES_NAME)
        write_json_atomic(out / MANIFEST_NAME, manifest.scrubbed(redactor))
        portfolio = None if lending is None else lending.portfolio
        return (
            None if portfolio is None else portfolio.to_json(),
            None if lending is None else lending.balance_at,
        )

    def summary(self, run: RunSummary) -> RunSummary:
        offset = self.evidence.api_clock.offset()
        return run if offset is None else dataclasses.replace(run, api_clock=offset.to_json())

    def close(self) -> None:
        self.reading.close()
