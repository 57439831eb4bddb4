"""`python -m batchval`: the console script by the interpreter's own path, so that a caller
that knows only `sys.executable` (the Airflow operator, a venv not on PATH) runs the batchval
installed beside it."""

from batchval._internal.cli import console

console()
