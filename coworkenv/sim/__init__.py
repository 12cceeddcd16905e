"""The simulator: tasks, virtual time, the episode kernel, checks and the concurrent runner."""

from ..store import events_hash
from .actor import Actor, ActorContext
from .checks import CheckResult, agent_tool_calls, evaluate_checks, projection_db
from .clock import Clock, VirtualClock, WallClock, make_clock
from .episode import EpisodeKernel, EpisodeResult, EpisodeSpec
from .errors import (
    EpisodeFailure,
    HeldOutError,
    RunConfigError,
    RunInterrupted,
    SessionFailedError,
    SimError,
    TaskFileError,
)
from .interrupt import STOP_SIGNALS, Interrupt
from .loader import HeldOut, benchmark, builtin_tasks, load_task_file, load_tasks, parse_task
from .runner import (
    ProcessFailedError,
    RunOptions,
    default_processes,
    episode_seed,
    new_run_id,
    plan_run,
    run_episodes,
    run_in_processes,
    run_jobs,
)
from .task import Capability, CastMember, Fact, Task

__all__ = [
    "STOP_SIGNALS",
    "Actor",
    "ActorContext",
    "Capability",
    "CastMember",
    "CheckResult",
    "Clock",
    "EpisodeFailure",
    "EpisodeKernel",
    "EpisodeResult",
    "EpisodeSpec",
    "Fact",
    "HeldOut",
    "HeldOutError",
    "Interrupt",
    "ProcessFailedError",
    "RunConfigError",
    "RunInterrupted",
    "RunOptions",
    "SessionFailedError",
    "SimError",
    "Task",
    "TaskFileError",
    "VirtualClock",
    "WallClock",
    "agent_tool_calls",
    "benchmark",
    "builtin_tasks",
    "default_processes",
    "episode_seed",
    "evaluate_checks",
    "events_hash",
    "load_task_file",
    "load_tasks",
    "make_clock",
    "new_run_id",
    "parse_task",
    "plan_run",
    "projection_db",
    "run_episodes",
    "run_in_processes",
    "run_jobs",
]
