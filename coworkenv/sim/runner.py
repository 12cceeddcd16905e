"""Running many episodes concurrently in one process, sharing one store writer and one bus."""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import anyio

from ..bus import Bus
from ..store import EventStore, Reader
from .actor import Actor
from .clock import make_clock
from .episode import EpisodeKernel, EpisodeResult, EpisodeSpec
from .faults import FaultInjector
from .grading import GradeWeights
from .task import FaultPlan, Task

CastFactory = Callable[[Task], dict[str, Actor]]


def episode_seed(task_id: str, trial: int) -> int:
    return zlib.crc32(f"{task_id}:{trial}".encode())


def new_run_id() -> str:
    return time.strftime("run-%Y%m%d-%H%M%S-") + f"{time.time_ns() % 1_000_000:06d}"


@dataclass(frozen=True, slots=True)
class RunOptions:
    run_id: str
    agent_name: str
    trials: int = 1
    concurrency: int = 64
    clock: str = "virtual"
    role: str = "student"
    resume: bool = False
    faults: FaultPlan | None = None
    """Faults for every task (a task's own plan wins)."""
    weights: GradeWeights = field(default_factory=GradeWeights)
    tools: list[str] | None = None
    """Tools offered to the agent (tool or app names), for every task."""
    max_attempts: int = 3
    """Runs of one (task, trial) when a failure says it may be retried (a lost worker)."""


async def run_episodes(tasks: Sequence[Task], *, agent: Callable[[Task], Actor],
                       cast: CastFactory, bus: Bus, store: EventStore, options: RunOptions,
                       on_done: Callable[[EpisodeResult], None] | None = None,
                       ) -> list[EpisodeResult]:
    """Run every (task, trial) not yet recorded in this run; return the results of this call.

    A failure inside one episode is recorded on that episode and never stops the others.
    """
    todo: list[tuple[Task, int, int]] = []
    done: set[tuple[str, int]] = set()
    attempts: dict[tuple[str, int], int] = {}
    if options.resume:
        await store.abort_running(options.run_id)
        await store.flush()
        with Reader(store) as r:
            done = r.completed_trials(options.run_id)
            for t in tasks:
                for k in range(options.trials):
                    if (t.id, k) not in done:
                        attempts[(t.id, k)] = r.next_attempt(options.run_id, t.id, k)
    await store.create_run(options.run_id, options.agent_name,
                           {"trials": options.trials, "clock": options.clock,
                            "tasks": [t.id for t in tasks], "role": options.role,
                            "faults": options.faults.model_dump() if options.faults else None})
    await store.save_tasks(options.run_id, [(t.id, t.family, list(t.capabilities),
                                             t.model_dump_json()) for t in tasks])
    for k in range(options.trials):
        for t in tasks:
            if (t.id, k) not in done:
                todo.append((t, k, attempts.get((t.id, k), 0)))
    results: list[EpisodeResult] = []
    queue = iter(todo)

    async def worker() -> None:
        for task, trial, first_attempt in queue:  # workers share one iterator
            for attempt in range(first_attempt, first_attempt + options.max_attempts):
                result = await one(task, trial, attempt)
                if not result.retryable:
                    break
            results.append(result)
            if on_done is not None:
                on_done(result)

    async def one(task: Task, trial: int, attempt: int) -> EpisodeResult:
        seed = episode_seed(task.id, trial)
        spec = EpisodeSpec(task, options.run_id, f"{options.run_id}:{task.id}:{trial}:{attempt}",
                           trial, attempt, seed, options.agent_name, options.role,
                           options.tools)
        plan = task.faults or options.faults
        try:
            kernel = EpisodeKernel(
                spec, bus=bus, store=store, agent=agent(task), cast=cast(task),
                clock=make_clock(options.clock),
                faults=FaultInjector.for_episode(plan, seed) if plan else None,
                weights=options.weights)
            return await kernel.run()
        except Exception as exc:  # setup failed: record it on this episode alone
            return await _setup_failure(store, spec, exc)

    async with anyio.create_task_group() as tg:
        for i in range(max(1, min(options.concurrency, len(todo)))):
            tg.start_soon(worker, name=f"episode-worker-{i}")
    await store.finish_run(options.run_id)
    await store.flush()
    return results


async def _setup_failure(store: EventStore, spec: EpisodeSpec, exc: Exception) -> EpisodeResult:
    msg = f"{type(exc).__name__}: {exc}"
    await store.start_episode(episode_id=spec.episode_id, run_id=spec.run_id,
                              task_id=spec.task.id, family=spec.task.family, trial=spec.trial,
                              attempt=spec.attempt, seed=spec.seed, agent=spec.agent_name,
                              role=spec.role)
    await store.finish_episode(spec.episode_id, status="failed", sim_time=0.0, turns=0,
                               termination="failed", completion=None, event_count=0,
                               events_hash="", state_hash="", failure_boundary="setup",
                               failure=msg)
    return EpisodeResult(spec.episode_id, spec.task.id, spec.task.family, spec.trial, "failed",
                         "failed", 0.0, 0, 0.0, 0.0, 0, "", "", "setup", msg)
