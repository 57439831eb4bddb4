"""`batchval.testing` (issue 58): the sandbox as a context manager and a pytest fixture,
and the client users test against; its public names are its `__all__`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support import InProcess

from batchval import testing


def test_the_module_s_public_names_are_its_all() -> None:
    found = {n for n in vars(testing) if not n.startswith("_") and n != "annotations"}
    modules = {n for n in found if type(vars(testing)[n]).__name__ == "module"}
    typing_names = {"Any", "Iterator", "Mapping"}
    assert found - modules - typing_names == set(testing.__all__)


def test_a_sandbox_in_a_with_block_serves_and_is_stopped(
    tmp_path: Path, batchval: InProcess
) -> None:
    """Started on a free port with the command's options, it answers batchval as its
    environment points it there, and its process is gone after the block."""
    source = tmp_path / "homes.csv"
    source.write_text(
        "postcode,property_type,bedrooms\nSW1A 2AA,flat,2\nM1 1AE,terraced,3\n", encoding="utf-8"
    )
    with testing.Sandbox("--daily-limit", "1") as sandbox:
        assert sandbox.base_url.startswith("http://127.0.0.1:")
        assert {c["client_id"] for c in sandbox.clients} == set(testing.SECRETS)
        env = {k: v for k, v in os.environ.items() if not k.startswith("BATCHVAL_")}
        done = batchval(
            "run", str(source), "--out", str(tmp_path / "o"), env={**env, **sandbox.env()}
        )
        assert done.returncode == 75, done.stderr  # the daily limit of 1 the options set
        assert sandbox.control("ledger")["credits_charged"] == 10
        process = sandbox._process
        assert process is not None
    assert process.returncode is not None
    summary = json.loads((tmp_path / "o" / "summary.json").read_text(encoding="utf-8"))
    assert summary["stop"]["reason"] == "daily_limit"


def test_the_fixture_is_a_pytest_fixture() -> None:
    assert testing.batchval_sandbox is not None
    assert "fixture" in repr(testing.batchval_sandbox).lower()


def test_a_sandbox_that_cannot_start_says_so() -> None:
    with pytest.raises(RuntimeError, match="before it listened"), testing.Sandbox("--rate", "x"):
        pass
