"""The command line as the Python API's first client (issue 37, part 3): `batchval run` and
`batchval streets` reach the engine only through `batchval`'s public names, and print and
exit with what the API gives them."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import env_for, portfolio, run_in_process

import batchval
from batchval._internal import public
from batchval._internal.sandbox.server import RunningSandbox
from batchval._internal.streets.runner import Streets
from batchval._internal.valuations.runner import Runner

CLI = Path(__file__).resolve().parents[2] / "batchval" / "_internal" / "cli.py"
# The commands that are the API's clients, and the public function each calls.
CLIENTS = {"run": "run", "streets": "analyse_streets"}
# What those commands may use of batchval beside its public names: `logs`, since logging is
# configured once at the entry point and the API never configures a host's logging.
ENTRY_POINT = frozenset({"batchval._internal.logs"})


def _imported(tree: ast.Module) -> dict[str, str]:
    """Each name cli.py's module level binds to something of batchval: the module or the
    object it stands for (`batchval` for `import batchval`)."""
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                found[alias.asname or alias.name.partition(".")[0]] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                found[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return {name: what for name, what in found.items() if what.startswith("batchval")}


def _body(function: ast.FunctionDef) -> Iterator[ast.AST]:
    """Every node of a function but its decorators (click's options are parsing: `--book`
    and `--live` are declared beside the code that reads them)."""
    for statement in function.body:
        yield from ast.walk(statement)


def engine_reached(source: str, command: str) -> list[str]:
    """What `command`'s function in `source` (and every function of the module it calls,
    at any depth) uses of batchval that is neither a public name of `batchval` nor the
    entry point's logging: a function-level import of batchval, a module-level batchval
    name, or `batchval.X` for an X not in `batchval.__all__`."""
    tree = ast.parse(source)
    imported = _imported(tree)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    seen, todo, found = set(), [command], []
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for node in _body(functions[name]):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("batchval"):
                found.append(f"{name}: from {node.module} import ...")
            elif isinstance(node, ast.Import):
                found += [f"{name}: import {a.name}" for a in node.names if "batchval" in a.name]
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if imported.get(node.value.id) == "batchval" and node.attr not in batchval.__all__:
                    found.append(f"{name}: batchval.{node.attr}")
            elif isinstance(node, ast.Name):
                if node.id in functions:
                    todo.append(node.id)
                elif node.id in imported and imported[node.id] not in {"batchval", *ENTRY_POINT}:
                    found.append(f"{name}: {node.id} ({imported[node.id]})")
    return found


@pytest.mark.parametrize("command", sorted(CLIENTS))
def test_the_command_reaches_the_engine_only_through_public_names(command: str) -> None:
    """cli.py's `run` and `streets`, and every helper they call, use of batchval only its
    public names (and the entry point's logging), and call their public function."""
    source = CLI.read_text(encoding="utf-8")
    assert engine_reached(source, command) == []
    [function] = [
        n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == command
    ]
    called = {
        n.func.attr
        for n in ast.walk(function)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
    }
    assert CLIENTS[command] in called


def test_the_check_finds_a_way_around_the_api() -> None:
    """The check above can fail: an engine import inside a command, one in a helper it
    calls, a module-level engine name, and a private name of `batchval`, each found."""
    source = """
import batchval
from batchval._internal import logs
from batchval._internal.place.place import place_of

def run():
    logs.configure(json_lines=False)
    from batchval._internal.valuations.runner import Runner
    helper()

def helper():
    with place_of("out"):
        batchval._internal.public._invoke()

def streets():
    batchval.analyse_streets()
"""
    assert engine_reached(source, "run") == [
        "run: from batchval._internal.valuations.runner import ...",
        "helper: place_of (batchval._internal.place.place.place_of)",
        "helper: batchval._internal",
    ]
    assert engine_reached(source, "streets") == []


# --- behaviour: what the command line does is what the API gives it --------------------


class Calls:
    """A stand-in for a public function: records each call, answers with `answer`."""

    def __init__(self, answer: Callable[..., batchval.Run]) -> None:
        self.answer = answer
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> batchval.Run:
        self.calls.append((args, kwargs))
        return self.answer(*args, **kwargs)


@pytest.fixture
def no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The products' runners fail if anything reaches them but through the public API."""

    def around(*_args: object) -> None:
        raise AssertionError("the command line reached the engine around the Python API")

    monkeypatch.setattr(Runner, "run", around)
    monkeypatch.setattr(Streets, "run", around)


def _faked(monkeypatch: pytest.MonkeyPatch, name: str, answer: Callable[..., Any]) -> Calls:
    calls = Calls(answer)
    monkeypatch.setattr(batchval, name, calls)
    return calls


STOPPED = batchval.Run(
    "out",
    {"exit_code": 75, "stop": {"reason": "daily_limit", "detail": "made up"}},
    "a summary the API made up",
    ("daily_limit: made up", "the run's log is kept in /made/up, not at its URL"),
)


@pytest.mark.usefixtures("no_engine")
@pytest.mark.parametrize(("command", "name"), sorted(CLIENTS.items()))
def test_the_command_prints_and_exits_with_what_the_api_returns(
    command: str,
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The public function stood in for: the command passes its settings as one
    `batchval.Settings` (those given, the rest None) and its own options by keyword (only
    those given), prints the Run's text on stdout and its messages on stderr, and exits
    with its code."""
    calls = _faked(monkeypatch, name, lambda *_a, **_k: STOPPED)
    source = str(tmp_path / "in.csv")
    code, out, err = run_in_process(
        command, source, "--out", "s3://bucket/runs", "--concurrency", "3", "--dry-run",
        "--max-credits", "0", env={}, monkeypatch=monkeypatch, capsys=capsys,
    )  # fmt: skip
    assert (code, out) == (75, "a summary the API made up\n")
    assert err.splitlines()[-2:] == [
        "batchval: daily_limit: made up",
        "batchval: the run's log is kept in /made/up, not at its URL",
    ]
    [(args, kwargs)] = calls.calls
    assert args == (source,)
    assert kwargs == {
        "out": "s3://bucket/runs",
        "config": None,
        "progress": False,  # log lines are JSON off a terminal: no bar
        "settings": batchval.Settings(concurrency=3, max_credits=0),
        "dry_run": True,
    }


def _refused(*_args: object, **_kwargs: object) -> batchval.Run:
    raise batchval.RunError(65, "input_unusable: made up", None, "input_unusable")


def _wrong(*_args: object, **_kwargs: object) -> batchval.Run:
    raise batchval.RunError(64, "run.concurrency must be a number, not made up")


def _defect(*_args: object, **_kwargs: object) -> batchval.Run:
    kept = batchval.Run("out", {"exit_code": 70}, "the summary kept", ("internal_error: made up",))
    raise public._keeping(ZeroDivisionError("made up"), kept)  # as a run's defect is raised


@pytest.mark.usefixtures("no_engine")
@pytest.mark.parametrize("name", sorted(CLIENTS.values()))
@pytest.mark.parametrize(
    ("answer", "code", "out", "err"),
    [
        (_refused, 65, "", "batchval: input_unusable: made up\n"),
        (_defect, 70, "the summary kept\n", "batchval: internal_error: made up\n"),
    ],
    ids=["refused", "defect"],
)
def test_an_error_of_the_api_is_the_command_lines_line_and_code(
    name: str,
    answer: Callable[..., batchval.Run],
    code: int,
    out: str,
    err: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A RunError is its line on stderr and its exit code; a defect a run kept is that
    run's summary and line, and 70."""
    _faked(monkeypatch, name, answer)
    command = {v: k for k, v in CLIENTS.items()}[name]
    said = run_in_process(
        command, str(tmp_path / "in.csv"), "--out", str(tmp_path / "out"),
        env={}, monkeypatch=monkeypatch, capsys=capsys,
    )  # fmt: skip
    assert said == (code, out, err)


@pytest.mark.usefixtures("no_engine")
def test_a_call_wrong_in_itself_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A RunError with no reason (a setting) is click's usage error: its usage line, the
    message, 64."""
    _faked(monkeypatch, "run", _wrong)
    code, out, err = run_in_process(
        "run", str(tmp_path / "in.csv"), "--out", str(tmp_path / "out"),
        env={}, monkeypatch=monkeypatch, capsys=capsys,
    )  # fmt: skip
    assert (code, out) == (64, "")
    assert err.startswith("Usage: batchval run [OPTIONS] INPUT\n")
    assert err.endswith("Error: run.concurrency must be a number, not made up\n")


@pytest.mark.parametrize(("command", "name"), sorted(CLIENTS.items()))
def test_the_command_runs_through_the_public_function(
    command: str,
    name: str,
    served: RunningSandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Against the sandbox, the public function watched: `batchval run` and `batchval
    streets` call it once with their options, and print its Run's text and exit with its
    code."""
    real = getattr(batchval, name)
    found: list[batchval.Run] = []

    def watched(*args: Any, **kwargs: Any) -> batchval.Run:
        found.append(real(*args, **kwargs))
        return found[-1]

    calls = _faked(monkeypatch, name, watched)
    source, out_dir = portfolio(tmp_path / "book.csv", 6), tmp_path / "out"
    code, out, _err = run_in_process(
        command, str(source), "--out", str(out_dir), "--concurrency", "2",
        env=env_for(served), monkeypatch=monkeypatch, capsys=capsys,
    )  # fmt: skip
    [(args, kwargs)] = calls.calls
    given = (args, kwargs["out"], kwargs["settings"])
    assert given == ((str(source),), str(out_dir), batchval.Settings(concurrency=2))
    [done] = found
    assert done.complete
    assert (code, out) == (0, f"{done.text}\n")
    assert done.results().height > 0
