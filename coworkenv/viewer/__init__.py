"""The web episode viewer: a read-only API over the store and one page that uses it.

:func:`viewer_url` (an address on the page) imports nothing heavy; :class:`ViewerServer` (and
its API, which reads episodes through the agents' code) is imported when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .urls import VIEWER_BASE, VIEWER_PORT, viewer_url

if TYPE_CHECKING:
    from .server import ViewerServer

__all__ = ["VIEWER_BASE", "VIEWER_PORT", "ViewerServer", "viewer_url"]


def __getattr__(name: str) -> Any:
    if name == "ViewerServer":
        from .server import ViewerServer

        return ViewerServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
