"""`make azure-local`: the tests' Azure Blob Storage emulator (Azurite, tests/azure_server.py)
started in the background for a person to try a run, or an Airflow night, at an `az://` URL:
an account, its key and a container, the variables to export printed (and written to
DIR/env.sh) with the Airflow connection that says the same.

    python tests/azure_local.py start DIR [--port 10000]    # idempotent: says so if it runs
    python tests/azure_local.py stop DIR                    # by the process id in DIR/azurite.pid

It serves on 127.0.0.1 only, under a fixed account and key documented like the sandbox's
test keys (a loopback emulator holding nothing of value); its data stays in DIR until DIR
is removed. A port taken (10000, Azurite's own, by default) gives way to a free one, and
the variables say which.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

from azure_server import START_TIMEOUT, AzureServer, _command, azurite_binary, container_request
from objects_server import free_ports
from s3_local import _free, _running, command_line, launched, served, stop_background

ACCOUNT = "batchvallocal"
# Base64 of 64 bytes, as Azure shows an account key; this one is public, like the sandbox's.
KEY = "YmF0Y2h2YWwtbG9jYWwtYXp1cml0ZS1rZXktZm9yLWxvb3BiYWNrLW9ubHktbm90LWEtc2VjcmV0LTAwMDAwMA=="
CONTAINER = "batchval-local"
PID_FILE = "azurite.pid"


def _say(directory: Path, server: AzureServer, already: bool) -> None:
    lines = [f"export {name}={value}" for name, value in server.env().items()]
    (directory / "env.sh").write_text("\n".join(lines) + "\n", encoding="utf-8")
    state = "already serves" if already else "serves"
    print(f"Azurite {state} Blob Storage at {server.endpoint}, container {CONTAINER} "
          f"(data in {directory})")  # fmt: skip
    print(f"the variables below are also in {directory / 'env.sh'}: . {directory / 'env.sh'}")
    print(*lines, sep="\n")
    print("an Airflow connection to it (docs/how-to/airflow.md):")
    print(
        f"airflow connections add batchval_azure --conn-type wasb --conn-login {ACCOUNT} "
        f"--conn-password {KEY} --conn-host {server.endpoint}"
    )
    print("stop it with: make azure-local-stop")


def start(directory: Path, port: int) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    if _running(directory, PID_FILE) is not None:
        kept = int((directory / "port").read_text(encoding="utf-8"))
        _say(directory, AzureServer(kept, ACCOUNT, KEY, CONTAINER, 0, 0.0), already=True)
        return 0
    binary = azurite_binary()
    if binary is None:
        print("no `azurite-blob`: run `make .venv/.installed` first", file=sys.stderr)
        return 1
    if not (port and _free(port)):
        (port,) = free_ports(1)
    data = directory / "data"
    data.mkdir(exist_ok=True)
    env = {**os.environ, "AZURITE_ACCOUNTS": f"{ACCOUNT}:{KEY}"}
    process = launched(_command(binary, data, port), env, directory, "azurite.log", PID_FILE)
    (directory / "port").write_text(str(port), encoding="utf-8")
    server = AzureServer(port, ACCOUNT, KEY, CONTAINER, process.pid, 0.0)

    def ready() -> bool:  # the container made (or there): the emulator serves
        with contextlib.suppress(OSError):
            return container_request(server, "PUT", CONTAINER) in (201, 409)
        return False

    if served(process, ready, START_TIMEOUT):
        _say(directory, server, already=False)
        return 0
    stop(directory)
    print(f"Azurite did not serve within {START_TIMEOUT:.0f} s: see {directory / 'azurite.log'}")
    return 1


def stop(directory: Path) -> int:
    # SIGTERM: what Node stops on.
    return stop_background(directory, PID_FILE, signal.SIGTERM, "the local Azurite")


def main(argv: list[str]) -> int:
    return command_line(argv, start, stop, 10000, __doc__ or "")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
