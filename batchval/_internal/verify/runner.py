"""`batchval verify DIR`: every valuation of DIR's results read back by id (free) and
compared with what results.parquet holds; the differences written to verify.parquet.

The composition root of the command, beside `valuations/runner` and `admin/status`. It takes DIR's
`RunLock` (a run writing results.parquet meanwhile would make the comparison moot),
reads the compared columns of results.parquet (`verify/compare`), and sends one read per
distinct valuation id through the sending phase of `run` (`sending/sending`, `sending/reading`):
pacing, `Retry-After`, retries, the breaker, the signals and the account and address
stops are the run's, and a stop is reported with the run's reasons and exit codes (75,
77, 64). As for `run`, nothing is read before the time the API gave: a daily limit's
`not_before` or a `Retry-After` kept in DIR's checkpoint is waited out (or, for the
daily limit without `run.wait_for_midnight`, 75 `daily_limit` at once), and one met
while reading is kept there for the next invocation, `run`'s or verify's. A read the API
refuses as `not-found`, and an answer it gives that cannot be read, are differences.

Exit codes: 0 when every valuation agrees, `ExitCode.DIFFERENCES` (1, verify's only)
when any differs, the stop's code when the API could not answer them all (and then
verify.parquet is not written: an incomplete comparison would read as a clean one).
A DIR valued by the embedded sandbox is refused (64): that sandbox forgot its
valuations when its run ended, so none can be read back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from batchval._internal import logs
from batchval._internal.api import (
    Answer,
    PartnerClient,
    PartnerError,
    UnreadableAnswerError,
    Valuation,
)
from batchval._internal.money import insist_on_live
from batchval._internal.outcome import ExitCode, RunRefusedError, StopInfo, StopReason
from batchval._internal.place import (
    LOG_NAME,
    RESULTS_NAME,
    VERIFY_NAME,
    NotedSignals,
    Place,
    locked_dir,
    write_table_atomic,
)
from batchval._internal.runs import opened
from batchval._internal.sending import ReadApi, ReadJob, Sending, Settled, charge_of
from batchval._internal.settings import ApiSettings, Settings, api_identity
from batchval._internal.store import Checkpoint, Counts, Database
from batchval._internal.verify.compare import (
    Comparer,
    Difference,
    HeldResults,
    differences_table,
)

log = logs.get_logger()

SHOWN = 5  # differences printed; verify.parquet holds them all
WIDTH = 160  # a printed difference is cut here (a commentary member runs long)


@dataclasses.dataclass(frozen=True, slots=True)
class Read:
    rowid: int
    key: str  # the valuation id


@dataclasses.dataclass(frozen=True, slots=True)
class VerifySummary:
    """What one verify did: rendered on the terminal, its exit code for the scheduler."""

    valuations: int  # distinct valuation ids in results.parquet
    rows: int  # rows of results.parquet
    read: int  # valuations the API answered (a not-found included)
    differences: tuple[Difference, ...]
    calls: int
    credits: int
    seconds: float
    stop: StopInfo | None = None

    @property
    def exit_code(self) -> ExitCode:
        if self.stop is not None:
            return self.stop.reason.exit_code
        return ExitCode.DIFFERENCES if self.differences else ExitCode.COMPLETE

    def render(self) -> str:
        head = (
            f"verify: {self.read} of {self.valuations} valuation(s) read back "
            f"({self.rows} results rows), {self.calls} calls, {self.credits} credits, "
            f"{self.seconds:.1f} s"
        )
        if self.stop is not None:
            return f"{head}; stopped before the end: nothing written"
        if not self.differences:
            return f"{head}; all agree"
        valuations = len({d.valuation_id for d in self.differences})
        lines = [
            f"{head}; {len(self.differences)} difference(s) in {valuations} valuation(s), "
            f"all in {VERIFY_NAME}:"
        ]
        for found in self.differences[:SHOWN]:
            rows = ",".join(map(str, found.row_numbers[:5]))
            line = f"  {found.valuation_id} (row {rows}) {found.field}: {found.detail}"
            lines.append(line if len(line) <= WIDTH else line[: WIDTH - 3] + "...")
        if len(self.differences) > SHOWN:
            lines.append(f"  ... and {len(self.differences) - SHOWN} more")
        return "\n".join(lines)


class VerifyJob(ReadJob[Read]):
    """Reads every valuation of the results; each answer goes to the `Comparer`."""

    name = "verify"

    def __init__(self, api: ReadApi, held: HeldResults) -> None:
        super().__init__(api, [Read(n, found) for n, found in enumerate(held.ids(), 1)])
        self.comparer = Comparer(held)
        self.read = 0

    def settle(self, item: Read, answer: Answer) -> Settled:
        self.read += 1
        credits, balance = charge_of(answer.data)  # none: a read is free (counted if not)
        try:
            valuation = Valuation.from_json(answer.data)
        except UnreadableAnswerError as error:
            detail = f"the API's answer cannot be read: {error}"
            self.comparer.whole(item.key, detail)
            return Settled(credits, balance, problem=detail)
        self.comparer.add(valuation, item.key)
        return Settled(credits, balance)

    def record_problem(self, item: Read, error: PartnerError) -> None:
        """The API refused the read (`not-found`: it has no valuation with that id)."""
        self.read += 1
        self.comparer.whole(item.key, f"the API refused the read: {error}", field="valuation_id")

    def record_retry(self, item: Read, error: PartnerError) -> None:
        """Not read in this invocation; the pool stops the run (api_unavailable)."""
        log.warning("verify.unread", valuation_id=item.key, detail=str(error))


def verify_dir(place: Place, settings: Settings, *, progress_bar: bool = False) -> VerifySummary:
    """Verify the run in `place` (taken: `place/place.taken`); raises RunRefusedError
    when it ends before reading (64, 75, 70). At a URL, the run's database is kept there
    as it commits (the stops verify keeps), and verify reads only while it holds the run."""
    out_dir = place.local
    if settings.run.live:  # before DIR is taken: nothing read
        insist_on_live(settings.api)
    if not (out_dir / RESULTS_NAME).is_file():
        raise RunRefusedError(
            StopReason.REFUSED,
            f"{out_dir} has no {RESULTS_NAME}: verify reads back the valuations of a run's "
            "results (batchval run INPUT --out DIR first)",
        )
    signals = NotedSignals()
    with locked_dir(out_dir, LOG_NAME, "verify"), signals:
        # An earlier verify's file goes first: this one, stopped or refused, must never
        # leave it to read as the clean comparison of the results held now.
        (out_dir / VERIFY_NAME).unlink(missing_ok=True)
        with _checkpoint(out_dir, place) as checkpoint:
            api = _api_of(out_dir, checkpoint, settings)
            held = _held(out_dir / RESULTS_NAME)
            return _verify(out_dir, held, checkpoint, api, settings, progress_bar, signals)


@contextlib.contextmanager
def _checkpoint(out_dir: Path, place: Place) -> Iterator[Checkpoint]:
    """DIR's checkpoint, where the daily limit's `not_before` and a `Retry-After` that
    outlives an invocation are kept (`sending/sending` waits them out and keeps them), and
    kept at the run's URL when it has one. A DIR whose results.parquet came without its
    checkpoint gets one for this invocation only."""
    found = opened(Database.open_existing, out_dir)
    if found is None:
        with Database.scratch() as scratch:
            yield Checkpoint(scratch)
        return
    try:
        place.keep(found)
        yield Checkpoint(found)
    finally:
        found.close()


def _api_of(out_dir: Path, checkpoint: Checkpoint, settings: Settings) -> ApiSettings:
    """The API to read from: the configured one, for a DIR not valued by the embedded
    sandbox."""
    valued_by = checkpoint.get("api_identity")
    if valued_by not in (None, api_identity(None), api_identity(settings.api)):
        # Another base URL or client id: fine for a rotated login of the same account;
        # another account's reads would all be not-found differences.
        log.warning("verify.other_api", detail="DIR was valued through another API or login")
    if valued_by == api_identity(None):
        raise RunRefusedError(
            StopReason.REFUSED,
            f"{out_dir} was valued by the embedded sandbox, which forgot its valuations "
            "when that run ended: they cannot be read back (verify a run made against "
            "an API: batchval sandbox, or the partner's)",
        )
    if settings.api is None:
        raise RunRefusedError(
            StopReason.REFUSED,
            "no API is configured: verify reads back from the API that valued DIR "
            "(BATCHVAL_BASE_URL, BATCHVAL_AUTH_URL, BATCHVAL_CLIENT_ID, "
            "BATCHVAL_CLIENT_SECRET, or the api section of --config)",
        )
    return settings.api


def _held(path: Path) -> HeldResults:
    """The compared columns of results.parquet; a file that is not batchval's results is
    refused (64), never an internal error."""
    try:
        return HeldResults.read(path)
    except (OSError, pa.ArrowException, KeyError) as exc:
        raise RunRefusedError(
            StopReason.REFUSED,
            f"{path} cannot be read as batchval's results ({type(exc).__name__}: {exc})",
        ) from None


def _verify(
    out_dir: Path,
    held: HeldResults,
    checkpoint: Checkpoint,
    api: ApiSettings,
    settings: Settings,
    progress_bar: bool,
    signals: NotedSignals,
) -> VerifySummary:
    started = time.monotonic()
    log.info("verify.reading", valuations=len(held.ids()), rows=held.rows)
    jobs: list[VerifyJob] = []  # one a round: a round after midnight reads everything again

    def job_for(client: PartnerClient) -> VerifyJob:
        jobs.append(VerifyJob(client, held))
        return jobs[-1]

    sending = Sending(
        database=checkpoint.database,
        api=lambda: contextlib.nullcontext(api),
        run=settings.run,
        now=settings.run.now,
        progress_bar=progress_bar,
        signals=signals,
        job_for=job_for,
        counts=lambda: _counts(held),
        wait_option="run.wait_for_midnight",
    )
    sent = sending.phase()
    job = jobs[-1] if jobs else None
    differences = tuple(job.comparer.finish()) if job is not None else ()
    if sent.stop is None:
        write_table_atomic(out_dir / VERIFY_NAME, differences_table(differences))
    summary = VerifySummary(
        valuations=len(held.ids()),
        rows=held.rows,
        read=job.read if job is not None else 0,
        differences=differences,
        calls=sent.calls,
        credits=sent.credits,
        seconds=round(time.monotonic() - started, 3),
        stop=sent.stop,
    )
    log.info(
        "verify.done",
        read=summary.read,
        differences=len(differences),
        exit_code=int(summary.exit_code),
    )
    return summary


def _counts(held: HeldResults) -> Counts:
    """Where a verify starts, for the progress bar: every row's valuation still to read."""
    ids = len(held.ids())
    return Counts(
        rows=held.rows,
        input_problems=0,
        valued_rows=0,
        api_problem_rows=0,
        pending_rows=held.rows,
        requests=ids,
        requests_done=0,
        requests_problem=0,
        requests_pending=ids,
        credits=0,
    )
