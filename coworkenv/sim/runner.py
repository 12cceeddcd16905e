"""Running many episodes concurrently: in one process, sharing one store writer and one bus,
or spread over several processes (``processes``), each with its own event loop, bus
connection and writer on the same SQLite file."""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import re
import signal
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import anyio

from ..bus import Bus
from ..store import EventStore, Reader, RunLease
from .actor import Actor
from .clock import make_clock
from .episode import EpisodeKernel, EpisodeResult, EpisodeSpec
from .errors import RunConfigError, RunInterrupted, SimError
from .faults import FaultInjector
from .grading import GradeWeights
from .interrupt import Interrupt
from .task import FaultPlan, Task

CastFactory = Callable[[Task], dict[str, Actor]]
Job = tuple[Task, int, int]
"""One (task, trial) to run, with the attempt number it starts at."""


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
    """Episodes at once, per process."""
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
    tune_gc: bool = True
    """While episodes run, freeze what already exists and collect young objects rarely: the
    cyclic collector otherwise re-scans every live episode's events and costs about as much
    as the simulation itself (see bench/episodes.py)."""

    def __post_init__(self) -> None:
        check_run_id(self.run_id)


RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def check_run_id(run_id: str) -> None:
    """A run id is one level of a bus topic and a file name: letters, digits, ``_.-``."""
    if not RUN_ID.match(run_id):
        raise RunConfigError(f"run id {run_id!r}: use letters, digits and _ . - (at most 128, "
                             "starting with a letter or digit)")


YOUNG_PER_EPISODE = 100
"""Objects allowed to accumulate before a young collection, per live episode (at least
50,000). Each live episode keeps about 25 young objects between its steps (its coroutines,
timer, futures and the message in flight), all scanned by every young collection; with a
fixed threshold, collections came as often at 5,000 live episodes as at 100 and each scanned
50 times more (measured: 0.3 us a step at 100, 10 us at 5,000). Proportional, a collection
scans about as much per step at any number of live episodes."""


@contextmanager
def tuned_gc(enabled: bool = True, live: int = 0) -> Iterator[None]:
    """Fewer, cheaper garbage collections for the duration of a run of up to ``live``
    episodes at once; restored afterwards."""
    if not enabled:
        yield
        return
    old = gc.get_threshold()
    gc.freeze()  # objects from before the run (modules, tasks, seeds) are never scanned again
    gc.set_threshold(max(old[0], 50_000, YOUNG_PER_EPISODE * live), max(old[1], 20),
                     max(old[2], 100))
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


def refuse_recorded_run(r: Reader, run_id: str, where: str | Path) -> None:
    """A new run may not take the id of a run the store holds: its episode ids would be that
    run's, and the store would refuse them midway (a resume is how a run goes on)."""
    if r.run_config(run_id) is not None:
        raise RunConfigError(f"run_id: run {run_id!r} is already recorded in {where}; resume "
                             "it to complete its missing episodes, or give a new run id")


async def plan_run(tasks: Sequence[Task], store: EventStore, options: RunOptions) -> list[Job]:
    """Record the run and its task specs; return every (task, trial) not yet completed.

    With ``options.resume``, episodes a crash left running are marked aborted first and the
    completed ones are skipped, so every (task, trial) ends up completed exactly once.
    """
    done: set[tuple[str, int]] = set()
    attempts: dict[tuple[str, int], int] = {}
    if not options.resume:
        with Reader(store) as r:
            refuse_recorded_run(r, options.run_id, store.path)
    if options.resume:
        await store.flush()
        with Reader(store) as r:
            _same_run(r, tasks, options)
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
    return [(t, k, attempts.get((t.id, k), 0))
            for k in range(options.trials) for t in tasks if (t.id, k) not in done]


def _same_run(r: Reader, tasks: Sequence[Task], options: RunOptions) -> None:
    """A resume goes on with the run as it was recorded: the same agent, trials and tasks
    (by content); anything else would mix two runs under one id."""
    recorded = r.run_config(options.run_id)
    if recorded is None:
        return  # nothing recorded yet: this call starts it
    agent, config = recorded
    problems = []
    if agent != options.agent_name:
        problems.append(f"agent {options.agent_name!r} (recorded: {agent!r})")
    if int(config.get("trials") or 1) != options.trials:
        problems.append(f"trials {options.trials} (recorded: {config.get('trials')})")
    specs = r.task_specs(options.run_id)
    ids, recorded_ids = {t.id for t in tasks}, set(config.get("tasks") or specs)
    if ids != recorded_ids:
        extra, missing = sorted(ids - recorded_ids), sorted(recorded_ids - ids)
        problems.append(f"other tasks ({len(extra)} not in the run, e.g. {extra[:3]}; "
                        f"{len(missing)} of the run missing, e.g. {missing[:3]})")
    else:
        changed = [t.id for t in tasks if t.id in specs and
                   Task.model_validate_json(specs[t.id]).content_hash() != t.content_hash()]
        if changed:
            problems.append(f"{len(changed)} task(s) whose content changed since the run "
                            f"started (e.g. {changed[:3]})")
    if problems:
        raise RunConfigError(f"resume of run {options.run_id!r} with " + "; ".join(problems)
                             + ": resume with the run's own options, or start a new run")


async def run_jobs(jobs: Sequence[Job], *, agent: Callable[[Task], Actor], cast: CastFactory,
                   bus: Bus, store: EventStore, options: RunOptions,
                   on_done: Callable[[EpisodeResult], None] | None = None,
                   interrupt: Interrupt | None = None) -> list[EpisodeResult]:
    """Run the given (task, trial, attempt) jobs, ``options.concurrency`` at a time.

    ``on_done`` hears of an episode only once its records are committed (a progress bar
    counts durable episodes; a crash right after loses nothing that was reported): finished
    episodes wait for the writer's next commit, and are reported together after it. Once
    ``interrupt`` is requested no job starts and running episodes are cancelled (left
    'running' in the store for the caller to mark aborted); the finished ones are returned."""
    stop = interrupt or Interrupt()
    results: list[EpisodeResult] = []
    queue = iter(jobs)
    finished: list[EpisodeResult] = []
    wake = anyio.Event()
    running = max(1, min(options.concurrency, len(jobs)))

    async def worker() -> None:
        nonlocal wake, running
        try:
            for task, trial, first_attempt in queue:  # workers share one iterator
                if stop.requested:
                    return
                result = None
                for attempt in range(first_attempt, first_attempt + options.max_attempts):
                    with stop.cancels():
                        result = await one(task, trial, attempt)
                    if stop.requested or result is None or not result.retryable:
                        break
                if result is None or (stop.requested and result.retryable):
                    return  # cut short: not a result
                results.append(result)
                finished.append(result)
                wake.set()
        finally:
            running -= 1
            wake.set()

    async def reporter() -> None:
        nonlocal wake, finished
        assert on_done is not None
        while running or finished:
            await wake.wait()
            wake = anyio.Event()
            if not finished:
                continue
            batch, finished = finished, []
            await store.flush()  # everything these episodes wrote is committed now
            for r in batch:
                on_done(r)

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
            result = await kernel.run()
            kernel.release()
            return result
        except Exception as exc:  # setup failed: record it on this episode alone
            return await _setup_failure(store, spec, exc)

    with tuned_gc(options.tune_gc, running):
        async with anyio.create_task_group() as tg:
            if on_done is not None:
                tg.start_soon(reporter, name="episode-reporter")
            for i in range(running):
                tg.start_soon(worker, name=f"episode-worker-{i}")
    return results


OnPlan = Callable[[int, int], None]
"""Told, once the run holds its lease and is planned: (task, trial) pairs scheduled, and how
many of them this call runs (fewer on a resume)."""


async def run_episodes(tasks: Sequence[Task], *, agent: Callable[[Task], Actor],
                       cast: CastFactory, bus: Bus, store: EventStore, options: RunOptions,
                       on_done: Callable[[EpisodeResult], None] | None = None,
                       on_plan: OnPlan | None = None,
                       interrupt: Interrupt | None = None) -> list[EpisodeResult]:
    """Run every (task, trial) not yet recorded in this run; return the results of this call.

    A failure inside one episode is recorded on that episode and never stops the others.
    When ``interrupt`` is requested, raise :class:`RunInterrupted` once every finished
    episode is committed and the ones cut short are recorded as aborted.
    """
    stop = interrupt or Interrupt()
    with RunLease(store.path, options.run_id) as lease:  # one runner per run
        if lease.enabled:  # (fenced: should another runner take over, this one stops)
            store.fence = (options.run_id, lease.owner)
        async with stop.listening():
            jobs = await plan_run(tasks, store, options)
            if on_plan is not None:
                on_plan(len(tasks) * options.trials, len(jobs))
            results = await run_jobs(jobs, agent=agent, cast=cast, bus=bus, store=store,
                                     options=options, on_done=on_done, interrupt=stop)
            # (a request that came after the last episode cut nothing: the run is whole)
            cut = stop.requested and len(results) < len(jobs)
            if not cut:
                await store.finish_run(options.run_id)
            else:
                await store.abort_running(options.run_id)
            await store.flush()
    if cut:
        raise RunInterrupted(options.run_id, results, stop.signum)
    return results


class ProcessFailedError(SimError, RuntimeError):
    """A worker process of a multi-process run died; ``--resume`` completes its episodes."""


def run_in_processes(tasks: Sequence[Task], *, processes: int, db: str | Path,
                     open_bus: Callable[[], Bus], agent: Callable[[Task], Actor],
                     cast: CastFactory, options: RunOptions,
                     on_done: Callable[[EpisodeResult], None] | None = None,
                     on_plan: OnPlan | None = None,
                     interrupt: Interrupt | None = None) -> list[EpisodeResult]:
    """Run a whole run over ``processes`` OS processes (synchronous; call it outside any event
    loop). Each process runs a fixed share of the jobs with its own event loop, bus (from
    ``open_bus``) and store writer, all on the one SQLite file ``db`` (WAL; each writer
    commits whole batches). Use it when one event loop is the bottleneck: many concurrent
    episodes with a fast agent. The run is planned once (resume included) before the
    processes start, and marked finished once all have ended; episode results and event
    sequences are the same as in one process. Needs the ``fork`` start method (POSIX): the
    factories are inherited, not pickled. ``interrupt`` works as in :func:`run_episodes`:
    this process hears its signals and stops the others (SIGTERM; they ignore SIGINT, so a
    Ctrl-C at the terminal reaches the run once); its ``on_second`` kills them first.
    """
    if processes < 1:
        raise ValueError(f"processes: expected at least 1, got {processes}")
    lease = RunLease(db, options.run_id)  # held by this process; children die with it

    async def plan() -> list[Job]:
        async with EventStore(db) as store:
            lease.acquire(heartbeat=False)  # (started once the children are forked)
            jobs = await plan_run(tasks, store, options)
            await store.flush()
            return jobs

    try:
        jobs = anyio.run(plan)
        if on_plan is not None:
            on_plan(len(tasks) * options.trials, len(jobs))
        return _run_shards(jobs, processes, db, open_bus, agent, cast, options, on_done,
                           lease.start_heartbeat, interrupt or Interrupt(),
                           (options.run_id, lease.owner) if lease.enabled else None)
    finally:
        lease.release()


def _orphan_watch(parent: int, name: str) -> None:
    """In a child: exit when the parent is gone (it is re-parented), saying so. A child left
    running would race a ``--resume`` of its run."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        print(f"coworkenv: {name}: the parent process {parent} is gone; stopping "
              "(`--resume` runs what was not finished)", file=sys.stderr, flush=True)
        os._exit(3)

    threading.Thread(target=watch, name="coworkenv-orphan-watch", daemon=True).start()


def _run_shards(jobs: list[Job], processes: int, db: str | Path, open_bus: Callable[[], Bus],
                agent: Callable[[Task], Actor], cast: CastFactory, options: RunOptions,
                on_done: Callable[[EpisodeResult], None] | None,
                forked: Callable[[], None], stop: Interrupt,
                fence: tuple[str, str] | None = None) -> list[EpisodeResult]:
    shards = [jobs[i::processes] for i in range(processes)]
    ctx = multiprocessing.get_context("fork")

    parent = os.getpid()

    def child(shard: list[Job], conn: Connection) -> None:
        _orphan_watch(parent, multiprocessing.current_process().name)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides, and says SIGTERM
        mine = Interrupt((signal.SIGTERM,) if stop.signals else ())

        async def go() -> None:
            async with mine.listening(), open_bus() as bus, EventStore(db, fence=fence) as store:
                await run_jobs(shard, agent=agent, cast=cast, bus=bus, store=store,
                               options=options, on_done=conn.send, interrupt=mine)
                await store.flush()
        anyio.run(go)
        conn.close()

    # children first, while this process holds no event loop, thread or open connection;
    # each reports its results on its own pipe, so a killed one cannot block the others
    procs: list[Any] = []
    readers: dict[Connection, Any] = {}
    for i, shard in enumerate(shards[1:], start=1):
        if shard:
            r, w = ctx.Pipe(duplex=False)
            p = ctx.Process(target=child, args=(shard, w), name=f"coworkenv-shard-{i}",
                            daemon=True)
            p.start()
            w.close()
            procs.append(p)
            readers[r] = p
    forked()
    results: list[EpisodeResult] = []
    expected = len(jobs) - len(shards[0])
    got = 0
    lock = threading.Lock()

    def read() -> None:
        """Take results as they arrive (a thread: a child whose pipe is full would wait)."""
        nonlocal got
        while readers:
            for r in wait(list(readers), timeout=0.5):
                assert isinstance(r, Connection)
                try:
                    res = r.recv()
                except (EOFError, OSError):  # finished, or killed (possibly mid-message)
                    del readers[r]
                    r.close()
                    continue
                with lock:
                    got += 1
                    results.append(res)
                    if on_done is not None:
                        on_done(res)

    def done_here(res: EpisodeResult) -> None:
        with lock:
            if on_done is not None:
                on_done(res)

    reader = threading.Thread(target=read, name="coworkenv-shard-results", daemon=True)
    reader.start()

    def signal_children(signum: int) -> None:
        for p in procs:
            if p.is_alive() and p.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signum)

    stop.on_request(lambda _: signal_children(signal.SIGTERM))
    stop.before_second(lambda _: signal_children(signal.SIGKILL))

    async def own() -> None:
        async with stop.listening(), open_bus() as bus, EventStore(db, fence=fence) as store:
            mine = await run_jobs(shards[0], agent=agent, cast=cast, bus=bus, store=store,
                                  options=options, on_done=done_here, interrupt=stop)
            with lock:
                results.extend(mine)
            await anyio.to_thread.run_sync(reader.join)
            for p in procs:
                await anyio.to_thread.run_sync(p.join)
            if got == expected and all(p.exitcode == 0 for p in procs):
                await store.finish_run(options.run_id)  # (whole, even if a stop came late)
            elif stop.requested:
                await store.abort_running(options.run_id)
            await store.flush()

    try:
        anyio.run(own)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join()
    if stop.requested and not (got == expected and all(p.exitcode == 0 for p in procs)):
        raise RunInterrupted(options.run_id, results, stop.signum)
    dead = [p for p in procs if p.exitcode != 0]
    if dead or got < expected:
        names = ", ".join(f"{p.name} (exit code {p.exitcode})" for p in dead) or "none"
        raise ProcessFailedError(
            f"{expected - got} of {len(jobs)} episodes did not report back; processes that "
            f"failed: {names}. Run again with --resume to complete them.")
    return results


def default_processes() -> int:
    """The CPUs this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)


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
