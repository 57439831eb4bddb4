"""The crontab line of docs/how-to/cron.md, run as cron would run it: its exact command (the
nightly script, examples/cron/nightly.sh) through /bin/sh with cron's bare environment, the
paths swapped for a test's and the API for the sandbox's live-like account."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import polars as pl
import pytest
import yaml
from support import BATCHVAL, LIVE, ROOT, portfolio, wait_until

from batchval._internal.sandbox.config import Faults
from batchval._internal.sandbox.server import RunningSandbox

# Touches the calendar: `make test-dates` runs it at each hard instant (tests/clocks.py).
pytestmark = pytest.mark.dates

PAGE = ROOT / "docs" / "how-to" / "cron.md"
PROJECT = "/opt/batchval"
PROJECT_BATCHVAL = PROJECT + "/.venv/bin/batchval"
SCRIPT = "/examples/cron/nightly.sh"
WORK = "/srv/valuations"
CONFIG = "/etc/batchval/live.yaml"
_ENTRY = re.compile(r"^(\S+\s+){5}(?P<command>.+)$")
_ASSIGNMENT = re.compile(r"^(?P<name>[A-Z_]+)=(?P<value>\S*)$")


def crontab() -> tuple[dict[str, str], list[str]]:
    """The first crontab block of the cron page: its variables and the commands of its
    entries, as cron hands them to the shell (`\\%` becomes `%`)."""
    page = PAGE.read_text(encoding="utf-8")
    block = page[page.index("```cron\n") + len("```cron\n") :]
    block = block[: block.index("```")]
    variables: dict[str, str] = {}
    commands: list[str] = []
    for line in block.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if found := _ASSIGNMENT.match(line):
            variables[found["name"]] = found["value"]
            continue
        entry = _ENTRY.match(line)
        assert entry, f"not a crontab entry: {line!r}"
        command = entry["command"]
        # cron turns an unescaped % into a newline: the page must escape every one.
        assert re.search(r"(?<!\\)%", command) is None, command
        commands.append(command.replace("\\%", "%"))
    return variables, commands


def nightly_command() -> tuple[dict[str, str], str]:
    variables, commands = crontab()
    assert len(commands) == 2, commands
    assert commands[0] == commands[1], "the 07:30 retry must be the same command"
    return variables, commands[0]


def as_cron_runs_it(tmp_path: Path, served: RunningSandbox, **run: object) -> list[str]:
    """/bin/sh -c and the command with the page's paths swapped for this test's; the
    test's own sandbox made a rehearsal's (the recipe runs --live, which takes batchval's
    sandbox only so)."""
    served.sandbox.config.rehearsal = True
    _, command = nightly_command()
    assert command.split(" && ")[1].startswith(PROJECT + SCRIPT + " loans.parquet "), command
    work = tmp_path / "srv"
    (work / "log").mkdir(parents=True)
    loans = portfolio(tmp_path / "loans.csv", 6)
    pl.read_csv(loans).write_parquet(work / "loans.parquet")
    settings: dict[str, object] = {
        "api": {
            "base_url": served.base_url,
            "auth_url": served.auth_url,
            "client_id": LIVE.client_id,
            "client_secret": LIVE.client_secret,
        }
    }
    if run:
        settings["run"] = run
    config = tmp_path / "live.yaml"
    config.write_text(yaml.safe_dump(settings))
    config.chmod(0o600)
    swapped = (
        command.replace(PROJECT, str(ROOT)).replace(WORK, str(work)).replace(CONFIG, str(config))
    )
    for path in ("/opt/", "/srv/", "/etc/"):
        assert path not in swapped, f"a path of the page was not swapped: {swapped}"
    return ["/bin/sh", "-c", swapped]


def cron_env(tmp_path: Path) -> dict[str, str]:
    """What cron gives a job: a bare PATH without the virtual environment, and the
    crontab's own variables."""
    variables, _ = nightly_command()
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "SHELL": "/bin/sh",
        "LOGNAME": "batchval",
        **{name: value.replace(PROJECT_BATCHVAL, BATCHVAL) for name, value in variables.items()},
    }


def test_the_page_s_crontab_is_what_the_test_runs() -> None:
    """The page's entries call the project's nightly script by absolute path, with the
    project's batchval by absolute path, log to a file, say CRON_TZ=UTC, and take no flock
    wrapper (the run's DIR lock covers two starts)."""
    variables, command = nightly_command()
    assert variables == {"CRON_TZ": "UTC", "BATCHVAL": PROJECT_BATCHVAL}
    assert PROJECT_BATCHVAL.startswith("/")
    assert PROJECT + SCRIPT + " " in command
    assert "flock" not in command
    assert re.search(r">> log/.+\.log 2>&1$", command), command


def test_the_script_runs_the_book_live_and_reports() -> None:
    """The recipe: a night's own directory, the book, --live, then the night's report;
    the page shows the script itself (a snippet of the file)."""
    script = (ROOT / SCRIPT.lstrip("/")).read_text(encoding="utf-8")
    assert re.search(
        r'^"\$BATCHVAL" run "\$INPUT" --out "\$OUT" --book "\$BOOK" --row-id "\$ROW_ID" --live',
        script,
        re.MULTILINE,
    )
    assert re.search(r'^\s+"\$BATCHVAL" report "\$OUT"$', script, re.MULTILINE)
    assert (ROOT / SCRIPT.lstrip("/")).stat().st_mode & 0o111, "cron runs it by its path"
    assert f'--8<-- "{SCRIPT.lstrip("/")}"' in PAGE.read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_crontab_command_values_the_book(served: RunningSandbox, tmp_path: Path) -> None:
    """The exact command exits 0 under cron's environment (live credentials, so --live
    lets it through) and writes the night's results, the book, the report and a log."""
    argv = as_cron_runs_it(tmp_path, served)
    done = subprocess.run(argv, env=cron_env(tmp_path), cwd=tmp_path, timeout=120, check=False)
    assert done.returncode == 0
    (out,) = (tmp_path / "srv" / "nights").iterdir()
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", out.name), out.name
    assert pl.read_parquet(out / "results.parquet").height == 6
    assert pl.read_parquet(tmp_path / "srv" / "book.parquet").height == 6
    assert (out / "report.html").is_file()
    (logged,) = (tmp_path / "srv" / "log").iterdir()
    assert logged.name == f"nightly-{out.name}.log"
    text = logged.read_text()
    assert f"run day-{out.name} (rehearsal mode, new run): complete" in text
    assert f"wrote nights/{out.name}/report.html" in text
    assert '"event": "valuations.ingest.batch"' in text
    assert served.sandbox.ledger.credits_charged(LIVE.client_id) == 60


@pytest.mark.slow
def test_two_starts_at_once_one_runs_one_exits_75(served: RunningSandbox, tmp_path: Path) -> None:
    """Started twice at once (cron and a person, or a slow night and the 07:30 line): one
    run values the book and exits 0, the other exits 75 dir_locked and sends nothing;
    the same command afterwards finds everything answered."""
    served.sandbox.set_faults(Faults(latency_ms=2000))  # one worker: about 12 s of calls
    argv = as_cron_runs_it(tmp_path, served, concurrency=1)
    env = cron_env(tmp_path)
    runs = tmp_path / "srv" / "nights"
    with subprocess.Popen(argv, env=env, cwd=tmp_path) as first:
        wait_until(  # the checkpoint is opened only under the DIR's lock
            lambda: list(runs.glob("*/checkpoint.sqlite")),
            60,
            "the first run's checkpoint (it holds the lock) before the second starts",
            process=first,
        )
        second = subprocess.run(argv, env=env, cwd=tmp_path, timeout=60, check=False)
        first.wait(timeout=120)
    assert (first.returncode, second.returncode) == (0, 75)
    (logged,) = (tmp_path / "srv" / "log").iterdir()
    assert "batchval: dir_locked: " in logged.read_text()
    ledger = served.sandbox.ledger
    assert ledger.keys_charged_twice() == []
    assert ledger.credits_charged(LIVE.client_id) == 60
    served.sandbox.set_faults(Faults())
    calls = len(ledger.requests)
    again = subprocess.run(argv, env=env, cwd=tmp_path, timeout=60, check=False)
    assert again.returncode == 0
    assert len(ledger.requests) == calls, "a finished run sent something again"
