"""The root of every error coworkenv raises on purpose; catch it to catch them all.

    CoworkenvError
    ├── BusError               coworkenv.bus: closed, timeout, connection, URL
    │   └── BusClosedError, BusTimeoutError, BusConnectionError, BusURLError
    ├── StoreError             coworkenv.store: the event store
    │   └── SchemaError, StoreClosedError, NotFoundError, LeaseHeldError, LeaseLostError,
    │       MergeConflictError
    ├── SimError               coworkenv.sim: tasks, episodes and runs
    │   └── TaskFileError, EpisodeFailure, RunConfigError, HeldOutError, RunInterrupted,
    │       SessionFailedError (a session the simulator could not carry),
    │       ProcessFailedError (a worker process of a multi-process run died),
    │       EndpointUnreachableError (a RunConfigError of coworkenv.runtime: a model
    │       endpoint that does not answer, found before the run)
    ├── WorkspaceError         coworkenv.workspace
    │   ├── ToolError          (returned to the agent as an observation, never raised out)
    │   └── AppError           an app plugin that cannot be loaded or breaks the contract
    ├── SynthError             coworkenv.synth
    │   └── PrimitiveError     a primitive plugin that cannot be loaded or breaks the contract
    ├── IncompleteOutputError  coworkenv.outputs: an output cut short or changed
    ├── TrainingDataError      coworkenv.training: nothing left to export or to train on
    │   └── NothingToExportError, NothingToTrainError
    └── ServerFailedError      coworkenv.training: the model server can no longer answer

Each package's own ``errors.py`` draws its part of the tree. Errors that say a value is
wrong also derive from ``ValueError`` (``BusURLError``, the training data errors), timeouts
from ``TimeoutError``.
"""

from __future__ import annotations


class CoworkenvError(Exception):
    """Base class of every error coworkenv raises on purpose."""
