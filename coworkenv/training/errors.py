"""Errors of training data.

    TrainingDataError         (a ValueError: the data asked for cannot be made)
    ├── NothingToExportError  no episode passed the export's filters; nothing was written
    └── NothingToTrainError   every demonstration was dropped before training (too long)
"""

from __future__ import annotations

from ..errors import CoworkenvError


class TrainingDataError(CoworkenvError, ValueError):
    """Base class of the training data's errors."""
