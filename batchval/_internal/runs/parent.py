"""A command that sends (`run`, `streets`, `verify`: `cli.SENDING_COMMANDS`) dies with its
parent, whatever kills the parent: an Airflow task
killed with `kill -9` while its batchval round goes on, a cron wrapper's shell, any
script that started batchval and is gone. No orphan goes on valuing unwatched.

A daemon thread notes when the process is given another parent (its own has ended: the
kernel hands an orphan to init or to a subreaper) and stops the process as SIGTERM would:
the command stops at its next safe point (a run exits 75, and the same command resumes
with the same keys). A stop that has not ended the process `GONE_SECONDS` later ends it
at once, as a kill would: the run's memory keeps what was done, and nothing sent is sent
again under another key.

Not watched: a process whose parent is init already (a daemon, a container's main
process); with `BATCHVAL_OUTLIVE_PARENT=1`; and, unless `BATCHVAL_OUTLIVE_PARENT=0` says
to watch, one that asked to outlive its terminal: started with SIGHUP ignored (`nohup`)
or as the leader of a session of its own (`setsid`). The Airflow operator, which starts
each round in a session of its own, says `0`. The other commands are never watched: a
`batchval sandbox` a script starts in the background outlives it, as servers do. Only
the stdlib here: the console script starts it before anything else is imported.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Mapping

# How often the parent is looked for, and how long a stop may take once it is gone.
POLL_SECONDS = 0.2
GONE_SECONDS = 1.5
OUTLIVE_VARIABLE = "BATCHVAL_OUTLIVE_PARENT"
_RESUMABLE = 75  # outcome.ExitCode.RESUMABLE, not imported: this module is the first
_SAID = b"batchval: the parent process is gone: stopping (the same command resumes)\n"


def watch_parent(env: Mapping[str, str]) -> threading.Thread | None:
    """Start watching this process's parent (the module's rule); the watching thread, or
    None where the process is not watched."""
    parent, said = os.getppid(), env.get(OUTLIVE_VARIABLE)
    detached = signal.getsignal(signal.SIGHUP) is signal.SIG_IGN or os.getsid(0) == os.getpid()
    if parent <= 1 or said == "1" or (detached and said != "0"):
        return None
    thread = threading.Thread(target=_watch, args=(parent,), name="batchval-parent", daemon=True)
    thread.start()
    return thread


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(POLL_SECONDS)
    with contextlib.suppress(OSError):  # the parent may have held stderr's other end
        os.write(2, _SAID)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(GONE_SECONDS)
    os._exit(_RESUMABLE)
