"""Errors of training data, and of the model server.

    TrainingDataError         (a ValueError: the data asked for cannot be made)
    ├── NothingToExportError  no episode passed the export's filters; nothing was written
    └── NothingToTrainError   every demonstration was dropped before training (too long)
    ServerFailedError         the model server can no longer answer (its generation thread
                              died): its clients get 503 with the reason
"""

from __future__ import annotations

from ..errors import CoworkenvError


class TrainingDataError(CoworkenvError, ValueError):
    """Base class of the training data's errors."""


class ServerFailedError(CoworkenvError, RuntimeError):
    """The model server can no longer answer: its generation thread died."""
