"""MkDocs hooks (mkdocs.yml): each page's reference tables, written into the Markdown by
`make docs-tables` (`batchval._internal.admin.reference`), checked against the code as the site is
built."""

from __future__ import annotations

import logging
from typing import Any

from mkdocs.structure.pages import Page

from batchval._internal.admin.reference import written

# Under mkdocs' own logger, so that strict mode counts what is logged here as it counts a
# broken link.
log = logging.getLogger("mkdocs.plugins.batchval.reference")


def on_page_markdown(markdown: str, page: Page, **_: Any) -> str:
    """Every page's Markdown, before it is rendered. A page whose tables are not the code's
    (or that asks for a table the code does not make) fails the (strict) build as a broken
    link does: logged, and the build goes on, so that one build names every fault of the
    site rather than the first. The page is shown as the repository holds it."""
    try:
        drawn = written(markdown)
    except ValueError as exc:
        log.error("Doc file '%s': %s", page.file.src_uri, exc)
        return markdown
    if drawn != markdown:
        log.error(
            "Doc file '%s': its tables are not the code's: `make docs-tables` rewrites them",
            page.file.src_uri,
        )
    return markdown
