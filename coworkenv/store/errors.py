"""Errors of the store.

    StoreError
    ├── SchemaError        the file's schema is newer than this code, or not a coworkenv store
    ├── StoreClosedError   a write after the store was closed, or after its writer failed
    ├── NotFoundError      a run or episode id that is not in the file
    ├── LeaseHeldError     another live runner holds the run
    ├── LeaseLostError     this runner's lease was taken over (it was paused past the lease's
    │                      time): its writer stops before committing anything more
    └── MergeConflictError two shards disagree about an episode, a run or a task spec
"""

from __future__ import annotations

from ..errors import CoworkenvError


class StoreError(CoworkenvError):
    """Base class of the store's errors."""


class SchemaError(StoreError):
    pass


class StoreClosedError(StoreError):
    pass


class NotFoundError(StoreError):
    pass


class LeaseHeldError(StoreError):
    """Another runner holds the run's lease and is alive (its heartbeat is fresh)."""


class LeaseLostError(StoreError):
    """Another runner took over this runner's run (its heartbeat went stale: the process was
    paused, or cut off from the file); the writer commits nothing more."""


class MergeConflictError(StoreError):
    """Two stores disagree about one episode, run or task spec; nothing of that shard was
    merged."""
