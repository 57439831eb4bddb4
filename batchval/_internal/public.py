"""batchval from Python: the run the command line makes, with the same guarantees.

    import batchval

    run = batchval.run("book.csv", out="runs/nightly", settings=batchval.Settings(concurrency=8))
    run = batchval.value(frame, out="runs/notebook")      # a polars (or pandas) frame
    run = batchval.open_run("s3://bucket/runs/nightly")   # read only
    run = batchval.analyse_streets("homes.csv", out="runs/streets")
    run.complete, run.stop, run.summary, run.results(), run.problems()

Each call is one invocation of `batchval run` (or `batchval streets`): the same keys,
checkpoint, resume, outputs and exit codes (docs/how-to/python.md). The command line is
this module's first client: its `run` and `streets` parse, build the same `Settings`, call
`run` and `analyse_streets`, print the `Run` (`text`, `messages`) and exit with its code.
The settings are one frozen `Settings` (each None takes the config's, else the default);
the command's options are keywords of their own (`run_id=`, `dry_run=`, `accept_changes=`,
`metrics_file=`, `sheet=`, `encoding=`, `header_row=`; `refresh=` and `join=` for
`analyse_streets`). A run that completes, or stops to be resumed (75), is a `Run`; one
a person must act on raises a `RunError` carrying the exit code and the line the command
line prints (64 usage or settings, 65 the input, 77 the account); a defect (70) is raised
as it was, once the run has kept what it did (`Run.of(error)` is that run).

It works from plain Python, inside a running event loop (a notebook cell, an `async def`
under `asyncio.run`: the run's own loop then works in a thread of its own while the call
waits) and from a worker thread (no signal handlers there: the host stops a run its own
way). Ctrl-C, or a notebook's interrupt, stops a run as the command line's SIGINT does: the
answers so far are kept, and the `Run` says `signal` (75). It never configures the host's
logging (`logs.configure_library`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import datetime as dt
import functools
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import polars as pl

from batchval._internal import logs, redaction
from batchval._internal.outcome import (
    BatchvalError,
    ExitCode,
    RunRefusedError,
    SettingsError,
    StopInfo,
    StopReason,
)

if TYPE_CHECKING:
    from batchval._internal.place import Place
    from batchval._internal.settings import Settings as Loaded

# What summary.json and the manifest call the input of `value`, unless `input_name=` says.
FRAME_NAME = "<frame>"
# The run settings of `run --book` (`--book`, `--row-id`, `--fresh-for`, `--max-calls`),
# which go together (`load_settings` refuses the last three without a book).
_BOOK = ("book", "row_id", "fresh_for_days", "max_calls")
# A path: a URL or a file (`os.PathLike`).
Where = str | os.PathLike[str]


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Settings:
    """A run's settings, each as the config names it (docs/reference/configuration.md): its
    `run` section's by their own names, its `index` section's after `index_`, its `book`
    section's after `book_`. None (the default) takes the config's, else batchval's own
    default. The command line builds the same object from its options."""

    # The config's `run` section (`settings.RUN_KEYS`).
    concurrency: int | None = None
    include: str | tuple[str, ...] | None = None  # "commentary,rebuildCost", or a tuple
    max_credits: int | None = None
    max_attempts: int | None = None
    outage_seconds: float | None = None
    unrecognised_limit: int | None = None
    wait_for_midnight: bool | None = None
    timeout_seconds: float | None = None
    shutdown_grace_seconds: float | None = None
    progress_seconds: float | None = None
    street_credits: int | None = None
    street_join: bool | None = None
    metrics_seconds: float | None = None
    max_refused_share: float | None = None
    book: Where | None = None
    row_id: str | None = None
    fresh_for_days: float | None = None
    max_calls: int | None = None
    live: bool | None = None
    # The config's `index` section (`settings.INDEX_KEYS`).
    index_source: Literal["none", "ukhpi", "api"] | None = None
    index_file: Where | None = None
    index_sha256: str | None = None
    index_postcodes: Where | None = None
    index_postcodes_sha256: str | None = None
    index_postcode_column: str | None = None
    index_authority_column: str | None = None
    # The config's `book` section (`settings.BOOK_KEYS`).
    book_order: Literal["risk", "staleness"] | None = None
    book_ltv_watch: tuple[float, ...] | None = None

    def by_section(self) -> dict[str, dict[str, Any]]:
        """The settings given (not None), by the config's sections (`run`, `book`: the
        run section's book settings, `index`, `order`: the book section's), each key as
        its section names it; paths as text."""
        found: dict[str, dict[str, Any]] = {"run": {}, "book": {}, "index": {}, "order": {}}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None:
                continue
            if isinstance(value, os.PathLike):
                value = os.fspath(value)
            if field.name.startswith("index_"):
                found["index"][field.name.removeprefix("index_")] = value
            elif field.name.startswith("book_"):
                name = field.name.removeprefix("book_")
                found["order"][name] = list(value) if isinstance(value, tuple | list) else value
            else:
                found["book" if field.name in _BOOK else "run"][field.name] = value
        return found


# The attribute a defect `run`, `value` or `analyse_streets` raised carries its kept run in
# (`Run.of`): an exception takes no weak reference, and is raised as its own type.
_KEPT = "_batchval_run"


class RunError(BatchvalError):
    """A run a person must act on: `exit_code` is the one `batchval run` would end with (64,
    65, 75 or 77; a defect is raised as it was, never as a RunError), and the message its
    lines on stderr (joined by "; "). `reason` is the stop reason the message begins with
    (`refused`, `input_unusable`, `credentials_refused`, ...), None for a call wrong in
    itself (a setting, a keyword), which the command line reports as a usage error. `run`
    is the run as it stands, when DIR holds one (its problems say which rows, for an input
    refused)."""

    def __init__(
        self, exit_code: int, message: str, run: Run | None = None, reason: str | None = None
    ) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.message = message
        self.run = run
        self.reason = reason


class FolderInUse(RunError):  # noqa: N818 - the name the docs and users catch it by
    """Another call, thread or process holds the folder (`out`) now: nothing was done, and
    the same call later carries on (exit code 75, reason `dir_locked`). Catch it to wait and
    try again, or give each concurrent call a folder of its own."""


@dataclasses.dataclass(frozen=True, slots=True)
class Stop:
    """Why a run did not complete: summary.json's `stop`."""

    reason: str  # a stop reason of docs/reference/exit-codes.md: "daily_limit", "signal", ...
    detail: str
    not_before: dt.datetime | None  # no call before this (the daily limit), when one is known


class Run:
    """A run in a DIR or at a URL, as its last invocation left it (`summary.json`).

    `text` is the summary as the command line prints it ("" for a run opened, or an
    invocation that ended before its summary: another process holding DIR); `messages`
    the lines it prints on stderr after `batchval: ` (the stop, outputs the run's URL
    could not take, where its log was kept)."""

    def __init__(
        self,
        place: str,
        summary: Mapping[str, Any],
        text: str = "",
        messages: tuple[str, ...] = (),
    ) -> None:
        self.place = place
        self.summary: Mapping[str, Any] = summary
        self.text = text
        self.messages = messages
        self._frames: dict[str, pl.DataFrame] = {}  # results() and problems(), read once
        self.scratch: Path | None = None  # `value`'s own folder (no `out`), removed on close

    def __repr__(self) -> str:
        return f"Run({self.place!r}, exit_code={self.exit_code})"

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Forget the frames read (`results()`, `problems()`); the run's files stay, but
        for a run `value` kept in a scratch folder (no `out`), which is removed."""
        self._frames.clear()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the frames it read, and owning no scratch folder (this one
        removes it on close, never a copy)."""
        return {**self.__dict__, "_frames": {}, "scratch": None}

    def _repr_html_(self) -> str:
        """A notebook's view: where the run is, whether it completed, why it stopped, and
        its summary as the command line prints it."""
        from html import escape

        stop = self.stop
        state = (
            "a dry run's price"
            if self.dry_run
            else "complete"
            if self.complete
            else f"stopped: {stop.reason}"
            if stop is not None
            else f"exit {self.exit_code}"
        )
        shown = self.text or "\n".join(self.messages)
        return (
            f"<div><strong>batchval run</strong> in <code>{escape(self.place)}</code>: "
            f"{escape(state)} (exit {self.exit_code})"
            + (f"<pre>{escape(shown)}</pre>" if shown else "")
            + "</div>"
        )

    def __str__(self) -> str:
        return self.text or "\n".join(self.messages) or repr(self)

    @classmethod
    def of(cls, error: BaseException) -> Run | None:
        """The run an error `run`, `value` or `analyse_streets` raised left: a RunError's `run`,
        or the run a defect stopped, kept as the command line's exit 70 keeps it (its
        `messages` the line that names the log with the traceback); None when none."""
        if isinstance(error, RunError):
            return error.run
        kept = getattr(error, _KEPT, None)
        return kept if isinstance(kept, Run) else None

    @property
    def exit_code(self) -> int:
        return int(self.summary.get("exit_code", ExitCode.INTERNAL))

    @property
    def complete(self) -> bool:
        """Every row valued or refused, nothing left to do (exit 0); never a dry run's,
        which values nothing (its exit code is 0 all the same)."""
        return self.exit_code == ExitCode.COMPLETE and not self.dry_run

    @property
    def dry_run(self) -> bool:
        """Whether this is a dry run's price (`dry_run=True`): nothing was sent."""
        return bool(self.summary.get("dry_run"))

    @property
    def price(self) -> Mapping[str, Any] | None:
        """A dry run's price (dry_run.json's `price`: `calls`, `credits`, `cost_gbp`,
        `days_at_daily_limit`, `daily_limit`, `answered`); None for a run."""
        found = self.summary.get("price") if self.dry_run else None
        return found if isinstance(found, Mapping) else None

    @property
    def stop(self) -> Stop | None:
        """Why the run did not complete; None when it did."""
        found = self.summary.get("stop")
        if not isinstance(found, Mapping):
            return None
        info = StopInfo.from_json(found)
        return Stop(info.reason.value, info.detail, info.not_before)

    def results(self) -> pl.DataFrame:
        """results.parquet: a row per input row valued, with its pass-through columns (of a
        `streets` run, street_analysis.parquet: a row per distinct postcode read)."""
        if self.summary.get("command") == "streets":
            from batchval._internal.streets import STREETS_NAME

            return self._frame(STREETS_NAME)
        return self._frame("results.parquet")

    def problems(self) -> pl.DataFrame:
        """problems.parquet: a row per input row not valued, and why."""
        return self._frame("problems.parquet")

    def report(self) -> str:
        """Write report.html beside the run's outputs (published at a URL); its place."""
        from batchval._internal.place import remember, taken
        from batchval._internal.reports import ReportError, write_report

        with _errors(), taken(self.place, os.environ, outputs=True) as place:
            try:
                path = write_report(place.local)
            except ReportError as exc:
                raise RunError(ExitCode.USAGE, place.named(str(exc)), self) from None
            remember(place, [path], "report")
        return place.where(path)

    def export(
        self, format: Literal["csv", "xlsx", "json"], *, nested: str = "flatten"
    ) -> list[str]:
        """Write the results and problems as CSV, an Excel workbook or JSON Lines beside
        them (as `batchval export DIR --format`); the places of the files written."""
        from batchval._internal.exports import Format, Nested, export_dir
        from batchval._internal.place import remember, taken

        with _errors(), taken(self.place, os.environ, outputs=True) as place:
            done = export_dir(place.local, Format(format), nested=Nested(nested))
            written = [file.path for file in done.files]
            remember(place, written, "export")
        return [place.where(path) for path in written]

    def _frame(self, name: str) -> pl.DataFrame:
        """The file `name` of the run as a frame, read once (`close` forgets it)."""
        if name not in self._frames:
            self._frames[name] = self._read(name)
        return self._frames[name]

    def _read(self, name: str) -> pl.DataFrame:
        if self.dry_run and name != "problems.parquet":
            raise RunError(
                ExitCode.USAGE,
                f"a dry run values nothing: {self.place} holds its price (`price`) and its "
                "problems; call again without dry_run=True for results",
                self,
            )
        if self.dry_run:  # its problems are in their own file
            name = str(self.summary.get("problems_file") or name)
        with _viewed(self.place) as local:
            path = local / name
            if not path.exists():
                raise RunError(ExitCode.USAGE, f"{self.place} holds no {name}", self)
            return pl.read_parquet(path)


def run(
    input: Where,
    *,
    out: Where,
    settings: Settings | None = None,
    config: Where | None = None,
    progress: bool = True,
    dry_run: bool = False,
    run_id: str | None = None,
    accept_changes: bool = False,
    metrics_file: Where | None = None,
    sheet: str | None = None,
    encoding: str | None = None,
    header_row: int | None = None,
) -> Run:
    """Value every row of `input` (CSV, Parquet or an Excel workbook; a path or an s3://
    URL) into `out` (a DIR or a URL): `batchval run INPUT --out DIR`, with `settings` as
    its config's and options' (`Settings`) and each keyword as the option of its name. The
    same call again resumes, and never pays twice."""
    options = _options(
        dry_run=dry_run,
        run_id=run_id,
        accept_changes=accept_changes,
        metrics_file=metrics_file,
        sheet=sheet,
        encoding=encoding,
        header_row=header_row,
    )
    return _invoke("run", str(input), str(out), config, progress, settings, options)


def value(
    frame: Any,
    *,
    out: Where | None = None,
    settings: Settings | None = None,
    config: Where | None = None,
    progress: bool = True,
    input_name: str = FRAME_NAME,
    dry_run: bool = False,
    run_id: str | None = None,
    accept_changes: bool = False,
    metrics_file: Where | None = None,
) -> Run:
    """Value every row of `frame` (a polars DataFrame, or a pandas one when pandas is
    installed) as a file with the same columns would be. Its content is the input's
    fingerprint: the same frame again resumes, a changed one is refused as a changed file
    is. summary.json and the manifest name it `<frame>` unless `input_name` says.

    Without `out` (one property, or a few), the run is kept in a scratch folder of its
    own (its owner's only), its `Run.place`, removed when the `Run` is closed (`close()`,
    or the end of `with batchval.value(...) as run:`); nothing resumes it then."""
    data = _polars(frame)
    options = _options(
        dry_run=dry_run,
        run_id=run_id,
        accept_changes=accept_changes,
        metrics_file=metrics_file,
        input_name=input_name,
    )
    scratch = None if out is not None else tempfile.mkdtemp(prefix="batchval-value-")
    with tempfile.TemporaryDirectory(prefix="batchval-frame-") as folder:
        path = Path(folder) / "frame.parquet"
        data.write_parquet(path, statistics=False)
        try:
            place = str(out or scratch)
            found = _invoke("run", str(path), place, config, progress, settings, options)
        except RunError as exc:  # the frame by its name, never the file it was written to
            said = exc.message.replace(str(path), input_name)
            if scratch is not None:  # the run's folder goes with its run, or now
                if exc.run is None:
                    shutil.rmtree(scratch, ignore_errors=True)
                else:
                    exc.run.scratch = Path(scratch)
            raise type(exc)(exc.exit_code, said, exc.run, exc.reason) from None
    if scratch is not None:
        found.scratch = Path(scratch)
    return found


async def arun(
    input: Where,
    *,
    out: Where,
    settings: Settings | None = None,
    config: Where | None = None,
    progress: bool = False,
    dry_run: bool = False,
    run_id: str | None = None,
    accept_changes: bool = False,
    metrics_file: Where | None = None,
    sheet: str | None = None,
    encoding: str | None = None,
    header_row: int | None = None,
) -> Run:
    """`run` from async code: the run works in a thread of its own while the caller's
    event loop goes on. A cancel of the awaiting task stops the run as a SIGINT would
    (every answer kept, nothing paid twice: the same call again resumes), waits for it to
    stop, and raises `CancelledError`."""
    call = functools.partial(
        run,
        input,
        out=out,
        settings=settings,
        config=config,
        progress=progress,
        dry_run=dry_run,
        run_id=run_id,
        accept_changes=accept_changes,
        metrics_file=metrics_file,
        sheet=sheet,
        encoding=encoding,
        header_row=header_row,
    )
    return await _off_the_loop(call)


async def avalue(
    frame: Any,
    *,
    out: Where | None = None,
    settings: Settings | None = None,
    config: Where | None = None,
    progress: bool = False,
    input_name: str = FRAME_NAME,
    dry_run: bool = False,
    run_id: str | None = None,
    accept_changes: bool = False,
    metrics_file: Where | None = None,
) -> Run:
    """`value` from async code, as `arun` is `run`'s."""
    call = functools.partial(
        value,
        frame,
        out=out,
        settings=settings,
        config=config,
        progress=progress,
        input_name=input_name,
        dry_run=dry_run,
        run_id=run_id,
        accept_changes=accept_changes,
        metrics_file=metrics_file,
    )
    return await _off_the_loop(call)


async def _off_the_loop(call: Callable[[], Run]) -> Run:
    """`call` in a worker thread; a cancel meanwhile noted on its invocation as a signal
    (`place/invocation.STOP_REQUESTS`), waited for, then raised."""
    from batchval._internal.place import STOP_REQUESTS, StopRequests

    waiting = StopRequests()
    context = contextvars.copy_context()
    context.run(STOP_REQUESTS.set, waiting)
    done = asyncio.get_running_loop().run_in_executor(None, context.run, call)
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        waiting.stop("a cancel of its task")  # however far the invocation has got
        while not done.done():  # the run stops at its next safe point
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([done])
        if not done.cancelled():
            done.exception()  # seen: the cancel is what the caller gets
        raise


def analyse_streets(
    input: Where,
    *,
    out: Where,
    settings: Settings | None = None,
    config: Where | None = None,
    progress: bool = True,
    dry_run: bool = False,
    refresh: bool = False,
    join: bool = False,
    sheet: str | None = None,
    encoding: str | None = None,
    header_row: int | None = None,
) -> Run:
    """The street analysis of every distinct postcode of `input` (a path or an s3:// URL)
    into `out` (a DIR or a URL): `batchval streets INPUT --out DIR`, with `refresh` and
    `join` as its `--refresh` and `--join`. A postcode read in the last 30 days is not
    paid for again; the same call again resumes. (Not `batchval._internal.streets`: that name is
    the package's `streets` folder, which importing it sets on `batchval`.)"""
    options = _options(
        dry_run=dry_run,
        refresh=refresh,
        join=join,
        sheet=sheet,
        encoding=encoding,
        header_row=header_row,
    )
    return _invoke("streets", str(input), str(out), config, progress, settings, options)


def _options(**given: Any) -> dict[str, Any]:
    """A command's options as `_start` reads them: those given (not None), paths as text."""
    return {k: os.fspath(v) if isinstance(v, os.PathLike) else v for k, v in given.items()}


def open_run(place: str | os.PathLike[str]) -> Run:
    """The run in `place` (a DIR or a URL) as its last invocation left it; read only."""
    where = str(place)
    with _viewed(where) as local:
        path = local / "summary.json"
        if not path.exists():
            raise RunError(ExitCode.USAGE, f"{where} holds no batchval run (no summary.json)")
        summary = json.loads(path.read_text(encoding="utf-8"))
    return Run(where, summary)


# --- one invocation ---------------------------------------------------------------------


class _Summary(Protocol):
    """What `run` and `streets` (and their dry runs) return: summary.json and its text."""

    @property
    def exit_code(self) -> ExitCode: ...
    @property
    def stop(self) -> StopInfo | None: ...
    def to_json(self) -> dict[str, Any]: ...
    def render(self) -> str: ...


def _invoke(
    command: Literal["run", "streets"],
    input_path: str,
    out: str,
    config: Where | None,
    progress: bool,
    given: Settings | None,
    options: Mapping[str, Any],
) -> Run:
    """One invocation of `command`, as the command line's: a Run, a RunError, or a defect
    raised as it was (carrying its kept run, `Run.of`)."""
    from batchval._internal.place import input_of, is_url, last_defect, modes, taken

    if given is not None and not isinstance(given, Settings):
        raise TypeError(f"settings= takes a batchval.Settings, not {type(given).__name__}")
    logs.configure_library()
    settings = _settings(config, options, given or Settings())
    dry_run = bool(options.get("dry_run", False))
    if dry_run and is_url(out):
        raise RunError(
            ExitCode.USAGE, "--dry-run sends nothing and keeps nothing: give it a local --out DIR"
        )
    env = settings.storage.env(os.environ)
    name = str(options.get("input_name") or input_path)
    last_defect.set(None)
    try:
        # A refusal names the URL, not the directory this invocation copied the run into.
        with (
            modes(settings.output_mode),  # who may read what the run writes
            input_of(input_path, env) as source,
            taken(out, env, summarised=True) as place,
            place.naming(),
        ):
            summary = _start(command, source, name, place, settings, options, progress)
    except RunRefusedError as exc:
        line = redaction.scrub(str(exc))
        if (defect := last_defect.get()) is not None:  # no summary: the line names the log
            kept = Run(out, _stopped(exc), messages=(line,))
            raise _keeping(_leaf(defect), kept) from None
        if exc.reason is StopReason.DIR_LOCKED:  # nothing done: the same call later resumes
            raise FolderInUse(exc.exit_code, line, reason=exc.reason.value) from None
        raise RunError(exc.exit_code, line, reason=exc.reason.value) from None
    code, said = place.left(int(summary.exit_code))
    stop = summary.stop
    messages = (*([stop.line()] if stop is not None else []), *said)
    found = Run(out, summary.to_json(), summary.render(), messages)
    if (defect := last_defect.get()) is not None:
        raise _keeping(_leaf(defect), found)  # kept what it did, as the command line's 70
    if place.unpublished is None and code in (ExitCode.COMPLETE, ExitCode.RESUMABLE):
        return found
    # The outputs are not where the run is, or a person's stop (a dry run's included).
    why = stop or place.unpublished or StopInfo(StopReason.INTERNAL_ERROR, "")
    raise RunError(code, "; ".join(messages), found, why.reason.value)


def _start(
    command: Literal["run", "streets"],
    source: Path,
    name: str,
    place: Place,
    settings: Loaded,
    options: Mapping[str, Any],
    progress: bool,
) -> _Summary:
    """The command's product on the engine, run once in `place`."""
    from batchval._internal.sandbox import embedded_api

    dry_run = bool(options.get("dry_run", False))
    if command == "streets":
        from batchval._internal.streets import Streets, StreetsRequest

        streets_request = StreetsRequest(
            input_path=source,
            input_name=name,
            place=place,
            settings=settings,
            refresh=bool(options.get("refresh", False)),
            join=bool(options.get("join", False)),
            dry_run=dry_run,
            progress_bar=progress,
        )
        return Streets(streets_request, embedded_api=embedded_api).run()
    from batchval._internal.valuations import Runner, RunRequest

    metrics_file = options.get("metrics_file")
    request = RunRequest(
        input_path=source,
        input_name=name,
        place=place,
        settings=settings,
        run_id=options.get("run_id"),
        dry_run=dry_run,
        accept_changes=bool(options.get("accept_changes", False)),
        progress_bar=progress,
        metrics_file=None if metrics_file is None else Path(metrics_file),
    )
    return Runner(request, embedded_api=embedded_api).run()


def _stopped(exc: RunRefusedError) -> dict[str, Any]:
    """The summary of an invocation refused before its run: its exit code and stop."""
    return {"exit_code": int(exc.exit_code), "stop": StopInfo(exc.reason, exc.detail).to_json()}


def _keeping(defect: BaseException, kept: Run) -> BaseException:
    """The defect as raised, carrying the run it stopped (`Run.of`) and, as a note under
    its traceback, the line the command line prints."""
    with contextlib.suppress(AttributeError):  # an exception with no __dict__ keeps none
        setattr(defect, _KEPT, kept)
    defect.add_note(f"batchval: the run in {kept.place} is kept: {'; '.join(kept.messages)}")
    return defect


def _settings(config: Where | None, options: Mapping[str, Any], given: Settings) -> Loaded:
    """The settings as the command line's, with the client secret given to the redactor
    before anything can print it; a bad setting is a RunError (64) with no reason."""
    from batchval._internal.settings import load_settings

    sections = given.by_section()
    try:
        settings = load_settings(
            None if config is None else Path(config),
            os.environ,
            encoding=options.get("encoding"),
            sheet=options.get("sheet"),
            header_row=options.get("header_row"),
            book=sections["book"],
            run_settings=sections["run"],
            index=sections["index"],
            book_order=sections["order"],
        )
    except SettingsError as exc:
        raise RunError(ExitCode.USAGE, str(exc)) from None
    for secret, user in settings.secrets(os.environ):
        redaction.hide(secret, user=user)
    return settings


def _leaf(defect: BaseException) -> BaseException:
    """The defect as its code raised it, out of the task groups it went up through (each
    wraps what its tasks raised in an ExceptionGroup)."""
    while isinstance(defect, BaseExceptionGroup) and len(defect.exceptions) == 1:
        defect = defect.exceptions[0]
    return defect


def _polars(frame: Any) -> pl.DataFrame:
    if isinstance(frame, pl.DataFrame):
        return frame
    if type(frame).__module__.split(".")[0] == "pandas":
        return pl.from_pandas(frame)
    raise RunError(
        ExitCode.USAGE,
        f"batchval.value takes a polars or pandas DataFrame, not {type(frame).__name__}",
    )


@contextlib.contextmanager
def _errors() -> Iterator[None]:
    """A refusal of the place (no run there, the store's fault) as a RunError."""
    try:
        yield
    except RunRefusedError as exc:
        raise RunError(exc.exit_code, redaction.scrub(str(exc))) from None


@contextlib.contextmanager
def _viewed(place: str) -> Iterator[Path]:
    """The run's files, read only: the DIR itself, or a copy of what is at its URL."""
    from batchval._internal.place import viewed

    with _errors(), viewed(place, os.environ) as found:
        yield found.local
