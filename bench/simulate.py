"""Simulation benchmark: the Northwind week (examples/simulations/week.yaml) with scripted
agents (the oracle) on one core, as JSON.

- ``week``: the median over ``--repeats`` runs of the whole week (5 working days, about 330
  arrivals, 3 agents, 29 people, an outage), recorded in a SQLite file: wall seconds,
  simulated working days per wall second, events per second (the simulation's log) and
  arrivals per second. Target: the week in under 30 s. Baseline, in the same timed loop and
  alternating with it: the same arrivals (their task specs, as the simulation recorded them)
  run as independent episodes by the batch runner (``coworkenv run``, concurrency 64): what
  running one shared company costs over running its requests apart.
- ``memory``: a longer run (``--memory-days`` working days) under tracemalloc, sampled every
  simulated working hour: the heap, the log's packed bytes and the workspace's size (its
  JSON) against the number of arrivals graded so far; the fitted growth per graded arrival
  of each, over the run's second half. What the kernel keeps of a graded arrival (its
  summary row) is the heap's growth beyond the log and the workspace.
- ``many``: ``--many`` one-day simulations at once in one event loop (each its own store
  file, as one writer per file wants), against the same simulations one after another in
  the same timed loop: simulations per second, and the ratio.
- ``seeds``: ``coworkenv simulate --seeds N`` (N one-day simulations, each seed its own draw,
  graded and recorded, merged into one store) for each N of ``--seeds-n``, over one process
  and over every core, the two in turn in the same timed loop: simulations and arrivals per
  second, and the ratio (target: 16 over 2 processes at 1.8 times one, 200 arrivals/s or
  more on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import anyio
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coworkenv.runtime import RunConfig, run
from coworkenv.runtime.simulate import Scenario, SimulationConfig, asimulate, simulate
from coworkenv.sim import Task
from coworkenv.store import Reader

SIMS = Path(__file__).resolve().parents[1] / "examples" / "simulations"


def variant(folder: Path, **clock: Any) -> Path:
    """The week with other clock settings, written beside a copy of its company."""
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "companies").exists():
        shutil.copytree(SIMS / "companies", folder / "companies")
    raw = yaml.safe_load((SIMS / "week.yaml").read_text())
    raw["clock"].update(clock)
    days = int(raw["clock"].get("days", 5))

    def inside(t: str) -> bool:  # (a shorter clock keeps what falls inside it)
        return not t.startswith("d") or int(t[1:].split()[0]) <= days
    for stream in raw["workload"]:
        if "at" in stream:
            stream["at"] = [t for t in stream["at"] if inside(t)]
    raw["workload"] = [s for s in raw["workload"] if s.get("at", True)]
    raw["events"] = [e for e in raw.get("events", [])
                     if all(inside(str(e.get(k, ""))) for k in ("from", "to", "at"))]
    raw["tasks"] = [str(SIMS / t) for t in raw["tasks"]]
    out = folder / f"week-{'-'.join(f'{k}{v}' for k, v in clock.items()) or 'same'}.yaml"
    out.write_text(yaml.safe_dump(raw))
    return out


def week(tmp: Path, repeats: int) -> dict[str, Any]:
    sim_runs: list[dict[str, Any]] = []
    batch_runs: list[float] = []
    specs: list[Task] = []
    for i in range(repeats):
        db = tmp / f"week-{i}.db"
        t0 = time.perf_counter()
        r = simulate(SimulationConfig(SIMS / "week.yaml", agent="oracle", db=db,
                                      run_id=f"w{i}"))
        wall = time.perf_counter() - t0
        sim_runs.append({"wall": wall, "events": r.event_count, "arrivals": len(r.outcomes),
                         "passed": sum(o.passed for o in r.outcomes),
                         "days": 5, "hash": r.events_hash})
        if not specs:
            with Reader(db) as rd:
                specs = [Task.model_validate_json(s) for s in rd.task_specs(f"w{i}").values()]
        t0 = time.perf_counter()
        b = run(RunConfig(specs, agent="oracle", db=tmp / f"batch-{i}.db", run_id=f"b{i}",
                          concurrency=64))
        batch_runs.append(time.perf_counter() - t0)
        assert len(b.episodes) == len(specs)
    wall = statistics.median(x["wall"] for x in sim_runs)
    first = sim_runs[0]
    batch = statistics.median(batch_runs)
    return {"wall_s": round(wall, 3), "arrivals": first["arrivals"], "passed": first["passed"],
            "events": first["events"], "working_days_per_s": round(5 / wall, 2),
            "events_per_s": round(first["events"] / wall),
            "arrivals_per_s": round(first["arrivals"] / wall, 1),
            "same_hash_every_run": len({x["hash"] for x in sim_runs}) == 1,
            "target_under_30_s": wall < 30,
            "batch_same_arrivals_wall_s": round(batch, 3),
            "ratio_simulation_vs_batch": round(wall / batch, 3),
            "walls_s": [round(x["wall"], 3) for x in sim_runs],
            "batch_walls_s": [round(x, 3) for x in batch_runs]}


def memory(tmp: Path, days: int) -> dict[str, Any]:
    samples: list[dict[str, int]] = []

    async def sample(sim: Scenario) -> None:
        k = sim._k

        def take() -> None:
            current, _ = tracemalloc.get_traced_memory()
            samples.append({"graded": len(sim.outcomes), "heap": current,
                            "log": k._log.nbytes(),
                            "workspace": len(json.dumps(k.state.to_json())),
                            "live": len(k.live), "events": len(k._log)})
        sim.every(60, take, start="d1 09:00")

    path = variant(tmp / "memory", days=days)
    tracemalloc.start()
    try:
        r = simulate(SimulationConfig(path, db=tmp / "memory.db", script=sample))
    finally:
        tracemalloc.stop()
    half = [s for s in samples if s["graded"] >= samples[-1]["graded"] / 2]

    def slope(key: str) -> float:
        xs = [s["graded"] for s in half]
        ys = [s[key] for s in half]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        var = sum((x - mx) ** 2 for x in xs)
        return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var \
            else 0.0

    heap, log, ws = slope("heap"), slope("log"), slope("workspace")
    return {"working_days": days, "arrivals": len(r.outcomes), "samples": len(samples),
            "heap_bytes_per_graded_arrival": round(heap),
            "log_packed_bytes_per_graded_arrival": round(log),
            "workspace_json_bytes_per_graded_arrival": round(ws),
            "heap_beyond_log_and_workspace_per_arrival": round(heap - log - ws),
            "heap_first_last_mb": [round(samples[0]["heap"] / 2**20, 2),
                                   round(samples[-1]["heap"] / 2**20, 2)],
            "largest_open_arrivals": max(s["live"] for s in samples)}


def many(tmp: Path, n: int) -> dict[str, Any]:
    path = variant(tmp / "many", days=1)
    folder = tmp / "many-db"
    folder.mkdir(exist_ok=True)

    async def together(tag: str) -> list[Any]:
        out: list[Any] = [None] * n

        async def one(i: int) -> None:
            out[i] = await asimulate(SimulationConfig(path, db=folder / f"{tag}-{i}.db",
                                                      run_id=f"{tag}{i}"))
        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i)
        return out

    async def apart(tag: str) -> list[Any]:
        return [await asimulate(SimulationConfig(path, db=folder / f"{tag}-{i}.db",
                                                 run_id=f"{tag}{i}")) for i in range(n)]

    t0 = time.perf_counter()
    a = anyio.run(together, "t")
    at_once = time.perf_counter() - t0
    t0 = time.perf_counter()
    b = anyio.run(apart, "s")
    sequential = time.perf_counter() - t0
    same = [x.events_hash for x in a] == [x.events_hash for x in b]
    return {"simulations": n, "arrivals_each": len(a[0].outcomes),
            "at_once_wall_s": round(at_once, 3), "one_after_another_wall_s": round(sequential, 3),
            "simulations_per_s_at_once": round(n / at_once, 2),
            "ratio_at_once_vs_sequential": round(at_once / sequential, 3),
            "same_hashes": same}


def seeds(tmp: Path, ns: list[int]) -> dict[str, Any]:
    import os

    from coworkenv.runtime.simbatch import simulate_seeds

    cores = os.cpu_count() or 1
    out: dict[str, Any] = {"cores": cores, "runs": []}
    for n in ns:
        row: dict[str, Any] = {"simulations": n}
        for procs in (1, cores):
            db = tmp / f"seeds-{n}-{procs}.db"
            batch = simulate_seeds(SimulationConfig(SIMS / "week.yaml", days=1, db=db,
                                                    run_id=f"s{n}p{procs}"),
                                   range(7, 7 + n), processes=procs)
            row[f"p{procs}"] = {"wall_s": round(batch.wall_seconds, 3),
                                "arrivals": batch.arrivals,
                                "simulations_per_s": round(batch.simulations_per_s, 2),
                                "arrivals_per_s": round(batch.arrivals_per_s, 1),
                                "hashes": [r.events_hash[:12] for r in batch.runs]}
        one, many_ = row["p1"], row[f"p{cores}"]
        row["speedup"] = round(one["wall_s"] / many_["wall_s"], 3) if many_["wall_s"] else None
        row["same_hashes"] = one["hashes"] == many_["hashes"]
        for k in ("p1", f"p{cores}"):
            del row[k]["hashes"]
        out["runs"].append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--memory-days", type=int, default=20)
    ap.add_argument("--many", type=int, default=100)
    ap.add_argument("--seeds-n", default="1,4,16,64",
                    help="batch sizes of the seeds section (comma-separated)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        out = {"week": week(tmp, a.repeats), "memory": memory(tmp, a.memory_days),
               "many": many(tmp, a.many),
               "seeds": seeds(tmp, [int(x) for x in a.seeds_n.split(",") if x])}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
