"""Grading and mutation-validation benchmark.

Reports, as JSON (medians over --repeats):
- grading cost per episode: ``regrade`` (replay the log into a workspace, then every check and
  safety rule, selectors included) over recorded oracle episodes of the built-in tasks and of
  synthesized tasks; the baseline beside it is replay alone, timed in the same loop, so the
  grader's own share is their difference;
- validation cost per synthesized task, full (parse, static checks, two oracle runs, a no-op
  run, capabilities, and every mutant of the reference run through the kernel and grader),
  beside the same validation without mutants; with the number of mutants per task.
Target: validating a synthesized task with all its mutants under 1 s on one core.
Run it pinned to one core for the per-core figure: ``taskset -c 0 python bench/grading.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coworkenv.runtime import RunConfig, run
from coworkenv.sim import Task, builtin_tasks, parse_task
from coworkenv.sim.grading import regrade
from coworkenv.store import Reader
from coworkenv.synth import ProceduralGenerator, load_requirement, synthesize
from coworkenv.synth.validate import validate_task_async
from coworkenv.workspace import replay_events

ROOT = Path(__file__).resolve().parents[1]


def synthesized(n: int) -> list[Task]:
    reqs = [load_requirement(p) for p in sorted((ROOT / "examples/workflows").glob("*.yaml"))]
    specs, _, _ = anyio.run(lambda: synthesize(reqs, ProceduralGenerator(7), n, mutate=False))
    return [parse_task(s, "bench") for s in specs]


def record(tasks: list[Task], db: Path) -> None:
    run(RunConfig(tasks, agent="oracle", db=db, run_id="g", role="student"))


def grading_cost(tasks: list[Task], db: Path, repeats: int) -> dict[str, Any]:
    by_id = {t.id: t for t in tasks}
    with Reader(db) as r:
        logs = [(by_id[e.task_id], list(r.events(e.episode_id)))
                for e in r.episodes("g", status="completed")]
    grade_ms, replay_ms = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _task, events in logs:
            replay_events(events)
        t1 = time.perf_counter()
        for task, events in logs:
            regrade(task, events)
        t2 = time.perf_counter()
        replay_ms.append((t1 - t0) * 1000 / len(logs))
        grade_ms.append((t2 - t1) * 1000 / len(logs))
    events = statistics.mean(len(e) for _, e in logs)
    return {"episodes": len(logs), "mean_events": round(events, 1),
            "regrade_ms_per_episode": round(statistics.median(grade_ms), 3),
            "replay_only_ms_per_episode": round(statistics.median(replay_ms), 3),
            "grader_share": round(1 - statistics.median(replay_ms)
                                  / statistics.median(grade_ms), 3)}


def validation_cost(tasks: list[Task], repeats: int) -> dict[str, Any]:
    full, plain, mutants, rejected = [], [], [], 0
    for _ in range(repeats):
        t_full = t_plain = 0.0
        for t in tasks:
            t0 = time.perf_counter()
            rep = anyio.run(lambda t=t: validate_task_async(t, mutate=True))
            t1 = time.perf_counter()
            anyio.run(lambda t=t: validate_task_async(t, mutate=False))
            t2 = time.perf_counter()
            t_full += t1 - t0
            t_plain += t2 - t1
            if rep.mutation is not None:
                mutants.append(len(rep.mutation.results))
            rejected += not rep.accepted
        full.append(t_full / len(tasks))
        plain.append(t_plain / len(tasks))
    f, p = statistics.median(full), statistics.median(plain)
    return {"tasks": len(tasks), "mutants_per_task": round(statistics.mean(mutants), 2),
            "validate_with_mutants_s_per_task": round(f, 4),
            "validate_without_mutants_s_per_task": round(p, 4),
            "mutation_share": round(1 - p / f, 3), "tasks_per_s_with_mutants": round(1 / f, 2),
            "rejected": rejected // repeats, "target_s_per_task": 1.0, "meets_target": f < 1.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--synth", type=int, default=60, help="synthesized tasks")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    synth = synthesized(a.synth)
    built = builtin_tasks()
    with tempfile.TemporaryDirectory() as d:
        record(built, Path(d) / "b.db")
        record(synth, Path(d) / "s.db")
        out = {"grading_builtin": grading_cost(built, Path(d) / "b.db", a.repeats),
               "grading_synthesized": grading_cost(synth, Path(d) / "s.db", a.repeats),
               "validation_synthesized": validation_cost(synth, a.repeats),
               "validation_builtin": validation_cost(built, a.repeats)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
