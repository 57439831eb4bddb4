"""What every command that calls the API shares, written once: the invocation's
skeleton (`invoke`), which API answers (the configured one, or the embedded sandbox in
test mode), the fingerprint of an input file, and why an invocation did not complete
(`final_stop`).

`invoke` is the one order of an invocation of `run` and `streets`: take the place (DIR
locked and logging, an output write a kill cut short cleared), read the input (or price
it without the network: a dry run), open DIR's database as the product keeps it,
prepare, plan (a mostly refused input stops there, before any call), send (a defect
becomes `internal_error`, 70, with its traceback in the log), settle, write, end the
invocation in the database, and write summary.json, whose `RunSummary` is built here
once. A product plugs in only what is its own: a `Product` names its view of the
database, reads its input, prices it and admits a DIR; the `Steps` it admits prepare,
plan, send, settle, count, write and wrap the summary. Once the outputs are written, the
exports and report.html made from older ones are removed (`place/derived`). The
skeleton names no product: each hands in its own pieces.

A product's front door is one shape: its request is an `Invocation` (the input, the
place, taken once by the caller (`place/place.taken`), the settings, a dry run asked)
with the product's own options beside, and the product a `FrontDoor` over it, which
answers the `Product` members every product answers alike and enters an invocation
(`--live` insisted on before the DIR is taken, signals noted).

`verify`, which reads back ids and has no input, plan or summary.json, takes only the
pieces that fit it: `invocation.locked_dir`, and `sending/sending.Sending`, whose phase holds
the gates every command shares (a noted signal, a kept daily limit).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Generic, ParamSpec, Protocol, TypeVar

from batchval._internal import logs
from batchval._internal.input import InputError, InputSource, open_input
from batchval._internal.money import insist_on_live
from batchval._internal.outcome import (
    ExitCode,
    RunRefusedError,
    SettingsError,
    StopInfo,
    StopReason,
)
from batchval._internal.place import (
    DRY_RUN_NAME,
    LOG_NAME,
    NotedSignals,
    Place,
    described,
    file_mode,
    last_defect,
    locked_dir,
    remove_stale,
    write_json_atomic,
)
from batchval._internal.runs.summary import SUMMARY_NAME, DryRunSummary, RunSummary
from batchval._internal.sending import SendOutcome, watched
from batchval._internal.settings import ApiSettings, Settings
from batchval._internal.store import (
    CHECKPOINT_NAME,
    CheckpointVersionError,
    Counts,
    Database,
    LockFileError,
)

log = logs.get_logger()

EmbeddedApi = Callable[[], contextlib.AbstractContextManager[ApiSettings]]


class Summary(Protocol):
    """A product's summary: summary.json is its `to_json`."""

    def to_json(self) -> dict[str, Any]: ...


SummaryT = TypeVar("SummaryT", bound=Summary)
SummaryT_co = TypeVar("SummaryT_co", bound=Summary, covariant=True)


@dataclasses.dataclass(frozen=True, slots=True)
class Lines:
    """A product's own fields of the run's summary, known once its outputs are written."""

    run_id: str
    mode: str  # test or live, from the API's answers; unknown before the first
    problems_by_type: Mapping[str, int]
    # summary.json's `portfolio` and `book` (run's: the loan balances' totals, the book's
    # section with --book), and the product's own lines for a person (`RunSummary.own_lines`).
    portfolio: Mapping[str, Any] | None = None
    book: Mapping[str, Any] | None = None
    own_lines: tuple[str, ...] = ()
    # The next action of a complete run in the product's words ("": the engine's).
    complete_action: str = ""
    # A stop met while writing (the book's swap lost to another run's): the run's stop when
    # it has none of its own, for the same command again finishes the write.
    stop: StopInfo | None = None


class Steps(Protocol[SummaryT_co]):
    """One product's invocation on its DIR's open database, in the order `invoke` calls
    them. The database is the skeleton's to close; what the steps opened, `close`'s."""

    def prepare(self, source: InputSource) -> None:
        """Before any call: the input read into the checkpoint when it is new or changed,
        a DIR of other settings refused, answers a killed run stored settled."""
        ...

    def plan(self, source: InputSource) -> StopInfo | None:
        """What this invocation will send; a stop (most rows refused, say) sends nothing."""
        ...

    def send(self) -> SendOutcome:
        """The sending phase (`sending/sending.Sending.phase`, behind its gates)."""
        ...

    def settle(self, sent: SendOutcome) -> SendOutcome:
        """After sending, a defect in it included: what is left stored, the stop as the
        product reads it."""
        ...

    def counts(self) -> Counts: ...

    def write_outputs(self) -> Lines:
        """The product's files, written atomically; its lines of the summary."""
        ...

    def summary(self, run: RunSummary) -> SummaryT_co:
        """The run's summary as the product reports it (summary.json, the terminal)."""
        ...

    def close(self) -> None: ...


class Product(Protocol[SummaryT_co]):
    """A command on the skeleton: what it reads, how it prices without the network, and
    which DIR it admits, with its own tables on DIR's database."""

    @property
    def name(self) -> str:
        """The command (`run`, `streets`): it names the log events (`<name>.internal_error`)."""
        ...

    @property
    def pending(self) -> str:
        """What a request is called where one is left pending (`request`, `postcode`)."""
        ...

    @property
    def input_name(self) -> str:
        """What summary.json calls the input: its path, or the URL it was read from."""
        ...

    @property
    def place(self) -> Place:
        """Where the run lives, taken for this invocation (`place/place`): the skeleton
        works in `place.local` and keeps the run's database at its URL, if it has one."""
        ...

    @property
    def dry(self) -> bool:
        """A dry run was asked: price the input, no checkpoint, no call."""
        ...

    def now(self) -> dt.datetime:
        """The run's clock (with the test seam)."""
        ...

    def read_input(self) -> InputSource:
        """The input opened (an `InputError` is the skeleton's refusal, 65)."""
        ...

    def dry_run(self, source: InputSource) -> DryRunSummary: ...

    def admit(self, database: Database, started: dt.datetime) -> Steps[SummaryT_co]:
        """This invocation's steps on DIR's open database, viewed through the product's
        own tables (`started`: the invocation's start, on the run's clock), or a
        `RunRefusedError` for a DIR that holds another command's outputs."""
        ...


def invoke(product: Product[SummaryT]) -> SummaryT | DryRunSummary:
    """One invocation of `product`; returns its summary (also written to DIR/summary.json).
    Raises RunRefusedError when it ends before sending. At a URL (`product.place`), the
    run's database is kept there as it commits."""
    place = product.place
    out_dir = place.local
    # A dry run takes no lock: it reads DIR's checkpoint read-only and writes only its
    # own files (`names.DRY_RUN_NAME`), so a run in progress there goes on undisturbed.
    with locked_dir(out_dir, LOG_NAME, product.name, lock=not product.dry):
        started, started_mono = product.now(), time.monotonic()
        try:
            source = product.read_input()
        except InputError as exc:
            raise RunRefusedError(StopReason.INPUT_UNUSABLE, str(exc)) from None
        except SettingsError as exc:  # the config names a column the input does not have
            raise RunRefusedError(StopReason.REFUSED, str(exc)) from None
        if product.dry:
            priced = dataclasses.replace(
                product.dry_run(source),
                input_read=source.read_as.to_json(),
                input=product.input_name,
                priced_at=started.isoformat(),
            )
            write_json_atomic(out_dir / DRY_RUN_NAME, priced.to_json())
            return priced
        for leftover in out_dir.glob(".*.tmp-*"):
            if not leftover.name.startswith(".dry_run"):  # a dry run's, maybe writing now
                leftover.unlink(missing_ok=True)  # an output write cut short by a kill
        # No memory here (at a URL: none restored): this invocation begins the run.
        began = not (out_dir / CHECKPOINT_NAME).exists()
        database = open_database(out_dir)
        try:
            place.keep(database)
            steps = product.admit(database, started)
            try:
                return _run(product, steps, database, source, started, started_mono, began)
            finally:
                steps.close()
        finally:
            database.close()


def open_database(out_dir: Path) -> Database:
    """DIR's database, created if need be with the context's file mode (`opened`)."""
    return opened(Database.open, out_dir, mode=file_mode())


_P = ParamSpec("_P")
_Opened = TypeVar("_Opened")


def opened(open_: Callable[_P, _Opened], *args: _P.args, **kwargs: _P.kwargs) -> _Opened:
    """DIR's database as `open_` opens it (to write, read-only, if it exists): one of a
    schema this version cannot migrate is the command's refusal (64)."""
    try:
        return open_(*args, **kwargs)
    except (CheckpointVersionError, LockFileError) as exc:
        raise RunRefusedError(StopReason.REFUSED, str(exc)) from None


def _run(
    product: Product[SummaryT],
    steps: Steps[SummaryT],
    database: Database,
    source: InputSource,
    started: dt.datetime,
    started_mono: float,
    began: bool,
) -> SummaryT:
    steps.prepare(source)
    # Most rows refused: no call; the outputs and summary say why (65).
    refused = steps.plan(source)
    invocation = database.invocations.record_start(started.isoformat())
    try:
        sent = SendOutcome(refused) if refused else steps.send()
    except Exception as exc:  # a defect: keep what was done, say so, exit 70
        last_defect.set(exc)
        log.error(f"{product.name}.internal_error", exc_info=True, file_only=True)
        detail = f"{type(exc).__name__}: {exc}; the traceback is in {LOG_NAME}"
        sent = SendOutcome(StopInfo(StopReason.INTERNAL_ERROR, detail))
    sent = steps.settle(sent)
    counts = steps.counts()
    stop = final_stop(counts, sent.stop, product.pending)
    code = ExitCode.COMPLETE if stop is None else stop.reason.exit_code
    lines = steps.write_outputs()
    removed = remove_stale(database, product.place)  # the exports and report made from the old
    if stop is None and lines.stop is not None:
        stop = lines.stop
        code = stop.reason.exit_code
    database.invocations.record_end(
        invocation,
        ended_at=product.now().isoformat(),
        exit_code=int(code),
        calls=sent.calls,
        rate_limited=sent.rate_limited,
        **database.charges.money(invocation).invocation_figures(),
    )
    run = RunSummary.of_run(
        database,
        invocation=invocation,
        calls=sent.calls,
        rate_limited=sent.rate_limited,
        status="complete" if code is ExitCode.COMPLETE else "incomplete",
        exit_code=code,
        run_id=lines.run_id,
        mode=lines.mode,
        counts=counts,
        problems_by_type=lines.problems_by_type,
        stop=stop,
        input=product.input_name,
        input_read=source.read_as.to_json(),
        started_at=started.isoformat(),
        finished_at=product.now().isoformat(),
        seconds=round(time.monotonic() - started_mono, 3),
        portfolio=lines.portfolio,
        book=lines.book,
        own_lines=lines.own_lines,
        next_action=lines.complete_action if code is ExitCode.COMPLETE else "",
        removed=tuple(removed),
        began=began,
        files=described(product.place.local),
    )
    summary = steps.summary(run)
    write_json_atomic(product.place.local / SUMMARY_NAME, summary.to_json())
    return summary


@dataclasses.dataclass(frozen=True, slots=True)
class Invocation:
    """What one invocation of a product is asked, whatever the product (its front door's
    record); a product's request adds its own options to it."""

    input_path: Path
    place: Place  # where the run lives, taken by the caller (`place/place.taken`)
    settings: Settings
    dry_run: bool = False
    progress_bar: bool = False
    input_name: str | None = None  # the URL `input_path` was read from, if it was


RequestT = TypeVar("RequestT", bound=Invocation)


class FrontDoor(Generic[RequestT]):
    """A product's front door: the `Product` members every product answers alike from its
    request, and the way into an invocation (`entered`). A product subclasses it and
    adds its database, name, dry run, `admit` and a `run` that calls `invoke`."""

    # The input is read for its postcodes alone (`open_input`'s `postcode_only`).
    postcode_only = False
    name: str  # the command's (its log events' names), the product's to set

    def __init__(self, request: RequestT, *, embedded_api: EmbeddedApi | None = None) -> None:
        self.request = request
        self.settings: Settings = request.settings
        self.embedded_api = embedded_api
        self.signals = NotedSignals()  # a signal received outside the sending phase

    @property
    def input_name(self) -> str:
        return self.request.input_name or str(self.request.input_path)

    @property
    def place(self) -> Place:
        return self.request.place

    @property
    def dry(self) -> bool:
        return self.request.dry_run

    def now(self) -> dt.datetime:
        return self.settings.run.now()  # with the test seam

    def input_fingerprint(self) -> str:
        """The input's sha256: the run knows an input by its bytes, so the same object
        read on another machine is the same input."""
        return file_fingerprint(self.request.input_path)

    def read_input(self) -> InputSource:
        """The input opened (its layout found: a workbook may take minutes), a noted
        signal honoured at once meanwhile (`watched`)."""
        source = watched(
            lambda: open_input(
                self.request.input_path, self.settings.input, postcode_only=self.postcode_only
            ),
            lambda: self.signals.received,
            self.name,
        )
        self.settings = self.settings.read_at(None if source.header is None else source.header.line)
        return source

    @contextlib.contextmanager
    def entered(self) -> Iterator[None]:
        """An invocation's way in: `--live` insisted on before the DIR is taken (nothing
        sent or written when it is refused), then signals noted until it ends."""
        if self.settings.run.live:
            verdict = insist_on_live(self.settings.api, dry=self.request.dry_run)
            if verdict == "rehearsal":  # the mode the run keeps (money/live)
                run = dataclasses.replace(self.settings.run, rehearsal=True)
                self.settings = dataclasses.replace(self.settings, run=run)
        with self.signals:
            yield


@contextlib.contextmanager
def chosen_api(
    configured: ApiSettings | None, embedded: EmbeddedApi | None, *, event: str, what: str
) -> Iterator[ApiSettings]:
    """The configured API, or else the embedded sandbox (test mode), said loudly: `event`
    is the warning's name, `what` what the command does there ("valuing", ...)."""
    if configured is not None:
        yield configured
        return
    if embedded is None:
        raise RunRefusedError(StopReason.REFUSED, "no API is configured")
    log.warning(
        event,
        message=f"No API configured: {what} against the embedded sandbox in TEST mode. "
        "Figures are fake and carry mode = test.",
    )
    with embedded() as settings:
        yield settings


def file_fingerprint(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def final_stop(counts: Counts, stop: StopInfo | None, pending: str = "request") -> StopInfo | None:
    """Why a run is not complete (None when it is), for `run` and `streets` alike: every
    incomplete run has a reason, and a complete run still reports a stop a person must
    act on (`StopInfo.needs_a_person`: met while reading back, say), never a resumable
    one. `pending` names what is left (requests, postcodes) in the defect's detail."""
    if counts.complete:
        return stop if stop is not None and stop.needs_a_person else None
    if stop is not None:
        return stop
    return StopInfo(
        StopReason.INTERNAL_ERROR,
        f"{counts.requests_pending} {pending}(s) left pending with no reason recorded "
        "(a defect: please report it); run the same command again to finish them",
    )
