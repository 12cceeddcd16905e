"""Every benchmark in one go: each script of bench/ run in its own process, one after the
other, with the machine's load average read just before each (machines are shared: a figure
is only as good as the load it was measured under). Writes one JSON object (to stdout, and to
``--out``): per benchmark its command, load before, wall time, exit status and its own JSON.

``--quick`` runs each with small arguments (a smoke of the whole set, minutes in all); the
default runs each with its own defaults (the figures the README quotes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

QUICK: dict[str, list[str]] = {
    "store": ["--events", "2000", "--repeats", "1"],
    "bus": ["--messages", "2000", "--mqtt-messages", "200", "--repeats", "1", "--episodes",
            "20", "--turns", "5", "--run-episodes", "16", "--run-steps", "5"],
    "episodes": ["--trials", "1", "--episodes", "20", "--steps", "10", "--repeats", "1",
                 "--lengths", "5,10", "--marginal-episodes", "5"],
    "replay": ["--episodes", "40", "--steps", "10"],
    "grading": ["--synth", "3", "--repeats", "1"],
    "synth": ["--tasks", "5", "--repeats", "1"],
    "sessions": ["--sessions", "8", "--steps", "4"],
    "scale": ["--quick"],
    "simulate": ["--repeats", "1", "--memory-days", "5", "--many", "5", "--seeds-n", "4"],
    "persistent": ["--days", "4", "--recall-day", "3"],
}
"""The benchmarks, in the order they run, with their --quick arguments."""

NEEDS = {"scale": ("ray",), "sessions": ("openenv", "mcp")}
"""Benchmarks that import an optional extra (all in `pip install -e '.[bench]'`)."""


def missing_modules(names: list[str]) -> dict[str, list[str]]:
    """For each benchmark to run, the modules of its extra that are not installed."""
    import importlib.util

    out = {}
    for name in names:
        gone = [m for m in NEEDS.get(name, ()) if importlib.util.find_spec(m) is None]
        if gone:
            out[name] = gone
    return out


def run_one(name: str, args: list[str], timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, str(HERE / f"{name}.py"), *args]
    load = [round(x, 2) for x in os.getloadavg()]
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
        out, err, code = r.stdout, r.stderr, r.returncode
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err, code = f"timed out after {timeout:.0f} s", None
    wall = time.perf_counter() - t0
    entry: dict[str, Any] = {"command": " ".join(["python", f"bench/{name}.py", *args]),
                             "load_before": load, "wall_s": round(wall, 2), "exit": code}
    try:
        entry["result"] = json.loads(out)
    except ValueError:
        entry["error"] = (err or out)[-2000:]
    return entry


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small arguments for each (a smoke)")
    ap.add_argument("--only", nargs="+", choices=sorted(QUICK), help="run only these")
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per benchmark")
    args = ap.parse_args()
    names = [n for n in QUICK if not args.only or n in args.only]
    missing = missing_modules(names)
    if missing:  # before anything runs, in one line: what is missing and how to get it
        what = "; ".join(f"bench/{n}.py needs {', '.join(m)}" for n, m in missing.items())
        sys.exit(f"bench/all.py: {what}: pip install -e '.[bench]' (or --only the others)")
    results: dict[str, Any] = {}
    for name in names:
        print(f"bench/all: {name} ...", file=sys.stderr, flush=True)
        results[name] = run_one(name, QUICK[name] if args.quick else [], args.timeout)
        print(f"bench/all: {name} done in {results[name]['wall_s']} s "
              f"(exit {results[name]['exit']})", file=sys.stderr, flush=True)
    report = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "quick": args.quick,
              "machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                          "platform": platform.platform()},
              "benchmarks": results,
              "failed": [n for n, r in results.items() if r["exit"] != 0 or "error" in r]}
    text = json.dumps(report, indent=2)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
    if report["failed"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
