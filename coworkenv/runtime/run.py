"""A run from Python: :class:`RunConfig` (everything ``coworkenv run`` takes; see
:mod:`.prepare`) and :func:`run` / :func:`arun`, which the CLI calls too.

    from coworkenv.runtime import RunConfig, run

    result = run(RunConfig(tasks=["examples/tasks"], agent="oracle", db="runs/a.db", trials=2))
    print(result.run_id, result.overall["score"], len(result.episodes))

Errors are library errors (:class:`~coworkenv.errors.CoworkenvError`) whose message starts with
the field it is about (``faults: expected a rate between 0 and 1, got 2.0``); the CLI shows the
same messages with the field as its flag.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..sim.errors import RunConfigError
from .prepare import (  # (the configuration's names, where callers have always found them)
    CLOCKS,
    SQLITE_HEADER,
    EndpointUnreachableError,
    OnDone,
    OnPlan,
    Prepared,
    RunConfig,
    _bus,
    check_db,
    check_endpoint,
    factories,
    prepare,
    resolve_tasks,
    select_tasks,
    unfinished_runs,
)

if TYPE_CHECKING:
    from ..sim import EpisodeResult, Interrupt, Task

__all__ = ["CLOCKS", "SQLITE_HEADER", "EndpointUnreachableError", "OnDone", "OnPlan", "Prepared",
           "RunConfig", "RunResult", "arun", "check_db", "check_endpoint", "execute",
           "execute_in_processes", "factories", "finish", "first_error", "prepare",
           "resolve_tasks", "run", "select_tasks", "unfinished_runs", "unwrapped"]


@dataclass(frozen=True)
class RunResult:
    """What a run did: this call's episodes, and the whole run as the store records it."""

    run_id: str
    db: Path
    episodes: list[EpisodeResult]
    """The episodes this call ran (a resume runs only the missing ones)."""
    tasks: list[Task]
    overall: dict[str, Any] = field(default_factory=dict)
    """Every scheduled (task, trial) of the run, read back from the store: score, completion,
    pass rate, pass@k, failures (see ``coworkenv eval``)."""
    by_family: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def agent_failed(self) -> int:
        """Episodes of this call that failed at the agent boundary."""
        return sum(1 for r in self.episodes
                   if r.status == "failed" and r.failure_boundary == "agent")


async def execute(p: Prepared, *, on_done: OnDone | None = None, on_plan: OnPlan | None = None,
                  interrupt: Interrupt | None = None) -> list[EpisodeResult]:
    """Run a prepared run in this event loop (one process)."""
    from ..sim import Interrupt, run_episodes
    from ..store import EventStore

    if p.config.processes > 1 or p.config.ray is not None:
        raise RunConfigError("processes: a run of several processes (or on Ray) is started "
                             "by run(), not inside an event loop (use processes 1 with arun)")
    bus = _bus(p.config.bus)
    stop = interrupt or Interrupt()
    # listening outermost: closing the bus and the store is covered by the signals too
    async with stop.listening(), bus, EventStore(p.db) as store:
        if not p.remote:
            return await run_episodes(p.tasks, agent=p.make_agent, cast=p.make_cast, bus=bus,
                                      store=store, options=p.options, on_done=on_done,
                                      on_plan=on_plan, interrupt=stop)
        from ..agents.remote import RemoteAgentProxy, RemotePool

        async with RemotePool(bus) as pool:
            return await run_episodes(p.tasks, agent=lambda t: RemoteAgentProxy(pool, t),
                                      cast=p.make_cast, bus=bus, store=store, options=p.options,
                                      on_done=on_done, on_plan=on_plan, interrupt=stop)


def execute_in_processes(p: Prepared, *, on_done: OnDone | None = None,
                         on_plan: OnPlan | None = None,
                         interrupt: Interrupt | None = None) -> list[EpisodeResult]:
    """Run a prepared run in ``processes`` OS processes sharing the store."""
    from ..bus import open_bus
    from ..sim import run_in_processes

    bus_url = p.config.bus
    assert isinstance(bus_url, str)  # (RunConfig refuses a Bus object with processes > 1)
    return run_in_processes(p.tasks, processes=p.config.processes, db=p.db,
                            open_bus=lambda: open_bus(bus_url), agent=p.make_agent,
                            cast=p.make_cast, options=p.options, on_done=on_done,
                            on_plan=on_plan, interrupt=interrupt)


def finish(p: Prepared, episodes: list[EpisodeResult]) -> RunResult:
    """The result, with the whole run's summary read back from the store."""
    from ..sim.report import summarize
    from ..store import Reader

    with Reader(p.db) as r:
        summary = summarize(r.scheduled_episodes(p.options.run_id))
    return RunResult(p.options.run_id, p.db, episodes, p.tasks, summary["overall"] or {},
                     summary["by_family"])


def first_error(group: BaseExceptionGroup[Any]) -> BaseException:
    """The first leaf of an exception group (a task group's failure, unwrapped)."""
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def _ours(group: BaseExceptionGroup[Any]) -> BaseException:
    """A library error raised inside a task group, as itself (else the group)."""
    from ..errors import CoworkenvError

    ours = group.subgroup(CoworkenvError)
    return group if ours is None else first_error(ours)


def unwrapped(call: Callable[[], list[EpisodeResult]]) -> list[EpisodeResult]:
    """``call()``, with a library error raised inside a task group re-raised as itself."""
    try:
        return call()
    except BaseExceptionGroup as group:
        raise _ours(group) from group


async def arun(config: RunConfig, *, on_done: OnDone | None = None,
               on_plan: OnPlan | None = None, interrupt: Interrupt | None = None) -> RunResult:
    """Run in the caller's event loop (``processes`` must be 1). ``on_done`` is called with
    each finished episode, ``on_plan(scheduled, to_run)`` once the run is planned;
    ``interrupt`` stops it early (:class:`~coworkenv.sim.RunInterrupted`)."""
    p = prepare(config)
    try:
        episodes = await execute(p, on_done=on_done, on_plan=on_plan, interrupt=interrupt)
    except BaseExceptionGroup as group:
        raise _ours(group) from group
    return finish(p, episodes)


def run(config: RunConfig, *, on_done: OnDone | None = None, on_plan: OnPlan | None = None,
        interrupt: Interrupt | None = None) -> RunResult:
    """Run to the end (one process, or ``processes`` processes) and return the result.
    Raises :class:`~coworkenv.sim.RunInterrupted` when ``interrupt`` stopped it."""
    import anyio

    p = prepare(config)
    if p.config.ray is not None:
        from .cluster import execute_on_ray

        episodes = unwrapped(lambda: execute_on_ray(
            p, on_done=on_done, on_plan=on_plan, interrupt=interrupt))
    elif p.config.processes > 1:
        episodes = unwrapped(lambda: execute_in_processes(
            p, on_done=on_done, on_plan=on_plan, interrupt=interrupt))
    else:
        async def go() -> list[EpisodeResult]:
            return await execute(p, on_done=on_done, on_plan=on_plan, interrupt=interrupt)
        episodes = unwrapped(lambda: anyio.run(go))
    return finish(p, episodes)
