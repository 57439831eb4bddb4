"""batchval from Python: the run the command line makes, with the same guarantees.

    import batchval

    run = batchval.run("book.csv", out="runs/nightly", concurrency=8)
    run = batchval.value(frame, out="runs/notebook")      # a polars (or pandas) frame
    run = batchval.open_run("s3://bucket/runs/nightly")   # read only
    run.complete, run.stop, run.summary, run.results(), run.problems()

Each call is one invocation of `batchval run`: the same keys, checkpoint, resume, outputs
and exit codes (docs/how-to/python.md). Settings are keywords named as the config's `run`
section names them (`concurrency=`, `include=`, `max_credits=`, `wait_for_midnight=`,
`book=`, ...), with `run_id=`, `dry_run=`, `accept_changes=`, `metrics_file=`, `sheet=`,
`encoding=` and `header_row=` as the command line's options. A run that completes, or
stops to be resumed (75), is a `Run`; one a person must act on raises a `RunError`
carrying the exit code and the line the command line prints (64 usage or settings, 65 the
input, 77 the account);
a defect (70) is raised as it was, once the run has kept what it did.

It works from plain Python, inside a running event loop (a notebook cell, an `async def`
under `asyncio.run`: the run's own loop then works in a thread of its own while the call
waits) and from a worker thread (no signal handlers there: the host stops a run its own
way). Ctrl-C, or a notebook's interrupt, stops a run as the command line's SIGINT does: the
answers so far are kept, and the `Run` says `signal` (75). It never configures the host's
logging (`logs.configure_library`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import polars as pl

from batchval import logs, redaction
from batchval.outcome import BatchvalError, ExitCode, RunRefusedError, SettingsError, StopInfo

if TYPE_CHECKING:
    from batchval.engine.place import Place
    from batchval.settings import Settings

# What summary.json and the manifest call the input of `value`, unless `input_name=` says.
FRAME_NAME = "<frame>"
# The keywords that are the command line's options rather than the config's run settings.
_OPTIONS = frozenset(
    {
        *("run_id", "dry_run", "accept_changes", "metrics_file"),
        *("sheet", "encoding", "header_row", "input_name"),
    }
)


class RunError(BatchvalError):
    """A run a person must act on: `exit_code` is the one `batchval run` would end with (64,
    65 or 77; a defect is raised as it was, never as a RunError),
    and the message its line on stderr. `run` is the run as it stands, when DIR holds one
    (its problems say which rows, for an input refused)."""

    def __init__(self, exit_code: int, message: str, run: Run | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.message = message
        self.run = run


@dataclasses.dataclass(frozen=True, slots=True)
class Stop:
    """Why a run did not complete: summary.json's `stop`."""

    reason: str  # a stop reason of docs/reference/exit-codes.md: "daily_limit", "signal", ...
    detail: str
    not_before: dt.datetime | None  # no call before this (the daily limit), when one is known


class Run:
    """A run in a DIR or at a URL, as its last invocation left it (`summary.json`)."""

    def __init__(self, place: str, summary: Mapping[str, Any], text: str = "") -> None:
        self.place = place
        self.summary: Mapping[str, Any] = summary
        self._text = text

    def __repr__(self) -> str:
        return f"Run({self.place!r}, exit_code={self.exit_code})"

    def __str__(self) -> str:
        return self._text or repr(self)

    @property
    def exit_code(self) -> int:
        return int(self.summary.get("exit_code", ExitCode.INTERNAL))

    @property
    def complete(self) -> bool:
        """Every row valued or refused, nothing left to do (exit 0)."""
        return self.exit_code == ExitCode.COMPLETE

    @property
    def stop(self) -> Stop | None:
        """Why the run did not complete; None when it did."""
        found = self.summary.get("stop")
        if not isinstance(found, Mapping):
            return None
        info = StopInfo.from_json(found)
        return Stop(info.reason.value, info.detail, info.not_before)

    def results(self) -> pl.DataFrame:
        """results.parquet: a row per input row valued, with its pass-through columns."""
        return self._frame("results.parquet")

    def problems(self) -> pl.DataFrame:
        """problems.parquet: a row per input row not valued, and why."""
        return self._frame("problems.parquet")

    def report(self) -> str:
        """Write report.html beside the run's outputs (published at a URL); its place."""
        from batchval.engine.derived import remember
        from batchval.engine.place import place_of
        from batchval.tools.report import ReportError, write_report

        with _errors(), place_of(self.place, os.environ, outputs=True) as place:
            try:
                path = write_report(place.local)
            except ReportError as exc:
                raise RunError(ExitCode.USAGE, _named(str(exc), place), self) from None
            remember(place, [path], "report")
        return _there(path, place)

    def export(
        self, format: Literal["csv", "xlsx", "json"], *, nested: str = "flatten"
    ) -> list[str]:
        """Write the results and problems as CSV, an Excel workbook or JSON Lines beside
        them (as `batchval export DIR --format`); the places of the files written."""
        from batchval.engine.derived import remember
        from batchval.engine.place import place_of
        from batchval.tools.export import Format, Nested, export_dir

        with _errors(), place_of(self.place, os.environ, outputs=True) as place:
            done = export_dir(place.local, Format(format), nested=Nested(nested))
            written = [file.path for file in done.files]
            remember(place, written, "export")
        return [_there(path, place) for path in written]

    def _frame(self, name: str) -> pl.DataFrame:
        with _viewed(self.place) as local:
            path = local / name
            if not path.exists():
                raise RunError(ExitCode.USAGE, f"{self.place} holds no {name}", self)
            return pl.read_parquet(path)


def run(
    input: str | os.PathLike[str],
    *,
    out: str | os.PathLike[str],
    config: str | os.PathLike[str] | None = None,
    progress: bool = True,
    **settings: Any,
) -> Run:
    """Value every row of `input` (CSV, Parquet or an Excel workbook; a path or an s3://
    URL) into `out` (a DIR or a URL): `batchval run INPUT --out DIR`. The same call again
    resumes, and never pays twice."""
    return _invoke(str(input), str(out), config, progress, settings)


def value(
    frame: Any,
    *,
    out: str | os.PathLike[str],
    config: str | os.PathLike[str] | None = None,
    progress: bool = True,
    **settings: Any,
) -> Run:
    """Value every row of `frame` (a polars DataFrame, or a pandas one when pandas is
    installed) as a file with the same columns would be. Its content is the input's
    fingerprint: the same frame again resumes, a changed one is refused as a changed file
    is. summary.json and the manifest name it `<frame>` unless `input_name=` says."""
    data = _polars(frame)
    name = str(settings.pop("input_name", FRAME_NAME))
    with tempfile.TemporaryDirectory(prefix="batchval-frame-") as folder:
        path = Path(folder) / "frame.parquet"
        data.write_parquet(path, statistics=False)
        try:
            return _invoke(str(path), str(out), config, progress, {**settings, "input_name": name})
        except RunError as exc:  # the frame by its name, never the file it was written to
            said = exc.message.replace(str(path), name)
            raise RunError(exc.exit_code, said, exc.run) from None


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


def _invoke(
    input_path: str,
    out: str,
    config: str | os.PathLike[str] | None,
    progress: bool,
    given: Mapping[str, Any],
) -> Run:
    from batchval.engine.invocation import last_defect
    from batchval.engine.place import input_of, is_url, place_of
    from batchval.sandbox.embedded import embedded_api
    from batchval.valuations.runner import Runner, RunRequest

    options = {k: v for k, v in given.items() if k in _OPTIONS}
    run_settings = {k: v for k, v in given.items() if k not in _OPTIONS}
    logs.configure_library()
    settings = _settings(config, options, run_settings)
    dry_run = bool(options.get("dry_run", False))
    if dry_run and is_url(out):
        raise RunError(
            ExitCode.USAGE, "dry_run sends nothing and keeps nothing: give it a local out"
        )
    env = settings.storage.env(os.environ)
    last_defect.set(None)
    try:
        with input_of(input_path, env) as source, place_of(out, env, summarised=True) as place:
            request = RunRequest(
                input_path=source,
                input_name=str(options.get("input_name") or input_path),
                out_dir=place.local,
                settings=settings,
                run_id=options.get("run_id"),
                dry_run=dry_run,
                accept_changes=bool(options.get("accept_changes", False)),
                progress_bar=progress,
                metrics_file=None
                if options.get("metrics_file") is None
                else Path(options["metrics_file"]),
                place=place,
            )
            summary = Runner(request, embedded_api=embedded_api).run()
    except RunRefusedError as exc:
        if (defect := last_defect.get()) is not None:
            raise _leaf(defect) from None  # as raised (its traceback also in the run's log)
        if exc.exit_code == ExitCode.RESUMABLE:  # nothing sent: the same call resumes
            stop = StopInfo(exc.reason, exc.detail)
            return Run(out, {"exit_code": int(exc.exit_code), "stop": stop.to_json()}, str(exc))
        raise RunError(exc.exit_code, redaction.scrub(str(exc))) from None
    if (defect := last_defect.get()) is not None:
        raise _leaf(defect)  # the run kept what it did, as the command line's exit 70 does
    found = Run(out, summary.to_json(), summary.render())
    line = summary.stop.line() if summary.stop is not None else ""
    if place.unpublished is not None:  # the outputs are not where the run is: a person's
        code, said = place.left(int(summary.exit_code))
        raise RunError(code, "; ".join(filter(None, [line, *said])), found)
    if summary.exit_code in (ExitCode.COMPLETE, ExitCode.RESUMABLE):
        return found
    raise RunError(int(summary.exit_code), line, found)


def _settings(
    config: str | os.PathLike[str] | None,
    options: Mapping[str, Any],
    run_settings: Mapping[str, Any],
) -> Settings:
    """The settings as the command line's, with the client secret given to the redactor
    before anything can print it; a bad setting is a RunError (64)."""
    from batchval.settings import RUN_KEYS, load_settings

    unknown = sorted(set(run_settings) - {key.name for key in RUN_KEYS})
    if unknown:
        known = sorted({key.name for key in RUN_KEYS} | _OPTIONS)
        raise RunError(
            ExitCode.USAGE,
            f"unknown setting(s): {', '.join(unknown)}; batchval takes {', '.join(known)}",
        )
    try:
        settings = load_settings(
            None if config is None else Path(config),
            os.environ,
            encoding=options.get("encoding"),
            sheet=options.get("sheet"),
            header_row=options.get("header_row"),
            run_settings=run_settings,
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
    from batchval.engine.place import viewed

    with _errors(), viewed(place, os.environ) as (local, _objects):
        yield local


def _there(path: Path, place: Place) -> str:
    """Where a file written in the place's local directory is for its user."""
    return f"{place.url.rstrip('/')}/{path.name}" if place.url else str(path)


def _named(text: str, place: Place) -> str:
    return text.replace(str(place.local), place.url) if place.url else text
