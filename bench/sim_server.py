"""Model-backed simulations against one model server: how many simulations to run at once so
that the server stays busy.

A simulation waits for each model call of its agents (its log is the same however fast the
server answers), so it has one call in flight at most: the calls in flight to a server are
the simulations waiting on it, at most ``--model-concurrency`` per process. Each row runs
``--waves`` x N one-day simulations of ``--file`` (default the week), every agent the model
(``openai:MODEL``), N at once: over ``--processes`` P (default: every core), N / P in each
(``simulate --seeds 2N --processes P --concurrency N/P``), graded and recorded. Against
``--base-url`` (a GPU server: ``coworkenv serve --device cuda``, or vLLM), or by default the
package's scripted server in a process of its own, answering ``finish`` after ``--latency``
seconds. Printed as JSON per N: wall seconds, arrivals and model calls a second, the mean
answer time, the calls in flight on average (calls/s x mean answer time), the ideal calls/s
(N / the answer time) and the ratio; then ``busy_at``, the smallest N whose calls/s reach 0.9
of the most measured: the simulations at once (``--processes`` x ``--concurrency``) that keep
this server busy, and ``--model-concurrency`` at least N / P.

On a lent GPU (see docs/design/scale.md): serve the model there, then
``python bench/sim_server.py --base-url http://127.0.0.1:8000/v1 --model NAME --at-once
1,8,32,128``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from coworkenv.runtime.simbatch import simulate_seeds  # noqa: E402
from coworkenv.runtime.simulate import SimulationConfig  # noqa: E402


def scripted_server(latency: float) -> tuple[subprocess.Popen[str], str]:
    """The package's scripted server in a child process (its CPU not this one's)."""
    proc = subprocess.Popen([sys.executable, "-W", "ignore::RuntimeWarning", "-m",
                             "coworkenv.agents.fake_openai", "--latency", str(latency)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def row(file: Path, base_url: str, model: str, at_once: int, processes: int, waves: int,
        days: int, folder: Path) -> dict[str, Any]:
    """N = ``at_once`` simulations at once over ``processes``, ``waves`` x N in all."""
    procs = max(1, min(processes, at_once))
    each = -(-at_once // procs)
    config = SimulationConfig(file, agent=f"openai:{model}", base_url=base_url, days=days,
                              db=folder / f"n{at_once}.db", model_concurrency=each,
                              model_timeout=600.0, memory="per_arrival")
    t0 = time.perf_counter()
    batch = simulate_seeds(config, range(waves * at_once), processes=procs, concurrency=each)
    wall = time.perf_counter() - t0
    calls = sum(u.get("calls", 0) for r in batch.runs for u in r.model_use.values())
    ms = sum(u.get("latency_ms", 0) for r in batch.runs for u in r.model_use.values())
    answer_s = ms / 1000 / calls if calls else 0.0
    rate = calls / wall
    ideal = at_once / answer_s if answer_s else 0.0
    return {"at_once": at_once, "processes": procs, "concurrency": each,
            "simulations": len(batch.runs), "arrivals": batch.arrivals,
            "wall_s": round(wall, 2), "arrivals_per_s": round(batch.arrivals / wall, 1),
            "calls": calls, "calls_per_s": round(rate, 1), "answer_s": round(answer_s, 4),
            "in_flight_mean": round(rate * answer_s, 1), "ideal_calls_per_s": round(ideal, 1),
            "ratio": round(rate / ideal, 3) if ideal else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--file", type=Path, default=ROOT / "examples/simulations/week.yaml")
    ap.add_argument("--base-url", help="the model server (default: the scripted one)")
    ap.add_argument("--model", default="m", help="the served model's name")
    ap.add_argument("--latency", type=float, default=0.2,
                    help="the scripted server's seconds an answer")
    ap.add_argument("--at-once", default="1,4,16,64",
                    help="simulations at once, comma-separated (one row each)")
    ap.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--waves", type=int, default=2, help="simulations per row: waves x N")
    ap.add_argument("--days", type=int, default=1)
    a = ap.parse_args()
    server = None
    base_url = a.base_url
    if base_url is None:
        server, base_url = scripted_server(a.latency)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for n in (int(x) for x in a.at_once.split(",")):
                rows.append(row(a.file, base_url, a.model, n, a.processes, a.waves, a.days,
                                Path(tmp)))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    finally:
        if server is not None:
            assert server.stdin is not None
            server.stdin.close()
            server.wait(timeout=10)
    best = max(r["calls_per_s"] for r in rows)
    busy = next(r["at_once"] for r in rows if r["calls_per_s"] >= 0.9 * best)
    print(json.dumps({"server": a.base_url or f"scripted, {a.latency:g} s an answer",
                      "model": a.model, "cores": os.cpu_count(), "rows": rows,
                      "busy_at": busy}, indent=2))


if __name__ == "__main__":
    main()
