"""Many simulations at once: one simulation file drawn with several seeds, over several OS
processes (``coworkenv simulate FILE --seeds N --processes P``) or the nodes of a Ray cluster
(``--ray ADDRESS``).

Each seed is a run of its own (``RUN-s<seed>``: the workload drawn anew, the same company and
roster), recorded in a shard file of its own beside the store (``DB.seeds/RUN-s<seed>.db``:
one writer per file), and the shards are merged into the store once every run has ended.
Each process runs its share of the seeds in one event loop, ``concurrency`` at a time (for
model-backed agents, their calls in flight together), and checks each shard it wrote, hash
for hash (:func:`~coworkenv.store.verify_shard`), so that the merge copies it whole
(:func:`~coworkenv.store.adopt_shards`). A batch that is interrupted goes on with
``resume``: finished runs are left as they are, the others resumed from their shards.

On Ray, each task of one CPU runs ``concurrency`` of the simulations in one event loop on
whichever node Ray places it, each in a shard on that node's local disk (a resumed run's
shard is sent with it), and sends the shards back as SQLite images: they are written beside
the store as a process's would be, and merged the same way. The simulation file (and what
it names: the company, the templates) must be readable at the same path on every node (a
shared checkout or file system), as the package must be installed there. A task whose node
dies is run again by Ray (up to ``MAX_RESTARTS`` times) from what was sent.

    from coworkenv.runtime.simbatch import simulate_seeds
    batch = simulate_seeds(SimulationConfig("week.yaml", db="runs/w.db"), seeds=range(7, 23),
                           processes=2)
    print(batch.arrivals_per_s, [r.pass_rate for r in batch.runs])
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..sim.errors import RunConfigError
from .simulate import SimulationConfig, SimulationResult, asimulate

__all__ = ["BatchResult", "shard_folder", "simulate_seeds"]


@dataclass
class BatchResult:
    """The runs of a batch (in seed order) and how long the batch took."""

    run_id: str
    runs: list[SimulationResult]
    wall_seconds: float
    processes: int
    db: Path
    earlier: list[str] = field(default_factory=list)
    """Runs a resumed batch found finished already (not run again, not in ``runs``)."""

    @property
    def arrivals(self) -> int:
        return sum(len(r.outcomes) for r in self.runs)

    @property
    def arrivals_per_s(self) -> float:
        return self.arrivals / self.wall_seconds if self.wall_seconds else 0.0

    @property
    def simulations_per_s(self) -> float:
        return len(self.runs) / self.wall_seconds if self.wall_seconds else 0.0

    @property
    def pass_rate(self) -> float:
        graded = [o.passed for r in self.runs for o in r.outcomes]
        return sum(graded) / len(graded) if graded else 0.0


def shard_folder(db: str | Path) -> Path:
    """Where a batch's runs are recorded until they are merged into ``db``."""
    p = Path(db)
    return p.with_name(p.name + ".seeds")


def simulate_seeds(config: SimulationConfig, seeds: Sequence[int], *, processes: int = 1,
                   concurrency: int = 8, ray: str | None = None,
                   on_done: Callable[[SimulationResult], None] | None = None) -> BatchResult:
    """Run ``config``'s simulation once per seed, over ``processes`` OS processes (fork;
    call it outside an event loop) or on the Ray cluster at ``ray`` (``auto``: this
    machine's, else a new local one), and merge the runs into ``config.db``.
    ``config.run_id`` names the batch (default: a new one); ``config.resume`` goes on with an
    interrupted batch of that id. ``on_done`` hears each run as it ends (in this process: one
    process, or as each process's share or Ray task comes back)."""
    from ..sim import new_run_id
    from ..store import Reader

    seeds = list(dict.fromkeys(int(s) for s in seeds))
    if not seeds:
        raise RunConfigError("seeds: give at least one")
    if processes < 1 or concurrency < 1:
        raise RunConfigError(f"processes and concurrency: at least 1 (got {processes}, "
                             f"{concurrency})")
    if ray is not None and processes != 1:
        raise RunConfigError("ray: a batch runs over a Ray cluster or over processes on this "
                             "machine, not both (leave processes at 1)")
    if config.replay_model is not None or config.script is not None:
        raise RunConfigError("seeds: a batch of seeds runs simulation files, without "
                             "--replay-model or a scenario script")
    if config.resume and config.run_id is None:
        raise RunConfigError("resume: give the batch's run id (--run-id) to resume it")
    base = config.run_id or new_run_id().replace("run-", "sim-", 1)
    db = Path(config.db)
    folder = shard_folder(db)
    done: set[str] = set()
    if db.exists() and db.stat().st_size:
        with Reader(db) as reader:
            have = {x["run_id"]: x["status"] for x in reader.runs()}
        mine = [f"{base}-s{s}" for s in seeds if f"{base}-s{s}" in have]
        if mine and not config.resume:
            raise RunConfigError(f"run_id: {db} holds runs of batch {base!r} already "
                                 f"({mine[0]}, ...); resume it with --resume, or give "
                                 "another --run-id")
        done = {rid for rid in mine if have[rid] == "finished"}
    folder.mkdir(parents=True, exist_ok=True)
    jobs = []
    for s in seeds:
        rid = f"{base}-s{s}"
        shard = folder / f"{rid}.db"
        on_file = shard.exists() and bool(shard.stat().st_size)
        if on_file and rid not in done:
            with Reader(shard) as reader:
                finished = any(x["run_id"] == rid and x["status"] == "finished"
                               for x in reader.runs())
            if finished:  # (it ended, and was cut before it was merged)
                from ..store import verify_shard

                verify_shard(shard)
                _merge_into([shard], db)
                done.add(rid)
        if rid in done:
            continue
        jobs.append(dataclasses.replace(config, run_id=rid, seed=s, db=shard,
                                        resume=bool(config.resume and on_file)))
    results: list[SimulationResult] = []

    def ended(r: SimulationResult) -> None:
        results.append(r)
        if on_done is not None:
            on_done(r)
    t0 = time.perf_counter()
    try:
        if ray is not None:
            if jobs:
                _on_ray(jobs, ray, concurrency, ended)
        elif processes == 1 or len(jobs) <= 1:
            _share(jobs, concurrency, ended)
        else:
            _in_processes(jobs, processes, concurrency, ended)
    finally:  # (what ended is merged, in one go: a merge a run costs more than the runs)
        if results:
            _merge_into([Path(r.db) for r in results], db)
            for r in results:
                r.db = db
    wall = time.perf_counter() - t0
    if not any(folder.iterdir()):
        folder.rmdir()
    order = {f"{base}-s{s}": i for i, s in enumerate(seeds)}
    results.sort(key=lambda r: order[r.run_id])
    return BatchResult(base, results, wall, processes, db, sorted(done, key=order.__getitem__))


def _merge_into(shards: list[Path], db: Path) -> None:
    """Runs' shards, checked where they were written (:func:`_share`), into the store, then
    the shards gone."""
    from ..store import adopt_shards

    adopt_shards(shards, db)
    for shard in shards:
        for extra in (shard, shard.with_name(shard.name + "-wal"),
                      shard.with_name(shard.name + "-shm")):
            extra.unlink(missing_ok=True)


def _in_processes(jobs: list[SimulationConfig], processes: int, concurrency: int,
                  ended: Callable[[SimulationResult], None]) -> None:
    """The jobs over forked processes, each its share in one event loop; each run comes
    back as it ends. A process's error stops the batch once every process has ended (what
    ended is merged; the rest resumes)."""
    import os

    ctx = multiprocessing.get_context("fork")
    queue = ctx.SimpleQueue()
    shares = [jobs[i::processes] for i in range(processes) if jobs[i::processes]]
    children = [ctx.Process(target=_child, args=(share, concurrency, queue, os.getpid()),
                            name=f"coworkenv-seeds-{i}", daemon=True)
                for i, share in enumerate(shares)]
    for c in children:
        c.start()
    left, error = len(children), None
    try:
        while left:
            kind, item = queue.get()
            if kind == "done":
                ended(item)
            else:
                left -= 1
                if kind == "error" and error is None:
                    error = item
    finally:
        for c in children:
            c.join(timeout=None if error is None else 5)
            if c.is_alive():
                c.terminate()
    if error is not None:
        raise error


def _share(jobs: list[SimulationConfig], concurrency: int,
           on_done: Callable[[SimulationResult], None] | None = None) -> list[SimulationResult]:
    """One process's share: its simulations in one event loop, ``concurrency`` at once."""
    import anyio

    out: list[SimulationResult] = []

    async def main() -> None:
        limit = anyio.Semaphore(concurrency)

        async def one(c: SimulationConfig) -> None:
            from ..store import verify_shard

            async with limit:
                r = await asimulate(c)
                # its shard checked here, in the process that wrote it (beside the other
                # processes): the merge then copies it whole
                verify_shard(r.db)
            out.append(r)
            if on_done is not None:
                on_done(r)
        async with anyio.create_task_group() as tg:
            for c in jobs:
                tg.start_soon(one, c)
    if jobs:
        anyio.run(main)
    return out


def _child(jobs: list[SimulationConfig], concurrency: int, queue: Any, parent: int) -> None:
    """A forked process: its share, each run sent back as it ends; then ``end``, or
    ``error`` with the exception (an exception group of one: the one), said once."""
    from ..sim.runner import _orphan_watch  # (a child left running would race a --resume)

    _orphan_watch(parent, multiprocessing.current_process().name)
    try:
        _share(jobs, concurrency, lambda r: queue.put(("done", r)))
    except BaseException as exc:
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        queue.put(("error", exc if isinstance(exc, RunConfigError) else
                   RunConfigError(f"{type(exc).__name__}: {exc}")))
        return
    queue.put(("end", None))


MAX_RESTARTS = 3
"""Times Ray runs a batch's task again when its node or process dies."""


def _on_ray(jobs: list[SimulationConfig], address: str, concurrency: int,
            ended: Callable[[SimulationResult], None]) -> None:
    """The jobs as Ray tasks of one CPU, ``concurrency`` simulations each; each run's shard
    comes back as an SQLite image, written where a process would have written it, and the
    run is told to ``ended`` as its task returns. An interrupt cancels the tasks still out
    (what came back is kept; the rest resumes)."""
    from .cluster import connect, ray_module

    rt = ray_module()
    started = connect(rt, address)
    try:
        task = rt.remote(num_cpus=1, max_retries=MAX_RESTARTS)(_ray_share)
        chunks = [jobs[i: i + concurrency] for i in range(0, len(jobs), concurrency)]
        where = {}
        for chunk in chunks:
            ref = task.remote([(c, _image(Path(c.db)) if c.resume else None) for c in chunk],
                              concurrency)
            where[ref] = {c.run_id: Path(c.db) for c in chunk}
        pending = list(where)
        try:
            while pending:
                done, pending = rt.wait(pending, num_returns=1, timeout=0.5)
                for ref in done:
                    for result, image in rt.get(ref):
                        shard = where[ref][result.run_id]
                        _write_image(shard, image)
                        result.db = shard
                        ended(result)
        except BaseException:
            for ref in pending:
                rt.cancel(ref, force=True)
            raise
    finally:
        if started:
            rt.shutdown()


def _ray_share(items: list[tuple[SimulationConfig, bytes | None]], concurrency: int
               ) -> list[tuple[SimulationResult, bytes]]:
    """A Ray task: its simulations in one event loop, each in a shard of its own in a new
    folder on this node (a resumed run's from the image sent), and the shards as images."""
    import socket
    import tempfile

    host = socket.gethostname()
    for c, _ in items:
        if not Path(c.file).exists():
            raise RunConfigError(f"ray: {c.file} is not readable on node {host}: a batch on "
                                 "Ray reads the simulation file at the same path on every "
                                 "node (a shared checkout or file system)")
    with tempfile.TemporaryDirectory(prefix="coworkenv-seeds-") as folder:
        jobs = []
        for c, image in items:
            local = Path(folder) / f"{c.run_id}.db"
            if image is not None:
                _write_image(local, image)
            jobs.append(dataclasses.replace(c, db=local))
        results = _share(jobs, concurrency)
        return [(r, _image(Path(r.db))) for r in results]


def _image(path: Path) -> bytes:
    """An SQLite file whole as bytes (its write-ahead log checkpointed into it first)."""
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return path.read_bytes()


def _write_image(path: Path, image: bytes) -> None:
    """Bytes of :func:`_image` as the SQLite file at ``path`` (replacing what is there)."""
    for extra in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        extra.unlink(missing_ok=True)
    part = path.with_name(path.name + ".part")
    part.write_bytes(image)
    part.replace(path)
