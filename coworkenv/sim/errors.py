"""Errors of the simulator.

    SimError
    ├── TaskFileError     a task file that does not parse or validate; names file, path, problem
    ├── EpisodeFailure    a failure inside one episode, attributed to one boundary
    └── RunConfigError    a bad combination of run options
"""

from __future__ import annotations

from typing import Literal

Boundary = Literal["setup", "agent", "user", "coworker", "tool", "world", "grading", "runtime"]


class SimError(Exception):
    """Base class of the simulator's errors."""


class TaskFileError(SimError):
    def __init__(self, file: str, problems: list[str]) -> None:
        self.file = file
        self.problems = problems
        super().__init__("\n".join(f"{file}: {p}" for p in problems))


class EpisodeFailure(SimError):
    """A failure attributed to one boundary. ``retryable``: the episode may run again as a new
    attempt (a remote worker was lost, say); the failed attempt stays recorded."""

    def __init__(self, boundary: Boundary, message: str, *, retryable: bool = False) -> None:
        self.boundary = boundary
        self.message = message
        self.retryable = retryable
        super().__init__(f"{boundary}: {message}")


class RunConfigError(SimError):
    pass
