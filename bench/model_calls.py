"""Model calls through the process's client pool, against a server that answers after a fixed
latency (the package's scripted OpenAI-compatible server, ``--latency`` seconds an answer, in a
process of its own so that its CPU is not the client's).

For each bound on calls in flight (``--bounds``), twice as many callers as the bound make
agent-sized model calls (``Endpoint.complete``: a system prompt, the task, a tool call and its
result, a coworker's message, and the agent's functions) for ``--seconds``, after one round to
open the connections. Printed as JSON, per bound, medians over ``--repeats``: calls/s, the
ideal (bound / latency), their ratio, the most requests the server held at once (the bound
holds: it equals the bound), and the client's and server's CPU milliseconds a call. Then the
same with ``--endpoints`` endpoints of different model names (as several seats or simulations
of one process are) and the bound each: the server still sees one bound, not their sum.
Target: calls/s >= 0.9 x ideal up to 256 in flight.

Client and server share this machine's cores, so a row also gives their CPU ceiling: cores /
(client + server CPU seconds a call), the most calls/s the two could make here if nothing
waited; ``bound_by`` says which of the ideal and that ceiling is lower, and ``of_reachable``
is calls/s over the lower. Where the ceiling is below 0.9 x ideal, the target cannot be met on
this machine by any client (``target_reachable_here``: false): on 2 cores, at 1.3-1.5 ms of
client and 1.2-1.5 ms of server CPU a call, the ceiling is 670-790 calls/s against the 1,152
that 256 in flight asks for (2026-12-07: 538 calls/s at 256, 0.80 of that ceiling).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coworkenv.agents import Endpoint, agent_tools
from coworkenv.agents.chat import opening

TICKS = os.sysconf("SC_CLK_TCK")


def agent_request(model: str) -> dict[str, Any]:
    """What an agent sends a few turns into a task (about 14 KB of JSON)."""
    messages = opening({"me": {"name": "Avery", "email": "avery@northwind.example",
                               "role": "operations assistant"}, "start": "Mon 09:00",
                        "from": "kai", "instruction": "My laptop died this morning; can you "
                        "get me a loaner and make sure IT knows it is urgent?"})
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_0", "type": "function", "function": {
                "name": "tickets_search", "arguments": json.dumps({"status": "open"})}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": json.dumps({"tickets": [
            {"id": "T1", "title": "Laptop does not boot", "status": "open",
             "requester": "kai", "priority": "normal"}]})},
        {"role": "user", "content": "[message from sam] I can bring a loaner at 11."}]
    return {"model": model, "messages": messages, "tools": agent_tools(),
            "tool_choice": "auto", "temperature": 0.0, "max_tokens": 512, "seed": 7}


class Server:
    """The scripted server in a child process: its base URL, stats and CPU time."""

    def __init__(self, latency: float) -> None:
        self.proc = subprocess.Popen(
            # (-W: runpy's note that the package imported the module before running it)
            [sys.executable, "-W", "ignore::RuntimeWarning", "-m", "coworkenv.agents.fake_openai",
             "--latency", str(latency)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            cwd=Path(__file__).resolve().parents[1])
        assert self.proc.stdout is not None
        self.base_url = self.proc.stdout.readline().strip()

    def stats(self, reset: bool = False) -> dict[str, int]:
        url = self.base_url.removesuffix("/v1") + "/_scripted/stats" + ("?reset=1" if reset else "")
        with urllib.request.urlopen(url) as r:
            return json.loads(r.read())  # type: ignore[no-any-return]

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def measure(server: Server, bound: int, endpoints: int, seconds: float) -> dict[str, Any]:
    """One run: ``endpoints`` endpoints of one server (``bound`` each), 2 x bound callers."""
    eps = [Endpoint(server.base_url, f"model-{i}", max_concurrency=bound, timeout=60)
           for i in range(endpoints)]
    requests = [agent_request(ep.model) for ep in eps]
    callers = 2 * bound
    out: dict[str, Any] = {}

    async def caller(i: int, until: float) -> None:
        ep, request = eps[i % endpoints], requests[i % endpoints]
        while time.perf_counter() < until:
            await ep.complete(request)
            out["calls"] += 1

    async def main() -> None:
        async with anyio.create_task_group() as tg:  # (opens the connections)
            for i in range(bound * endpoints):
                tg.start_soon(eps[i % endpoints].complete, requests[i % endpoints])
        server.stats(reset=True)
        out["calls"], cpu0, srv0 = 0, time.process_time(), server.cpu_s()
        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for i in range(callers):
                tg.start_soon(caller, i, t0 + seconds)
        wall = time.perf_counter() - t0
        out.update(wall=wall, cpu=time.process_time() - cpu0, server_cpu=server.cpu_s() - srv0)

    anyio.run(main)
    return {**out, "max_active": server.stats()["max_active"]}


def row(server: Server, bound: int, endpoints: int, seconds: float, repeats: int,
        latency: float) -> dict[str, Any]:
    runs = [measure(server, bound, endpoints, seconds) for _ in range(repeats)]
    rate = statistics.median(r["calls"] / r["wall"] for r in runs)
    ideal = bound / latency
    client = statistics.median(r["cpu"] / r["calls"] for r in runs)
    server_cpu = statistics.median(r["server_cpu"] / r["calls"] for r in runs)
    ceiling = (os.cpu_count() or 1) / (client + server_cpu)
    return {"bound": bound, "endpoints": endpoints, "callers": 2 * bound,
            "calls_per_s": round(rate, 1), "ideal_per_s": round(ideal, 1),
            "ratio": round(rate / ideal, 3),
            "server_max_active": max(r["max_active"] for r in runs),
            "client_cpu_ms_per_call": round(1000 * client, 3),
            "server_cpu_ms_per_call": round(1000 * server_cpu, 3),
            "cpu_ceiling_per_s": round(ceiling, 1),
            "bound_by": "latency" if ideal <= ceiling else "cpu",
            "of_reachable": round(rate / min(ideal, ceiling), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bounds", default="1,4,16,64,128,256")
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--endpoints", type=int, default=4)
    ap.add_argument("--shared-bound", type=int, default=64)
    a = ap.parse_args()
    load = [round(x, 2) for x in os.getloadavg()]
    server = Server(a.latency)
    try:
        rows = [row(server, int(b), 1, a.seconds, a.repeats, a.latency)
                for b in a.bounds.split(",")]
        shared = row(server, a.shared_bound, a.endpoints, a.seconds, a.repeats, a.latency)
    finally:
        server.close()
    print(json.dumps({
        "latency_s": a.latency, "seconds": a.seconds, "repeats": a.repeats,
        "cpus": os.cpu_count(), "load_before": load,
        "rows": rows,
        "shared": {**shared, "bounds_if_separate": a.endpoints * a.shared_bound},
        "target_met": all(r["ratio"] >= 0.9 for r in rows),
        "target_reachable_here": all(0.9 * r["ideal_per_s"] <= r["cpu_ceiling_per_s"]
                                     for r in rows)}, indent=1))


if __name__ == "__main__":
    main()
