"""A batchval connection tested as Airflow's `airflow connections test` and the UI's Test
button ask (`hook.BatchvalHook.test_connection`), without Airflow: the connection's fields
as batchval's environment, then `batchval check` run as a process, as the operator runs
batchval (docs/how-to/airflow.md, "The connection").

`batchval check` fetches a token (free), reads the API with it and says the token's
scope: `live` (partners:read, charged) or `test` (partners:test, fake figures, never
charged). The connection's optional extra `scope` states which it must be: a live job's
connection holding test credentials fails its test, as `--live` would refuse it.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Mapping, Sequence

from batchval.airflow._rounds import ConnectionFields, api_environment, extra_field

# The connection's fields batchval needs, by their names on the form.
NEEDED = {"host": "Base URL", "login": "Client ID", "password": "Client secret"}
SCOPES = ("live", "test")
# `batchval check`'s line for the token's scope: `ok    mode: live: ...`.
_MODE = re.compile(r"^ok\s+mode: (live|test)\b(.*)$", re.MULTILINE)
# Its last line: `check: ok (exit 0)` or `check: <what failed> (exit N)`.
_VERDICT = re.compile(r"^check: (.*) \(exit \d+\)$", re.MULTILINE)
CHECK_TIMEOUT_SECONDS = 60

# How `batchval check` is run: its arguments and environment in; its exit code and its
# output (stdout, then stderr) out.
Runner = Callable[[Sequence[str], Mapping[str, str]], tuple[int, str]]


def missing_fields(connection: ConnectionFields) -> list[str]:
    """The form's names of the fields batchval needs that the connection leaves empty."""
    found = [label for name, label in NEEDED.items() if not getattr(connection, name)]
    if not extra_field(connection, "auth_url"):
        found.append("Token URL (extra auth_url)")
    return found


def stated_scope(connection: ConnectionFields) -> str | None:
    """The scope the connection says its credentials have (`live`, `test`), or None."""
    scope = extra_field(connection, "scope")
    if scope in (None, ""):
        return None
    if scope not in SCOPES:
        raise ValueError(f"the connection's scope is {scope!r}: give live, test or none")
    return str(scope)


def verdict(code: int, output: str, scope: str | None) -> tuple[bool, str]:
    """`airflow connections test`'s answer from `batchval check`'s exit code and output:
    whether the connection works, and a line that says so (the token's scope), or what
    failed; a scope other than the connection states is a failure."""
    if code != 0:
        said = _VERDICT.findall(output)
        return False, f"batchval check failed (exit {code}): {said[-1] if said else output}"
    found = _MODE.search(output)
    if found is None:
        return True, "a token was fetched and the API answered; it did not say its scope"
    mode = found.group(1)
    words = {
        "live": "live scope (partners:read): calls are charged",
        "test": "test scope (partners:test): fake figures, never charged",
    }[mode]
    if scope is not None and mode != scope:
        return False, f"the credentials are of the {words}, but the connection says {scope}"
    return True, f"a token was fetched and the API answered: {words}"


def process(command: Sequence[str]) -> Runner:
    """batchval run as a process, as the operator runs it (`command`: its
    `batchval_command`); the runner the hook tests a connection with."""

    def run(arguments: Sequence[str], env: Mapping[str, str]) -> tuple[int, str]:
        done = subprocess.run(
            [*command, *arguments],
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT_SECONDS,
            check=False,
        )
        return done.returncode, done.stdout + done.stderr

    return run


def test_connection(
    connection: ConnectionFields, environ: Mapping[str, str], run: Runner
) -> tuple[bool, str]:
    """Test `connection` by `batchval check` (run by `run`: `process(command)` for the
    hook), with the worker's environment less its own BATCHVAL_ variables and plus the
    connection's."""
    missing = missing_fields(connection)
    if missing:
        return False, f"the connection has no {', '.join(missing)}"
    try:
        scope = stated_scope(connection)
    except ValueError as exc:
        return False, str(exc)
    env = {k: v for k, v in environ.items() if not k.startswith("BATCHVAL_")}
    env.update(api_environment(connection))
    try:
        code, output = run(["check"], env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"batchval check could not be run: {exc}"
    return verdict(code, output, scope)
