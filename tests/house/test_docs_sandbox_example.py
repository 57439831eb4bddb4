"""The pytest module of docs/how-to/sandbox-in-tests.md runs as a user would run it: its
```python block written to a file and run by pytest in a child process, with the project's
`batchval` on PATH, so that the page's fixture and tests cannot drift from the sandbox."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from docs_examples import environment, fenced

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "how-to" / "sandbox-in-tests.md"


def test_the_page_has_one_python_module() -> None:
    """The page shows one ```python block: the module this test runs."""
    assert len(fenced(PAGE.read_text(encoding="utf-8"), "python")) == 1


@pytest.mark.slow
def test_the_page_s_pytest_module_passes(tmp_path: Path) -> None:
    """The page's fixture starts `batchval sandbox`, and its tests pass against it."""
    ((_, module),) = fenced(PAGE.read_text(encoding="utf-8"), "python")
    (tmp_path / "test_with_sandbox.py").write_text(module, encoding="utf-8")
    env = environment(tmp_path)  # the project's batchval first on PATH, as for a reader
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_with_sandbox.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\b\d+ passed\b", done.stdout), done.stdout
    assert "skipped" not in done.stdout, done.stdout
