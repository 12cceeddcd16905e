"""Errors of the simulator.

    SimError
    ├── TaskFileError     a task file that does not parse or validate; names file, path, problem
    ├── EpisodeFailure    a failure inside one episode, attributed to one boundary
    ├── RunConfigError    a bad combination of run options
    ├── HeldOutError      training data asked of tasks that are held out (the benchmark)
    ├── SessionFailedError  a session the simulator could not carry (its episode raised, the
    │                     store stopped recording): an error for its client, never a reward
    └── RunInterrupted    a run stopped early on request (a signal); what finished is recorded
"""

from __future__ import annotations

from typing import Any, Literal

from ..errors import CoworkenvError

Boundary = Literal["setup", "agent", "user", "coworker", "tool", "world", "grading", "runtime"]


class SimError(CoworkenvError):
    """Base class of the simulator's errors."""


class TaskFileError(SimError):
    """A file's problems, each naming the file; the message shows the first
    :attr:`SHOWN` of them and says how many more there are (``problems`` holds them all)."""

    SHOWN = 20

    def __init__(self, file: str, problems: list[str]) -> None:
        self.file = file
        self.problems = problems
        shown = [f"{file}: {p}" for p in problems[: self.SHOWN]]
        if len(problems) > self.SHOWN:
            shown.append(f"{file}: ... and {len(problems) - self.SHOWN:,} more problem(s) "
                          "like these")
        super().__init__("\n".join(shown))


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


class SessionFailedError(SimError):
    """A session the simulator could not carry: its episode raised inside the simulator, or
    the store stopped recording. Its client gets this error, never a reward."""


class HeldOutError(SimError):
    """Tasks that are never trained on (the benchmark's) were given to export or training."""

    def __init__(self, what: str, task_ids: list[str]) -> None:
        self.task_ids = task_ids
        shown = ", ".join(task_ids[:5]) + (f" and {len(task_ids) - 5} more"
                                           if len(task_ids) > 5 else "")
        super().__init__(f"{what}: {len(task_ids)} task(s) of the benchmark, which is never "
                         f"trained on: {shown}")


class RunInterrupted(SimError):
    """A run stopped early (see :class:`~coworkenv.sim.interrupt.Interrupt`): its finished
    episodes are recorded, the ones cut short are recorded as aborted, and ``--resume`` runs
    what is left. ``results``: the episodes this call finished."""

    def __init__(self, run_id: str, results: list[Any], signum: int | None) -> None:
        self.run_id, self.results, self.signum = run_id, results, signum
        super().__init__(f"run {run_id!r} interrupted after {len(results)} episode(s) of this "
                         "call; `--resume` runs the rest")
