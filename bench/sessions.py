"""Sessions benchmark: many episodes driven step by step, in process and over the OpenEnv server.

N sessions at once (default 256), each resets to a built-in task and takes K actions (default
20) of a realistic mix, then finishes: a directory read, an email to the user (a write that
notifies her), a document search, a chat message (a write); the user's replies come back in
later observations, as in any episode. Measured side by side in one run:

- in process: ``coworkenv.runtime.Sessions`` on one event loop (the floor);
- over OpenEnv: ``coworkenv serve-env`` in its own process, driven by OpenEnv's own client
  (``MCPToolClient``, one WebSocket per session), the way a trainer reaches it.

Reports, for both, steps per second, step latency p50/p99 and CPU per step (the server
process's own CPU over OpenEnv, read from /proc; the client's is not counted), with the
machine's load average before each. The server's overhead per step, three ways: CPU per step
over OpenEnv minus in process; step latency with one session (nothing queued: what the server
adds to a step), over OpenEnv minus in process, p50 and p99; and the same difference with N
sessions (mostly queueing behind the other sessions' steps). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import free_port

from coworkenv.runtime import Action, Sessions
from coworkenv.sim import builtin_tasks

TASK = "share-onboarding"


def actions(user: str, k: int) -> list[tuple[str, dict[str, Any]]]:
    """K actions of the mix (two writes in four), then finish."""
    mix: list[tuple[str, dict[str, Any]]] = [
        ("directory_get_person", {"person": user}),
        ("email_send", {"to": [user], "subject": "Onboarding", "body": "Where is the guide?"}),
        ("docs_search", {"query": "onboarding"}),
        ("chat_send_dm", {"to": user, "text": "Sent you an email."}),
    ]
    return [mix[i % len(mix)] for i in range(k)] + [("finish", {"summary": "done"})]


def percentiles(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {"p50_ms": round(statistics.median(xs) * 1000, 3),
            "p99_ms": round(xs[min(len(xs) - 1, int(len(xs) * 0.99))] * 1000, 3)}


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _cpu_s(pid: int | None = None) -> float | None:
    """CPU seconds (user + system) of this process, or of process ``pid`` (Linux /proc)."""
    if pid is None:
        return time.process_time()
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _per_step_us(cpu: float | None, steps: int) -> float | None:
    return None if cpu is None or not steps else round(cpu / steps * 1e6, 1)


def in_process(n: int, k: int, db: Path) -> dict[str, Any]:
    task = next(t for t in builtin_tasks() if t.id == TASK)
    plan = actions(task.user.person, k)
    latencies: list[float] = []
    failed = 0

    async def main() -> float:
        nonlocal failed
        async with Sessions(db, tasks=[task], agent_name="bench") as sessions:
            async def one() -> None:
                nonlocal failed
                s = sessions.session()
                await s.reset(task)
                for name, args in plan:
                    kind = "finish" if name == "finish" else "tool"
                    t0 = time.perf_counter()
                    obs, _, done, _ = await s.step(Action(kind, name, args))  # type: ignore[arg-type]
                    latencies.append(time.perf_counter() - t0)
                    failed += '"ok": false' in obs.text
                    if done:
                        break

            t0 = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for _ in range(n):
                    tg.start_soon(one)
            return time.perf_counter() - t0

    cpu0 = _cpu_s()
    wall = anyio.run(main)
    cpu = _cpu_s() - cpu0  # type: ignore[operator]
    return {"sessions": n, "steps": len(latencies), "failed_calls": failed,
            "wall_s": round(wall, 3), "steps_per_s": round(len(latencies) / wall, 1),
            "cpu_per_step_us": _per_step_us(cpu, len(latencies)), **percentiles(latencies)}



def over_openenv(n: int, k: int, db: Path) -> dict[str, Any]:
    from openenv.core.env_server.mcp_types import CallToolAction
    from openenv.core.mcp_client import MCPToolClient

    task = next(t for t in builtin_tasks() if t.id == TASK)
    plan = actions(task.user.person, k)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "coworkenv.cli", "serve-env", "--db",
                               str(db), "--port", str(port), "--max-sessions", str(n),
                               # (every client here is one address: the cap is the server's)
                               "--sessions-per-client", str(n), "--agent-name", "bench"],
                              stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("coworkenv serve-env did not start") from None
                time.sleep(0.2)
        latencies: list[float] = []
        failed = 0

        async def one() -> None:
            nonlocal failed
            async with MCPToolClient(base_url=f"http://127.0.0.1:{port}",
                                     message_timeout_s=600) as env:
                await env.reset(task_id=TASK)
                for name, args in plan:
                    t0 = time.perf_counter()
                    r = await env.step(CallToolAction(tool_name=name, arguments=args))
                    latencies.append(time.perf_counter() - t0)
                    failed += '"ok": false' in str(r.observation.result.get("text", ""))
                    if r.done:
                        break

        async def main() -> float:
            t0 = time.perf_counter()
            await asyncio.gather(*(one() for _ in range(n)))
            return time.perf_counter() - t0

        cpu0 = _cpu_s(server.pid)
        wall = asyncio.run(main())
        cpu1 = _cpu_s(server.pid)
    finally:
        server.terminate()
        server.wait(60)
    cpu = cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None
    return {"sessions": n, "steps": len(latencies), "failed_calls": failed,
            "wall_s": round(wall, 3), "steps_per_s": round(len(latencies) / wall, 1),
            "server_cpu_per_step_us": _per_step_us(cpu, len(latencies)),
            **percentiles(latencies)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=256, help="sessions at once")
    ap.add_argument("--steps", type=int, default=20, help="actions per session (then finish)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        load_in = load()
        local = in_process(args.sessions, args.steps, Path(tmp) / "in.db")
        load_env = load()
        served = over_openenv(args.sessions, args.steps, Path(tmp) / "env.db")
        # one session, nothing queued: what the server adds to each step
        alone_local = in_process(1, args.steps, Path(tmp) / "in1.db")
        alone_served = over_openenv(1, args.steps, Path(tmp) / "env1.db")
    cpu_local, cpu_served = local["cpu_per_step_us"], served["server_cpu_per_step_us"]
    print(json.dumps({
        "in_process": {**local, "load_before": load_in},
        "openenv": {**served, "load_before": load_env},
        "one_session": {"in_process": alone_local, "openenv": alone_served},
        "server_overhead_per_step": {
            "cpu_us": (round(cpu_served - cpu_local, 1)
                       if cpu_served is not None and cpu_local is not None else None),
            "one_session_p50_ms": round(alone_served["p50_ms"] - alone_local["p50_ms"], 3),
            "one_session_p99_ms": round(alone_served["p99_ms"] - alone_local["p99_ms"], 3),
            f"{args.sessions}_sessions_p50_ms": round(served["p50_ms"] - local["p50_ms"], 3),
            f"{args.sessions}_sessions_p99_ms": round(served["p99_ms"] - local["p99_ms"], 3)},
        "throughput_ratio_openenv_to_in_process": round(
            served["steps_per_s"] / local["steps_per_s"], 3),
        "targets": {"server_p50_overhead_ms": 1.0, "openenv_steps_per_s": 1000},
        "cores": os.cpu_count(),
    }, indent=2))


if __name__ == "__main__":
    main()
