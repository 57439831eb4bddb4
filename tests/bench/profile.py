"""Where the client's CPU goes: `batchval run` of the cost's book under cProfile.

The same run as the client cost's (tests/bench/cost.py: 10,000 rows against a fresh
zero-latency, no-limit sandbox in another process), with `python -m cProfile` around it.
The profiler slows every Python call, so its own figure is not the cost's: what it gives
is the shares, each function's own time (not its callees') over the whole run's, grouped
by the package it belongs to. C code called from Python (a socket's send, SQLite, the event
loop's callbacks) is counted on the built-in it was called through.
"""

from __future__ import annotations

import collections
import dataclasses
import pstats
import re
from pathlib import Path

from bench.processes import PYTHON, run_measured
from bench.served import NO_DAILY_LIMIT, ServedSandbox

TOP_FUNCTIONS = 15
TOP_PACKAGES = 10


@dataclasses.dataclass(frozen=True, slots=True)
class Spent:
    """One function's or one package's own time under the profiler."""

    what: str
    seconds: float
    calls: int


@dataclasses.dataclass(frozen=True, slots=True)
class ClientProfile:
    valuations: int
    cpu_seconds: float  # the profiled process's, the profiler's own work included
    profiled_seconds: float  # the functions' own times summed (all of the main thread's)
    functions: tuple[Spent, ...]  # the most own time first
    packages: tuple[Spent, ...]

    def share(self, spent: Spent) -> float:
        return spent.seconds / self.profiled_seconds if self.profiled_seconds else 0.0


def client_profile(work: Path, book: Path) -> ClientProfile:
    """`batchval run` over `book` under cProfile, against a sandbox of its own."""
    out, stats = work / "profile-batchval", work / "profile-batchval.pstats"
    options = ["--no-rate-limit", *NO_DAILY_LIMIT]
    with ServedSandbox(options, work / "profile-batchval._internal.sandbox.log") as api:
        argv = [PYTHON, "-m", "cProfile", "-o", str(stats), "-m", "batchval", "run"]
        process = run_measured(
            [*argv, str(book), "--out", str(out)],
            log=work / "profile-batchval.log",
            env=api.client_env(),
        )
        valuations = api.ledger().count(201)
    return read_profile(stats, valuations, process.cpu_seconds)


def read_profile(path: Path, valuations: int, cpu_seconds: float) -> ClientProfile:
    """The functions and packages with the most own time in a cProfile file."""
    raw = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    functions: list[Spent] = []
    packages: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0])
    for (filename, line, name), (_, calls, own, _, _) in raw.items():
        package = package_of(filename, name)
        functions.append(Spent(function_name(filename, line, name), own, calls))
        packages[package][0] += own
        packages[package][1] += calls
    total = sum(f.seconds for f in functions)
    functions.sort(key=lambda f: -f.seconds)
    grouped = sorted(
        (Spent(name, seconds, int(calls)) for name, (seconds, calls) in packages.items()),
        key=lambda p: -p.seconds,
    )
    return ClientProfile(
        valuations,
        cpu_seconds,
        total,
        tuple(functions[:TOP_FUNCTIONS]),
        tuple(grouped[:TOP_PACKAGES]),
    )


_SITE = re.compile(r"site-packages/([^/]+)")
_STDLIB = re.compile(r"python3\.\d+/([^/]+)")


def package_of(filename: str, name: str) -> str:
    """batchval's rooms apart (`batchval/_internal/api`, `.../sending`, `.../store`, ...,
    the private package's top modules as `batchval/_internal`); a library by its package;
    C code by the built-in it was called through."""
    if filename == "~":
        return "C, called from Python (" + _builtin_kind(name) + ")"
    parts = Path(filename).parts
    if "batchval" in parts and "site-packages" not in parts:
        rest = parts[len(parts) - 1 - parts[::-1].index("batchval") :]
        depth = 3 if rest[1:2] == ("_internal",) else 2
        return "/".join(rest[:depth] if len(rest) > depth else rest[: depth - 1])
    found = _SITE.search(filename)
    if found:
        return found.group(1).removesuffix(".py")
    found = _STDLIB.search(filename)
    if found:
        return "Python's " + found.group(1).removesuffix(".py")
    return "other"


def _builtin_kind(name: str) -> str:
    found = re.search(r"of '([\w.]+?)\.", name) or re.search(r"method ([\w.]+?)\.", name)
    return found.group(1).lstrip("_") if found else "builtins"


def function_name(filename: str, line: int, name: str) -> str:
    if filename == "~":
        return name.replace("<", "{").replace(">", "}")
    parts = Path(filename).parts
    if "site-packages" in parts:
        parts = parts[parts.index("site-packages") + 1 :]
    elif "batchval" in parts:
        parts = parts[len(parts) - 1 - parts[::-1].index("batchval") :]
    else:
        parts = parts[-2:]
    return f"{'/'.join(parts)}:{line} {name}"


def profile_section(p: ClientProfile | None) -> list[str]:
    """docs/performance.md's "Where the client's CPU goes": the measured tables, then what
    was changed on them (CPU_HISTORY)."""
    if p is None:
        return []
    per = 1000 / p.valuations if p.valuations else 0.0
    return [
        "## Where the client's CPU goes",
        "",
        f"`batchval run` over the client cost's book ({p.valuations:,} valuations) under",
        "`python -m cProfile` (tests/bench/profile.py), against a sandbox of its own. The",
        f"profiler slows every Python call (the process took {p.cpu_seconds:.1f} s of CPU,",
        f"{p.cpu_seconds * per:.2f} ms a valuation), so read the shares: each function's own",
        "time (the clock's, not its callees'), over the main thread's. C code called from",
        "Python (a socket's send, SQLite, the event loop's) counts on the built-in or the",
        "function it was called through.",
        "",
        *_table(
            ["package", "share", "own ms per valuation", "calls per valuation"],
            [
                [
                    s.what,
                    f"{100 * p.share(s):.1f} %",
                    f"{s.seconds * per:.3f}",
                    f"{s.calls / max(p.valuations, 1):.1f}",
                ]
                for s in p.packages
            ],
        ),
        "",
        *_table(
            ["function", "share", "own ms per valuation", "calls per valuation"],
            [
                [
                    f"`{s.what}`",
                    f"{100 * p.share(s):.1f} %",
                    f"{s.seconds * per:.3f}",
                    f"{s.calls / max(p.valuations, 1):.1f}",
                ]
                for s in p.functions
            ],
        ),
        "",
        *CPU_HISTORY.strip("\n").splitlines(),
        "",
    ]


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return out + ["| " + " | ".join(row) + " |" for row in rows]


# What the profile led to, by hand (the tables above are measured on every `make bench`).
CPU_HISTORY = """
Read from these tables and from py-spy over the same run (every thread, sampled, no
slowing): nearly all of the client's CPU is in the stack under one call, not in batchval.
anyio's streams (a checkpoint, a cancel scope for the timeout and a wait on every read and
write; the socket's own send counts on `send`: two a call, the headers and then the body,
as in the sequential loop), httpcore, h11 and httpx take more than half; batchval's own
code a sixth or less (reading the answer to settle it, and writing results.parquet; the
ledger's charge line; the group commits' SQLite writes); the event
loop the rest. Progress, the rate controller, the redactor, the token cache, polars and
pyarrow are each under 0.5 %; structlog 0.8 % (the per-call `api.call` is a debug event,
dropped at the default level before any processor runs, but the lazy logger is bound anew
for each call); SQLite's commits every 0.2 s wait on the disk rather than use the CPU.

Issue 38, item 4 (November 2026). The event loop itself was the largest cost that was
batchval's to choose: on asyncio's own loop, py-spy found 27 % of the samples in asyncio's
Python code (the loop's turns, the selector, the socket transport) and 4 % in `selectors`.
Since then `sending/loops` runs the loop on uvloop where it is installed (a runtime
dependency everywhere but Windows), with anyio, httpcore and httpx as they were; the sandbox
keeps asyncio's loop. On a machine loaded 2 to 9.5 (1-minute load average, 2 cores), over
10,000 valuations each, CPU per valuation:

| batchval | runs | CPU per valuation | ÷ the sequential loop's, same run |
|---|---|---|---|
| on asyncio's loop, `--only cost`, load 6.0-9.5 | 3 | 1.25, 1.61, 1.65 ms | 1.56, 2.27, 1.92 |
| on asyncio's loop, paired with the next, load 5.0-7.8 | 3 | 1.71, 1.46, 1.59 ms | |
| on uvloop, paired with the one before, load 5.0-7.8 | 3 | 1.25, 1.29, 1.36 ms | |
| on uvloop, `--only cost`, load 4.2-8.5 | 3 | 1.67, 1.29, 1.19 ms | 2.17, 2.02, 1.34 |
| on uvloop, `--only cost`, load 2.1-3.1 | 2 | 0.98, 1.19 ms | 1.36, 1.65 |
| on asyncio's loop, `--only cost`, between those two, load 2.8-3.3 | 1 | 1.18 ms | 1.76 |
| on uvloop, `--only cost`, quiet, load 0.5-1.0 | 3 | 1.00, 0.91, 1.01 ms | 1.67, 1.61, 1.50 |

The paired runs (one on each loop, back to back, three times) show uvloop saving 0.17 to
0.46 ms a valuation, about a sixth on average. The ratio itself moves by a third with the
machine's load (the sequential loop measured 0.64 to 0.89 ms over these runs), so it is
read from a quiet machine's `make bench`. Latency hiding at 128 in flight (`--only
hiding`, single runs, load 2.4-5.4) measured 0.84 and 0.92 on uvloop, 0.90 on asyncio's
loop. Since issue 60 an answer is read once, when it is settled: the checkpoint keeps its
record (about 260 bytes a valuation without extras, beside the raw answer's 530), and the
writer makes its rows from the records (results.parquet of 200,000 valuations written in
5.4 s, not 8.9 s, in-process on this machine). Not done: the second `send` of each call
(httpcore writes the headers and the body apart; joining them would take a network backend
of batchval's own under httpcore, which is what a hand-made transport begins with).
"""
