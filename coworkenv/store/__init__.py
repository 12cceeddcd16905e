"""The event store: an append-only SQLite event log with one batched writer per file."""

from ._lease import RunLease
from ._merge import (
    MergeStats,
    adopt_shards,
    merge_connection,
    merge_stores,
    shard_files,
    verify_shard,
    writable_store,
)
from ._prune import delete_runs
from ._reader import MAX_SHARDS, Reader
from ._records import (
    MEASURED,
    UNHASHED,
    EpisodeRecord,
    EventRecord,
    EventsHasher,
    events_hash,
    hash_line,
)
from ._schema import SCHEMA_VERSION, migrate
from ._writer import EventStore, WriterSettings, WriterStatistics
from .errors import (
    LeaseHeldError,
    LeaseLostError,
    MergeConflictError,
    NotFoundError,
    SchemaError,
    StoreClosedError,
    StoreError,
)

__all__ = [
    "MAX_SHARDS",
    "MEASURED",
    "SCHEMA_VERSION",
    "UNHASHED",
    "EpisodeRecord",
    "EventRecord",
    "EventStore",
    "EventsHasher",
    "LeaseHeldError",
    "LeaseLostError",
    "MergeConflictError",
    "MergeStats",
    "NotFoundError",
    "Reader",
    "RunLease",
    "SchemaError",
    "StoreClosedError",
    "StoreError",
    "WriterSettings",
    "WriterStatistics",
    "adopt_shards",
    "delete_runs",
    "events_hash",
    "hash_line",
    "merge_connection",
    "merge_stores",
    "migrate",
    "shard_files",
    "verify_shard",
    "writable_store",
]
