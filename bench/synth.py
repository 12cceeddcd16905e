"""Synthesis benchmark: validated tasks per second on one core, mutation check included.

Composes tasks from the example workflow requirements and validates each exactly as
``coworkenv synth`` does (parse, static checks, two oracle runs, a no-op run, capabilities,
every mutant of the reference), one at a time on one event loop. Reports, as JSON (medians
over --repeats): validated tasks per second, the share of time spent composing and in
validation (and within it, in the mutation check), mutants per task, and the median oracle
agent steps of what was validated. Run it pinned to one core for the per-core figure:
``taskset -c 0 python bench/synth.py``. Target: at least 20 validated tasks per second.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import zlib
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coworkenv.synth import load_requirement
from coworkenv.synth.compose import compose
from coworkenv.synth.validate import validate_task_async

ROOT = Path(__file__).resolve().parents[1]


def once(n: int, seed: int) -> dict[str, float]:
    reqs = [load_requirement(p) for p in sorted((ROOT / "examples/workflows").glob("*.yaml"))]
    compose_s = validate_s = plain_s = 0.0
    mutants, turns, accepted = [], [], 0

    async def go() -> None:
        nonlocal compose_s, validate_s, plain_s, accepted
        for i in range(n):
            req = reqs[i % len(reqs)]
            t0 = time.perf_counter()
            spec = compose(req, random.Random(zlib.crc32(f"{seed}:{i}".encode())),
                           f"{req.id}-{i:05d}")
            t1 = time.perf_counter()
            rep = await validate_task_async(spec, "bench", mutate=True)
            t2 = time.perf_counter()
            await validate_task_async(spec, "bench", mutate=False)
            t3 = time.perf_counter()
            compose_s += t1 - t0
            validate_s += t2 - t1
            plain_s += t3 - t2
            accepted += rep.accepted
            if rep.mutation is not None:
                mutants.append(len(rep.mutation.results))
            turns.append(int(rep.oracle.get("turns", 0)))

    anyio.run(go)
    total = compose_s + validate_s
    return {"tasks_per_s": n / total, "validation_share": validate_s / total,
            "mutation_share_of_validation": 1 - plain_s / validate_s,
            "ms_per_task": 1000 * total / n, "mutants_per_task": statistics.mean(mutants),
            "median_oracle_steps": statistics.median(turns), "accepted": accepted / n}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=120)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    runs = [once(a.tasks, r) for r in range(a.repeats)]
    out = {k: round(statistics.median(r[k] for r in runs), 4) for k in runs[0]}
    out.update({"tasks": a.tasks, "repeats": a.repeats, "target_tasks_per_s": 20,
                "meets_target": out["tasks_per_s"] >= 20})
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
