"""The shell examples of the docs, run as written and their output compared.

A page's executed examples are its fenced `console` blocks (other shell blocks, such as a
crontab or an Airflow set-up, are shown and not run). In a block, a line that starts
`$ ` is a command (a line ending in a backslash carries it on); the lines up to the next
command are what it prints. A line of `...` alone stands for any number of lines.

All the blocks of a page run in order in one bash process, in a fresh directory holding
copies of `sample_inputs/`, `configs/` and `examples/` and links to the project's `.venv`
(and, on a page that runs `make`, `Makefile` and `tests/`), with `.venv/bin` first on PATH
and no `BATCHVAL_*` or `AWS_*` variable but one: the sandbox's figures are pinned to one
month (`BATCHVAL_SANDBOX_FIGURES_MONTH`), so that the estimates a page shows hold next
month. So `cd` and `export` carry on from one command to the next, as in a reader's
terminal, and `batchval` is the project's. Each command must exit 0 (a page shows a
non-zero exit with `; echo "exit $?"`).

What a command prints is compared as a reader sees it on a pipe: its stdout, then its
stderr without the JSON log lines (the structured log, documented on its own page). Both
sides are masked first, so that the figures that change from run to run (times and
dates, durations, run ids and keys, credit balances, the sandbox's estimates, which
follow the month, temporary paths and ports) do not fail a page.

Run as a script, it runs pages and prints what each command printed, to paste:

    .venv/bin/python tests/docs_examples.py docs/tutorials/first-run.md
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COPIED = ("sample_inputs", "configs", "examples")
# Linked, not copied: the project's venv; and, for a page that runs `make` (in a clone of
# the repository, as docs/how-to/object-storage.md's `make s3-local` is), the Makefile with
# the tests' servers behind it. Other pages list their folder as a reader's shows it.
LINKED = (".venv",)
LINKED_FOR_MAKE = ("Makefile", "tests")
FIGURES_MONTH = "2026-11"
# Each mask, in order: what changes from run to run, and what stands for it.
_MASKS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        # ISO times and dates, with or without seconds, fraction and zone.
        (r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d| UTC)?", "<time>"),
        (r"\d{1,2} [A-Z][a-z]{2} \d{4}( \d\d:\d\d)?( UTC)?", "<time>"),
        (r"\d{4}-\d\d-\d\d", "<date>"),
        (r"\d{8}T\d{6}Z?", "<time>"),
        # Durations and rates, in words and in JSON.
        (r'("[a-z_]*seconds[a-z_]*": )-?\d+(\.\d+)?', r"\1<n>"),
        (r"\b\d+(\.\d+)?\s?(ms|s|min|h)\b", "<duration>"),
        (r"\b\d+(\.\d+)?/s\b", "<rate>"),
        (r"\b\d+m\d+(\.\d+)?s\b", "<duration>"),
        # Keys, hashes and uuids.
        (r"\bbv\d-[0-9a-f]{8,}\b", "<key>"),
        (r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "<uuid>"),
        (r"\b[0-9a-f]{12,}\b", "<hash>"),
        # The sandbox's figures follow the month (its price index moves): a portfolio's
        # estimates and loan-to-value ratios.
        (r"\b(estimates?|LTV) £?\d[\d,.]*%?", r"\1 <n>"),
        # The loans revaluation triggers flag: they move with the sandbox's month and
        # the run's date (a valuation turns five years old on its anniversary).
        (r"\b(fall|age|any) \d[\d,]* \(£[\d,.]+\)", r"\1 <n>"),
        # Which stale loans a `risk` book night values follows them too (a trigger first):
        # the balance of tonight's valuations, on the line that counts them alone.
        (r"^(portfolio: \d+ loans valued, loan balance )£[\d,.]+", r"\1<n>"),
        # Balances: what the account has left.
        (r"(balance|left)(:?\s+)[\d,]+", r"\1\2<n>"),
        # Ports a server chose (port 0).
        (r"\b(127\.0\.0\.1|localhost):\d{2,5}\b", r"\1:<port>"),
        # Temporary directories.
        (r"/tmp/[^\s'\"]+", "<tmp>"),
    )
)


@dataclasses.dataclass(frozen=True, slots=True)
class Command:
    line: int  # where the command is on the page (1-based), for failures
    text: str  # as the shell runs it
    expected: tuple[str, ...]  # what it prints, `...` for any lines


def fenced(page: str, language: str) -> list[tuple[int, str]]:
    """The page's fenced blocks of `language`, each with the line its body starts on."""
    pattern = rf"^```{re.escape(language)}(?:[ \t][^\n]*)?\n(.*?)^```"
    return [
        (page.count("\n", 0, block.start(1)) + 1, block.group(1))
        for block in re.finditer(pattern, page, re.MULTILINE | re.DOTALL)
    ]


def commands(page: str) -> list[Command]:
    """The commands of a page's console blocks, in order, each with what it prints."""
    found: list[Command] = []
    for first, body in fenced(page, "console"):
        lines = body.splitlines()
        i = 0
        while i < len(lines):
            if not lines[i].startswith("$ "):
                raise ValueError(f"line {first + i}: a console block starts with `$ `")
            start, text = i, lines[i][2:]
            while text.endswith("\\") and i + 1 < len(lines):
                i += 1
                text += "\n" + lines[i]
            i += 1
            printed: list[str] = []
            while i < len(lines) and not lines[i].startswith("$ "):
                printed.append(lines[i])
                i += 1
            found.append(Command(first + start, text, tuple(printed)))
    return found


def mask(line: str) -> str:
    for pattern, replacement in _MASKS:
        line = pattern.sub(replacement, line)
    return line.rstrip()


def matches(expected: tuple[str, ...], actual: list[str]) -> bool:
    """Whether the printed lines are the expected ones, masked, `...` for any lines."""
    want = [line if line == "..." else mask(line) for line in expected]
    got = [mask(line) for line in actual]
    while want and not want[-1].strip():
        want.pop()
    while got and not got[-1].strip():
        got.pop()

    def fits(w: int, g: int) -> bool:
        if w == len(want):
            return g == len(got)
        if want[w] == "...":
            return any(fits(w + 1, k) for k in range(g, len(got) + 1))
        return g < len(got) and want[w] == got[g] and fits(w + 1, g + 1)

    return fits(0, 0)


def _shown(stdout: str, stderr: str) -> list[str]:
    log = [line for line in stderr.splitlines() if not _is_log_line(line)]
    return [*stdout.splitlines(), *log]


def _is_log_line(line: str) -> bool:
    return line.startswith("{") and '"event":' in line


@dataclasses.dataclass(frozen=True, slots=True)
class Ran:
    command: Command
    exit_code: int
    printed: list[str]


def environment(home: Path) -> dict[str, str]:
    """A reader's environment: the project's batchval first on PATH, none of batchval's
    or AWS's variables but the sandbox's pinned month, `home` as HOME."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("BATCHVAL_", "AWS_", "PYTEST_", "COV_"))
    }
    env.update(
        PATH=f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        HOME=str(home),
        COLUMNS="100",
        # The sandbox's figures follow the month; the pages show November 2026's.
        BATCHVAL_SANDBOX_FIGURES_MONTH=FIGURES_MONTH,
        TERM="dumb",
    )
    env.pop("VIRTUAL_ENV", None)
    return env


def run_page(path: Path, *, timeout: float = 600) -> Iterator[Ran]:
    """Run a page's commands in order in one bash process in a fresh directory; yield
    each one's exit code and what it printed."""
    found = commands(path.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="batchval-docs-") as name:
        work = Path(name)
        for part in COPIED:
            shutil.copytree(ROOT / part, work / part, ignore=shutil.ignore_patterns("__pycache__"))
        runs_make = any(re.search(r"(^|\s)make\s", c.text) for c in found)
        for part in LINKED + (LINKED_FOR_MAKE if runs_make else ()):
            (work / part).symlink_to(ROOT / part)
        outs = work / ".docs-example"
        outs.mkdir()
        script = []
        for n, command in enumerate(found):
            script.append(
                f"{{\n{command.text}\n}} >{outs}/{n}.out 2>{outs}/{n}.err\necho $? >{outs}/{n}.rc"
            )
        subprocess.run(
            ["bash", "-c", "set -o pipefail\n" + "\n".join(script)],
            cwd=work,
            env=environment(work),
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for n, command in enumerate(found):
            rc = outs / f"{n}.rc"
            if not rc.exists():
                yield Ran(command, -1, ["(not run: the page's shell stopped before it)"])
                continue
            out = (outs / f"{n}.out").read_text(encoding="utf-8", errors="replace")
            err = (outs / f"{n}.err").read_text(encoding="utf-8", errors="replace")
            yield Ran(command, int(rc.read_text()), _shown(out, err))


def failures(path: Path) -> list[str]:
    """What differs between a page's examples and what they print, one entry a command."""
    wrong: list[str] = []
    for ran in run_page(path):
        where = f"{path.relative_to(ROOT)}:{ran.command.line}: $ {ran.command.text}"
        if ran.exit_code != 0:
            wrong.append(f"{where}\n  exit {ran.exit_code}\n" + _indented(ran.printed))
        elif not matches(ran.command.expected, ran.printed):
            wrong.append(
                f"{where}\n  expected (masked):\n"
                + _indented([mask(line) for line in ran.command.expected])
                + "\n  printed (masked):\n"
                + _indented([mask(line) for line in ran.printed])
            )
    return wrong


def _indented(lines: list[str]) -> str:
    return "\n".join("    " + line for line in lines)


def main(argv: list[str]) -> int:
    bad = 0
    for name in argv:
        path = Path(name).resolve()
        for ran in run_page(path):
            ok = ran.exit_code == 0 and matches(ran.command.expected, ran.printed)
            bad += not ok
            print(f"{'ok ' if ok else 'BAD'} {name}:{ran.command.line} (exit {ran.exit_code})")
            print(f"$ {ran.command.text}")
            print("\n".join(ran.printed))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
