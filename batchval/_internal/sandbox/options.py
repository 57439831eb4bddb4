"""The options of `batchval sandbox` on the command line, as one decorator (as
valuations/book_options does for `run --book`), and the command class whose help lists the
fault-injection switches under a heading of their own: cli.py stays thin."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

_Command = TypeVar("_Command", bound=Callable[..., Any])


def _share(_ctx: click.Context, _param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not 0.0 <= value <= 1.0:
        raise click.BadParameter("a share is a number from 0 to 1")
    return value


# The sandbox's fault-injection switches (all but --seed set its `faults`): `sandbox --help`
# lists them under a heading of their own, after the options a trial needs.
FAULT_SWITCHES = (
    "--latency-ms",
    "--jitter-ms",
    "--fail-503",
    "--fail-504-after-commit",
    "--drop-after-commit",
    "--malformed",
    "--slow",
    "--revoke-tokens",
    "--storm",
    "--storm-retry-after",
    "--seed",
)
FAULTS_HEADING = "Fault injection (for tests)"


def _fault(
    flag: str, meaning: str, *, share: bool = True, **attrs: Any
) -> Callable[[_Command], _Command]:
    """One of FAULT_SWITCHES; a share (of calls) is a number from 0 to 1."""
    if share:
        attrs.update(type=float, callback=_share, metavar="SHARE")
    return click.option(flag, help=meaning, **attrs)


# In the order `sandbox --help` lists them: the limits a trial sets, then the faults.
_OPTIONS = (
    click.option(
        "--host", metavar="ADDRESS", default="127.0.0.1", show_default=True, help="Listen here."
    ),
    click.option(
        "--allow-remote",
        is_flag=True,
        help="Let --host be an address other than loopback: anyone who reaches it can "
        "use the /_sandbox controls, which take no credentials.",
    ),
    click.option(
        "--port",
        type=int,
        metavar="N",
        default=8000,
        show_default=True,
        help="0 picks a free port.",
    ),
    click.option(
        "--config",
        "config_file",
        type=click.Path(dir_okay=False, path_type=Path),
        metavar="FILE",
        help="YAML with accounts, limits and faults (see configs/sandbox.yaml).",
    ),
    click.option("--token-ttl", type=int, metavar="SECONDS", help="Token lifetime [1800]."),
    click.option(
        "--rate",
        type=float,
        metavar="N",
        help="Short-term limit: requests a second per account [20].",
    ),
    click.option("--burst", type=int, metavar="N", help="Short-term limit: bucket size [20]."),
    click.option("--no-rate-limit", is_flag=True, help="Turn the short-term limit off."),
    click.option(
        "--daily-limit",
        type=int,
        metavar="N",
        help="Daily calls for every account [5000 live, 1000 test].",
    ),
    click.option(
        "--request-timeout",
        type=float,
        metavar="SECONDS",
        help="Seconds before a request is cut with 504 [30].",
    ),
    click.option(
        "--figures-month",
        metavar="YYYY-MM",
        envvar="BATCHVAL_SANDBOX_FIGURES_MONTH",
        help="Fake figures as of this month, whatever the clock [the clock's]; "
        "also BATCHVAL_SANDBOX_FIGURES_MONTH.",
    ),
    click.option(
        "--stamp-precision",
        type=click.Choice(["second", "milli", "micro"]),
        help="How finely valuedAt is stamped [milli]; `second` as an API that cuts to seconds.",
    ),
    click.option(
        "--rehearsal",
        is_flag=True,
        help="Mark its tokens a rehearsal's: `--live` runs against it (the docs' "
        "walk-throughs of a live night), and their mode is `rehearsal`.",
    ),
    _fault("--latency-ms", "Added to every valuation.", share=False, type=float, metavar="MS"),
    _fault("--jitter-ms", "Plus a random extra up to this.", share=False, type=float, metavar="MS"),
    _fault("--fail-503", "Share of calls (0 to 1) answered 503."),
    _fault("--fail-504-after-commit", "Share valued, charged, then 504."),
    _fault("--drop-after-commit", "Share valued, charged, then the connection is cut."),
    _fault("--malformed", "Share with a truncated 201 body."),
    _fault("--slow", "Share of calls slower than the limit."),
    _fault("--revoke-tokens", "Share of calls whose token dies."),
    _fault("--storm", "Share answered 429 with a long Retry-After."),
    _fault(
        "--storm-retry-after",
        "That Retry-After, in seconds [5].",
        share=False,
        type=int,
        metavar="SECONDS",
    ),
    _fault("--seed", "Seed of the fault generator [0].", share=False, type=int, metavar="N"),
)


class FaultsApart(click.Command):
    """`batchval sandbox`: its help lists the options a trial needs, then the fault
    switches (FAULT_SWITCHES) under a heading of their own, out of a newcomer's way."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        everyday: list[tuple[str, str]] = []
        faults: list[tuple[str, str]] = []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None and isinstance(param, click.Option):
                (faults if set(param.opts) & set(FAULT_SWITCHES) else everyday).append(record)
        for heading, records in (("Options", everyday), (FAULTS_HEADING, faults)):
            if records:
                with formatter.section(heading):
                    formatter.write_dl(records)


def sandbox_options(command: _Command) -> _Command:
    """Every option of `batchval sandbox`, in _OPTIONS' order."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command
