"""The event store: an append-only SQLite event log with one batched writer per file."""

from ._lease import RunLease
from ._reader import Reader
from ._records import EpisodeRecord, EventRecord
from ._schema import SCHEMA_VERSION, migrate
from ._writer import EventStore, WriterSettings, WriterStatistics
from .errors import LeaseHeldError, NotFoundError, SchemaError, StoreClosedError, StoreError

__all__ = [
    "SCHEMA_VERSION",
    "EpisodeRecord",
    "EventRecord",
    "EventStore",
    "LeaseHeldError",
    "NotFoundError",
    "Reader",
    "RunLease",
    "SchemaError",
    "StoreClosedError",
    "StoreError",
    "WriterSettings",
    "WriterStatistics",
    "migrate",
]
