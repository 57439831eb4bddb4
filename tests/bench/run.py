"""`make bench`: speed and memory figures, printed (never asserted).

    python tests/bench/run.py [--rows 500000] [--paced-rows 600]

- ingest: read + validate + key + checkpoint of a synthetic CSV, rows/s and peak memory
  (in a child process, so the figure is the pipeline's own);
- writer: results.parquet from a filled checkpoint, rows/s;
- pacing: a live run against a sandbox with a short-term limit (20/s, latency 30 ms):
  achieved calls/s against the limit, and 429s seen;
- throughput: a run against a sandbox with no limit, calls/s the client sustains.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BATCHVAL = str(Path(sys.executable).with_name("batchval"))
POSTCODE_AREAS = ["SW", "M", "LS", "CF", "BS", "NE", "B", "L", "S", "NG", "LE", "CV", "OX"]


def synthetic_csv(path: Path, rows: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    kinds = ["detached", "semi_detached", "terraced", "flat"]
    with path.open("w", encoding="utf-8") as out:
        out.write("loan_id,postcode,property_type,bedrooms,floor_area_sqm,year_built,reference\n")
        for n in range(rows):
            area = rng.choice(POSTCODE_AREAS)
            unit = f"{rng.randint(1, 9)}{rng.choice('ABDEFGHJ')}{rng.choice('LNPQRSTU')}"
            postcode = f"{area}{rng.randint(1, 20)} {unit}"
            floor = f"{rng.uniform(30, 250):.1f}" if rng.random() < 0.6 else ""
            year = str(rng.randint(1850, 2024)) if rng.random() < 0.7 else ""
            out.write(
                f"LN-{n:08d},{postcode},{rng.choice(kinds)},{rng.randint(1, 6)},{floor},{year},"
                f"CASE-{n:08d}\n"
            )


_INGEST_CHILD = """
import json, resource, sys, time
from pathlib import Path
from batchval.input import InputOptions, open_input
from batchval.store.checkpoint import Checkpoint
from batchval.run.keys import idempotency_key
source, out = Path(sys.argv[1]), Path(sys.argv[2])
started = time.perf_counter()
checkpoint = Checkpoint.open(out)
rows = 0
for batch in open_input(source, InputOptions()).batches():
    items, requests = [], {}
    for number, request, field, rule, detail, passthrough in batch.select(
        "row_number", "request_json", "field", "rule", "detail", "passthrough_json"
    ).iter_rows():
        key = idempotency_key("bench", request) if request is not None else None
        if key is not None:
            requests[key] = request
        items.append((number, key, field, rule, detail, passthrough))
    checkpoint.add_rows(items, list(requests.items()))
    rows += len(items)
checkpoint.finish_ingest()
seconds = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"rows": rows, "seconds": seconds, "peak_mib": peak}))
"""

_WRITER_CHILD = """
import json, sys, time
from pathlib import Path
from batchval.output.writer import write_results
from batchval.store.checkpoint import Checkpoint
out = Path(sys.argv[1])
checkpoint = Checkpoint.open(out)
answer = json.dumps({"id": "val_" + "0" * 26, "valuedAt": "2026-11-22T00:00:00Z",
  "valuation": {"estimate": 250000, "range": {"low": 230000, "high": 270000, "coverage": 0.8},
  "currency": "GBP", "indexedTo": "2026-09"}, "location": {"sector": "SW1A 2",
  "localAuthority": "E09000033"}, "dataQuality": "partial",
  "model": {"version": "2024-11-04T09:30:00Z"},
  "input": {"postcode": "SW1A 2AA", "propertyType": "terraced", "floorAreaSqm": 80,
  "floorAreaSource": "bedrooms", "bedrooms": 3}, "charge": {"credits": 10, "balanceAfter": 5}})
keys = [f"k{n}" for n in range(int(sys.argv[2]))]
checkpoint.add_rows([(n + 1, k, None, None, None, '{"loan_id":"x"}') for n, k in enumerate(keys)],
                    [(k, "{}") for k in keys])
with checkpoint.transaction():
    for k in keys:
        checkpoint.record_answer(k, answer.encode())
        checkpoint.record_valuation(k, 10)
checkpoint.finish_ingest()
started = time.perf_counter()
rows = write_results(checkpoint, out / "results.parquet", ["loan_id"])
print(json.dumps({"rows": rows, "seconds": time.perf_counter() - started}))
"""


def bench_ingest(rows: int, work: Path) -> None:
    source = work / "book.csv"
    synthetic_csv(source, rows)
    out = work / "ingest"
    out.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", _INGEST_CHILD, str(source), str(out)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    figures = json.loads(done.stdout)
    print(
        f"ingest    {figures['rows']:>9,} rows in {figures['seconds']:6.2f} s = "
        f"{figures['rows'] / figures['seconds']:>9,.0f} rows/s, "
        f"peak {figures['peak_mib']:,.0f} MiB"
    )


def bench_writer(rows: int, work: Path) -> None:
    out = work / "writer"
    out.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", _WRITER_CHILD, str(out), str(rows)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    figures = json.loads(done.stdout)
    print(
        f"writer    {figures['rows']:>9,} rows in {figures['seconds']:6.2f} s = "
        f"{figures['rows'] / figures['seconds']:>9,.0f} rows/s (results.parquet)"
    )


def _live_run(rows: int, work: Path, name: str, sandbox_args: list[str]) -> dict[str, object]:
    from batchval.sandbox.app import Sandbox
    from batchval.sandbox.config import Faults, RateLimit, SandboxConfig
    from batchval.sandbox.server import serve_in_thread

    rate = None
    if "--rate" in sandbox_args:
        rate = RateLimit(float(sandbox_args[sandbox_args.index("--rate") + 1]), 20)
    config = SandboxConfig(rate_limit=rate)
    latency = float(sandbox_args[sandbox_args.index("--latency-ms") + 1])
    config.faults = Faults(latency_ms=latency, latency_jitter_ms=latency / 2)
    source = work / f"{name}.csv"
    synthetic_csv(source, rows, seed=2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATCHVAL_")}
    with serve_in_thread(Sandbox(config)) as served:
        env.update(
            BATCHVAL_BASE_URL=served.base_url,
            BATCHVAL_AUTH_URL=served.auth_url,
            BATCHVAL_CLIENT_ID="sandbox-live",
            BATCHVAL_CLIENT_SECRET="sandbox-live-secret",
        )
        started = time.perf_counter()
        subprocess.run(
            [BATCHVAL, "run", str(source), "--out", str(work / name), "--concurrency", "8"],
            env=env, capture_output=True, check=False,
        )  # fmt: skip
        seconds = time.perf_counter() - started
        early = len(served.sandbox.ledger.early_requests())
    summary = json.loads((work / name / "summary.json").read_text())
    return {"seconds": seconds, "summary": summary, "early": early}


def bench_pacing(rows: int, work: Path) -> None:
    result = _live_run(rows, work, "paced", ["--rate", "20", "--latency-ms", "30"])
    summary = result["summary"]
    assert isinstance(summary, dict)
    calls = summary["calls"]["this_invocation"]
    sending = float(summary["seconds"])
    print(
        f"pacing    {calls:>9,} calls in {sending:6.2f} s = {calls / sending:6.1f} calls/s "
        f"against a limit of 20/s ({calls / sending / 20:.0%}), "
        f"{summary['rate_limited']['this_invocation']} 429s, {result['early']} early calls"
    )


def bench_throughput(rows: int, work: Path) -> None:
    result = _live_run(rows, work, "open", ["--latency-ms", "5"])
    summary = result["summary"]
    assert isinstance(summary, dict)
    calls = summary["calls"]["this_invocation"]
    print(
        f"throughput{calls:>9,} calls in {float(summary['seconds']):6.2f} s = "
        f"{calls / float(summary['seconds']):6.1f} calls/s with no limit (8 workers, 5 ms latency)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--paced-rows", type=int, default=600)
    parser.add_argument("--open-rows", type=int, default=3000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="batchval-bench-") as scratch:
        work = Path(scratch)
        bench_ingest(args.rows, work)
        bench_writer(min(args.rows, 200_000), work)
        bench_pacing(args.paced_rows, work)
        bench_throughput(args.open_rows, work)


if __name__ == "__main__":
    main()
