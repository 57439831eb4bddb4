"""`make s3-local`: the tests' S3 server (SeaweedFS's `weed mini`, tests/objects_server.py)
started in the background for a person to try a run at an `s3://` URL, with keys and a
bucket, and the variables to export printed (and written to DIR/env.sh).

    python tests/s3_local.py start DIR [--port 8333]    # idempotent: says so if it runs
    python tests/s3_local.py stop DIR                   # by the process id in DIR/weed.pid

It serves on 127.0.0.1 only, with fixed keys documented like the sandbox's test keys (a
loopback server holding nothing of value); its data stays in DIR until DIR is removed. A
port taken (8333 by default) gives way to a free one, and the variables say which.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from objects_server import (
    _PORT_FLAGS,
    START_TIMEOUT,
    _command,
    _ready,
    free_ports,
    ready_client,
    weed_binary,
)

BUCKET = "batchval-local"
ACCESS_KEY_ID = "batchval-local"
SECRET_ACCESS_KEY = "batchval-local-secret"
REGION = "us-east-1"
STOP_TIMEOUT = 30.0


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _running(directory: Path, pid_file: str = "weed.pid") -> int | None:
    """The process id kept in `directory/pid_file`, while that process lives."""
    try:
        pid = int((directory / pid_file).read_text(encoding="utf-8"))
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def _variables(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
        "AWS_REGION": REGION,
        "AWS_ENDPOINT_URL": endpoint,
    }


def _say(directory: Path, endpoint: str, already: bool) -> None:
    lines = [f"export {name}={value}" for name, value in _variables(endpoint).items()]
    (directory / "env.sh").write_text("\n".join(lines) + "\n", encoding="utf-8")
    state = "already serves" if already else "serves"
    print(f"SeaweedFS {state} S3 at {endpoint}, bucket {BUCKET} (data in {directory})")
    print(f"the variables below are also in {directory / 'env.sh'}: . {directory / 'env.sh'}")
    print(*lines, sep="\n")
    print("stop it with: make s3-local-stop")


def start(directory: Path, port: int) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    if _running(directory) is not None:
        endpoint = (directory / "endpoint").read_text(encoding="utf-8").strip()
        _say(directory, endpoint, already=True)
        return 0
    weed = weed_binary()
    if weed is None:
        print("no `weed` binary: run `make .venv/.installed` first", file=sys.stderr)
        return 1
    # S3's port first (8333, or a free one if it is taken), then the rest, all free now.
    chosen = free_ports(len(_PORT_FLAGS))
    if port and _free(port) and port not in chosen:
        chosen[0] = port
    ports = dict(zip(_PORT_FLAGS, chosen, strict=True))
    s3_port = ports["s3.port"]
    endpoint = f"http://127.0.0.1:{s3_port}"
    data = directory / "data"
    data.mkdir(exist_ok=True)
    env = {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID}
    env["AWS_SECRET_ACCESS_KEY"] = SECRET_ACCESS_KEY
    command = _command(weed, data, ports, bucket=BUCKET)
    process = launched(command, env, directory, "weed.log", "weed.pid")
    (directory / "endpoint").write_text(endpoint, encoding="utf-8")
    client = ready_client(endpoint, ACCESS_KEY_ID, SECRET_ACCESS_KEY, BUCKET)
    if served(process, lambda: _ready(client), START_TIMEOUT):
        _say(directory, endpoint, already=False)
        return 0
    stop(directory)
    print(f"SeaweedFS did not serve S3 within {START_TIMEOUT:.0f} s: see {directory / 'weed.log'}")
    return 1


def stop(directory: Path) -> int:
    return stop_background(directory, "weed.pid", signal.SIGINT, "the local S3 server")


def launched(
    command: list[str], env: dict[str, str], directory: Path, log: str, pid_file: str
) -> subprocess.Popen[bytes]:
    """`command` started in `directory` in a session of its own, so that it outlives this
    script and the make that ran it, its output appended to `directory/log` and its
    process id kept in `directory/pid_file` (`make s3-local`, `make azure-local`)."""
    with (directory / log).open("ab") as out:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=directory,
            start_new_session=True,
        )
    (directory / pid_file).write_text(str(process.pid), encoding="utf-8")
    return process


def served(process: subprocess.Popen[bytes], ready: Callable[[], bool], timeout: float) -> bool:
    """Whether the launched server answers `ready` within `timeout` seconds, asked every
    0.2 s while its process lives."""
    began = time.monotonic()
    while process.poll() is None and time.monotonic() - began < timeout:
        if ready():
            return True
        time.sleep(0.2)
    return False


def stop_background(directory: Path, pid_file: str, how: signal.Signals, what: str) -> int:
    """Stop the server whose process id `directory/pid_file` keeps: `how`, then SIGKILL if
    it still runs after STOP_TIMEOUT (`make s3-local-stop`, `make azure-local-stop`)."""
    pid = _running(directory, pid_file)
    if pid is None:
        print(f"no {what.removeprefix('the ')} runs from {directory}")
        return 0
    os.kill(pid, how)
    began = time.monotonic()
    while _alive(pid) and time.monotonic() - began < STOP_TIMEOUT:
        time.sleep(0.2)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
    (directory / pid_file).unlink(missing_ok=True)
    print(f"stopped {what}; its data stays in {directory / 'data'}")
    return 0


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child (started by an earlier `make s3-local`)
        waited = 0
    if waited == pid:
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def command_line(
    argv: list[str],
    start: Callable[[Path, int], int],
    stop: Callable[[Path], int],
    port: int,
    doc: str,
) -> int:
    """`start DIR [--port N]` or `stop DIR`, for a local server's script (`doc`, its
    docstring, gives the help's first line)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("action", choices=("start", "stop"))
    parser.add_argument("directory", type=Path)
    parser.add_argument("--port", type=int, default=port)
    args = parser.parse_args(argv)
    if args.action == "start":
        return start(args.directory, args.port)
    return stop(args.directory)


def main(argv: list[str]) -> int:
    return command_line(argv, start, stop, 8333, __doc__ or "")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
