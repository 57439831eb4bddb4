"""The house rules of ARCHITECTURE.md that a grep can check: no module over 500 lines,
and the floors' one direction (run/ and output/ never import each other, nothing below
the runner imports it, the sandbox stays apart from the client's sending code)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "batchval"
MODULES = sorted(PACKAGE.rglob("*.py"))


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every batchval module `path` imports, at any depth (inside functions too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.startswith("batchval")}


def _in(name: str, prefix: str) -> bool:
    """`name` is the module or package `prefix`, or inside it (`batchval.runner` is not
    inside `batchval.run`)."""
    return name == prefix or name.startswith(prefix + ".")


def _importers_of(prefix: str, within: str) -> list[str]:
    return [
        _name(path)
        for path in MODULES
        if _in(_name(path), within) and any(_in(name, prefix) for name in _imports(path))
    ]


@pytest.mark.parametrize("path", MODULES, ids=lambda path: _name(path))
def test_no_module_over_500_lines(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= 500, f"{_name(path)} has {lines} lines"


def test_run_and_output_never_import_each_other() -> None:
    assert _importers_of("batchval.output", "batchval.run") == []
    assert _importers_of("batchval.run", "batchval.output") == []


@pytest.mark.parametrize("package", ["batchval.api", "batchval.input", "batchval.store"])
def test_lower_floors_import_nothing_above_them(package: str) -> None:
    above = ["batchval.run", "batchval.output", "batchval.runner", "batchval.status"]
    assert [m for prefix in above for m in _importers_of(prefix, package)] == []


def test_the_store_is_below_run_and_output() -> None:
    assert _importers_of("batchval.store", "batchval.store") != []  # the check can see
    assert _importers_of("batchval.run", "batchval.store") == []
    assert _importers_of("batchval.output", "batchval.store") == []


def test_the_sandbox_never_imports_the_sending_code() -> None:
    for prefix in ("batchval.run", "batchval.output", "batchval.runner", "batchval.store"):
        assert _importers_of(prefix, "batchval.sandbox") == []


def test_the_shared_writing_pieces_stand_below_the_products() -> None:
    """files.py imports nothing of batchval (any floor may write a file with it), and
    output/arrow.py, the conversion every product's files share, imports no product."""
    assert _imports(PACKAGE / "files.py") == set()
    assert _imports(PACKAGE / "output" / "arrow.py") == {
        "batchval.api.models",  # Valuation, the type of Column.of_valuation's argument
        "batchval.api.models.Valuation",
    }


_SQL = re.compile(
    r"\b(SELECT\s.+\sFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM"
    r"|CREATE\s+(TEMP\s+)?(TABLE|INDEX)|PRAGMA\s+\w+|BEGIN\s+IMMEDIATE)\b",
    re.DOTALL,
)


def _store_leaks(path: Path) -> list[str]:
    """What in `path` would hold the database or speak SQL: an import of sqlite3, the
    `Database.sql` connection, or a string that is an SQL statement."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            found += [f"imports {n}" for n in names if n.split(".")[0] == "sqlite3"]
        elif isinstance(node, ast.Attribute) and node.attr in ("sql", "_connection"):
            found.append(f"line {node.lineno}: .{node.attr}")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _SQL.search(node.value)
        ):
            found.append(f"line {node.lineno}: SQL {node.value[:40]!r}")
    return found


def test_sql_and_connections_live_only_in_the_store() -> None:
    """Only batchval/store/ holds a connection or writes SQL: the seam a second backend
    of the run's memory implements (ARCHITECTURE.md)."""
    store = PACKAGE / "store"
    assert _store_leaks(store / "queue.py") != []  # the check can see
    leaks = {
        _name(path): found
        for path in MODULES
        if store not in path.parents and (found := _store_leaks(path))
    }
    assert leaks == {}


def _calls(path: Path, name: str) -> bool:
    """`path` calls a function or method named `name` (`x.name(...)` or `name(...)`)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called == name:
                return True
    return False


@pytest.mark.parametrize(
    ("name", "callers"),
    [
        # The invocation's record and its summary: the skeleton's (status shows a DIR's).
        ("start_invocation", ["batchval.command"]),
        ("end_invocation", ["batchval.command"]),
        ("of_run", ["batchval.command", "batchval.status"]),
        ("final_stop", ["batchval.command"]),
        ("locked_dir", ["batchval.command", "batchval.verify"]),
        # The daily limit's gate: the sending phase's alone.
        ("stored_not_before", ["batchval.run.sending"]),
    ],
)
def test_the_command_skeleton_is_written_once(name: str, callers: list[str]) -> None:
    """No product keeps its own copy of the invocation's steps, its summary or the gate."""
    outside = [path for path in MODULES if not _in(_name(path), "batchval.store")]
    assert [_name(path) for path in outside if _calls(path, name)] == callers


def test_the_products_do_not_import_each_other() -> None:
    """streets and verify stand on the engine and the skeleton, not on the runner."""
    products = ["batchval.runner", "batchval.streets", "batchval.verify"]
    for product in products:
        others = [other for other in products if other != product]
        assert [name for other in others for name in _importers_of(other, product)] == []
