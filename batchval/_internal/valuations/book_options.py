"""The options of `run --book` on the command line, as one decorator: cli.py stays thin,
and the book's four options read together here (`booking` does the work)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

_Command = TypeVar("_Command", bound=Callable[..., Any])

# Each option's name is its setting's in the config's `run` section (`load_settings`).
_OPTIONS = (
    click.option(
        "--book",
        type=click.Path(dir_okay=False),
        metavar="FILE|URL",
        help="Keep the latest valuation of every row here (Parquet); send only what is stale.",
    ),
    click.option(
        "--row-id",
        metavar="COLUMN",
        help="With --book: the column that names a row [the request].",
    ),
    click.option(
        "--fresh-for",
        "fresh_for_days",
        type=click.FloatRange(0),
        metavar="DAYS",
        help="With --book: days a valuation stays fresh [30].",
    ),
    click.option(
        "--max-calls", type=click.IntRange(0), metavar="N", help="With --book: valuations a night."
    ),
)


def book_options(command: _Command) -> _Command:
    """`--book FILE|URL [--row-id COLUMN] [--fresh-for DAYS] [--max-calls N]`, in that order."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command
