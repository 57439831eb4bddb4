"""sending/progress: the bar's figures fit an 80-column terminal, for a million requests."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from batchval._internal import logs
from batchval._internal.sending.pool import PoolStats
from batchval._internal.sending.progress import Progress


@pytest.mark.parametrize("width", [80, 160])
def test_the_bar_s_figures_fit_the_terminal(monkeypatch: pytest.MonkeyPatch, width: int) -> None:
    screen = io.StringIO()
    console = Console(file=screen, width=width, force_terminal=True, color_system=None)
    monkeypatch.setattr(logs, "_CONSOLE", console)
    progress = Progress(pending_requests=1_000_000, bar=True, every_seconds=10)
    progress._started -= 3_000  # 41 requests a second: as fast as the API lets a run go
    progress.update(PoolStats(calls=123_457, valued=123_456, credits=1_234_560))
    assert progress._bar is not None
    console.print(progress._bar.get_renderable())
    [line] = [x for x in screen.getvalue().splitlines() if x.strip()]
    assert len(line) <= width
    for figure in ("valuing", "123456/1000000 requests", "12%", "41.2/s", "1234560 credits"):
        assert figure in line, line
    assert "ETA 5:" in line  # 876,544 requests at 41.2 a second: 5 h 55 min
