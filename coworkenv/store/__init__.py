"""The event store: an append-only SQLite event log with one batched writer per file."""

from ._reader import Reader
from ._records import EpisodeRecord, EventRecord
from ._schema import SCHEMA_VERSION, migrate
from ._writer import EventStore, WriterSettings, WriterStatistics
from .errors import NotFoundError, SchemaError, StoreClosedError, StoreError

__all__ = [
    "SCHEMA_VERSION",
    "EpisodeRecord",
    "EventRecord",
    "EventStore",
    "NotFoundError",
    "Reader",
    "SchemaError",
    "StoreClosedError",
    "StoreError",
    "WriterSettings",
    "WriterStatistics",
    "migrate",
]
