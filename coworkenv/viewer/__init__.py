"""The web episode viewer: a read-only API over the store and one page that uses it."""

from .server import ViewerServer

__all__ = ["ViewerServer"]
