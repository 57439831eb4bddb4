"""The bad-input corpus (issue 4, section 3): `batchval run` on every file in tests/corpus.

Each input is run at the command line in this process (the `batchval` fixture; a handful
also as the installed command's process) in live mode against the sandbox over loopback, and
must end as `tests/corpus/expected.yaml` says: exit 65 (64 when its config names what
the file lacks) with one clear line on stderr and nothing sent, or exit 0 with exactly
the listed problem rows, every row accounted for once and nothing paid twice. Never a
traceback. The inputs are made by `tests/corpus/make_corpus.py`; a case that a known
batchval bug breaks is marked `xfail` (strict) with the bug as the reason.
"""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from support import (
    InProcess,
    Ran,
    assert_accounted,
    assert_no_secrets,
    assert_paid_once,
    env_for,
    outputs,
    run_cli,
)

from batchval._internal.api.errors import PROBLEM_TYPES
from batchval._internal.input import PROBLEM_RULES
from batchval._internal.sandbox.server import RunningSandbox

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
SCRIPT = "make_corpus.py"
EXPECTED = "expected.yaml"
CASES: list[dict[str, Any]] = yaml.safe_load((CORPUS / EXPECTED).read_text(encoding="utf-8"))
# Config files in the corpus: a `config` that names a file here rather than holding YAML.
CONFIG_FILES = {
    c["config"] for c in CASES if "config" in c and (CORPUS / str(c["config"])).is_file()
}
CRASH_SIGNS = ("Traceback", "panicked at")


def _case_id(case: dict[str, Any]) -> str:
    return str(case.get("id", case["file"]))


def _params() -> list[Any]:
    params = []
    for case in CASES:
        marks = []
        if "xfail" in case:
            marks.append(pytest.mark.xfail(strict=True, reason=case["xfail"]))
        params.append(pytest.param(case, id=_case_id(case), marks=marks))
    return params


def _config_args(case: dict[str, Any], tmp_path: Path) -> list[str]:
    """The case's config, with `run.max_refused_share: 0` unless it sets one: a corpus file
    is a few rows made to break one rule, so most of its rows are refused, which a run
    refuses as a whole (`input_mostly_refused`, tests/input/test_input_refused.py). The corpus
    checks each row's own verdict."""
    config = str(case.get("config") or "")
    if config in CONFIG_FILES:
        config = (CORPUS / config).read_text(encoding="utf-8")
    settings = yaml.safe_load(config) or {}
    settings.setdefault("run", {}).setdefault("max_refused_share", 0)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return ["--config", str(path)]


def _posted_keys(served: RunningSandbox) -> set[str | None]:
    return {
        r.idempotency_key
        for r in served.sandbox.ledger.requests
        if r.method == "POST" and r.path.endswith("/valuations")
    }


def _check_refused(case: dict[str, Any], source: Path, stderr: str, served: RunningSandbox) -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert case["message"] in lines[0]
    assert str(source) in lines[0], "the line names the file"
    assert served.sandbox.ledger.requests == [], "nothing is sent for an unusable input"


def _check_complete(case: dict[str, Any], out: Path, served: RunningSandbox) -> None:
    results, problems, summary = outputs(out)
    expected: dict[int, str] = case["problems"]
    found = dict(problems.select("row_number", "type").iter_rows())
    assert problems.height == len(found), "one problem row per input row"
    assert found == expected
    for row, kind, stage in problems.select("row_number", "type", "stage").iter_rows():
        stages = {"input"} if kind in PROBLEM_RULES else set()
        stages |= {"api"} if kind in PROBLEM_TYPES else set()
        assert stage in stages, (row, kind, stage)
    assert results.height == case["valued"]
    assert_accounted(out, case["valued"] + len(expected))
    assert summary["exit_code"] == 0
    assert_paid_once(served, out)
    ledger = served.sandbox.ledger
    charged = [str(c.idempotency_key) for c in ledger.valuations_created()]
    assert sorted(charged) == sorted({str(k) for k in results["idempotency_key"].to_list()}), (
        "one charge per distinct valued request"
    )
    if "charged" in case:
        assert len(charged) == case["charged"]
    if "sent" in case:
        assert len(_posted_keys(served)) == case["sent"]
    rows = {r["row_number"]: r for r in [*results.to_dicts(), *problems.to_dicts()]}
    for number, columns in case.get("passthrough", {}).items():
        for column, text in columns.items():
            assert column in rows[number], (number, column, sorted(rows[number]))
            assert rows[number][column] == text, (number, column)


def _check_ended(
    case: dict[str, Any],
    source: Path,
    out: Path,
    done: Ran | subprocess.CompletedProcess[str],
    served: RunningSandbox,
) -> None:
    """The invocation ended as the case says: never a traceback; 65 (or 64) with one line
    and nothing sent, or 0 with exact problems, every row once, nothing paid twice."""
    crashed = [sign for sign in CRASH_SIGNS if sign in done.stderr]
    assert not crashed, done.stderr[-3000:]
    assert done.returncode == case["exit"], done.stderr[-3000:]
    if case["exit"] in (64, 65):
        _check_refused(case, source, done.stderr, served)
    else:
        _check_complete(case, out, served)
        assert_no_secrets(served, out, done.stdout + done.stderr)


@pytest.mark.parametrize("case", _params())
@pytest.mark.slow
def test_corpus_case(
    case: dict[str, Any], served: RunningSandbox, tmp_path: Path, batchval: InProcess
) -> None:
    """The input ends as expected.yaml says: 65 with one line (64 when the config names
    what the file lacks), or 0 with exact problems."""
    source = CORPUS / case["file"]
    out = tmp_path / "out"
    args = ("run", str(source), "--out", str(out), *_config_args(case, tmp_path))
    _check_ended(case, source, out, batchval(*args, env=env_for(served)), served)


# One case end to end as the installed command's process, what a scheduler starts: its
# problems beside pass-through text, which the process's own stdout and stderr encodings
# could spoil (every other verdict is the same in this process, above).
AS_A_PROCESS = ("unicode_passthrough.csv",)


@pytest.mark.parametrize("case", [c for c in _params() if c.id in AS_A_PROCESS])
@pytest.mark.slow
def test_corpus_case_as_a_process(
    case: dict[str, Any], served: RunningSandbox, tmp_path: Path
) -> None:
    """The case as the `batchval` process: the same verdict as in this process."""
    source = CORPUS / case["file"]
    out = tmp_path / "out"
    args = ("run", str(source), "--out", str(out), *_config_args(case, tmp_path))
    _check_ended(case, source, out, run_cli(*args, env=env_for(served)), served)


def test_every_corpus_file_has_an_entry() -> None:
    """The corpus holds at least 40 inputs, each with an entry in expected.yaml."""
    inputs = {p.name for p in CORPUS.iterdir()} - {SCRIPT, EXPECTED, "__pycache__"} - CONFIG_FILES
    assert len(inputs) >= 40
    assert inputs == {c["file"] for c in CASES}
    ids = [_case_id(c) for c in CASES]
    assert len(ids) == len(set(ids)), "case ids are unique"
    for case in CASES:
        assert case["exit"] in (0, 64, 65), _case_id(case)
        wanted = {"message"} if case["exit"] in (64, 65) else {"problems", "valued"}
        assert wanted <= set(case), _case_id(case)


def test_every_rule_appears_in_the_corpus() -> None:
    """Every validation rule is expected somewhere in the corpus (outside xfails)."""
    seen = {
        kind for case in CASES if "xfail" not in case for kind in case.get("problems", {}).values()
    }
    assert set(PROBLEM_RULES) <= seen


def test_make_corpus_reproduces_the_corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """make_corpus.py writes exactly the committed inputs, byte for byte."""
    spec = importlib.util.spec_from_file_location("make_corpus", CORPUS / SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "HERE", tmp_path)
    module.main()
    made = {p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file()}
    committed = {
        p.relative_to(CORPUS)
        for p in CORPUS.rglob("*")
        if p.is_file()
        and p.name not in {SCRIPT, EXPECTED, *CONFIG_FILES}
        and "__pycache__" not in p.parts  # make_corpus.py's bytecode, where it is written
    }
    assert made == committed
    # Parquet footers carry the writer's version: compare those only when it is the same.
    stamp = f"parquet-cpp-arrow version {pa.__version__}".encode()
    for name in sorted(made):
        data = (CORPUS / name).read_bytes()
        if b"parquet-cpp-arrow version" in data and stamp not in data:
            continue
        assert (tmp_path / name).read_bytes() == data, f"{name}: re-run {SCRIPT}"
