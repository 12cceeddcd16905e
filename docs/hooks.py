"""MkDocs hook: the reference pages' generated parts, from the code itself
(:mod:`coworkenv.docgen`), wherever a page says ``<!-- generated: NAME -->``."""

from __future__ import annotations

from typing import Any

from coworkenv.docgen import expand


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return expand(markdown)
