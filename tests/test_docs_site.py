"""`make docs` fails on what would make the site wrong: the strict build is tried on a copy
of the site's sources with one fault each, so that a loosened mkdocs.yml fails here."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MKDOCS = ROOT / ".venv" / "bin" / "mkdocs"


def _copy(tmp_path: Path) -> Path:
    site = tmp_path / "site-src"
    site.mkdir()
    shutil.copytree(ROOT / "docs", site / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("mkdocs.yml", "CHANGELOG.md"):
        shutil.copy(ROOT / name, site / name)
    (site / "batchval").symlink_to(ROOT / "batchval")  # watched by mkdocs serve
    (site / "examples").symlink_to(ROOT / "examples")  # pages include its scripts (snippets)
    return site


def _build(site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(site / "out")],
        cwd=site,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        check=False,
    )


def _edit(page: Path, old: str, new: str) -> None:
    text = page.read_text("utf-8")
    assert old in text
    page.write_text(text.replace(old, new, 1), "utf-8")


pytestmark = pytest.mark.skipif(not MKDOCS.exists(), reason="the docs extra is not installed")


@pytest.mark.slow
def test_the_copy_builds(tmp_path: Path) -> None:
    """The copy builds as the site does, so each fault below is what fails it."""
    built = _build(_copy(tmp_path))
    assert built.returncode == 0, built.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("page", "old", "new", "said"),
    [
        (
            "reference/exit-codes.md",
            "(../explanation/exit-codes.md)",
            "(../explanation/gone.md)",
            "gone.md",
        ),
        (
            "reference/configuration.md",
            "(../outputs.md#lender-columns)",
            "(../outputs.md#no-such)",
            "no-such",
        ),
        (
            "reference/exit-codes.md",
            "<!-- generated: exit-codes -->",
            "<!-- generated: exit-code -->",
            "exit-code",
        ),
    ],
    ids=["missing page", "missing anchor", "unknown table"],
)
def test_a_fault_fails_the_strict_build(
    tmp_path: Path, page: str, old: str, new: str, said: str
) -> None:
    site = _copy(tmp_path)
    _edit(site / "docs" / page, old, new)
    built = _build(site)
    assert built.returncode != 0
    assert said in built.stderr


@pytest.mark.slow
def test_a_page_left_out_of_the_nav_fails_the_build(tmp_path: Path) -> None:
    site = _copy(tmp_path)
    (site / "docs" / "how-to" / "orphan.md").write_text("# Orphan\n", "utf-8")
    built = _build(site)
    assert built.returncode != 0
    assert "orphan.md" in built.stderr
