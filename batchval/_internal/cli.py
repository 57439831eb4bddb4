"""The `batchval` command line: parse, build settings, call, map to an exit code.

Exit codes are a contract with schedulers (outcome.py): 0 complete, 75 resumable,
77 account, 65 input, 64 command line or config, 70 internal error. Whenever a run
does not complete, one line on stderr says why (`batchval: <reason>: <detail>`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

import batchval
from batchval._internal import logs, redaction
from batchval._internal.money import live_option
from batchval._internal.outcome import ExitCode, RunRefusedError, SettingsError
from batchval._internal.place import defect_line
from batchval._internal.sandbox import FaultsApart, sandbox_options
from batchval._internal.valuations import book_options

if TYPE_CHECKING:
    from batchval._internal.admin import Chosen, Proposal
    from batchval._internal.exports import Export
    from batchval._internal.settings import Settings


F = TypeVar("F", bound=Callable[..., Any])

# The options several commands take, declared once (each command says what they mean
# for it).


def config_option(meaning: str) -> Callable[[F], F]:
    return click.option(
        "--config",
        "config_file",
        type=click.Path(dir_okay=False, path_type=Path),
        metavar="FILE",
        help=meaning,
    )


def out_option(
    meaning: str, *, name: str = "out_dir", required: bool = True, url: bool = False
) -> Callable[[F], F]:
    """`url`: the place may be a URL (`s3://bucket/prefix`, `az://...`), passed on as text."""
    kind: click.ParamType[Any] = click.Path(path_type=Path)
    if url:
        kind = click.STRING
    elif not required:
        kind = click.Path(file_okay=False, path_type=Path)
    metavar = "DIR|URL" if url else "DIR"
    return click.option("--out", name, required=required, type=kind, metavar=metavar, help=meaning)


def concurrency_option(what: str) -> Callable[[F], F]:
    return click.option(
        "--concurrency",
        type=click.IntRange(1, 256),
        metavar="N",
        help=f"Most {what} in flight [8].",
    )


def input_reading_options(f: F) -> F:
    """--sheet, --encoding and --header-row, for the commands that read INPUT: over the
    config's `input.sheet`, `input.encoding` and `input.header_row`."""
    f = click.option(
        "--header-row",
        type=click.IntRange(1),
        metavar="N",
        help="The line of a CSV or sheet that holds the header [found below any title].",
    )(f)
    f = click.option(
        "--encoding",
        metavar="NAME",
        help="A CSV's encoding (utf-8, cp1252, latin-1, ...) [found: UTF-8, else cp1252].",
    )(f)
    return click.option(
        "--sheet", metavar="NAME", help="An Excel workbook's sheet to read [the first]."
    )(f)


def sending_options(directory: str) -> Callable[[F], F]:
    """INPUT, --out (`directory` says what DIR is), --config and the input's reading options:
    the front door of a command that reads an input into DIR and sends (`run`, `streets`)."""

    def declared(f: F) -> F:
        f = input_reading_options(f)
        f = config_option("YAML config: api, input mapping, run settings.")(f)
        f = out_option(
            f"{directory}: outputs and checkpoint. Same DIR again resumes. Or an "
            "s3:// or az:// URL that keeps the run, for machines that come and go.",
            url=True,
        )(f)
        return click.argument("input_path", metavar="INPUT")(f)

    return declared


MAX_CREDITS = click.option(
    "--max-credits", type=click.IntRange(0), metavar="N", help="Spend at most N credits this call."
)
DRY_RUN = click.option("--dry-run", is_flag=True, help="Validate and price; no network.")


def _logging(log_json: bool = False) -> bool:
    """Logging configured once, at the entry point; whether log lines are JSON (then there
    is no progress bar)."""
    json_lines = logs.json_wanted(os.environ, log_json)
    logs.configure(json_lines=json_lines)  # the redactor `cli` made, the env's secrets known
    return json_lines


def _configured(config_file: Path | None, **options: Any) -> tuple[Settings, bool]:
    """Logging configured, then the settings (a bad config is a usage error, 64), with the
    client secret given to the redactor before anything can print it. Returns them and
    whether log lines are JSON."""
    from batchval._internal.settings import load_settings

    json_lines = _logging()
    try:
        settings = load_settings(config_file, os.environ, **options)
    except SettingsError as exc:
        raise click.UsageError(str(exc)) from None
    for secret, user in settings.secrets(os.environ):
        redaction.hide(secret, user=user)
    return settings, json_lines


def _sent(call: Callable[[], batchval.Run]) -> NoReturn:
    """A command that sends (`run`, `streets`), as a client of the Python API: the run's
    summary on stdout, its lines on stderr, its exit code. A call wrong in itself (a
    setting) is a usage error (64); a defect a run kept is said as its line (70)."""
    found: batchval.Run | None
    try:
        found = call()
        code = found.exit_code
    except batchval.RunError as exc:
        if exc.reason is None:
            raise click.UsageError(exc.message) from None
        found, code = exc.run, exc.exit_code
        if found is None:  # ended before its run: one line
            click.echo(f"batchval: {exc.message}", err=True)
    except Exception as exc:
        found = batchval.Run.of(exc)
        if found is None:  # met before any DIR's log: `main` says it
            raise
        code = found.exit_code
    if found is not None:
        if found.text:
            click.echo(found.text)
        for line in found.messages:  # the stop (a dry run's too), what the place left
            click.echo(f"batchval: {line}", err=True)
    raise SystemExit(int(code))


@contextlib.contextmanager
def _refusals() -> Iterator[None]:
    """An invocation that ends before sending: one line, its own exit code."""
    try:
        yield
    except RunRefusedError as exc:
        click.echo(f"batchval: {exc}", err=True)
        raise SystemExit(int(exc.exit_code)) from None


# --- help a newcomer reads (issue 33) ---------------------------------------------------

# The order `batchval --help` lists the commands in; one it does not name comes after them.
COMMAND_ORDER = (
    # A user's way: a config proposed for their file, a free preflight, the run, where it
    # stands, what it made.
    *("init", "check", "run", "status", "report", "export"),
    *("verify", "streets", "split", "sandbox"),  # the other products, then the tools
)


def _in_order(name: str) -> tuple[int, str]:
    return (COMMAND_ORDER.index(name) if name in COMMAND_ORDER else len(COMMAND_ORDER), name)


class InOrder(click.Group):
    """A group that lists its commands in COMMAND_ORDER, not alphabetically (the reference
    page, drawn by mkdocs-click, sorts them by name whatever the group says)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.commands, key=_in_order)


@click.group(cls=InOrder, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="batchval")
def cli() -> None:
    """Bulk valuations through the Partner Valuation API, never paid twice.

    Start with `batchval init INPUT`: it proposes a config and the next step.

    INPUT is a CSV, Parquet or Excel file; DIR is a run's folder. Either may be a URL (s3://, az://).
    """
    from batchval._internal.place import modes
    from batchval._internal.settings import env_output_mode, env_redactor

    # Every command, whatever it reads: the environment's secrets known, every line it
    # prints scrubbed (issue 35), every file and folder it makes at the environment's
    # `BATCHVAL_OUTPUT_MODE` (a command with a config takes the config's too).
    redaction.use(env_redactor(os.environ))
    context = click.get_current_context()
    context.with_resource(redaction.scrubbed_output())
    try:
        context.with_resource(modes(env_output_mode(os.environ)))
    except SettingsError as exc:
        raise click.UsageError(str(exc)) from None


@cli.command(
    cls=FaultsApart, short_help="Serve a local fake of the Partner API, for trials and tests."
)
@sandbox_options
def sandbox(
    host: str,
    allow_remote: bool,
    port: int,
    config_file: Path | None,
    token_ttl: int | None,
    rate: float | None,
    burst: int | None,
    no_rate_limit: bool,
    daily_limit: int | None,
    request_timeout: float | None,
    latency_ms: float | None,
    jitter_ms: float | None,
    fail_503: float | None,
    fail_504_after_commit: float | None,
    drop_after_commit: float | None,
    malformed: float | None,
    slow: float | None,
    revoke_tokens: float | None,
    storm: float | None,
    storm_retry_after: int | None,
    seed: int | None,
    figures_month: str | None,
    stamp_precision: str | None,
    rehearsal: bool,
) -> None:
    """Serve a local fake of the Partner API (prints one JSON line once listening)."""
    # Imported here: the sandbox's server libraries are not needed by the other commands.
    from batchval._internal.sandbox import (
        ConfigError,
        SandboxConfig,
        figures_moment,
        is_loopback,
        load_config,
        serve_forever,
    )

    if not allow_remote and not is_loopback(host):
        raise click.UsageError(
            f"--host {host} is not a loopback address: anyone who reaches it could use the "
            "sandbox's /_sandbox controls (its clock, faults, accounts), which take no "
            "credentials; give --allow-remote to mean it"
        )
    try:
        config = load_config(config_file) if config_file else SandboxConfig()
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    if token_ttl is not None:
        config.token_ttl_seconds = token_ttl
    if no_rate_limit:
        config.rate_limit = None
    elif config.rate_limit is not None:
        if rate is not None:
            config.rate_limit.rate_per_second = rate
        if burst is not None:
            config.rate_limit.burst = burst
    if daily_limit is not None:
        for account in config.accounts:
            account.daily_limit = daily_limit
    if request_timeout is not None:
        config.request_timeout_seconds = request_timeout
    if seed is not None:
        config.seed = seed
    if figures_month is not None:
        try:
            figures_moment(figures_month)
        except ConfigError as exc:
            raise click.UsageError(f"--figures-month: {exc}") from None
        config.figures_month = figures_month
    if stamp_precision is not None:
        config.stamp_precision = stamp_precision
    if rehearsal:
        config.rehearsal = True
    overrides: dict[str, Any] = {
        "latency_ms": latency_ms,
        "latency_jitter_ms": jitter_ms,
        "error_503_share": fail_503,
        "timeout_504_after_commit_share": fail_504_after_commit,
        "drop_after_commit_share": drop_after_commit,
        "malformed_share": malformed,
        "slow_share": slow,
        "revoke_token_share": revoke_tokens,
        "rate_limit_storm_share": storm,
        "storm_retry_after_seconds": storm_retry_after,
    }
    config.faults = dataclasses.replace(
        config.faults, **{k: v for k, v in overrides.items() if v is not None}
    )
    serve_forever(config, host, port)


@cli.command(short_help="Value every row of INPUT into DIR; the same command resumes.")
@sending_options("The run's directory")
@click.option(
    "--run-id",
    metavar="ID",
    help="Name the run (default: the UTC day, day-YYYY-MM-DD; kept in the checkpoint).",
)
@concurrency_option("requests")
@click.option(
    "--include",
    metavar="EXTRAS",
    help="Extras for every valuation, comma-separated: commentary,rebuildCost.",
)
@MAX_CREDITS
@DRY_RUN
@click.option(
    "--accept-changes",
    is_flag=True,
    help="Carry on a run in DIR although its input or request settings changed.",
)
@click.option(
    "--wait-for-midnight",
    is_flag=True,
    help="At the daily limit, wait for midnight UTC instead of exiting 75.",
)
@click.option(
    "--log-json",
    is_flag=True,
    help="JSON log lines on stderr even on a terminal (no bar); also BATCHVAL_LOG_JSON=1.",
)
@click.option(
    "--metrics-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Prometheus text for node_exporter's textfile collector (every run.metrics_seconds).",
)
@book_options
@click.option(
    "--book-order",
    type=click.Choice(["risk", "staleness"]),
    help="The order a --book night values its loans in [config book.order].",
)
@click.option(
    "--index-source",
    type=click.Choice(["none", "ukhpi", "api"]),
    help="Roll every loan forward by a house price index: ukhpi (a file) or api (read "
    "from street analyses, held in the --book) [config index.source].",
)
@click.option("--index-file", metavar="FILE|URL", help="The UK HPI full file (CSV) [index.file].")
@click.option(
    "--index-sha256",
    metavar="HEX",
    help="The index file's sha256, checked; needed for an https:// URL [index.sha256].",
)
@click.option(
    "--index-postcodes",
    metavar="FILE|URL",
    help="A postcode directory giving each postcode's local authority [index.postcodes].",
)
@click.option(
    "--index-postcodes-sha256",
    metavar="HEX",
    help="The postcode directory's sha256, as --index-sha256 [index.postcodes_sha256].",
)
@live_option
def run(
    input_path: str, out_dir: str, config_file: Path | None, log_json: bool, **options: Any
) -> None:
    """Value every row of INPUT (CSV, Parquet or an Excel workbook; a path or an s3:// or az:// URL)
    into DIR; exit 0, 75, 77, 65, 64 or 70."""
    given = _given(out_dir, config_file, log_json, options)
    _sent(lambda: batchval.run(input_path, **given))


def _given(
    out_dir: str, config_file: Path | None, log_json: bool, options: dict[str, Any]
) -> dict[str, Any]:
    """The keywords of a command that sends (`run`, `streets`) for its public function,
    once logging is configured: the place, the config, the bar unless log lines are JSON,
    the `batchval.Settings` its options give (each by its setting's name) and its own
    options (click's names are the Python API's): one left out (None) or a flag not set
    takes the config's value."""
    json_lines = _logging(log_json)
    given = {k: v for k, v in options.items() if v is not None and v is not False}
    named = {field.name for field in dataclasses.fields(batchval.Settings)}
    settings = batchval.Settings(**{k: v for k, v in given.items() if k in named})
    return {
        "out": out_dir,
        "config": config_file,
        "progress": not json_lines,
        "settings": settings,
        **{k: v for k, v in given.items() if k not in named},
    }


@cli.command(short_help="Say where the run in DIR stands and what to do next.")
@click.argument("out_dir", metavar="DIR")
@click.option("--json", "as_json", is_flag=True, help="Print the status object as JSON.")
def status(out_dir: str, as_json: bool) -> None:
    """Say where a run in DIR (a path or an s3:// or az:// URL) stands and what to do next; exit
    with the run's own code."""
    from batchval._internal.admin import read_dry_run, read_status, status_text
    from batchval._internal.place import viewed
    from batchval._internal.runs import DryRunSummary, RunSummary

    found: RunSummary | DryRunSummary | None
    with _refusals(), viewed(out_dir, os.environ) as place:
        found = read_status(place.local, objects=place.objects)
        dry = read_dry_run(place.local)  # alone, or priced beside a run
        if found is None:
            found = dry
        logs = [] if place.objects is None or as_json else place.objects.list("logs")
    if found is None:
        raise click.UsageError(
            f"{out_dir} holds no batchval run (no checkpoint.sqlite) and no dry run "
            "(no dry_run.json)"
        )
    click.echo(status_text(found, dry, as_json=as_json))
    if logs:  # each invocation's events, kept at the URL (`store/shipped_log`)
        click.echo(f"logs: {len(logs)} invocation(s) under {out_dir.rstrip('/')}/logs/")
    raise SystemExit(int(found.exit_code))


@cli.command(short_help="Check settings, token, API and INPUT's price, at no cost.")
@click.argument("input_path", metavar="[INPUT]", required=False)
@config_option("YAML config: api, input mapping, run settings.")
@input_reading_options
def check(
    input_path: str | None,
    config_file: Path | None,
    sheet: str | None,
    encoding: str | None,
    header_row: int | None,
) -> None:
    """Preflight at no cost: settings, token, API, mode, and INPUT's price (INPUT a path
    or an s3:// or az:// URL); exit 0, 64, 65, 75 or 77."""
    from batchval._internal.admin import CheckReport, Finding, run_check
    from batchval._internal.place import input_of
    from batchval._internal.sandbox import embedded_api
    from batchval._internal.settings import load_settings

    # Its lines are the report; the log says only what goes wrong (the input's batches
    # are the dry run's business).
    logs.configure(json_lines=logs.json_wanted(os.environ, False), level=30)
    try:
        settings = load_settings(
            config_file, os.environ, encoding=encoding, sheet=sheet, header_row=header_row
        )
    except SettingsError as exc:
        report = CheckReport((Finding("settings", str(exc), ExitCode.USAGE),))
    else:
        for secret, user in settings.secrets(os.environ):
            redaction.hide(secret, user=user)
        if input_path is None:
            report = run_check(settings, None, embedded_api=embedded_api)
        else:
            with _refusals(), input_of(input_path, settings.storage.env(os.environ)) as source:
                report = run_check(settings, source, embedded_api=embedded_api)
    click.echo(report.render())  # scrubbed on the way out, as every printed line
    if report.failure is not None:
        click.echo(f"batchval: {report.final_line()}", err=True)
    raise SystemExit(int(report.exit_code))


@cli.command(short_help="Cut INPUT into N Parquet shards by a stable hash of each row.")
@click.argument("input_path", metavar="INPUT")
@click.option(
    "--shards", required=True, type=click.IntRange(1, 10_000), metavar="N", help="How many."
)
@out_option("Where the shards and shards.json go: a directory, or an s3:// or az:// URL.", url=True)
@config_option("YAML config: its input mapping decides the requests.")
@input_reading_options
@click.option(
    "--row-id",
    metavar="COLUMN",
    help="The column that names a row (a loan id): what places it.",
)
def split(
    input_path: str,
    shards: int,
    out_dir: str,
    config_file: Path | None,
    sheet: str | None,
    encoding: str | None,
    header_row: int | None,
    row_id: str | None,
) -> None:
    """Cut INPUT (a path or an s3:// or az:// URL) into N Parquet shards by a stable hash of each
    row, into DIR (a path or an s3:// or az:// URL); exit 0, 64, 65 or 75."""
    from batchval._internal.admin import split_input
    from batchval._internal.input import InputError
    from batchval._internal.place import input_of, written
    from batchval._internal.settings import load_settings

    logs.configure(json_lines=logs.json_wanted(os.environ, False), level=30)
    try:
        settings = load_settings(
            config_file, os.environ, encoding=encoding, sheet=sheet, header_row=header_row
        )
        for secret, user in settings.secrets(os.environ):
            redaction.hide(secret, user=user)
        env = settings.storage.env(os.environ)
        with (
            _refusals(),
            input_of(input_path, env) as source,
            written(out_dir, env) as place,
            place.naming(),
        ):
            summary = split_input(
                source,
                place.local,
                shards,
                settings.input,
                row_id,
                input_name=input_path,
                held=place.held,
            )
    except SettingsError as exc:
        raise click.UsageError(str(exc)) from None
    except InputError as exc:
        click.echo(f"batchval: input_unusable: {exc}", err=True)
        raise SystemExit(int(ExitCode.INPUT)) from None
    click.echo(summary.render())


@cli.command(short_help="Write DIR/report.html: one page about the run in DIR.")
@click.argument("out_dir", metavar="DIR")
def report(out_dir: str) -> None:
    """Write DIR/report.html: one self-contained page about the run in DIR (a path, or an
    s3:// URL, where the page is published beside the run's outputs)."""
    from batchval._internal.place import remember, taken
    from batchval._internal.reports import ReportError, write_report

    # At a URL the run is taken while the page is written and listed (published at the end).
    with _refusals(), taken(out_dir, os.environ, outputs=True) as place:
        try:
            path = write_report(place.local)
        except ReportError as exc:
            raise click.UsageError(place.named(str(exc))) from None
        unlisted = remember(place, [path], "report")
    if unlisted:
        click.echo(f"batchval: {unlisted}", err=True)
    click.echo(f"wrote {place.where(path)}")


@cli.command(
    name="export", short_help="Write DIR's results and problems as CSV, Excel or JSON Lines."
)
@click.argument("out_dir", metavar="DIR")
@click.option(
    "--format", "fmt", required=True, type=click.Choice(["csv", "xlsx", "json"]),
    help="csv: a file per Parquet file; xlsx: one workbook; json: JSON Lines.",
)  # fmt: skip
@click.option(
    "--nested", type=click.Choice(["flatten", "drop"]), default="flatten", show_default=True,
    help="Struct columns as <column>_<member> columns, or left out (with lists).",
)  # fmt: skip
@out_option("Directory to write to [DIR].", name="to_dir", required=False)
def export_command(out_dir: str, fmt: str, nested: str, to_dir: Path | None) -> None:
    """Write DIR's results and problems (DIR a path or an s3:// or az:// URL) as CSV, XLSX or JSON
    Lines; exit 0, 64 or 65."""
    from batchval._internal.place import remember, taken, viewed

    if to_dir is not None:  # elsewhere: the run's place is only read
        with _refusals(), viewed(out_dir, os.environ) as place, place.naming():
            click.echo(_export(place.local, fmt, nested, to_dir).render())
        raise SystemExit(int(ExitCode.COMPLETE))
    # In the run's place, listed in its memory (at a URL the run is taken meanwhile, and
    # the files published at the end), so that a run that changes the outputs removes them.
    with _refusals(), taken(out_dir, os.environ, outputs=True) as place:
        with place.naming():
            done = _export(place.local, fmt, nested, None)
        unlisted = remember(place, [file.path for file in done.files], "export")
    click.echo(place.named(done.render()))
    if unlisted:
        click.echo(f"batchval: {unlisted}", err=True)
    raise SystemExit(int(ExitCode.COMPLETE))


def _export(local: Path, fmt: str, nested: str, to_dir: Path | None) -> Export:
    from batchval._internal.exports import Format, Nested, export_dir

    return export_dir(local, Format(fmt), nested=Nested(nested), out_dir=to_dir)


@cli.command(short_help="Street analysis of every distinct postcode of INPUT, into DIR.")
@sending_options("The directory")
@click.option("--refresh", is_flag=True, help="Read again postcodes read in the last 30 days.")
@click.option("--join", is_flag=True, help="Also write homes_with_street.parquet.")
@MAX_CREDITS
@DRY_RUN
@concurrency_option("requests")
@live_option
def streets(input_path: str, out_dir: str, config_file: Path | None, **options: Any) -> None:
    """Street analysis of every distinct postcode of INPUT (a path, s3:// or az:// URL) into DIR
    (30 days free repeat)."""
    given = _given(out_dir, config_file, False, options)
    _sent(lambda: batchval.analyse_streets(input_path, **given))


@cli.command(short_help="Read DIR's valuations back from the API (free) and compare.")
@click.argument("out_dir", metavar="DIR")
@config_option("YAML config: api, run settings (as for run).")
@concurrency_option("reads")
@live_option
def verify(out_dir: str, config_file: Path | None, concurrency: int | None, live: bool) -> None:
    """Read back every valuation of DIR's results (DIR a path or an s3:// or az:// URL) by id (free)
    and compare; exit 0 when all agree, 1 on a difference (DIR/verify.parquet), 75, 77 or
    64 as run does."""
    from batchval._internal.place import taken
    from batchval._internal.verify import verify_dir

    settings, json_lines = _configured(config_file, concurrency=concurrency, live=live)
    with (
        _refusals(),
        taken(out_dir, settings.storage.env(os.environ), outputs=True) as place,
        place.naming(),
    ):
        summary = verify_dir(place, settings, progress_bar=not json_lines)
    click.echo(summary.render())
    if summary.stop is not None:
        click.echo(f"batchval: {summary.stop.line()}", err=True)
    elif summary.differences:
        click.echo(
            f"batchval: differences: {len(summary.differences)} between the API and "
            f"results.parquet (first: {summary.differences[0].valuation_id} "
            f"{summary.differences[0].field}); see {place.name}/verify.parquet",
            err=True,
        )
    raise SystemExit(int(summary.exit_code))


@cli.command(short_help="Propose a config for a lender's file (INPUT) and try it out.")
@click.argument("input_path", metavar="INPUT")
@click.option(
    "--out",
    "-o",
    "config_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the proposal [INPUT's name with .batchval.yaml, here].",
)
@click.option("--force", is_flag=True, help="Replace the file --out names if it exists.")
@input_reading_options
def init(
    input_path: str,
    config_out: Path | None,
    force: bool,
    sheet: str | None,
    encoding: str | None,
    header_row: int | None,
) -> None:
    """Propose a config for INPUT (a lender's own file; a path or an s3:// or az:// URL): each
    column's mapping and why, the lender columns found, every value it cannot place with
    its count; then read INPUT through it and say what a run would send; exit 0, 64 or 65."""
    from batchval._internal.admin import Chosen, propose, render, survey, trial
    from batchval._internal.input import InputError, InputOptions, NoTableError, read_as_text
    from batchval._internal.place import input_of
    from batchval._internal.settings import load_settings

    logs.configure(json_lines=logs.json_wanted(os.environ, False), level=30)
    name = input_path.rstrip("/").rpartition("/")[2]
    target = config_out or Path(f"{Path(name).stem}.batchval.yaml")
    if target.exists() and not force:
        raise click.UsageError(f"{target} exists: give another --out, or --force to replace it")
    try:
        reading = InputOptions(encoding=encoding, sheet=sheet, header_row=header_row)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    with _refusals(), input_of(input_path, os.environ) as source:
        chosen: Chosen | None = None
        try:
            try:
                columns, frames, read_as = read_as_text(source, reading)
            except NoTableError as exc:  # a cover sheet first: the first sheet with a table
                chosen = Chosen(
                    exc.sheets[0],
                    f"the first sheet {exc.first!r} holds no table; this is the first that does",
                    cover=True,
                )
                reading = dataclasses.replace(reading, sheet=chosen.name)
                columns, frames, read_as = read_as_text(source, reading)
            surveyed, rows = survey(columns, frames)
        except InputError as exc:
            click.echo(f"batchval: input_unusable: {exc}", err=True)
            raise SystemExit(int(ExitCode.INPUT)) from None
        if chosen is None and read_as.sheet is not None:
            chosen = Chosen(read_as.sheet, "the sheet read (--sheet NAME reads another)")
        header = read_as.header
        proposal = propose(columns, surveyed, rows, hidden=read_as.hidden_columns)
        target.write_text(render(proposal, input_path, sheet=chosen, header=header), "utf-8")
        try:
            settings = load_settings(target, os.environ, encoding=encoding)
            tried = trial(source, settings.input)
        except (InputError, SettingsError) as exc:
            _proposed(target, input_path, proposal, chosen, sheet)
            click.echo(f"batchval: input_unusable: with {target}: {exc}", err=True)
            raise SystemExit(int(ExitCode.INPUT)) from None
        read = tried.read_as
        if read is not None and (read.not_loans or read.hidden_rows):  # said in the proposal
            rows -= len(read.not_loans)  # not data rows after all
            proposal = dataclasses.replace(proposal, rows=rows)
            rendered = render(proposal, input_path, sheet=chosen, header=header, read_as=read)
            target.write_text(rendered, "utf-8")
    _proposed(target, input_path, proposal, chosen, sheet)
    for line in tried.lines():
        click.echo(line)
    # The proposal names the sheet and the header's line; the command says them too.
    given = "".join(
        f" --{k} {shlex.quote(str(v))}"
        for k, v in (
            ("sheet", None if chosen is None else chosen.name),
            ("header-row", header.line if header is not None and header.line > 1 else None),
            ("encoding", encoding),
        )
        if v
    )
    click.echo(f"next: batchval run {input_path}{given} --config {target} --out DIR --dry-run")


def _proposed(
    target: Path, input_path: str, proposal: Proposal, chosen: Chosen | None, sheet: str | None
) -> None:
    """What `init` proposed, for the terminal."""
    from batchval._internal.admin import summary_lines

    rows = proposal.rows
    click.echo(f"wrote {target}: a config proposed for {input_path} ({rows} data rows)")
    if chosen is not None and chosen.name != sheet and chosen.cover:
        click.echo(f"  sheet {chosen.name!r}: {chosen.why}")
    for line in summary_lines(proposal):
        click.echo(line)


def main(argv: list[str] | None = None) -> None:
    """The console script: click's own exit code 2 for usage errors becomes 64."""
    try:
        with redaction.scrubbed_output():  # click's own messages too
            code = cli.main(args=argv, prog_name="batchval", standalone_mode=False)
    except click.exceptions.Exit as done:
        code = done.exit_code
    except click.ClickException as exc:
        exc.show()
        code = ExitCode.USAGE
    except click.Abort:  # Ctrl-C at a prompt or before a run took DIR: nothing to resume
        click.echo("Aborted.", err=True)
        code = ExitCode.RESUMABLE
    except Exception as exc:  # a defect outside any run's DIR: one line, the rest in a file
        click.echo(f"batchval: {defect_line(exc)}", err=True)
        code = ExitCode.INTERNAL
    sys.exit(code if isinstance(code, int) else 0)


# The commands that send calls (and may spend): each dies with its parent.
SENDING_COMMANDS = frozenset({"run", "streets", "verify"})


def console() -> None:
    """The console script (`batchval`, `python -m batchval`): `main`, then, when a read a
    signal stopped is still at work in its thread (`sending/batches.watched`), the process
    ends at once with the code `main` gave, its streams flushed: the interpreter cannot be
    shut down under a thread inside native code, and the read is nothing to keep. A
    command that sends (`run`, `streets`, `verify`) dies with its parent
    (`runs/parent`); the others, `sandbox` (a server a script may leave behind) among
    them, do not."""
    if len(sys.argv) > 1 and sys.argv[1] in SENDING_COMMANDS:
        from batchval._internal.runs import watch_parent

        watch_parent(os.environ)
    try:
        main()
    except SystemExit as done:
        from batchval._internal.sending import left_behind

        if left_behind():
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(done.code if isinstance(done.code, int) else 0)
        raise


if __name__ == "__main__":
    console()
