"""Replay and viewer benchmark on a large log.

Builds a database of 10,000 scripted episodes (about a million events: the load agent making
about 50 tool calls per episode, its office mix of three writes that notify someone to two
reads, plus the built-in tasks' own traffic), then reports, as JSON: replay events/s (read
back and folded into a workspace), with the share of the replayed events that change the
workspace (``ws.*``: seeds and the agent's writes) and the rate of those alone, and the time to
open the episode list
and one episode's timeline through the viewer's API, each the median over 20 requests (a new
read-only connection per request, as the server does). Target: list and timeline < 200 ms.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coworkenv.agents import LoadAgent
from coworkenv.runtime import RunConfig, run
from coworkenv.sim import builtin_tasks
from coworkenv.store import Reader
from coworkenv.viewer import api
from coworkenv.workspace import replay_events


def build(db: Path, episodes: int, steps: int) -> float:
    tasks = [t.model_copy(update={"limits": t.limits.model_copy(update={"max_turns": steps + 2})})
             for t in builtin_tasks()]
    trials = max(1, episodes // len(tasks))

    t0 = time.perf_counter()
    run(RunConfig(tasks, agent=lambda t: LoadAgent.for_task(t, steps), agent_name="load", db=db,
                  run_id="big", trials=trials, concurrency=256, role="student"))
    return time.perf_counter() - t0


def timed(fn: Any, n: int = 20) -> float:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--episodes", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=48)
    ap.add_argument("--db", type=Path, default=None, help="keep the database here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "big.db"
        build_s = build(db, args.episodes, args.steps)
        with Reader(db) as r:
            n_eps = r.conn.execute("SELECT count(*) FROM episodes").fetchone()[0]
            n_events = r.conn.execute("SELECT count(*) FROM events").fetchone()[0]
            ids = [e.episode_id for e in r.episodes("big")]
        rng = random.Random(7)
        sample = rng.sample(ids, min(200, len(ids)))
        t0 = time.perf_counter()
        replayed = changing = 0
        with Reader(db) as r:
            for eid in sample:
                evs = list(r.events(eid))
                replay_events(evs)
                replayed += len(evs)
                changing += sum(1 for e in evs if e.kind.startswith("ws."))
        replay_s = time.perf_counter() - t0
        replay_rate = replayed / replay_s

        def with_reader(fn: Any) -> Any:
            def call() -> Any:
                with Reader(db) as r:
                    return fn(r)
            return call

        picks = iter(rng.choices(ids, k=1000))
        out = {
            "episodes": n_eps,
            "events": n_events,
            "build_s": round(build_s, 1),
            "replay_events_per_s": round(replay_rate),
            "replayed_changing_state_share": round(changing / replayed, 3),
            "replay_state_changes_per_s": round(changing / replay_s),
            "list_first_page_ms": round(timed(with_reader(lambda r: api.episodes(r))), 2),
            "list_deep_page_ms": round(timed(with_reader(
                lambda r: api.episodes(r, offset=n_eps - 60))), 2),
            "list_filtered_ms": round(timed(with_reader(lambda r: api.episodes(
                r, capability="dynamic_workspace_state", passed=False))), 2),
            "timeline_ms": round(timed(with_reader(lambda r: api.timeline(r, next(picks)))), 2),
            "state_at_middle_ms": round(timed(with_reader(
                lambda r: api.state_at(r, next(picks), 50))), 2),
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
