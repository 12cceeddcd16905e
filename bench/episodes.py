"""Episode benchmark, measured in one run.

(a) On one core: scripted episodes per second and agent steps per second (the built-in tasks
    with the oracle agent, memory bus, a SQLite file; everything an episode costs, setup,
    coworkers, grading and recording included, divided by its agent steps), and the marginal
    cost of one more agent step (bus + tool + reducer + notifications + store + kernel): the
    slope of wall time per episode regressed on episode length (``--lengths``), with the load
    agent's office mix (three writes that notify someone, two reads per five calls), with
    no think time; the intercept is what an episode costs whatever its length.
(b) Concurrency efficiency: the load agent taking 50 ms of real time per decision (then the
    next call of the same mix), N concurrent episodes; achieved steps/s as a fraction of the
    ideal N / 0.05 s, measured while all N episodes run together (from the last episode's
    start to the first one's finish, from the wall-clock stamps in the store; null, not 0,
    when there is no such stretch); the whole run, setting up and winding down N episodes
    included, is reported beside it. Reported for one process
    pinned to one core, one process on all cores (the store's writer thread free to use
    another), the same with the garbage collector left at Python's defaults (what
    ``RunOptions.tune_gc`` saves), and N episodes spread over one process per core
    (``coworkenv run --processes``), all on one SQLite file.
With ``--agent openai --base-url URL --model M``: agent-step latency against a real server,
split into model time and simulator time.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coworkenv.agents import LoadAgent
from coworkenv.runtime import RunConfig, run
from coworkenv.sim import Task, builtin_tasks


def _load(task: Task, steps: int, think: float) -> Any:
    """The load agent's factory: ``steps`` calls of the task's office mix (three writes that
    notify someone, two reads), ``think`` seconds before each decision."""
    return lambda t: LoadAgent.for_task(task, steps, think)


def _run(tasks: list[Task], agent: Any, concurrency: int, trials: int, db: Path,
         tune_gc: bool = True, processes: int = 1) -> tuple[float, list[Any]]:
    """A run through the library API (what `coworkenv run` does); its wall time from the
    call to the result (store opened, episodes run and recorded, summary read back)."""
    t0 = time.perf_counter()
    result = run(RunConfig(tasks, agent=agent, agent_name="bench", role="student", db=db,
                           trials=trials, concurrency=concurrency, processes=processes,
                           tune_gc=tune_gc, run_id=f"bench-{time.time_ns()}"))
    return time.perf_counter() - t0, result.episodes


def scripted(trials: int, d: Path) -> dict[str, Any]:
    tasks = builtin_tasks()
    wall, results = _run(tasks, "oracle", 64, trials, d / "s.db")
    steps = sum(r.turns for r in results)
    return {"episodes": len(results), "agent_steps": steps,
            "episodes_per_s": len(results) / wall, "agent_steps_per_s": steps / wall,
            "all_in_cost_per_agent_step_us": wall / steps * 1e6}


def _long(steps: int) -> Task:
    task = next(t for t in builtin_tasks() if t.id == "share-onboarding")
    return task.model_copy(update={"limits": task.limits.model_copy(
        update={"max_turns": steps + 1})})


def marginal(episodes: int, lengths: list[int], d: Path) -> dict[str, Any]:
    """The cost of one more agent step: episodes of several lengths (decisions each), the
    office mix of writes and reads, no think time, all in one process; wall time per
    episode regressed on its length. The slope is the marginal cost of a step (the tool call,
    its events, notifications, the kernel and the store); the intercept, what an episode
    costs whatever its length (setup, seeds, grading)."""
    xs, ys = [], []
    for n in lengths:
        task = _long(n)
        wall, results = _run([task], _load(task, n, 0.0), episodes, episodes,
                             d / f"m{n}-{time.time_ns()}.db")
        xs.append(statistics.mean(r.turns for r in results))
        ys.append(wall / len(results))
    slope, intercept = statistics.linear_regression(xs, ys)
    fit = [intercept + slope * x for x in xs]
    ss_res = sum((y - f) ** 2 for y, f in zip(ys, fit, strict=True))
    ss_tot = sum((y - statistics.mean(ys)) ** 2 for y in ys) or 1e-30
    return {"episodes_per_length": episodes, "agent_steps_per_episode": xs,
            "wall_per_episode_ms": [y * 1e3 for y in ys],
            "marginal_per_agent_step_us": slope * 1e6,
            "per_episode_fixed_ms": intercept * 1e3, "r2": 1 - ss_res / ss_tot}


def steady_state(db: Path) -> tuple[float, int] | None:
    """The stretch of a run in which every episode was running (from the last start to the
    first finish), and the agent decisions recorded in it, read from the store; None when
    there is no such stretch (the last episode started after the first finished)."""
    window = _steady_window(db)
    if window is None:
        return None
    return window[1] - window[0], _decisions_between(db, *window)


def _steady_window(db: Path) -> tuple[float, float] | None:
    """(last start, first finish), wall-clock seconds; None when the first comes later."""
    with sqlite3.connect(db) as c:
        lo, hi = c.execute("SELECT max(started_at), min(finished_at) FROM episodes").fetchone()
    return (lo, hi) if hi > lo else None


def _decisions_between(db: Path, lo: float, hi: float) -> int:
    with sqlite3.connect(db) as c:
        (k,) = c.execute("SELECT count(*) FROM events WHERE actor = 'agent' AND kind IN "
                         "('tool_call', 'finish') AND wall_time BETWEEN ? AND ?",
                         (lo, hi)).fetchone()
    return int(k)


class CpuSampler:
    """The process's CPU time (all threads) and its event loop thread's, sampled every
    ``every`` seconds with the wall clock, so the CPU of a stretch known only afterwards (the
    steady window, from the store) can be read: a run's start (store, plan) and end (the last
    gradings, the summary) cost the same at every N and would otherwise weigh on small N."""

    def __init__(self, every: float = 0.05) -> None:
        import threading

        self.every = every
        self.samples: list[tuple[float, float, float]] = []
        self._loop_clock = time.pthread_getcpuclockid(threading.main_thread().ident or 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        self.samples.append((time.time(), time.process_time(),
                             time.clock_gettime(self._loop_clock)))

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self._sample()

    def __enter__(self) -> CpuSampler:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def between(self, lo: float, hi: float) -> tuple[float, float, float, float] | None:
        """(start, end, process CPU, loop thread CPU) from the first sample at or after ``lo``
        to the last at or before ``hi``; None when no two samples fall inside."""
        inside = [s for s in self.samples if lo <= s[0] <= hi]
        if len(inside) < 2:
            return None
        a, b = inside[0], inside[-1]
        return a[0], b[0], b[1] - a[1], b[2] - a[2]


def concurrent(n: int, steps: int, think: float, d: Path, processes: int = 1,
               tune_gc: bool = True) -> dict[str, Any]:
    task = _long(steps)
    db = d / f"c{time.time_ns()}.db"
    # the same n episodes at once, in one process or spread over processes on one SQLite file
    wall, results = _run([task], _load(task, steps, think), -(-n // processes), n, db,
                         tune_gc, processes)
    done = sum(r.turns for r in results)  # tool calls + the finish
    decisions = done  # each turn is preceded by one think
    ideal = n / think
    steady = steady_state(db)
    window, in_window = steady if steady is not None else (None, 0)
    return {"concurrent_episodes": n, "processes": processes, "decisions": decisions,
            "wall_s": wall, "ideal_steps_per_s": ideal,
            # all n episodes running at once: the throughput the target is about
            # None (not 0) when no stretch had every episode running: raise --steps
            "steady_window_s": window,
            "steady_steps_per_s": in_window / window if window else None,
            "efficiency": in_window / window / ideal if window else None,
            # the whole run, start-up (setting up n episodes) and wind-down included
            "whole_run_steps_per_s": decisions / wall,
            "whole_run_efficiency": decisions / wall / ideal}


def scale_one(n: int, steps: int, load: float, d: Path) -> dict[str, Any]:
    """``n`` live episodes at a fixed offered load: each decision thinks ``n / load`` seconds,
    so the ideal is ``load`` steps/s whatever ``n`` is. Efficiency and CPU per agent step in
    the steady stretch (all ``n`` episodes running; this process, all threads, and the event
    loop's thread alone), the same over the whole run, and memory per live episode (peak
    resident size above what the process held before the run, over ``n``)."""
    import resource

    task = _long(steps)
    think = n / load
    _run([task], _load(task, 5, 0.0), 4, 4, d / "warm.db")  # imports and first-use caches
    base_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    db = d / f"scale{n}.db"
    with CpuSampler() as cpu:
        wall, results = _run([task], _load(task, steps, think), n, n, db)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    decisions = sum(r.turns for r in results)
    window = _steady_window(db)
    steady = cpu.between(*window) if window else None
    k = _decisions_between(db, *window) if window else 0
    # (the decisions between the two samples that bound the CPU measured)
    k_cpu = _decisions_between(db, steady[0], steady[1]) if steady else 0
    first, last = cpu.samples[0], cpu.samples[-1]
    return {"live_episodes": n, "think_s": think, "ideal_steps_per_s": load,
            "efficiency": k / (window[1] - window[0]) / load if window else None,
            "steady_window_s": window[1] - window[0] if window else None,
            # CPU in the steady stretch (between the samples inside it, and the decisions
            # recorded between those samples): what a step costs with n episodes live
            "cpu_per_agent_step_us": steady[2] / k_cpu * 1e6 if steady and k_cpu else None,
            "loop_cpu_per_agent_step_us": steady[3] / k_cpu * 1e6 if steady and k_cpu else None,
            "whole_run_efficiency": decisions / wall / load,
            "whole_run_cpu_per_agent_step_us": (last[1] - first[1]) / decisions * 1e6,
            "rss_per_live_episode_kib": (peak_kib - base_kib) / n, "wall_s": wall}


def scale(ns: list[int], steps: int, load: float) -> list[dict[str, Any]]:
    """:func:`scale_one` for each N, each in a fresh process (so its memory is its own)."""
    import subprocess

    rows = []
    for n in ns:
        out = subprocess.run([sys.executable, __file__, "--scale-one", str(n), "--steps",
                              str(steps), "--load", str(load)], capture_output=True, text=True,
                             check=True)
        rows.append(json.loads(out.stdout))
        print(f"scale: {n} live episodes: {rows[-1]}", file=sys.stderr, flush=True)
    return rows


def with_model(base_url: str, model: str, episodes: int, d: Path) -> dict[str, Any]:
    """Agent-step latency against a real OpenAI-compatible server, split into the model's
    time (each call's latency, as recorded) and the simulator's (everything else)."""
    from coworkenv.agents import Endpoint, OpenAIAgent
    from coworkenv.store import Reader

    task = next(t for t in builtin_tasks() if t.id == "triage-laptop")
    task = task.model_copy(update={"tools": ["tickets"], "limits": task.limits.model_copy(
        update={"max_turns": 4})})
    ep = Endpoint(base_url, model, max_tokens=96, max_concurrency=1)
    wall, results = _run([task], lambda t: OpenAIAgent(ep), 1, episodes, d / "model.db")
    model_s = 0.0
    calls = 0
    with Reader(d / "model.db") as r:
        for res in results:
            for e in r.events(res.episode_id):
                if e.kind == "agent.model_call":
                    model_s += e.payload["latency_s"]
                    calls += 1
    steps = sum(r.turns for r in results) or 1
    return {"episodes": len(results), "agent_steps": steps, "model_calls": calls,
            "wall_s": round(wall, 3),
            "per_step_ms": round(wall / steps * 1000, 2),
            "model_per_step_ms": round(model_s / steps * 1000, 2),
            "simulator_per_step_ms": round((wall - model_s) / steps * 1000, 3),
            "simulator_share": round((wall - model_s) / wall, 5)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--agent", default="stub", help="stub (default) or openai: measure against "
                    "a real server (--base-url, --model)")
    ap.add_argument("--base-url", default="http://127.0.0.1:8080/v1")
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--trials", type=int, default=40, help="trials per built-in task for (a)")
    ap.add_argument("--episodes", type=int, default=1000, help="concurrent episodes for (b)")
    ap.add_argument("--steps", type=int, default=100,
                    help="decisions per episode for (b): long enough that all N episodes run "
                         "together for a few seconds")
    ap.add_argument("--think", type=float, default=0.05, help="seconds per decision for (b)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--lengths", type=lambda v: [int(x) for x in v.split(",")],
                    default=[10, 40, 80, 160],
                    help="episode lengths (decisions) for the marginal cost's regression")
    ap.add_argument("--marginal-episodes", type=int, default=50,
                    help="episodes of each length for the marginal cost")
    ap.add_argument("--scale", type=lambda v: [int(x) for x in v.split(",")], nargs="?",
                    const=[1, 10, 100, 1000, 5000, 10000], default=None,
                    help="the scaling table instead: live episodes at a fixed offered load "
                         "(default 1,10,100,1000,5000,10000)")
    ap.add_argument("--load", type=float, default=2000.0,
                    help="offered load for --scale, steps/s (think = N / load)")
    ap.add_argument("--scale-one", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.scale_one is not None:
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(scale_one(args.scale_one, args.steps, args.load, Path(tmp))))
        return
    if args.scale is not None:
        date, before = time.strftime("%Y-%m-%dT%H:%M:%S%z"), os.getloadavg()
        print(json.dumps({"date": date, "load_before": before,
                          "scale": scale(args.scale, args.steps, args.load),
                          "steps_per_episode": args.steps, "offered_steps_per_s": args.load,
                          "load_average": os.getloadavg(), "cores": os.cpu_count()},
                         indent=2))
        return
    if args.agent == "openai":
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps({"openai": with_model(args.base_url, args.model, 3, Path(tmp))},
                             indent=2))
        return
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()

    def pin(one: bool) -> None:
        if cores:
            os.sched_setaffinity(0, {min(cores)} if one else cores)

    a_runs, m_runs, b1_runs, b2_runs, bg_runs, bp_runs = [], [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):  # interleaved, so noise hits every variant alike
            d = Path(tmp) / str(i)
            d.mkdir()
            pin(True)
            a_runs.append(scripted(args.trials, d))
            m_runs.append(marginal(args.marginal_episodes, args.lengths, d))
            b1_runs.append(concurrent(args.episodes, args.steps, args.think, d))
            pin(False)
            b2_runs.append(concurrent(args.episodes, args.steps, args.think, d))
            bg_runs.append(concurrent(args.episodes, args.steps, args.think, d, tune_gc=False))
            bp_runs.append(concurrent(args.episodes, args.steps, args.think, d,
                                      processes=max(1, len(cores))))

    def med(runs: list[dict[str, Any]]) -> dict[str, Any]:
        """Medians of numbers; lists and missing values (None) as the first run has them
        beside the median of those that have one."""
        out: dict[str, Any] = {}
        for k in runs[0]:
            vals = [r[k] for r in runs if isinstance(r[k], (int, float))]
            out[k] = round(statistics.median(vals), 3) if vals else runs[0][k]
        return out

    print(json.dumps({"repeats": args.repeats, "scripted_one_core": med(a_runs),
                      "marginal_step_one_core": med(m_runs),
                      "stub_agent_50ms_one_core": med(b1_runs),
                      "stub_agent_50ms_all_cores": med(b2_runs),
                      "stub_agent_50ms_all_cores_default_gc": med(bg_runs),
                      "stub_agent_50ms_process_per_core": med(bp_runs),
                      "cores": len(cores)}, indent=2))


if __name__ == "__main__":
    main()
