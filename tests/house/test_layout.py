"""The house rules of docs/explanation/architecture.md that a parser can check: no module
far past 800 lines; the public modules at the top and every other room in the private
package `batchval/_internal/`; and the floors' one direction: the foundations, the store,
the engine's four rooms and the files' contract know no product, the engine no product's
tables and no validator, no product imports another, the sandbox stays apart from the
client's sending code, and only the store speaks SQL; inside the store, its groups' one
direction and no import cycle."""

from __future__ import annotations

import ast
import functools
import importlib
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "batchval"
INTERNAL = PACKAGE / "_internal"
MODULES = sorted(PACKAGE.rglob("*.py"))
IN = "batchval._internal"  # the private package's name, before each room's


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A module parsed once for all the checks."""
    return ast.parse(path.read_text(encoding="utf-8"))


@functools.cache
def _face(package: str) -> dict[str, str]:
    """What a room offers the others: each name its face lists (`__init__.pyi`, which its
    `__init__.py` reads to load each name on first use) and the module inside the room the
    name is from (a module offered whole, as `store.azure`, is its own); none for a module."""
    stub = PACKAGE.parent.joinpath(*package.split(".")) / "__init__.pyi"
    if not stub.is_file():
        return {}
    return {
        alias.name: f"{package}.{node.module}" if node.module else f"{package}.{alias.name}"
        for node in _tree(stub).body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


@functools.cache
def _imports(path: Path) -> frozenset[str]:
    """Every batchval module `path` imports, at any depth (inside functions too), and each
    name it imports (`module.name`); a name taken from a room's face counts as taken from
    the module inside that holds it."""
    found: set[str] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            face = _face(node.module)
            for alias in node.names:
                module = face.get(alias.name, node.module)
                found.update((module, f"{module}.{alias.name}"))
    return frozenset(name for name in found if name.startswith("batchval"))


def _in(name: str, prefix: str) -> bool:
    """`name` is the module or package `prefix`, or inside it (`batchval._internal.streets` is not
    inside `batchval._internal.store`)."""
    return name == prefix or name.startswith(prefix + ".")


def _importers_of(prefix: str | tuple[str, ...], within: str | tuple[str, ...]) -> list[str]:
    """The modules inside `within` (one room or several) that import from `prefix` (one
    room or several)."""
    prefixes = (prefix,) if isinstance(prefix, str) else prefix
    withins = (within,) if isinstance(within, str) else within
    return [
        _name(path)
        for path in MODULES
        if any(_in(_name(path), w) for w in withins)
        and any(_in(name, p) for name in _imports(path) for p in prefixes)
    ]


# The public modules: what users import (docs/how-to/python.md); all else is private.
PUBLIC = ("batchval", "batchval.exceptions", "batchval.testing", "batchval.airflow")
PRODUCTS = (f"{IN}.valuations", f"{IN}.streets", f"{IN}.verify")
# The one import between products: a --book night reads the API's index through the
# streets product's job (issue 56: "through the existing streets job and store").
BETWEEN_PRODUCTS = {(f"{IN}.valuations.index_reads", f"{IN}.streets.job")}
# The engine, which knows no product, in four rooms by concern: sending the requests, the
# money they cost, the run's place and its files, the command's skeleton and summary.
ENGINE = (f"{IN}.sending", f"{IN}.money", f"{IN}.place", f"{IN}.runs")
# The commands around a run.
TOOLS = (f"{IN}.reports", f"{IN}.exports", f"{IN}.admin")
# Below every product: the foundations, the client, the input, the store, the engine and
# the files' contract.
FLOORS = (f"{IN}.api", f"{IN}.input", f"{IN}.store", *ENGINE, f"{IN}.contract")
# The foundations, at the private package's top; and the version, at the package's.
FOUNDATIONS = ("outcome", "settings", "logs", "redaction", "postcodes", "batching")


@pytest.mark.parametrize("path", MODULES, ids=lambda path: _name(path))
def test_no_module_past_800_lines(path: Path) -> None:
    """A smell check, not a target: past about 800 lines a module is asking to be split
    where its code divides."""
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= 800, f"{_name(path)} has {lines} lines"


def test_every_module_sits_in_a_room_of_the_house() -> None:
    """At the top only the public modules (`__init__`, the Python API's face, its errors
    `exceptions`, the sandbox for users' tests `testing`, the Airflow provider `airflow`),
    `__main__` for `python -m batchval`, the version, `api` (the old place of `testing`'s
    client, for one release) and the private package. In the private package: the
    foundations, the cli and the Python API's workings (`public`) at its top, every other
    module in a folder that says what it does (docs/explanation/architecture.md's
    picture)."""
    top = {path.stem for path in PACKAGE.glob("*.py")}
    assert top == {"__init__", "__main__", "_version", "api", "exceptions", "testing"}
    folders = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()}
    assert folders == {"_internal", "airflow"}
    inside = {path.stem for path in INTERNAL.glob("*.py")}
    assert inside == {"__init__", "cli", "public", *FOUNDATIONS}
    rooms = {path.name for path in INTERNAL.iterdir() if (path / "__init__.py").is_file()}
    assert rooms == {
        *(name.rpartition(".")[2] for name in (*FLOORS, *PRODUCTS, *TOOLS)),
        "sandbox",
    }


@pytest.mark.parametrize(
    "floor", [*FLOORS, *(f"{IN}.{name}" for name in FOUNDATIONS), "batchval._version"]
)
def test_the_floors_know_no_product(floor: str) -> None:
    """The engine, the store and everything below them import no product and no tool."""
    above = (*PRODUCTS, *TOOLS, f"{IN}.cli", f"{IN}.public", *PUBLIC[1:])
    assert _importers_of(above, floor) == []


# Each product's own tables in the store: run's rows and requests (`checkpoint`) and its
# book's plan (`book`), streets' street reads (`streets`).
PRODUCT_TABLES = (f"{IN}.store.checkpoint", f"{IN}.store.book", f"{IN}.store.streets")


def test_the_engine_names_no_product() -> None:
    """The engine's rooms import nothing of valuations, streets or verify, no product's
    tables in the store and no validator: a product hands the engine what is its own (the
    class it keeps DIR's database as, its validator, its charges' lines, its lines of the
    summary)."""
    assert _importers_of(f"{IN}.store.database", ENGINE) != []  # the check can see
    for table in PRODUCT_TABLES:
        assert (PACKAGE.parent / (table.replace(".", "/") + ".py")).is_file(), table
    assert _importers_of((*PRODUCTS, *PRODUCT_TABLES), ENGINE) == []
    validators = {f"{IN}.input.validate.{name}" for name in _validators()}
    engine = [path for path in MODULES if any(_in(_name(path), room) for room in ENGINE)]
    assert [_name(path) for path in engine if _imports(path) & validators] == []


def test_the_store_and_the_engine_know_no_files_contract() -> None:
    assert _importers_of(f"{IN}.store", ENGINE) != []  # the check can see
    assert _importers_of(f"{IN}.contract", (f"{IN}.store", *ENGINE)) == []
    assert _importers_of(ENGINE, f"{IN}.store") == []


# store/ in groups, from the bottom up (store/__init__.py's docstring): a group imports
# only from itself and the groups below it; each product's tables from the generic and
# the replication, never another product's.
STORE_GROUPS: dict[str, tuple[int, tuple[str, ...]]] = {
    # The run's memory at a URL: the object store, its lease, the database's replica.
    "replication": (0, ("objects", "failures", "azure", "replica", "lease", "shipped_log")),
    # What every product's tables stand on: the database, its schema, the one work queue.
    "generic": (
        1,
        (
            *("database", "schema", "queue", "held", "counts", "connected"),
            *("invocations", "charges", "derived", "records", "lock"),
        ),
    ),
    "run's tables": (2, ("checkpoint", "rows", "book")),
    "streets' tables": (2, ("streets",)),
}
STORE = INTERNAL / "store"


def _store_imports(path: Path) -> set[str]:
    """The modules of store/ that `path` imports, `TYPE_CHECKING` imports and imports
    inside functions included (an import for annotations is a dependency too)."""
    modules = {_name(module) for module in STORE.glob("*.py")} - {f"{IN}.store"}
    return {name for name in _imports(path) if name in modules} - {_name(path)}


def test_every_store_module_is_in_one_group() -> None:
    """A module added to store/ is placed in a group, once."""
    placed = [name for _, names in STORE_GROUPS.values() for name in names]
    assert len(placed) == len(set(placed))
    assert sorted(placed) == sorted(p.stem for p in STORE.glob("*.py") if p.stem != "__init__")
    tables = {
        f"{IN}.store.{n}" for level, names in STORE_GROUPS.values() if level == 2 for n in names
    }
    assert set(PRODUCT_TABLES) <= tables  # what the engine may not import is a product's


@pytest.mark.parametrize("group", STORE_GROUPS)
def test_the_store_groups_import_downwards(group: str) -> None:
    """The replication imports nothing of the database or the tables; the generic no
    product's tables; a product's tables no other product's."""
    level, names = STORE_GROUPS[group]
    allowed = {
        f"{IN}.store.{name}"
        for other, (below, others) in STORE_GROUPS.items()
        if other == group or below < level
        for name in others
    }
    found = {
        f"{name} imports {imported}"
        for name in names
        for imported in _store_imports(STORE / f"{name}.py")
        if imported not in allowed
    }
    assert found == set()


def test_the_store_has_no_import_cycle() -> None:
    """No circle of store/ modules importing each other, even one closed only through
    `TYPE_CHECKING` imports: a type both sides need lives in the module below both."""
    graph = {_name(path): _store_imports(path) for path in STORE.glob("*.py")}
    assert graph["batchval._internal.store.queue"]  # the check can see
    assert _circles(graph) == []


def _module_graph() -> dict[str, set[str]]:
    """Each batchval module and the modules it imports, at any depth, `TYPE_CHECKING`
    imports included: `from batchval._internal import logs` is an arrow to the module
    `batchval._internal.logs`, `from batchval import __version__` one to the package's face,
    `from batchval._internal.store import Database` one to `store.database`, the module
    behind the store's face that holds it."""
    names = {_name(path) for path in MODULES}
    graph: dict[str, set[str]] = {}
    for path in MODULES:
        found: set[str] = set()
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names if alias.name in names)
            elif isinstance(node, ast.ImportFrom) and node.module in names and not node.level:
                face = _face(node.module)
                for alias in node.names:
                    inner = face.get(alias.name, f"{node.module}.{alias.name}")
                    found.add(inner if inner in names else node.module)
        graph[_name(path)] = found - {_name(path)}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """One circle through each node that closes one (none: the graph has no cycle)."""
    done: set[str] = set()

    def circle(name: str, path: tuple[str, ...]) -> tuple[str, ...] | None:
        if name in path:
            return (*path[path.index(name) :], name)
        if name in done:
            return None
        for imported in sorted(graph.get(name, ())):
            if found := circle(imported, (*path, name)):
                return found
        done.add(name)
        return None

    return [found for name in sorted(graph) if (found := circle(name, ()))]


def _room(name: str) -> str:
    """The room of the house a module stands in: its folder under batchval/_internal/ or
    batchval/, or itself at either's top (`batchval` is the package's face)."""
    parts = name.split(".")
    depth = 3 if parts[1:2] == ["_internal"] else 2
    if len(parts) > depth or PACKAGE.parent.joinpath(*parts).is_dir():
        return ".".join(parts[:depth])
    return name


def test_the_house_has_no_circle_and_no_arrow_back_up() -> None:
    """No module imports its way back to itself, and no room (a folder, or a module at the
    top) does: so each room stands on a floor above all it imports, and no import runs
    back up. The store's own check below says the same of its groups."""
    graph = _module_graph()
    assert graph["batchval._internal.sandbox.app"]  # the check can see
    assert _circles(graph) == []
    rooms: dict[str, set[str]] = {}
    for name, imported in graph.items():
        rooms.setdefault(_room(name), set()).update(_room(other) for other in imported)
    rooms = {room: inside - {room} for room, inside in rooms.items()}
    assert "batchval" in rooms["batchval._internal.cli"]  # the face, imported from the top only
    assert _circles(rooms) == []


ROOMS = tuple(f"{IN}.{path.parent.name}" for path in sorted(INTERNAL.glob("*/__init__.py")))


def _past_faces(module: str, tree: ast.Module) -> list[str]:
    """Each import in `module` of another room's inside: a module behind the room's face
    (`from batchval._internal.store.database import Database`), or a name the face does not
    list (`from batchval._internal.store import records`)."""
    own = next((room for room in ROOMS if _in(module, room)), None)
    found = []
    for node in ast.walk(tree):
        taken: list[tuple[str, str | None]]
        if isinstance(node, ast.Import):
            taken = [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            taken = [(node.module, alias.name) for alias in node.names]
        else:
            continue
        for name, attribute in taken:
            room = next((room for room in ROOMS if _in(name, room)), None)
            if room is None or room == own:
                continue
            if name != room or (attribute is not None and attribute not in _face(room)):
                found.append(f"{module}:{node.lineno} {name}{f'.{attribute}' * bool(attribute)}")
    return found


def test_the_rooms_meet_by_their_faces() -> None:
    """A room of the private package is entered by its face, never past it: another
    room, the cli, the foundations and the public modules import what the room's
    `__init__.pyi` lists, from the room itself, and a name is loaded on first use (so
    `batchval --version` reads no module it does not need). Inside a room, its modules
    import each other directly."""
    wrong = "from batchval._internal.store.database import Database\n"
    wrong += "from batchval._internal.store import records\n"
    assert len(_past_faces(f"{IN}.sending.pool", ast.parse(wrong))) == 2  # the check can see
    assert _past_faces(f"{IN}.store.rows", ast.parse(wrong)) == []
    assert _face(f"{IN}.store")["Database"] == f"{IN}.store.database"
    found = [line for path in MODULES for line in _past_faces(_name(path), _tree(path))]
    assert found == []


@pytest.mark.parametrize("room", ROOMS)
def test_each_face_loads_what_it_lists(room: str) -> None:
    """Each name a face lists is found, from the module its `__init__.pyi` names."""
    face = importlib.import_module(room)
    listed = _face(room)
    assert sorted(dir(face)) == sorted(listed)
    for name, module in listed.items():
        inner = importlib.import_module(module)
        held = getattr(inner, name, inner)  # a name of the module, or the module offered whole
        assert getattr(face, name) is held, name


@pytest.mark.parametrize("product", PRODUCTS)
def test_the_products_never_import_each_other(product: str) -> None:
    """No product imports another, but for `BETWEEN_PRODUCTS`, each edge named."""
    others = [other for other in PRODUCTS if other != product]
    assert _importers_of(ENGINE, product) != []  # the check can see
    within = [path for path in MODULES if _in(_name(path), product)]
    found = [
        (_name(path), name)
        for path in within
        for name in _imports(path)
        if any(_in(name, other) for other in others)
    ]
    named = [(a, b) for a, b in found if any(a == s and _in(b, t) for s, t in BETWEEN_PRODUCTS)]
    assert sorted(set(found) - set(named)) == []


def test_the_airflow_provider_stands_apart() -> None:
    """batchval/airflow/ runs batchval as a process: it imports only the exit codes and
    itself, and nothing of batchval imports it (Airflow is never batchval's dependency)."""
    inside = [path for path in MODULES if _in(_name(path), "batchval.airflow")]
    assert inside  # the check can see
    outside = {
        name
        for path in inside
        for name in _imports(path)
        if not _in(name, "batchval.airflow") and not _in(name, "batchval._internal.outcome")
    }
    assert outside == {"batchval", "batchval.__version__"}  # provider_info's version
    importers = _importers_of("batchval.airflow", "batchval")
    assert [name for name in importers if not _in(name, "batchval.airflow")] == []


def test_the_sandbox_never_imports_the_sending_code() -> None:
    for prefix in (
        *ENGINE,
        "batchval._internal.store",
        "batchval._internal.contract",
        *PRODUCTS,
    ):
        assert _importers_of(prefix, "batchval._internal.sandbox") == []


def test_the_shared_writing_pieces_stand_below_the_products() -> None:
    """place/files.py imports nothing of batchval but the redaction and the batching loop,
    which import nothing of batchval (any floor may write a file with it), and
    place/arrow.py, the conversion every product's files share, imports no product."""
    assert _imports(INTERNAL / "place" / "files.py") == {
        f"{IN}",
        f"{IN}.redaction",
        f"{IN}.batching",
        f"{IN}.batching.gathered",
    }
    assert _imports(INTERNAL / "redaction.py") == set()
    assert _imports(INTERNAL / "batching.py") == set()
    assert _imports(INTERNAL / "place" / "arrow.py") == set()


def _validators() -> set[str]:
    """The validators input/validate.py defines (`check_batch`, `check_postcodes`, ...)."""
    tree = _tree(INTERNAL / "input" / "validate.py")
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("check_")
    }


def test_no_reading_knows_a_validator_by_identity() -> None:
    """The input stage is told what a reading is (the validator, whether a lender's figures
    are read), never guesses it from which validator it was handed (`check is
    check_batch`); nor does any other module compare validators."""
    validators = _validators()
    assert {"check_batch", "check_postcodes"} <= validators  # the check can see
    compared = [
        f"{_name(path)}:{node.lineno}"
        for path in MODULES
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.Compare)
        and {
            operand.id
            for operand in (node.left, *node.comparators)
            if isinstance(operand, ast.Name)
        }
        & validators
    ]
    assert compared == []


_SQL = re.compile(
    r"\b(SELECT\s.+\sFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM"
    r"|CREATE\s+(TEMP\s+)?(TABLE|INDEX)|PRAGMA\s+\w+|BEGIN\s+IMMEDIATE)\b",
    re.DOTALL,
)


def _store_leaks(path: Path) -> list[str]:
    """What in `path` would hold the database or speak SQL: an import of sqlite3, the
    `Database.sql` connection, or a string that is an SQL statement."""
    found = []
    for node in ast.walk(_tree(path)):
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
    """Only batchval/_internal/store/ holds a connection or writes SQL: the seam a second backend
    of the run's memory implements (docs/explanation/architecture.md)."""
    store = INTERNAL / "store"
    assert _store_leaks(store / "queue.py") != []  # the check can see
    leaks = {
        _name(path): found
        for path in MODULES
        if store not in path.parents and (found := _store_leaks(path))
    }
    assert leaks == {}


def _calls(path: Path, name: str) -> bool:
    """`path` calls a function or method named `name` (`x.name(...)` or `name(...)`)."""
    for node in ast.walk(_tree(path)):
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
        ("record_start", ["batchval._internal.runs.command"]),
        ("record_end", ["batchval._internal.runs.command"]),
        ("of_run", ["batchval._internal.admin.status", "batchval._internal.runs.command"]),
        ("final_stop", ["batchval._internal.runs.command"]),
        ("locked_dir", ["batchval._internal.runs.command", "batchval._internal.verify.runner"]),
        # The daily limit's gate: the sending phase's alone.
        ("stored_not_before", ["batchval._internal.sending.sending"]),
    ],
)
def test_the_command_skeleton_is_written_once(name: str, callers: list[str]) -> None:
    """No product keeps its own copy of the invocation's steps, its summary or the gate."""
    outside = [path for path in MODULES if not _in(_name(path), "batchval._internal.store")]
    assert [_name(path) for path in outside if _calls(path, name)] == callers
