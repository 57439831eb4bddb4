"""`make test-dates`: the tests that touch the calendar (marked `dates`) with the whole pytest
process's clock, and every process it starts, at each hard instant of `clocks.INSTANTS`, one
instant after another; a summary line an instant, and exit 1 when any failed.

    python tests/dates.py [INSTANT ...] [-- PYTEST_ARGS]
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import clocks  # noqa: E402  (a module of the tests' folder, found by the line above)


def main(argv: list[str]) -> int:
    names, extra = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    )
    unknown = set(names) - set(clocks.INSTANTS)
    if unknown:
        print(f"not an instant: {sorted(unknown)}; the instants: {list(clocks.INSTANTS)}")
        return 2
    failed: list[str] = []
    for name in names or list(clocks.INSTANTS):
        instant = clocks.INSTANTS[name]
        # The offset is taken as pytest starts: the clock then ticks on from the instant
        # through the collection and the tests (a minute or two: a year's end is crossed).
        env = clocks.at(instant)
        env[clocks.INSTANT_VARIABLE] = instant.isoformat()
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-n", "3", "--dist", "worksteal",
             "-m", "dates", "-p", "no:cacheprovider", *extra],
            cwd=HERE.parent,
            env=env,
            check=False,
        )  # fmt: skip
        took = time.monotonic() - started
        when = f"{instant:%Y-%m-%d %H:%M:%S} UTC"
        print(f"test-dates: {name} ({when}): exit {done.returncode}, {took:.0f} s")
        if done.returncode != 0:
            failed.append(name)
    if failed:
        print(f"test-dates: failed at {', '.join(failed)}")
        return 1
    print("test-dates: every instant passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
