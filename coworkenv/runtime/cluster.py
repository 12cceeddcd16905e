"""Episodes on a Ray cluster (``RunConfig(ray=...)``, ``coworkenv run --ray``).

The driver (the process that calls :func:`~coworkenv.runtime.run`) plans the run once in its
store (``db``: the run, its task specs, every (task, trial) not yet completed, resume
included), then hands batches of jobs to *episode hosts*: Ray actors of one CPU each, placed
by Ray, each with its own event loop, bus and SQLite shard on its node's local disk
(``shard_dir``). A host runs a batch as ``run_jobs`` does in one process, then sends the
batch's rows (episodes, events, projection, checks, grades: an SQLite image through Ray's
object store) back; the driver merges them into ``db`` with :func:`~coworkenv.store.
merge_stores`' rules, each episode's events hash verified, and only then reports the
episodes as done. So ``db`` ends as a one-process run's would (the same per-episode
hashes), and every shard stays on its node as a durable copy that ``coworkenv merge`` or
the readers take as they are.

Failures are Ray's to place and retry: a host whose process dies is restarted by Ray (up to
``MAX_RESTARTS`` times). Its batch in flight is lost; each of its episodes is recorded in
``db`` as a failed attempt at the ``runtime`` boundary with the reason, and runs again, as a
new attempt, on whichever host is free (the same exactly-once rule as ``processes``: each
(task, trial) ends with one final attempt). A (task, trial) lost ``max_attempts`` times, or
a cluster with no host left, ends the run with :class:`~coworkenv.sim.ProcessFailedError`;
``resume`` completes it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import socket
import sqlite3
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from ..sim.errors import RunConfigError

if TYPE_CHECKING:
    from ..sim import EpisodeResult, Interrupt, RunOptions, Task
    from .prepare import OnDone, OnPlan, Prepared, RunConfig

MAX_RESTARTS = 3
"""Times Ray restarts an episode host whose process died."""
BATCHES = 4
"""Batches a host's concurrency is cut into: one ends, the next starts, three go on."""


def ray_module() -> Any:
    """The ``ray`` package, or a one-line error that says how to install it."""
    try:
        import ray
    except ImportError:
        raise RunConfigError("ray: the Ray engine needs the ray package; install it with "
                             "pip install 'coworkenv[ray]'") from None
    return ray


JobKey = tuple[str, int, int]
"""(task id, trial, attempt): a job as it travels to a host."""


class EpisodeHost:
    """One episode host: a Ray actor (see the module's docstring), made one by
    :func:`execute_on_ray`.

    An async actor: its batches run concurrently on the one event loop Ray gives it, sharing
    one bus connection and one store writer that a long-lived serving task holds open (a
    batch does not wait for the slowest episode of the one before it)."""

    def __init__(self, config: RunConfig, options: RunOptions, tasks: list[Task], agent: str,
                 run_config: str, index: int, shard_dir: str | None) -> None:
        from .prepare import factories

        self.config, self.index = config, index
        # per-batch GC tuning would nest across concurrent batches; the host tunes once
        self.options = dataclasses.replace(options, tune_gc=False)
        self.tasks = {t.id: t for t in tasks}
        _, self.make_agent, self.make_cast = factories(config)
        folder = Path(shard_dir or Path(tempfile.gettempdir()) / "coworkenv-shards")
        # one file per host and process: a restarted host never writes into the file of the
        # process that died (whose last batch was run again elsewhere)
        self.shard = folder / options.run_id / f"host-{index}-{socket.gethostname()}-" \
                                                f"{os.getpid()}.db"
        self.shard.parent.mkdir(parents=True, exist_ok=True)
        _record_run(self.shard, options.run_id, agent, run_config, tasks)
        self._inbox: Any = None
        self._ready: anyio.Event | None = None
        self._serving: Any = None
        self.tune_gc, self.live = options.tune_gc, options.concurrency

    async def where(self) -> dict[str, Any]:
        """This host's process, node and shard."""
        return {"index": self.index, "pid": os.getpid(), "host": socket.gethostname(),
                "shard": str(self.shard)}

    async def run(self, jobs: list[JobKey]) -> tuple[list[EpisodeResult], bytes]:
        """Run a batch to the end; its results and its rows (an SQLite image)."""
        if self._ready is None:
            import asyncio

            self._ready = anyio.Event()
            send, self._inbox = anyio.create_memory_object_stream[Any](64)
            self._send = send
            # the serving task outlives this call (Ray gives no task group to start it in)
            self._serving = asyncio.get_running_loop().create_task(self._serve())
        await self._ready.wait()
        slot: dict[str, Any] = {"done": anyio.Event()}
        await self._send.send((jobs, slot))
        await slot["done"].wait()
        if "error" in slot:
            raise slot["error"]
        results: list[EpisodeResult] = slot["results"]
        image = await anyio.to_thread.run_sync(self.rows, [r.episode_id for r in results])
        return results, image

    async def _serve(self) -> None:
        from ..sim.runner import tuned_gc
        from ..store import EventStore
        from .prepare import _bus

        async with _bus(self.config.bus) as bus, EventStore(self.shard) as store:
            assert self._ready is not None
            self._ready.set()
            with tuned_gc(self.tune_gc, self.live):
                async with anyio.create_task_group() as tg:
                    async for jobs, slot in self._inbox:
                        tg.start_soon(self._batch, bus, store, jobs, slot)

    async def _batch(self, bus: Any, store: Any, jobs: list[JobKey],
                     slot: dict[str, Any]) -> None:
        from ..sim import run_jobs

        try:
            slot["results"] = await run_jobs(
                [(self.tasks[t], k, a) for t, k, a in jobs], agent=self.make_agent,
                cast=self.make_cast, bus=bus, store=store, options=self.options)
            await store.flush()  # its rows are committed before they are read back
        except Exception as exc:  # (the caller re-raises it: Ray reports it to the driver)
            slot["error"] = exc
        finally:
            slot["done"].set()

    def rows(self, episode_ids: list[str]) -> bytes:
        """The shard's rows of these episodes (and of the run), as an SQLite image."""
        from ..store import migrate

        mem = sqlite3.connect("file::memory:", uri=True, isolation_level=None)
        try:
            migrate(mem, "batch")
            mem.execute("ATTACH DATABASE ? AS shard", (f"file:{self.shard}?mode=ro",))
            mem.execute("CREATE TEMP TABLE ids (episode_id TEXT PRIMARY KEY)")
            mem.executemany("INSERT OR IGNORE INTO ids VALUES (?)", [(e,) for e in episode_ids])
            mem.execute("BEGIN")
            mem.execute("INSERT INTO main.runs SELECT * FROM shard.runs WHERE run_id=?",
                        (self.options.run_id,))
            for table in ("episodes", "events", "projection", "check_results", "grades"):
                mem.execute(f"INSERT INTO main.{table} SELECT * FROM shard.{table} "
                            "WHERE episode_id IN (SELECT episode_id FROM temp.ids)")
            mem.execute("COMMIT")
            mem.execute("DETACH DATABASE shard")
            return mem.serialize()
        finally:
            mem.close()


def _record_run(shard: Path, run_id: str, agent: str, run_config: str,
                tasks: list[Task]) -> None:
    """The run and its task specs in a host's shard too, so that it stands alone (regrade,
    replay and eval read it as they read any store)."""
    from ..store import writable_store

    with writable_store(shard) as db:
        db.execute("BEGIN")
        db.execute("INSERT OR IGNORE INTO runs (run_id, created_at, status, agent, config) "
                   "VALUES (?, ?, 'running', ?, ?)", (run_id, time.time(), agent, run_config))
        db.executemany("INSERT OR IGNORE INTO tasks (run_id, task_id, family, capabilities, "
                       "spec) VALUES (?, ?, ?, ?, ?)",
                       [(run_id, t.id, t.family, json.dumps(list(t.capabilities)),
                         t.model_dump_json()) for t in tasks])
        db.execute("COMMIT")


def connect(ray: Any, address: str) -> bool:
    """Join the cluster at ``address`` (``auto``: this machine's, else a new local one);
    True when this call started Ray (and so stops it)."""
    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                              "configure_logging": False}
    if address == "auto":
        try:
            ray.init(address="auto", **kwargs)
        except ConnectionError:  # no cluster here: a local one, for this run
            ray.init(**kwargs)
        return True
    try:
        ray.init(address=address, **kwargs)
    except (ConnectionError, ValueError) as exc:
        raise RunConfigError(f"ray {address}: no Ray cluster there ({exc}); start one with "
                             "`ray start --head`, or give auto") from None
    return True


def execute_on_ray(p: Prepared, *, on_done: OnDone | None = None,
                   on_plan: OnPlan | None = None,
                   interrupt: Interrupt | None = None) -> list[EpisodeResult]:
    """Run a prepared run on Ray (synchronous; outside any event loop)."""
    from ..sim import Interrupt

    ray = ray_module()
    assert p.config.ray is not None
    started = connect(ray, p.config.ray)
    try:
        # a relative folder means the driver's: the nodes are told it whole
        shard_dir = str(Path(p.config.shard_dir).absolute()) if p.config.shard_dir else None
        return anyio.run(_drive, ray, p, shard_dir, on_done, on_plan, interrupt or Interrupt())
    finally:
        if started:
            ray.shutdown()


async def _drive(ray: Any, p: Prepared, shard_dir: str | None, on_done: OnDone | None,
                 on_plan: OnPlan | None, stop: Interrupt) -> list[EpisodeResult]:
    from ..sim import ProcessFailedError, RunInterrupted, plan_run
    from ..store import EventStore, MergeStats, RunLease, merge_connection, writable_store

    o = p.options
    tasks = {t.id: t for t in p.tasks}
    cpus = int(ray.cluster_resources().get("CPU", 0))
    if p.config.hosts is not None and p.config.hosts > cpus:
        raise RunConfigError(f"hosts: {p.config.hosts} episode hosts take one CPU each, and the "
                             f"Ray cluster ({p.config.ray}) has {cpus}; ask for at most {cpus}")
    lease = RunLease(p.db, o.run_id)
    async with stop.listening():
        async with EventStore(p.db) as store:
            lease.acquire()
            jobs = await plan_run(p.tasks, store, o)
            await store.flush()
        try:
            if on_plan is not None:
                on_plan(len(p.tasks) * o.trials, len(jobs))
            with writable_store(p.db) as db:
                agent, config = db.execute("SELECT agent, config FROM runs WHERE run_id=?",
                                           (o.run_id,)).fetchone()
                hosts = max(1, min(p.config.hosts or cpus, len(jobs)))
                actor = ray.remote(EpisodeHost).options(
                    num_cpus=1, max_restarts=MAX_RESTARTS, max_task_retries=0)
                actors = [actor.remote(p.config, o, p.tasks, agent, config, i, shard_dir)
                          for i in range(hosts)] if jobs else []
                try:
                    results, lost, reason = await _dispatch(
                        ray, actors, jobs, tasks, db, p, on_done, stop, merge_connection,
                        MergeStats())
                finally:
                    for a in actors:
                        with contextlib.suppress(Exception):
                            ray.kill(a, no_restart=True)
                if not stop.requested and not lost:
                    db.execute("UPDATE runs SET status='finished' WHERE run_id=?", (o.run_id,))
        finally:
            lease.release()
    if stop.requested:
        raise RunInterrupted(o.run_id, results, stop.signum)
    if lost:
        raise ProcessFailedError(
            f"{len(lost)} of {len(jobs)} episodes were lost {o.max_attempts} times or had no "
            f"episode host left (e.g. {lost[0][0]} trial {lost[0][1]}; the last loss: "
            f"{reason}); run again with --resume to complete them")
    return results


async def _dispatch(ray: Any, actors: list[Any], jobs: list[tuple[Task, int, int]],
                    tasks: dict[str, Task], db: sqlite3.Connection, p: Prepared,
                    on_done: OnDone | None, stop: Interrupt, merge: Any,
                    stats: Any) -> tuple[list[EpisodeResult], list[JobKey], str]:
    """Hand out batches to hosts as they free up; merge what comes back; run lost batches
    again as new attempts."""
    o = p.options
    queue: deque[JobKey] = deque((t.id, k, a) for t, k, a in jobs)
    first = {(t.id, k): a for t, k, a in jobs}
    # batches of a quarter of a host's concurrency at most, so that as one batch ends the
    # next starts while three still run: each host keeps about `concurrency` episodes going
    size = max(1, min(math.ceil(p.config.concurrency / BATCHES),
                      math.ceil(len(jobs) / max(1, len(actors)) / BATCHES)))
    live = dict(enumerate(actors))
    in_flight: dict[Any, tuple[int, list[JobKey]]] = {}
    results: list[EpisodeResult] = []
    lost: list[JobKey] = []
    reasons: list[str] = []

    def fill() -> None:
        for i, a in live.items():
            while queue:
                running = sum(len(b) for h, b in in_flight.values() if h == i)
                if running and running + min(size, len(queue)) > p.config.concurrency:
                    break
                batch = [queue.popleft() for _ in range(min(size, len(queue)))]
                in_flight[a.run.remote(batch)] = (i, batch)

    fill()
    while in_flight and not stop.requested:
        ready, _ = await anyio.to_thread.run_sync(
            lambda: ray.wait(list(in_flight), num_returns=1, timeout=0.5))
        for ref in ready:
            i, batch = in_flight.pop(ref)
            try:
                done, image = await anyio.to_thread.run_sync(ray.get, ref)
            except ray.exceptions.RayActorError as exc:
                reasons.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
                if i in live and not await anyio.to_thread.run_sync(_answers, ray, live[i]):
                    del live[i]  # dead for good (Ray's restarts spent)
                for t, k, a in batch:
                    _record_lost(db, o, tasks[t], k, a, f"episode host {i} died before its "
                                 f"batch came back ({reasons[-1]})")
                    if a + 1 - first[(t, k)] < o.max_attempts and live:
                        queue.append((t, k, a + 1))
                    else:
                        lost.append((t, k, a))
                continue
            src = sqlite3.connect(":memory:")
            try:
                src.deserialize(image)
                merge(src, db, f"episode host {i}", str(p.db), stats)
            finally:
                src.close()
            results.extend(done)
            if on_done is not None:
                for r in done:
                    on_done(r)
        if not live and queue:
            lost.extend(queue)
            queue.clear()
        fill()
    return results, lost, reasons[-1] if reasons else ""


def _answers(ray: Any, host: Any, timeout: float = 120.0) -> bool:
    """Whether a host whose batch was lost is back (Ray restarted it) or gone for good. While
    Ray restarts it, a call says it is *temporarily* unavailable (``ActorUnavailableError``,
    a ``RayActorError``): that is asked again until the timeout, not taken as its death (which
    dropped a restarting host, and with it every episode queued for it)."""
    unavailable = getattr(ray.exceptions, "ActorUnavailableError", ())
    deadline = time.monotonic() + timeout
    while True:
        try:
            ray.get(host.where.remote(), timeout=max(0.1, deadline - time.monotonic()))
        except unavailable:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.5)
            continue
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            return False
        return True


def _record_lost(db: sqlite3.Connection, o: RunOptions, task: Task, trial: int, attempt: int,
                 reason: str) -> None:
    """A lost attempt, on record in the run's store: failed at the runtime boundary (not the
    agent's doing, so a resume or the next attempt runs it again)."""
    from ..sim import episode_seed

    now = time.time()
    db.execute(
        "INSERT OR IGNORE INTO episodes (episode_id, run_id, task_id, family, trial, attempt, "
        "seed, agent, role, status, started_at, finished_at, sim_time, turns, termination, "
        "failure_boundary, failure, event_count, events_hash, state_hash) VALUES "
        "(?, ?, ?, ?, ?, ?, ?, ?, ?, 'failed', ?, ?, 0, 0, 'failed', 'runtime', ?, 0, '', '')",
        (f"{o.run_id}:{task.id}:{trial}:{attempt}", o.run_id, task.id, task.family, trial,
         attempt, episode_seed(task.id, trial), o.agent_name, o.role, now, now, reason))
