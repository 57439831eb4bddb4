"""batchval: bulk valuations through the Partner Valuation API, never paid twice.

The Python API (docs/how-to/python.md): `run`, `value`, `analyse_streets` and `open_run`, each
giving a `Run`, their settings one frozen `Settings`; errors a person must act on are
`RunError`s (a `BatchvalError`; the whole tree in `batchval.exceptions`, `FolderInUse` for
a folder another call holds). The
command line is its first client. Everything else in the package may change without
notice.
"""

from batchval import exceptions as exceptions  # the public module, `batchval.exceptions`
from batchval._internal.public import (
    Run,
    Settings,
    Stop,
    analyse_streets,
    arun,
    avalue,
    open_run,
    run,
    value,
)
from batchval._version import __version__
from batchval.exceptions import BatchvalError, FolderInUse, RunError

__all__ = [
    "BatchvalError",
    "FolderInUse",
    "Run",
    "RunError",
    "Settings",
    "Stop",
    "__version__",
    "analyse_streets",
    "arun",
    "avalue",
    "open_run",
    "run",
    "value",
]


def __dir__() -> list[str]:
    """The public names, `__all__`: what `dir()` and an editor's completion show (the
    modules behind this face are not part of it)."""
    return sorted(__all__)
