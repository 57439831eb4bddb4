"""Logging on a terminal and off it: under tmux, one progress bar and human lines, never a
JSON log line on the screen; JSON on stderr when asked; every event in DIR/batchval.log."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile import HostileProxy, Rules, serve_proxy
from support import BATCHVAL, LIVE, env_for, portfolio, run_cli, wait_until

from batchval._internal import logs
from batchval._internal.sandbox.app import API_PREFIX
from batchval._internal.sandbox.config import Faults
from batchval._internal.sandbox.server import RunningSandbox

TMUX = shutil.which("tmux")
needs_tmux = pytest.mark.skipif(
    TMUX is None,
    reason="tmux is not installed (`make test` installs it when run as root with apt-get)",
)


class Pane:
    """A tmux server of its own (`-L`), one window running one shell command."""

    def __init__(self, command: str, env: dict[str, str]) -> None:
        self.socket = f"batchval-test-{uuid.uuid4().hex[:8]}"
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        shell = f"env -i {exports} {command}; echo EXIT=$?; sleep 120"
        self._tmux("new-session", "-d", "-x", "160", "-y", "45", "-s", "t", shell)

    def _tmux(self, *args: str) -> str:
        assert TMUX is not None
        done = subprocess.run(
            [TMUX, "-L", self.socket, *args], capture_output=True, text=True, check=True
        )
        return done.stdout

    def screen(self) -> list[str]:
        return [line.rstrip() for line in self._tmux("capture-pane", "-p", "-J").splitlines()]

    def close(self) -> None:
        subprocess.run([TMUX or "tmux", "-L", self.socket, "kill-server"], check=False)


def watch(pane: Pane, timeout: float = 90) -> tuple[list[list[str]], list[str]]:
    """Screens captured every 0.2 s until the command has exited; and the last screen."""
    screens: list[list[str]] = []

    def exited() -> bool:
        screens.append(pane.screen())
        return any(line.startswith("EXIT=") for line in screens[-1])

    wait_until(exited, timeout, "the run to end", every=0.2, detail=lambda: screens[-1:])
    return screens, screens[-1]


@pytest.fixture
def proxy(served: RunningSandbox) -> Iterator[HostileProxy]:
    with serve_proxy(served.auth_url) as running:
        yield running


def run_in_pane(
    served: RunningSandbox, proxy: HostileProxy, tmp_path: Path, **extra_env: str
) -> tuple[list[list[str]], list[str], Path]:
    """A slow run (latency, one worker) through a proxy whose HTML pages make the run log
    warnings while the bar is drawn; the screens and DIR."""
    served.sandbox.set_faults(Faults(latency_ms=120))
    proxy.rules = Rules(html_share=0.15, html_status=403, html_spare_first=4)
    source = portfolio(tmp_path / "book.csv", 30)
    config = tmp_path / "config.yaml"
    config.write_text("run:\n  unrecognised_limit: 200\n  concurrency: 1\n")
    out = tmp_path / "out"
    env = env_for(served, LIVE, BATCHVAL_BASE_URL=proxy.url + API_PREFIX, **extra_env)
    env = {k: v for k, v in env.items() if k.startswith("BATCHVAL_")}
    env |= {"PATH": "/usr/bin:/bin", "TERM": "xterm-256color", "HOME": str(tmp_path)}
    command = shlex.join([BATCHVAL, "run", str(source), "--out", str(out), "--run-id", "tty"])
    pane = Pane(f"{command} --config {shlex.quote(str(config))}", env)
    try:
        screens, last = watch(pane)
    finally:
        pane.close()
    return screens, last, out


def is_json(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


@needs_tmux
@pytest.mark.slow
def test_terminal_shows_a_bar_and_human_lines_never_json(
    served: RunningSandbox, proxy: HostileProxy, tmp_path: Path
) -> None:
    """On a terminal: the bar is drawn, warnings come as human lines above it, no JSON log
    line ever reaches the screen, and the final summary is whole and readable."""
    screens, last, out = run_in_pane(served, proxy, tmp_path)
    assert proxy.counts["html"] > 0, "no HTML page was served: no warning to show"
    with_bar = [s for s in screens if any("requests" in x and "credits" in x for x in s)]
    assert with_bar, f"no progress bar was ever drawn: {screens[-1]}"
    for screen in screens:
        assert not [line for line in screen if line.lstrip().startswith("{")], screen
        assert sum("ETA" in line for line in screen) <= 1, f"more than one bar: {screen}"
    shown = "\n".join(last)
    assert "warning: engine.pool.answer.unrecognised" in shown
    assert "EXIT=0" in last
    assert "run tty (live mode, new run): complete" in last
    assert "rows: 30 total, 30 valued, 0 problems, 0 pending" in last
    assert "exit 0; next: nothing: every row has a result or a problem" in last
    logged = [json.loads(line) for line in (out / "batchval.log").read_text().splitlines()]
    assert {"valuations.ingest.batch", "engine.pool.answer.unrecognised"} <= {
        e["event"] for e in logged
    }


@needs_tmux
@pytest.mark.slow
def test_json_on_a_terminal_when_asked(
    served: RunningSandbox, proxy: HostileProxy, tmp_path: Path
) -> None:
    """BATCHVAL_LOG_JSON=1 on a terminal: JSON log lines on stderr and no bar."""
    screens, last, _ = run_in_pane(served, proxy, tmp_path, BATCHVAL_LOG_JSON="1")
    assert "EXIT=0" in last
    assert any(is_json(line) for screen in screens for line in screen)
    assert not any("ETA" in line for screen in screens for line in screen)


@pytest.mark.slow
def test_json_lines_off_a_terminal(served: RunningSandbox, tmp_path: Path) -> None:
    """Off a terminal (cron, Airflow), stderr is JSON lines, every one of them."""
    source = portfolio(tmp_path / "book.csv", 3)
    done = run_cli("run", str(source), "--out", str(tmp_path / "out"), env=env_for(served, LIVE))
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines
    assert all(is_json(line) for line in lines), lines


def test_terminal_lines_are_warnings_and_above(capsys: pytest.CaptureFixture[str]) -> None:
    """Terminal mode prints a warning as one human line and drops info events."""
    with logs.kept():  # other tests' logging is theirs
        logs.configure(json_lines=False, redactor=logs.Redactor(["s3cret"]))
        log = logs.get_logger()
        log.info("valuations.ingest.batch", rows=5)
        log.warning("run.stopping", reason="signal", detail="token s3cret")
    err = capsys.readouterr().err
    assert "valuations.ingest.batch" not in err
    assert err.strip() == "warning: run.stopping (reason=signal detail=token [redacted])"
