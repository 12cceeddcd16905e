"""Scale-out benchmark, measured side by side in one run.

Episodes per second of the same work with one and two *Ray episode hosts* (``run --ray
--hosts N``: actors with their own event loop, bus and SQLite shard, their batches merged
into the run's store by the driver) against one and two *OS processes* (``run --processes
N``: all on one SQLite file), and so the scaling efficiency of each engine on this machine
(episodes/s with 2 over twice that with 1). The work: a stub agent that thinks 50 ms of real
time per decision, then calls a write tool (``email_send`` to a coworker, who is notified),
``--steps`` decisions per episode, ``--episodes`` episodes, ``--concurrency`` at once per
host or process. Each configuration runs ``--rounds`` times, in turn with the others; medians
are reported. Ray is started once for the whole benchmark on this machine
(``ray.init(num_cpus=2)``); its start is not timed, the driver's per-run work (planning,
starting the hosts, merging every batch) is.

Also the merge rate: the Ray runs' shards merged into one fresh store with
``coworkenv.store.merge_stores`` (events per second, every episode's hash verified).

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coworkenv.agents import LoadAgent
from coworkenv.runtime import RunConfig, run
from coworkenv.sim import Task, builtin_tasks
from coworkenv.store import merge_stores


def _mailer(steps: int, think: float, to: str) -> Any:
    """The load agent with a cycle of one call: a mail to a coworker (a write that notifies
    its recipient) each decision, after ``think`` seconds."""
    calls = [("email_send", {"to": [to], "subject": "status", "body": "status update"})]
    return lambda t: LoadAgent(steps, calls, think)


def _task(steps: int) -> tuple[Task, str]:
    task = next(t for t in builtin_tasks() if t.id == "share-onboarding")
    to = next(p.id for p in task.seed.people if p.id != task.agent)  # a coworker
    return task.model_copy(update={"limits": task.limits.model_copy(
        update={"max_turns": steps + 1})}), to


def one(engine: str, n: int, task: Task, to: str, args: argparse.Namespace,
        d: Path) -> dict[str, Any]:
    kind, k = engine.split("-")
    rid = f"{engine}-{time.time_ns()}"
    cfg = RunConfig([task], agent=_mailer(args.steps, args.think, to),
                    agent_name="stub", role="student", db=d / f"{rid}.db", trials=n,
                    concurrency=args.concurrency, run_id=rid,
                    processes=int(k) if kind == "processes" else 1,
                    ray="auto" if kind == "ray" else None,
                    hosts=int(k) if kind == "ray" else None,
                    shard_dir=str(d / "shards") if kind == "ray" else None)
    t0 = time.perf_counter()
    result = run(cfg)
    wall = time.perf_counter() - t0
    assert len(result.episodes) == n, result.episodes
    assert result.overall["episodes"] == n, result.overall
    steps = sum(r.turns for r in result.episodes)
    return {"wall_s": wall, "episodes_per_s": n / wall, "agent_steps_per_s": steps / wall,
            "shards": str(d / "shards" / rid) if kind == "ray" else None}


def costs(task: Task, to: str, args: argparse.Namespace, d: Path) -> dict[str, Any]:
    """What one episode and one agent step of this work cost, for sizing a cluster: CPU per
    agent step in one process (its threads, the store's writer, included), events and bytes
    per episode in the store, and over the local Mosquitto, broker messages and bytes per
    agent step (counted by a plain MQTT client subscribed to the run's prefix)."""
    import resource
    import sqlite3
    import threading

    n = args.episodes
    rid = f"costs-{time.time_ns()}"
    db = d / f"{rid}.db"
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    result = run(RunConfig([task], agent=_mailer(args.steps, args.think, to),
                           agent_name="stub", db=db, trials=n, concurrency=args.concurrency,
                           run_id=rid))
    wall = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    steps = sum(r.turns for r in result.episodes)
    with sqlite3.connect(db) as c:
        events, payload = c.execute("SELECT count(*), sum(length(payload)) FROM events"
                                    ).fetchone()
    out: dict[str, Any] = {
        "episodes": n, "agent_steps": steps, "wall_s": wall,
        "cpu_s": cpu, "cpu_per_agent_step_us": cpu / steps * 1e6,
        "events_per_episode": events / n, "payload_bytes_per_episode": payload / n,
        "store_bytes_per_episode": db.stat().st_size / n,
    }
    # the same work over MQTT, every broker message counted by an outside subscriber
    prefix = f"scale{time.time_ns() % 10**9}"
    counted = {"messages": 0, "bytes": 0}
    ready, stop = threading.Event(), threading.Event()

    def listen() -> None:
        import aiomqtt

        async def go() -> None:
            async with aiomqtt.Client("127.0.0.1", 1883) as client:
                await client.subscribe(f"{prefix}/#", qos=0)
                ready.set()
                async for m in client.messages:
                    counted["messages"] += 1
                    counted["bytes"] += len(m.payload) if isinstance(m.payload, bytes) else 0
                    if stop.is_set():
                        return

        with contextlib.suppress(Exception):
            anyio.run(go)
        ready.set()

    t = threading.Thread(target=listen, daemon=True)
    t.start()
    if not ready.wait(10) or not t.is_alive():
        out["mqtt"] = "no broker on 127.0.0.1:1883 (mosquitto -d starts one)"
        return out
    t0 = time.perf_counter()
    mq = run(RunConfig([task], agent=_mailer(args.steps, args.think, to),
                       agent_name="stub", db=d / f"{rid}-mqtt.db", trials=n,
                       concurrency=args.concurrency, run_id=f"{rid}-mqtt",
                       bus=f"mqtt://127.0.0.1:1883/{prefix}"))
    mq_wall = time.perf_counter() - t0
    time.sleep(0.5)  # the last deliveries
    stop.set()
    mq_steps = sum(r.turns for r in mq.episodes)
    out["mqtt"] = {"episodes_per_s": n / mq_wall, "memory_bus_episodes_per_s": n / wall,
                   "broker_messages_per_agent_step": counted["messages"] / mq_steps,
                   "broker_bytes_per_agent_step": counted["bytes"] / mq_steps}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--episodes", type=int, default=256)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--think", type=float, default=0.05)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="a smoke: 64 episodes, 1 round")
    ap.add_argument("--engines", default="processes-1,processes-2,ray-1,ray-2",
                    help="which to measure (comma-separated)")
    args = ap.parse_args()
    if args.quick:
        args.episodes, args.rounds = 64, 1
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             object_store_memory=200 * 2**20)
    engines = args.engines.split(",")
    task, to = _task(args.steps)
    got: dict[str, list[dict[str, Any]]] = {e: [] for e in engines}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for _ in range(args.rounds):
            for e in engines:
                got[e].append(one(e, args.episodes, task, to, args, d))
                print(f"{e}: {got[e][-1]['episodes_per_s']:.1f} episodes/s", file=sys.stderr,
                      flush=True)
        shards = [Path(r["shards"]) for e in engines for r in got[e] if r["shards"]]
        stats = merge_stores(shards, d / "merged.db")
        per = costs(task, to, args, d)
    ray.shutdown()
    med = {e: statistics.median(r["episodes_per_s"] for r in got[e]) for e in engines}
    ideal = min(args.concurrency, args.episodes) / ((args.steps + 1) * args.think)
    print(json.dumps({
        "benchmark": "scale", "load_average": os.getloadavg(), "cpus": os.cpu_count(),
        "episodes": args.episodes, "steps": args.steps, "think_s": args.think,
        "concurrency_per_host": args.concurrency, "rounds": args.rounds,
        "ideal_episodes_per_s_per_host": ideal,
        "episodes_per_s": med,
        "runs": {e: [round(r["episodes_per_s"], 2) for r in got[e]] for e in engines},
        "scaling_efficiency": {k: med[f"{k}-2"] / (2 * med[f"{k}-1"]) for k in
                               ("processes", "ray") if f"{k}-1" in med and f"{k}-2" in med},
        "ray_over_processes": {n: med[f"ray-{n}"] / med[f"processes-{n}"] for n in ("1", "2")
                               if f"ray-{n}" in med and f"processes-{n}" in med},
        "costs": per,
        "merge": {"shards": stats.shards, "episodes": stats.episodes_added,
                  "events": stats.events_added, "seconds": stats.seconds,
                  "events_per_s": stats.events_added / stats.seconds if stats.seconds else None,
                  "verified": stats.verified},
    }, indent=2))


if __name__ == "__main__":
    main()
