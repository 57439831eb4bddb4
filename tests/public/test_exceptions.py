"""`batchval.exceptions` (issue 58): its names are its `__all__`, the tree its docstring
draws is the classes' own, and every error pickles to a process pool's parent as its own
type with its attributes, `FolderInUse` from a folder another process holds included."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import pickle
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from support import env_for, wait_until

import batchval
from batchval import exceptions
from batchval._internal.api import Credentials, PartnerClient
from batchval._internal.sandbox.server import RunningSandbox


def test_the_module_s_public_names_are_its_all() -> None:
    found = {
        name
        for name, value in vars(exceptions).items()
        if not name.startswith("_") and isinstance(value, type)
    }
    assert found == set(exceptions.__all__)
    assert all(issubclass(getattr(exceptions, n), exceptions.BatchvalError) for n in found)


def _drawn() -> dict[str, str | None]:
    """Each class of the docstring's tree and the class it hangs from (None: the root)."""
    assert exceptions.__doc__ is not None
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in exceptions.__doc__.splitlines():
        found = re.match(r"^(\s*(?:[│ ]\s*)*(?:├── |└── )?)([A-Z]\w+)\s{2,}", line)
        if found is None:
            continue
        depth, name = len(found.group(1)), found.group(2)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents[name] = stack[-1][1] if stack else None
        stack.append((depth, name))
    return parents


def test_the_tree_drawn_is_the_classes_own() -> None:
    """Every public class is drawn once, under the public class it derives from."""
    drawn = _drawn()
    assert set(drawn) == set(exceptions.__all__)
    for name, parent in drawn.items():
        kind = getattr(exceptions, name)
        bases = [b.__name__ for b in kind.__mro__[1:] if b.__name__ in drawn]
        assert (bases[0] if bases else None) == parent, name


def _value_into(folder: str) -> batchval.Run:  # pragma: no cover - a pool worker's
    frame = pl.DataFrame({"postcode": ["M1 1AE"], "property_type": ["flat"], "bedrooms": [2]})
    return batchval.value(frame, out=folder, progress=False)


def test_a_folder_in_use_reaches_a_process_pool_s_parent_as_folder_in_use(
    served: RunningSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holds the folder: the worker's call raises `FolderInUse` (75,
    `dir_locked`, still a `RunError`), and the parent gets it as such, nothing sent."""
    for name, value in env_for(served).items():
        monkeypatch.setenv(name, value)
    folder, ready = tmp_path / "out", tmp_path / "ready"
    folder.mkdir()
    code = (
        "import sys; from pathlib import Path; from batchval._internal.store.lock import RunLock\n"
        "with RunLock(Path(sys.argv[1])):\n"
        "    Path(sys.argv[2]).write_text('held')\n"
        "    sys.stdin.read()\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(folder), str(ready)], stdin=subprocess.PIPE
    )
    try:
        wait_until(ready.exists, 60, "the holder's lock", process=holder)
        context = multiprocessing.get_context("spawn")
        with (
            concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool,
            pytest.raises(batchval.FolderInUse) as caught,
        ):
            pool.submit(_value_into, str(folder)).result(timeout=120)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    error = caught.value
    assert isinstance(error, batchval.RunError)
    assert (error.exit_code, error.reason, error.run) == (75, "dir_locked", None)
    assert "dir_locked" in str(error)
    assert served.sandbox.ledger.requests == []


def test_an_error_with_its_run_pickles_whole(served: RunningSandbox, tmp_path: Path) -> None:
    """A RunError carrying its run (an input refused into a folder) comes back from pickle
    with its code, reason, message and run."""
    with pytest.raises(batchval.RunError) as caught:
        batchval.value(
            pl.DataFrame({"postcode": ["not a postcode"] * 3}),
            out=tmp_path / "out",
            progress=False,
        )
    again = pickle.loads(pickle.dumps(caught.value))
    assert type(again) is type(caught.value)
    assert (again.exit_code, again.reason, again.message) == (
        caught.value.exit_code,
        caught.value.reason,
        caught.value.message,
    )
    assert str(again) == str(caught.value)
    if caught.value.run is not None:
        assert again.run is not None
        assert again.run.place == caught.value.run.place


@pytest.mark.anyio
async def test_an_error_of_the_api_pickles_as_its_own_type(served: RunningSandbox) -> None:
    """A 404 the client raised for a valuation id no one made: the same type, status and
    message after pickling."""
    async with PartnerClient(
        base_url=served.base_url,
        auth_url=served.auth_url,
        credentials=Credentials("sandbox-test", "sandbox-test-secret"),
    ) as client:
        with pytest.raises(exceptions.NotFoundError) as caught:
            await client.read_valuation("val_" + "0" * 26)
    again = pickle.loads(pickle.dumps(caught.value))
    assert type(again) is exceptions.NotFoundError
    assert (again.status, str(again)) == (caught.value.status, str(caught.value))


def test_a_dry_run_is_not_complete_and_says_its_price(
    served: RunningSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exit 0 all the same, but nothing valued: `complete` is False, `price` holds what a
    run would cost, `results()` says why there are none, `problems()` the rows refused."""
    for name, value in env_for(served).items():
        monkeypatch.setenv(name, value)
    frame = pl.DataFrame(
        {
            "postcode": ["M1 1AE", "SW1A 2AA", "not a postcode"],
            "property_type": ["flat", "terraced", "flat"],
            "bedrooms": [2, 3, 1],
        }
    )
    priced = batchval.value(frame, out=tmp_path / "out", progress=False, dry_run=True)
    assert (priced.exit_code, priced.complete, priced.dry_run) == (0, False, True)
    assert priced.price is not None
    assert (priced.price["calls"], priced.price["credits"]) == (2, 20)
    with pytest.raises(batchval.RunError, match="a dry run values nothing"):
        priced.results()
    assert priced.problems().height == 1
    assert served.sandbox.ledger.requests == []
    done = batchval.value(frame, out=tmp_path / "out", progress=False)
    assert (done.complete, done.dry_run, done.price) == (True, False, None)


def test_a_run_reads_its_frames_once_renders_in_a_notebook_and_closes(
    served: RunningSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in env_for(served).items():
        monkeypatch.setenv(name, value)
    frame = pl.DataFrame({"postcode": ["M1 1AE"], "property_type": ["flat"], "bedrooms": [2]})
    with batchval.value(frame, out=tmp_path / "a <b>", progress=False) as run:
        first = run.results()
        assert run.results() is first  # read once
        shown = run._repr_html_()
        assert "complete (exit 0)" in shown
        assert "a &lt;b&gt;" in shown  # the place escaped
        assert "<pre>" in shown
        again = pickle.loads(pickle.dumps(run))
        assert again.results().equals(first)
    assert run.results() is not first  # closed: read again when asked


def test_the_host_s_logging_is_left_as_the_host_set_it(
    served: RunningSandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A host with the standard library's logging configured and structlog not: after a
    batchval call, structlog is still unconfigured and the host's own structlog events
    print as structlog's defaults print them (never into logging); batchval's events
    are in the run's log, and reach the host's logging only through its `batchval`
    logger, where the host gave it a handler."""
    import logging

    import structlog

    for name, value in env_for(served).items():
        monkeypatch.setenv(name, value)
    structlog.reset_defaults()
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    root = logging.getLogger()
    keep, level = Keep(logging.INFO), root.level
    root.addHandler(keep)
    root.setLevel(logging.INFO)  # as logging.basicConfig(level=logging.INFO) sets it
    try:
        frame = pl.DataFrame({"postcode": ["M1 1AE"], "property_type": ["flat"], "bedrooms": [2]})
        done = batchval.value(frame, out=tmp_path / "out", progress=False)
        assert done.complete
        assert structlog.is_configured() is False
        structlog.get_logger().info("host.own_event", n=1)
    finally:
        root.removeHandler(keep)
        root.setLevel(level)
    printed = capsys.readouterr().out
    assert "host.own_event" in printed
    assert not any("host.own_event" in r.getMessage() for r in seen)
    assert any("valuations.ingest.batch" in r.getMessage() for r in seen if r.name == "batchval")
    events = (tmp_path / "out" / "batchval.log").read_text(encoding="utf-8")
    assert '"event": "valuations.ingest.batch"' in events
    # With no handler anywhere, batchval's events go no further than the run's log.
    seen.clear()
    again = batchval.value(frame, out=tmp_path / "out", progress=False)
    assert again.complete
    assert seen == []
    assert capsys.readouterr().err == ""


def test_one_property_needs_no_folder(
    served: RunningSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`value` without `out`: the run is kept in a scratch folder of its own (its owner's
    only), said as its place, and removed when the Run is closed; a refused frame leaves
    no folder behind."""
    import stat

    for name, value in env_for(served).items():
        monkeypatch.setenv(name, value)
    frame = pl.DataFrame({"postcode": ["M1 1AE"], "property_type": ["flat"], "bedrooms": [2]})
    with batchval.value(frame, progress=False) as run:
        place = Path(run.place)
        assert run.complete
        assert run.results().height == 1
        assert stat.S_IMODE(place.stat().st_mode) == 0o700
        assert (place / "summary.json").is_file()
    assert not place.exists()
    again = batchval.value(frame, progress=False)
    assert Path(again.place) != place
    again.close()
    assert not Path(again.place).exists()
    with pytest.raises(batchval.RunError) as refused:
        batchval.value(pl.DataFrame({"postcode": ["no"] * 3}), progress=False)
    assert refused.value.run is None or refused.value.run.scratch is not None
    if refused.value.run is not None:
        kept = Path(refused.value.run.place)
        refused.value.run.close()
        assert not kept.exists()
