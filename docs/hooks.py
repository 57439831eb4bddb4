"""MkDocs hooks (mkdocs.yml): each page's reference tables, drawn from the code as the site
is built (`batchval.tools.reference`)."""

from __future__ import annotations

from typing import Any

from batchval.tools.reference import expand


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Every page's Markdown, before it is rendered."""
    return expand(markdown)
