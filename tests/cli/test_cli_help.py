"""`batchval --help` and each command's `--help` as a newcomer reads them (issue 33)."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from batchval._internal.cli import cli

# The order a user goes: set up, preflight, run, look, then the rest.
IN_ORDER = [
    "init",
    "check",
    "run",
    "status",
    "report",
    "export",
    "verify",
    "streets",
    "split",
    "sandbox",
]
FAULTS = [
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
]
FAULT_HEADING = "Fault injection (for tests):"


def helped(*args: str, columns: int = 80) -> str:
    runner = CliRunner(env={"COLUMNS": str(columns)})
    done = runner.invoke(cli, [*args, "--help"], prog_name="batchval")
    assert done.exit_code == 0, done.output
    return done.output


def below_usage(text: str) -> str:
    """The help below its usage line (whose `[ARGS]...` is click's, not a cut)."""
    assert text.startswith("Usage: batchval ")
    return text.split("\n", 1)[1]


def command_lines(text: str) -> list[str]:
    """The lines of the group's `Commands:` section."""
    section = text.split("\nCommands:\n", 1)[1]
    return [line for line in section.splitlines() if line.strip()]


def test_the_commands_are_listed_in_the_order_a_user_goes() -> None:
    """init first, then the order a user goes, every command once."""
    names = [line.split()[0] for line in command_lines(helped())]
    assert names == IN_ORDER
    assert sorted(names) == sorted(cli.commands)


def test_the_group_help_says_to_start_with_init_on_one_line() -> None:
    """A newcomer is told where to start, in one line of an 80-column terminal."""
    lines = helped().splitlines()
    start = [line for line in lines if "Start with" in line]
    assert start == ["  Start with `batchval init INPUT`: it proposes a config and the next step."]


@pytest.mark.parametrize("columns", [80, 200])
def test_every_summary_is_whole_on_one_line(columns: int) -> None:
    """Each command's line is its whole short_help, never cut with `...`."""
    text = helped(columns=columns)
    assert "..." not in below_usage(text)
    for line in command_lines(text):
        name, summary = line.split(maxsplit=1)
        command = cli.commands[name]
        assert command.short_help, name
        assert summary == command.short_help
        assert summary.endswith(".")


def test_a_narrow_terminal_wraps_a_summary_rather_than_cut_it() -> None:
    """At 50 columns the summaries run onto a second line; none is cut."""
    text = helped(columns=50)
    assert "..." not in below_usage(text)
    said = " ".join(" ".join(command_lines(text)).split())
    for name in IN_ORDER:
        assert f"{name} {cli.commands[name].short_help}" in said


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("run", "--out DIR|URL"),
        ("run", "--book FILE|URL"),
        ("run", "--config FILE"),
        ("run", "--concurrency N"),
        ("run", "--row-id COLUMN"),
        ("run", "--fresh-for DAYS"),
        ("streets", "--out DIR|URL"),
        ("split", "--out DIR|URL"),
        ("split", "--shards N"),
        ("export", "--out DIR "),
        ("init", "-o, --out FILE"),
        ("sandbox", "--fail-503 SHARE"),
    ],
)
def test_a_metavar_says_what_the_value_is(command: str, shown: str) -> None:
    """`--out DIR|URL` where a URL is taken, `DIR` where only a directory is."""
    assert shown in helped(command)


@pytest.mark.parametrize("command", IN_ORDER)
def test_no_option_shows_a_bare_type_name(command: str) -> None:
    """Every option's value is named for what it is, not click's TEXT, INTEGER, ..."""
    options = helped(command).split("\nOptions:\n", 1)[1]
    bare = re.findall(r"--[a-z0-9-]+ (TEXT|INTEGER|FLOAT|PATH|DIRECTORY|FILENAME)\b", options)
    assert bare == []


def test_the_sandbox_lists_its_fault_switches_under_their_own_heading() -> None:
    """The everyday options first; every fault switch under the fault heading, none above."""
    text = helped("sandbox")
    assert text.count(FAULT_HEADING) == 1
    above, below = text.split(FAULT_HEADING)
    flags_below = re.findall(r"^  (--[a-z0-9-]+)", below, re.MULTILINE)
    assert flags_below == FAULTS
    flags_above = re.findall(r"^  (?:-h, )?(--[a-z0-9-]+)", above, re.MULTILINE)
    assert not set(flags_above) & set(FAULTS)
    assert {"--host", "--port", "--config", "--daily-limit", "--help"} <= set(flags_above)
