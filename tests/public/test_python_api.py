"""batchval from Python (issue 37): `run`, `value` and `open_run` give the command line's
run with its guarantees, from plain Python, inside a running event loop and from a worker
thread, and the docs page's example runs in a real Jupyter kernel."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import importlib.util
import json
import os
import re
import signal
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import mypy.api
import nbformat
import polars as pl
import pytest
import structlog
from nbclient import NotebookClient
from support import LIVE, env_for, portfolio

import batchval
import batchval.exceptions
import batchval.testing
from batchval._internal.sandbox.config import Faults
from batchval._internal.sandbox.server import RunningSandbox

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "how-to" / "python.md"
ONE_AT_A_TIME = batchval.Settings(concurrency=1)


@pytest.fixture(autouse=True)
def _host(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A host that configured nothing: no BATCHVAL_ variables, structlog as it was (the
    API configures it only when nothing has), put back after the test."""
    for name in [n for n in os.environ if n.startswith("BATCHVAL_")]:
        monkeypatch.delenv(name)
    logging = structlog.get_config()
    configured = structlog.is_configured()
    structlog.reset_defaults()
    yield
    if configured:
        structlog.configure(**logging)
    else:
        structlog.reset_defaults()


def served_env(served: RunningSandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in env_for(served).items():
        if name.startswith("BATCHVAL_"):
            monkeypatch.setenv(name, value)


def frame(rows: int) -> pl.DataFrame:
    postcodes = ["SW1A 2AA", "M1 1AE", "LS6 2AB", "CF10 1AA", "BS1 4DJ", "NE1 7RU"]
    return pl.DataFrame(
        {
            "loan_id": [f"L-{n:04d}" for n in range(rows)],
            "postcode": [postcodes[n % 6] for n in range(rows)],
            "property_type": ["terraced"] * rows,
            "bedrooms": [1 + n % 5 for n in range(rows)],
            "reference": [f"CASE-{n:04d}" for n in range(rows)],
        }
    )


def test_all_is_pinned() -> None:
    """The public names; one leaves only with a minor release and a changelog line."""
    assert batchval.__all__ == [
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
    assert issubclass(batchval.RunError, batchval.BatchvalError)
    assert (ROOT / "batchval" / "py.typed").exists()


def test_settings_hold_every_setting_of_the_config_s_run_index_and_book_sections() -> None:
    """`batchval.Settings` has a field for each key of the config's `run` section, each of
    its `index` section after `index_` and each of its `book` section after `book_`, and no
    other: a new setting cannot reach the config without reaching the type."""
    from batchval._internal.settings import BOOK_KEYS, INDEX_KEYS, RUN_KEYS

    fields = [field.name for field in dataclasses.fields(batchval.Settings)]
    assert fields == [
        *(key.name for key in RUN_KEYS),
        *(f"index_{key.name}" for key in INDEX_KEYS),
        *(f"book_{key.name}" for key in BOOK_KEYS),
    ]
    every = batchval.Settings(
        **{name: ("x" if name.startswith("index_") else 1) for name in fields}  # type: ignore[arg-type]
    )
    sections = every.by_section()
    assert set(sections["run"]) == {key.name for key in RUN_KEYS} - {
        "book",
        "row_id",
        "fresh_for_days",
        "max_calls",
    }
    assert set(sections["index"]) == {key.name for key in INDEX_KEYS}
    assert set(sections["order"]) == {key.name for key in BOOK_KEYS}


USER_SCRIPT = """\
import batchval

good = batchval.Settings(concurrency=8, index_source="ukhpi", book_ltv_watch=(0.85,))
batchval.run("book.csv", out="runs/x", settings=good, run_id="n1", dry_run=True)
batchval.Settings(concurency=8)
batchval.run("book.csv", out="runs/x", concurrency=8)
batchval.Settings(index_source="ukhpy")
"""


def test_a_misspelt_setting_is_a_type_error_in_a_user_s_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A type checker holds a user's script to `Settings`' fields and their types, and the
    calls to their keywords: each wrong line of the script is an error (the project's own
    checker, mypy --strict, in this process; its cache from `make typecheck` makes this a
    second), the right ones none."""
    script = tmp_path / "nightly.py"
    script.write_text(USER_SCRIPT, encoding="utf-8")
    monkeypatch.chdir(ROOT)  # where `batchval` is found as the package, not the editable hook
    said, _, _ = mypy.api.run(["--strict", "--no-error-summary", str(script)])
    errors = [line for line in said.splitlines() if ": error: " in line]
    assert [int(line.split(":")[1]) for line in errors] == [5, 6, 7], said
    assert 'did you mean "concurrency"' in errors[0]
    assert "'ukhpy'" in errors[2]


PUBLIC_MODULES = ("batchval", "batchval.exceptions", "batchval.testing", "batchval.airflow")
# A face kept for one release: where 0.1.0 had the client (each name warns).
DEPRECATED = ("batchval.api",)


def _import_the_whole_package() -> None:
    """Every module of batchval imported (Airflow's side of the provider where Airflow is):
    each import sets its name on the package above it."""
    for path in sorted((ROOT / "batchval").rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        airflow = name.endswith(("._hook", "._operator", "._trigger"))
        if name == "batchval.__main__" or (airflow and importlib.util.find_spec("airflow") is None):
            continue
        importlib.import_module(name)


def _public_names(module: types.ModuleType) -> set[str]:
    """The names a module holds that are not private: what an editor, pyright or `from m
    import *` without `__all__` would take for its public face (a public module it holds
    as an attribute, `batchval.exceptions` in `batchval`, is a face of its own), and
    those of `__all__` that are private by their name (`__version__`)."""
    faces = (*PUBLIC_MODULES, *DEPRECATED)
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") or name in getattr(module, "__all__", ())
        if not (isinstance(value, types.ModuleType) and value.__name__ in faces)
    }


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_each_public_module_holds_its_all_and_nothing_else(name: str) -> None:
    """As httpx holds its own: the names each public module holds, once the whole package
    is imported, are its `__all__`: no module behind it (`logs`, `outcome`, the Airflow
    provider's rounds, ...) and nothing it imports to do its work; and `dir()` (an
    editor's completion) shows the same. The Airflow provider's names come on first use,
    so that its module loads without Airflow: each is imported by its name."""
    _import_the_whole_package()
    module = importlib.import_module(name)
    assert dir(module) == sorted(module.__all__)
    assert len(set(module.__all__)) == len(module.__all__)
    if name == "batchval.airflow":
        assert _public_names(module) == set()
        source = (ROOT / "batchval" / "airflow" / "__init__.py").read_text(encoding="utf-8")
        assert all(f"import {public}\n" in source for public in module.__all__)
        return
    assert _public_names(module) == set(module.__all__)
    assert all(getattr(module, public, None) is not None for public in module.__all__)


def test_the_check_finds_a_leak() -> None:
    """The check above can fail: a module holding an import or a private module is seen."""
    leaky = types.ModuleType("leaky")
    leaky.__dict__.update(json=json, Path=Path, _ok=1, exceptions=batchval.exceptions)
    assert _public_names(leaky) == {"json", "Path"}


def test_the_client_s_old_place_warns_for_one_release() -> None:
    """`batchval.api`, where 0.1.0 had the client and its errors: each name is still
    found there, with a `DeprecationWarning` that says where it lives now."""
    import batchval.api

    with pytest.warns(DeprecationWarning, match="PartnerClient: import it from batchval.testing"):
        client = batchval.api.PartnerClient
    assert client is batchval.testing.PartnerClient
    with pytest.warns(DeprecationWarning, match="RateLimitedError: import it from batchval.exc"):
        assert batchval.api.RateLimitedError is batchval.exceptions.RateLimitedError
    with pytest.warns(DeprecationWarning, match="read_failure: it is private"):
        assert callable(batchval.api.read_failure)
    with pytest.raises(AttributeError):
        batchval.api.nothing  # noqa: B018


def test_no_public_name_is_taken_by_a_module_of_the_package() -> None:
    """Importing a subpackage sets its name on `batchval` (`batchval._internal.streets` is the
    streets folder): every public name is still what `__all__` promises once the whole
    package is imported."""
    _import_the_whole_package()
    assert [n for n in batchval.__all__ if isinstance(getattr(batchval, n), types.ModuleType)] == []
    assert callable(batchval.analyse_streets)


def test_a_frame_valued_resumed_opened_and_joined_back(
    served: RunningSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A polars frame valued into a DIR: complete, every loan back in the results with an
    estimate, named <frame>; the same frame again sends nothing; open_run reads the same
    run; a changed frame is refused (64) as a changed file is, and charges nothing."""
    served_env(served, monkeypatch)
    book, out = frame(12), tmp_path / "out"
    done = batchval.value(book, out=out, progress=False)
    assert (done.complete, done.exit_code, done.stop) == (True, 0, None)
    assert done.summary["input"] == "<frame>"
    joined = book.join(done.results().select("loan_id", "estimate"), on="loan_id", how="left")
    assert joined["estimate"].null_count() == 0
    assert done.problems().height == 0
    calls = len(served.sandbox.ledger.requests)
    again = batchval.value(book, out=out, progress=False)
    assert again.complete
    assert again.summary["calls"]["this_invocation"] == 0
    assert len(served.sandbox.ledger.requests) == calls
    opened = batchval.open_run(out)
    assert opened.summary == again.summary
    assert opened.results().equals(again.results())
    changed = book.with_columns(pl.col("bedrooms") + 1)
    with pytest.raises(batchval.RunError) as refused:
        batchval.value(changed, out=out, progress=False)
    assert refused.value.exit_code == 64
    assert "refused" in str(refused.value)
    assert len(served.sandbox.ledger.requests) == calls


def test_a_file_by_path_with_its_settings(
    served: RunningSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run` takes INPUT's path, one `batchval.Settings` and the command's options by
    keyword. A setting misspelt is a TypeError before anything runs (and a type error to
    a checker: the fields are typed), a value the config would refuse is a RunError (64)
    naming the setting, and anything but a Settings for `settings` is a TypeError."""
    served_env(served, monkeypatch)
    source = portfolio(tmp_path / "book.csv", 8)
    done = batchval.run(
        source, out=tmp_path / "out", settings=batchval.Settings(concurrency=2), run_id="night-1"
    )
    assert done.complete
    assert done.summary["run_id"] == "night-1"
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["settings"]["run"]["concurrency"] == 2
    given: dict[str, Any] = {"concurency": 2}
    with pytest.raises(TypeError, match="concurency"):
        batchval.Settings(**given)
    with pytest.raises(batchval.RunError) as refused:
        batchval.run(source, out=tmp_path / "other", settings=batchval.Settings(concurrency=0))
    assert refused.value.exit_code == 64
    assert refused.value.reason is None  # a call wrong in itself: the CLI's usage error
    assert "run.concurrency" in str(refused.value)
    wrong: Any = {"concurrency": 2}
    with pytest.raises(TypeError, match=r"batchval\.Settings"):
        batchval.run(source, out=tmp_path / "other", settings=wrong)
    assert not (tmp_path / "other").exists()
    with pytest.raises(dataclasses.FrozenInstanceError):
        batchval.Settings().concurrency = 3  # type: ignore[misc]


def test_a_frame_without_a_postcode_is_65_naming_the_frame(tmp_path: Path) -> None:
    """The input unusable: a RunError whose exit code is 65 and whose message is the line
    the command line prints, naming <frame> (never a temporary file)."""
    with pytest.raises(batchval.RunError) as refused:
        batchval.value(frame(3).drop("postcode"), out=tmp_path / "out", progress=False)
    assert refused.value.exit_code == 65
    assert refused.value.reason == "input_unusable"
    assert "postcode" in str(refused.value)
    assert "<frame>" in str(refused.value)
    assert "batchval-frame-" not in str(refused.value)


def test_the_daily_limit_gives_a_run_to_resume(
    served: RunningSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daily limit is no error: a Run, not complete, stop `daily_limit` with the
    moment no call goes before."""
    served_env(served, monkeypatch)
    served.sandbox.account(LIVE.client_id).daily_limit = 5
    stopped = batchval.value(frame(9), out=tmp_path / "out", progress=False)
    assert (stopped.complete, stopped.exit_code) == (False, 75)
    assert stopped.stop is not None
    assert stopped.stop.reason == "daily_limit"
    assert stopped.stop.not_before is not None
    assert stopped.messages == (f"daily_limit: {stopped.stop.detail}",)
    assert stopped.text.startswith("run ")


def test_open_run_of_a_place_with_no_run_is_64(tmp_path: Path) -> None:
    with pytest.raises(batchval.RunError) as nothing:
        batchval.open_run(tmp_path)
    assert nothing.value.exit_code == 64


def _in_a_thread(call: Callable[[], batchval.Run]) -> batchval.Run:
    found: list[batchval.Run | BaseException] = []

    def work() -> None:
        try:
            found.append(call())
        except BaseException as exc:
            found.append(exc)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join(120)
    [outcome] = found
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def _the_notebooks_calls(out: Path, served: RunningSandbox) -> batchval.Run:
    """The Done-when calls, in whatever thread or loop calls this: a frame valued, the same
    frame again sending nothing, the run opened, a frame without a postcode refused (65)."""
    done = batchval.value(frame(6), out=out, progress=False)
    assert done.complete
    calls = len(served.sandbox.ledger.requests)
    assert (
        batchval.value(frame(6), out=out, progress=False).summary["calls"]["this_invocation"] == 0
    )
    assert len(served.sandbox.ledger.requests) == calls
    assert batchval.open_run(out).results().equals(done.results())
    with pytest.raises(batchval.RunError) as refused:
        batchval.value(frame(2).drop("postcode"), out=out.with_name(f"{out.name}-bad"))
    assert refused.value.exit_code == 65
    return done


def _stopped_at_the_daily_limit(out: Path) -> None:
    stopped = batchval.value(frame(9), out=out, progress=False)
    assert (stopped.complete, stopped.exit_code) == (False, 75)
    assert stopped.stop is not None
    assert stopped.stop.reason == "daily_limit"
    assert stopped.stop.not_before is not None


def test_from_a_worker_thread_and_from_a_running_event_loop(
    served: RunningSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task thread (no signal handler can be set there) and a caller's `async def` under
    asyncio.run (an event loop already running): the notebook's calls, the same run, and
    then a daily limit a Run to resume."""
    served_env(served, monkeypatch)
    threaded = _in_a_thread(lambda: _the_notebooks_calls(tmp_path / "t", served))

    async def main() -> batchval.Run:
        return _the_notebooks_calls(tmp_path / "a", served)

    looped = asyncio.run(main())
    assert threaded.results()["valuation_id"].to_list() == (
        looped.results()["valuation_id"].to_list()
    )
    served.sandbox.account(LIVE.client_id).daily_limit = 1

    def limited() -> batchval.Run:
        _stopped_at_the_daily_limit(tmp_path / "t-limit")
        return threaded

    _in_a_thread(limited)

    async def limited_in_a_loop() -> None:
        _stopped_at_the_daily_limit(tmp_path / "a-limit")

    asyncio.run(limited_in_a_loop())


def test_an_interrupt_in_a_running_event_loop_stops_the_run_cleanly(
    served: RunningSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while a notebook cell runs a valuation (SIGINT to the process, an event loop
    running): the run stops as the command line's SIGINT stops it, a Run with stop
    `signal` (75), its answers kept; the same call again completes, nothing paid twice."""
    served_env(served, monkeypatch)
    served.sandbox.set_faults(Faults(latency_ms=200))
    out = tmp_path / "out"

    async def main() -> batchval.Run:
        timer = threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        try:
            return batchval.value(frame(40), out=out, progress=False, settings=ONE_AT_A_TIME)
        finally:
            timer.cancel()

    stopped = asyncio.run(main())
    assert stopped.exit_code == 75
    assert stopped.stop is not None
    assert stopped.stop.reason == "signal"
    served.sandbox.set_faults(Faults())
    done = batchval.value(frame(40), out=out, progress=False)
    assert done.complete
    assert served.sandbox.ledger.keys_charged_twice() == []
    assert done.results().height == 40


def _code_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)


# A cell after the page's: the kernel pointed at the test's sandbox, whose account's daily
# limit stops a run of the page's three loans after one.
DAILY_LIMIT_CELL = """
import os
os.environ.update({env!r})
stopped = batchval.value(book, out="runs/daily-limit", progress=False)
print(stopped.complete, stopped.exit_code, stopped.stop.reason, stopped.stop.not_before is not None)
"""


@pytest.mark.slow  # a Jupyter kernel of its own: seconds of a process's start
def test_the_docs_example_runs_in_a_jupyter_kernel(served: RunningSandbox, tmp_path: Path) -> None:
    """docs/how-to/python.md's example, each block a cell, in a real Jupyter kernel (whose
    event loop runs while a cell does): every cell runs; what it prints is what the page
    says it shows. Then, in the same kernel, a daily limit is a Run to resume."""
    blocks = _code_blocks(PAGE)
    assert len(blocks) >= 5
    served.sandbox.account(LIVE.client_id).daily_limit = 1
    daily = DAILY_LIMIT_CELL.format(env=env_for(served))
    cells = [nbformat.v4.new_code_cell(code) for code in [*blocks, daily]]  # type: ignore[no-untyped-call]
    notebook = nbformat.v4.new_notebook(cells=cells)  # type: ignore[no-untyped-call]
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATCHVAL_")}
    client = NotebookClient(
        notebook,
        timeout=180,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    with _Environment(env):
        client.execute()
    printed = ["".join(_stdout(cell)) for cell in notebook.cells]
    assert printed[0].splitlines()[-1] == "True 3"
    assert "estimate" in printed[1]
    assert "L-003" in printed[1]
    assert printed[2].strip() == "0"
    assert printed[3].startswith("65 input_unusable: <frame>")
    assert printed[4].strip() == "3"
    assert printed[5].splitlines()[-1] == "True 3"
    assert printed[-1].splitlines()[-1] == "False 75 daily_limit True"


def _stdout(cell: Any) -> list[str]:
    return [o.get("text", "") for o in cell.get("outputs", []) if o.get("name") == "stdout"]


class _Environment:
    """The kernel inherits this process's environment: none of its BATCHVAL_ variables."""

    def __init__(self, env: dict[str, str]) -> None:
        self._env = env
        self._saved: dict[str, str] = {}

    def __enter__(self) -> None:
        self._saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(self._env)

    def __exit__(self, *_exc: object) -> None:
        os.environ.clear()
        os.environ.update(self._saved)


def test_a_defect_is_raised_as_it_was_once_the_run_is_kept(
    served: RunningSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A defect while sending (exit 70 on the command line) is raised as it was, not as a
    RunError; the run kept what it did (its summary says internal_error), and once the
    defect is gone the same call completes, nothing paid twice."""
    from batchval._internal.valuations import valuing

    served_env(served, monkeypatch)
    out, book = tmp_path / "out", frame(6)
    settle = valuing.ValuationJob.settle
    calls = 0

    def broken(self: valuing.ValuationJob, item: Any, answer: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise ZeroDivisionError("a defect")
        return settle(self, item, answer)

    monkeypatch.setattr(valuing.ValuationJob, "settle", broken)
    with pytest.raises(ZeroDivisionError, match="a defect") as raised:
        batchval.value(book, out=out, progress=False)
    stopped = batchval.Run.of(raised.value)  # what the command line prints of it
    assert stopped is not None
    assert stopped.exit_code == 70
    assert stopped.text.splitlines()[-1].startswith("exit 70")
    assert stopped.messages[0].startswith("internal_error: ")  # as the command line says
    assert stopped.messages[0].endswith("the traceback is in batchval.log")
    assert batchval.Run.of(ZeroDivisionError("not batchval's")) is None
    kept = batchval.open_run(out)
    assert kept.exit_code == 70
    assert kept.stop is not None
    assert kept.stop.reason == "internal_error"
    monkeypatch.setattr(valuing.ValuationJob, "settle", settle)
    assert batchval.value(book, out=out, progress=False).complete
    assert served.sandbox.ledger.keys_charged_twice() == []
