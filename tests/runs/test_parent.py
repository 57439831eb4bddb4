"""A batchval process dies with its parent, whatever kills the parent (issue 57, part 3):
a script that started `batchval run` is killed with SIGKILL, and batchval stops at once
(`runs/parent`); the same command then finishes the run, paying for nothing twice.
Under `BATCHVAL_OUTLIVE_PARENT=1` it finishes on its own. A real process: the behaviour
is the process's."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import (
    BATCHVAL,
    InProcess,
    assert_accounted,
    assert_paid_once,
    env_for,
    portfolio,
    wait_until,
)

from batchval._internal.sandbox.config import Faults
from batchval._internal.sandbox.server import RunningSandbox

ROWS = 16  # each its own request: half a second each, one at a time
# The parent: starts the command it is given, says the child's pid, and waits to be killed.
# A script run from a shell, whatever started the suite: under `nohup make test` SIGHUP
# comes ignored, and a child started so asked to outlive its terminal (`runs/parent`).
PARENT = (
    "import signal, subprocess, sys, time\n"
    "signal.signal(signal.SIGHUP, signal.SIG_DFL)\n"
    "own = sys.argv[1] == 'session'\n"
    "child = subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL, start_new_session=own)\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(600)\n"
)


def running(pid: int) -> bool:
    """Whether the process `pid` still runs (a zombie that nobody has reaped does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def orphaned(
    served: RunningSandbox, tmp_path: Path, env: dict[str, str], how: str = "plain"
) -> tuple[int, list[str], float]:
    """batchval run started by a parent killed after its third valuation (in a session of
    its own with `how` "session", as the Airflow operator starts a round): the child's
    pid, the command, and when the parent died (monotonic)."""
    served.sandbox.set_faults(Faults(latency_ms=500))
    source = portfolio(tmp_path / "loans.csv", ROWS)
    command = [BATCHVAL, "run", str(source), "--out", str(tmp_path / "out"), "--concurrency", "1"]
    with subprocess.Popen(
        [sys.executable, "-c", PARENT, how, *command], env=env, stdout=subprocess.PIPE, text=True
    ) as parent:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        wait_until(lambda: len(served.sandbox.ledger.charges) >= 3, 60, "three valuations")
        parent.kill()
        parent.wait(timeout=10)
        died = time.monotonic()
    return child, command, died


@pytest.mark.slow
@pytest.mark.parametrize(
    ("how", "said"),
    [("plain", {}), ("session", {"BATCHVAL_OUTLIVE_PARENT": "0"})],
    ids=["a-script", "like-the-airflow-operator"],
)
def test_a_run_whose_parent_is_killed_stops_at_once_and_resumes(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess, how: str, said: dict[str, str]
) -> None:
    child, command, died = orphaned(served, tmp_path, {**env_for(served), **said}, how)
    # A run left alone goes on for about 6 s more; this one stops within the watch's
    # bound (0.2 s to see the parent gone, 1.5 s to stop), with room for a loaded machine.
    wait_until(lambda: not running(child), 6, "batchval to stop with its parent")
    stopped = time.monotonic() - died
    assert len(served.sandbox.ledger.charges) < ROWS, f"it valued on for {stopped:.1f} s"
    done = batchval(*command[1:], env=env_for(served))
    assert done.returncode == 0, done.stderr
    assert_accounted(tmp_path / "out", ROWS)
    assert_paid_once(served, tmp_path / "out")


@pytest.mark.slow
def test_a_run_told_to_outlive_its_parent_finishes(served: RunningSandbox, tmp_path: Path) -> None:
    env = {**env_for(served), "BATCHVAL_OUTLIVE_PARENT": "1"}
    child, _, _ = orphaned(served, tmp_path, env)
    time.sleep(1.0)
    assert running(child)  # the watch would have stopped it by now
    wait_until(lambda: not running(child), 60, "the run to finish on its own")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    assert (summary["status"], summary["exit_code"]) == ("complete", 0)
    assert len(served.sandbox.ledger.charges) == ROWS


def test_a_sandbox_left_in_the_background_outlives_its_parent(tmp_path: Path) -> None:
    """Only the commands that send are watched: `batchval sandbox`, a server a script may
    start and leave behind, goes on when that script is gone."""
    with subprocess.Popen(
        [sys.executable, "-c", PARENT, "plain", BATCHVAL, "sandbox", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    ) as parent:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        parent.kill()
        parent.wait(timeout=10)
    try:
        time.sleep(1.0)  # five times the watch's look: a watched process would be stopping
        assert running(child)
    finally:
        subprocess.run(["kill", str(child)], check=False)
