"""`run --metrics-file`: Prometheus text that the Prometheus client's parser reads, during a
run and after it, with figures that match the sandbox's ledger."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support import BATCHVAL, LIVE, InProcess, env_for, portfolio, wait_until

from batchval._internal.api.auth import Credentials
from batchval._internal.sandbox.config import Faults, RateLimit
from batchval._internal.sandbox.server import RunningSandbox
from batchval._internal.valuations.metrics import RunMetrics, render, write_metrics

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    """Every sample, by name and labels (less `name`), as the Prometheus parser reads them."""
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        assert family.type == "gauge", family
        for sample in family.samples:
            labels = frozenset((k, v) for k, v in sample.labels.items() if k != "name")
            found[(sample.name, labels)] = sample.value
    return found


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((f"batchval_{name}", frozenset(labels.items())))


def config(tmp_path: Path, **run: object) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text("run:\n" + "".join(f"  {k}: {v}\n" for k, v in run.items()))
    return path


@pytest.mark.slow
def test_metrics_during_and_after_a_run(served: RunningSandbox, tmp_path: Path) -> None:
    """While a slow run goes, the file parses and says running with rows still pending;
    at the end it says the exit code, the rows, credits and calls the ledger shows."""
    served.sandbox.set_faults(Faults(latency_ms=150))
    source = portfolio(tmp_path / "book.csv", 24)
    metrics = tmp_path / "textfile" / "batchval-nightly.prom"
    metrics.parent.mkdir()
    args = [BATCHVAL, "run", str(source), "--out", str(tmp_path / "out")]
    args += ["--config", str(config(tmp_path, metrics_seconds=0.2, concurrency=1))]
    args += ["--metrics-file", str(metrics)]
    started = time.time()
    with subprocess.Popen(
        args, env=env_for(served, LIVE), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as process:
        during: list[Samples] = []

        def ended() -> bool:  # and meanwhile, what the file says while the run goes
            if metrics.exists():
                seen = parse(metrics.read_text())
                if value(seen, "running") == 1:
                    during.append(seen)
            return process.poll() is not None

        wait_until(ended, 120, "the run to end", every=0.1)
        assert process.returncode == 0, process.stderr.read() if process.stderr else ""
    assert during, "the file was never written while the run went"
    first = during[0]
    assert value(first, "exit_code") is None
    rows = [value(first, "rows", outcome=o) for o in ("valued", "problem", "pending")]
    assert sum(r or 0 for r in rows) == 24
    assert any((value(s, "rows", outcome="pending") or 0) > 0 for s in during)

    after = parse(metrics.read_text())
    ledger = served.sandbox.ledger
    assert value(after, "running") == 0
    assert value(after, "exit_code") == 0
    assert value(after, "rows", outcome="valued") == 24
    assert value(after, "rows", outcome="pending") == 0
    assert value(after, "credits_spent") == ledger.credits_charged(LIVE.client_id) == 240
    assert value(after, "calls", status="201") == 24
    assert value(after, "rate_limited_calls") == 0
    last = value(after, "last_success_timestamp_seconds")
    assert last is not None
    assert started - 1 <= last <= time.time() + 1
    assert (value(after, "run_seconds") or 0) >= 24 * 0.15
    assert [p.name for p in metrics.parent.iterdir()] == [metrics.name]  # no temporary left


@pytest.mark.slow
def test_429s_are_counted(served: RunningSandbox, tmp_path: Path, batchval: InProcess) -> None:
    """A tight short-term limit: the 429s met are in the calls by status and the 429 count."""
    served.sandbox.config.rate_limit = RateLimit(rate_per_second=5.0, burst=2)
    source = portfolio(tmp_path / "book.csv", 16)
    metrics = tmp_path / "run.prom"
    done = batchval(
        "run", str(source), "--out", str(tmp_path / "out"), "--concurrency", "8",
        "--metrics-file", str(metrics), env=env_for(served, LIVE),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    after = parse(metrics.read_text())
    limited = sum(1 for r in served.sandbox.ledger.requests if r.status == 429)
    assert limited > 0, "the limit was never met: the test shows nothing"
    assert value(after, "rate_limited_calls") == limited
    assert value(after, "calls", status="429") == limited


@pytest.mark.slow
def test_a_failed_run_keeps_the_last_success(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A run refused by the account (77) writes its exit code and keeps the time of the
    last run that exited 0, in another DIR."""
    metrics = tmp_path / "run.prom"
    source = portfolio(tmp_path / "book.csv", 3)
    ok = batchval(
        "run", str(source), "--out", str(tmp_path / "night1"), "--metrics-file", str(metrics),
        env=env_for(served, LIVE),
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    success = value(parse(metrics.read_text()), "last_success_timestamp_seconds")
    refused = env_for(served, Credentials(LIVE.client_id, "wrong-secret"))
    failed = batchval(
        "run", str(source), "--out", str(tmp_path / "night2"), "--metrics-file", str(metrics),
        env=refused,
    )  # fmt: skip
    assert failed.returncode == 77, failed.stderr
    after = parse(metrics.read_text())
    assert value(after, "exit_code") == 77
    assert value(after, "rows", outcome="pending") == 3
    assert value(after, "last_success_timestamp_seconds") == success


@pytest.mark.slow
def test_a_refused_input_writes_its_exit_code(tmp_path: Path, batchval: InProcess) -> None:
    """An input that cannot be used: exit 65 in the file, no rows, no last success."""
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    metrics = tmp_path / "run.prom"
    done = batchval(
        "run", str(empty), "--out", str(tmp_path / "out"), "--metrics-file", str(metrics),
        env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 65, done.stderr
    after = parse(metrics.read_text())
    assert value(after, "exit_code") == 65
    assert not any(name == "batchval_rows" for name, _ in after)
    assert value(after, "last_success_timestamp_seconds") is None


@pytest.mark.slow
def test_an_unwritable_metrics_file_never_changes_the_outcome(
    served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """A metrics file in a directory that does not exist: the run still exits 0."""
    source = portfolio(tmp_path / "book.csv", 2)
    done = batchval(
        "run", str(source), "--out", str(tmp_path / "out"),
        "--metrics-file", str(tmp_path / "missing" / "run.prom"), env=env_for(served, LIVE),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "run.metrics.unwritable" in done.stderr


@pytest.mark.parametrize("name", ['with "quotes"', "back\\slash", "new\nline"])
def test_label_values_are_escaped(name: str) -> None:
    """Any file name is a valid label value: the parser reads it back as it was."""
    text = render(
        RunMetrics({"valued": 1}, 10, {"201": 1}, 0, 1.5, 0), name=name, last_success=None
    )
    families = list(text_string_to_metric_families(text))
    assert {s.labels["name"] for f in families for s in f.samples} == {name}


def test_write_reads_back_the_last_success(tmp_path: Path) -> None:
    """A success records `now`; a later failure keeps it."""
    path = tmp_path / "m.prom"
    write_metrics(path, RunMetrics({}, 0, {}, 0, 1.0, 0), now=1700000000.25)
    write_metrics(path, RunMetrics({}, 0, {}, 0, 1.0, 75), now=1800000000.0)
    after = parse(path.read_text())
    assert value(after, "last_success_timestamp_seconds") == 1700000000.25
    assert value(after, "exit_code") == 75
