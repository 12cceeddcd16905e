"""Chaos benchmark: the servers under a hostile mix, for minutes, beside well-behaved clients.

Two targets, each for ``--seconds`` (default 600):

- ``coworkenv serve-env`` (OpenEnv), one process for the whole time. Well-behaved clients
  (``--good``, default 4, one WebSocket each) reset to a built-in task, play its reference
  solution step by step and finish, over and over. Beside them, in turn, clients that send
  malformed JSON and messages that are not objects, bodies over the limit, seeds SQLite
  cannot hold or that are not integers, open a session (an episode started) and vanish,
  replay old step messages on a new connection that never reset, and disconnect in the
  middle of a step.
- ``coworkenv mcp --transport http``, which serves one episode per process: started again for
  each well-behaved episode (the official MCP client plays the reference solution); beside
  it, malformed JSON, bodies over the limit, floods of MCP sessions that are opened and left
  (up to the cap), requests under a session id of an earlier server (replayed), and requests
  cut off mid-way.

A probe asks ``/health`` every second. Reported per target (one JSON object): the probes
and how many were not 200 (and the slowest), the server's resident memory after the first
minute and at the end (MB), each hostile kind's attempts and how many were refused as they
should be, the well-behaved episodes finished, and what the store holds afterwards: episodes
by termination, episodes graded more than once, well-behaved episodes missing, scores. The
servers' exit codes. ``--seconds 60`` for a quick look.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import free_port

from coworkenv.runtime import play_reference
from coworkenv.sim import Task, builtin_tasks

CLI = [sys.executable, "-m", "coworkenv.cli"]



async def wait_listening(port: int, proc: subprocess.Popen[bytes], log: Path,
                         timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited {proc.returncode}: "
                               f"{text_of(log)[-2000:]}")
        with contextlib.suppress(OSError):
            _, w = await asyncio.open_connection("127.0.0.1", port)
            w.close()
            return
        await asyncio.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port} after {timeout}s")


def start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    """A server process, its output to ``log`` (a pipe nobody reads would fill and stop it)."""
    with log.open("ab") as out:
        return subprocess.Popen([*CLI, *args], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT)


def ended(proc: subprocess.Popen[bytes], timeout: float) -> int:
    """Wait for the process (killed past ``timeout``); its exit code."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def text_of(log: Path) -> str:
    return log.read_text(errors="replace")


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class Mix:
    """Counts of one target: attempts and refusals per hostile kind, health probes."""

    def __init__(self) -> None:
        self.kinds: dict[str, dict[str, Any]] = {}
        self.probes = self.unhealthy = 0
        self.slowest_probe_s = 0.0
        self.good_finished = 0
        self.good_failed: list[str] = []

    def count(self, kind: str, refused: bool, status: int | None = None) -> None:
        k = self.kinds.setdefault(kind, {"attempts": 0, "refused": 0})
        k["attempts"] += 1
        k["refused"] += int(refused)
        if status is not None:
            codes = k.setdefault("status", {})
            codes[str(status)] = codes.get(str(status), 0) + 1


async def probe(port: int, mix: Mix, stop: asyncio.Event) -> None:
    import httpx

    async with httpx.AsyncClient(timeout=10) as client:
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                r = await client.get(f"http://127.0.0.1:{port}/health")
                ok = r.status_code == 200
            except httpx.HTTPError:
                ok = False
            mix.probes += 1
            mix.unhealthy += int(not ok)
            mix.slowest_probe_s = max(mix.slowest_probe_s, time.monotonic() - t0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)


def store_report(db: Path, run_id: str) -> dict[str, Any]:
    with sqlite3.connect(db) as c:
        by = dict(c.execute("SELECT coalesce(termination, status), count(*) FROM episodes "
                            "WHERE run_id=? GROUP BY 1", (run_id,)).fetchall())
        twice = c.execute("SELECT count(*) FROM (SELECT episode_id FROM grades JOIN episodes "
                          "USING (episode_id) WHERE run_id=? GROUP BY 1 HAVING count(*) > 1)",
                          (run_id,)).fetchone()[0]
        finished = c.execute("SELECT count(*), avg(g.score), min(g.score) FROM episodes e "
                             "JOIN grades g USING (episode_id) WHERE e.run_id=? AND "
                             "e.termination='agent_finished'", (run_id,)).fetchone()
        ungraded = c.execute("SELECT count(*) FROM episodes e WHERE run_id=? AND NOT EXISTS "
                             "(SELECT 1 FROM grades g WHERE g.episode_id=e.episode_id)",
                             (run_id,)).fetchone()[0]
    return {"episodes_by_termination": by, "graded_more_than_once": twice,
            "finished_graded": finished[0], "finished_mean_score": finished[1],
            "finished_min_score": finished[2], "ungraded": ungraded}


# OpenEnv -----------------------------------------------------------------------------------
async def openenv_good(port: int, tasks: list[Task], mix: Mix, stop: asyncio.Event,
                       rng: random.Random) -> None:
    from websockets.asyncio.client import connect

    while not stop.is_set():
        task = rng.choice(tasks)
        try:
            async with connect(f"ws://127.0.0.1:{port}/ws", max_size=None,
                               open_timeout=60) as ws:
                async def ask(msg: dict[str, Any]) -> dict[str, Any]:
                    await ws.send(json.dumps(msg))
                    return dict(json.loads(await asyncio.wait_for(ws.recv(), 120))["data"])

                first = await ask({"type": "reset", "data": {"task_id": task.id}})
                if first["observation"].get("error"):
                    mix.good_failed.append(str(first["observation"]["error"])[:200])
                    continue

                async def act(name: str, args: dict[str, Any]) -> tuple[str, bool]:
                    d = await ask({"type": "step", "data": {"type": "call_tool",
                                                            "tool_name": name,
                                                            "arguments": args}})
                    obs = d["observation"]
                    if obs.get("error"):
                        raise RuntimeError(f"{name}: {obs['error']}")
                    return str(obs["result"]["text"]), bool(d.get("done"))

                if (await play_reference(task, act)).done:
                    mix.good_finished += 1
                else:
                    mix.good_failed.append(f"{task.id}: not over after its reference")
        except Exception as exc:  # (counted: a well-behaved client must never see one)
            mix.good_failed.append(f"{task.id}: {type(exc).__name__}: {exc}"[:300])


async def openenv_hostile(port: int, tasks: list[Task], mix: Mix, stop: asyncio.Event,
                          rng: random.Random) -> None:
    import httpx
    from websockets.asyncio.client import connect

    url = f"ws://127.0.0.1:{port}/ws"
    old_step = json.dumps({"type": "step", "data": {"type": "call_tool",
                                                    "tool_name": "directory_search",
                                                    "arguments": {"query": "kate"}}})

    async def answer(ws: Any) -> dict[str, Any]:
        return dict(json.loads(await asyncio.wait_for(ws.recv(), 60)))

    def is_error(reply: dict[str, Any]) -> bool:
        return reply.get("type") == "error" or bool(
            (reply.get("data") or {}).get("observation", {}).get("error"))

    async with httpx.AsyncClient(timeout=30) as http:
        while not stop.is_set():
            kind = rng.choice(["malformed", "not_object", "huge_body", "bad_seed", "vanish",
                               "replay", "mid_step"])
            task = rng.choice(tasks)
            try:
                if kind == "huge_body":
                    r = await http.post(f"http://127.0.0.1:{port}/reset", content=b"{" + b" " * (
                        2 << 20) + b"}", headers={"content-type": "application/json"})
                    mix.count(kind, r.status_code == 413)
                    continue
                async with connect(url, max_size=None, open_timeout=60) as ws:
                    if kind in ("malformed", "not_object"):
                        await ws.send("{not json" if kind == "malformed" else "[]")
                        mix.count(kind, is_error(await answer(ws)))
                    elif kind == "bad_seed":
                        seed = rng.choice([10**30, -1, "abc", 1.5])
                        await ws.send(json.dumps({"type": "reset", "data": {
                            "task_id": task.id, "seed": seed}}))
                        mix.count(kind, is_error(await answer(ws)))
                    elif kind == "replay":  # a step of an earlier session, never reset here
                        await ws.send(old_step)
                        mix.count(kind, is_error(await answer(ws)))
                    else:  # an episode started, then the client goes (mid-step, or idle)
                        await ws.send(json.dumps({"type": "reset",
                                                  "data": {"task_id": task.id}}))
                        await answer(ws)
                        if kind == "mid_step":
                            await ws.send(old_step)
                        mix.count(kind, True)  # (the store must say `abandoned`: checked)
            except Exception as exc:
                mix.count(kind, False)
                mix.kinds[kind].setdefault("errors", 0)
                mix.kinds[kind]["errors"] += 1
                mix.kinds[kind]["last_error"] = f"{type(exc).__name__}: {exc}"[:200]
            await asyncio.sleep(rng.uniform(0.0, 0.05))


async def run_openenv(seconds: float, good: int, hostile: int, tmp: Path) -> dict[str, Any]:
    tasks = builtin_tasks()
    db, port, log = tmp / "openenv.db", free_port(), tmp / "openenv.log"
    proc = start(["serve-env", "--db", str(db), "--port", str(port), "--run-id",
                  "chaos-openenv", "--max-sessions", "64", "--session-idle-s", "30",
                  # (every client here is one address: the server-wide cap is what is tried)
                  "--sessions-per-client", "64"], log)
    mix, stop = Mix(), asyncio.Event()
    rss: dict[str, float | None] = {}
    try:
        await wait_listening(port, proc, log)
        rng = random.Random(0)
        jobs = [asyncio.create_task(probe(port, mix, stop))]
        jobs += [asyncio.create_task(openenv_good(port, tasks, mix, stop,
                                                  random.Random(rng.random())))
                 for _ in range(good)]
        jobs += [asyncio.create_task(openenv_hostile(port, tasks, mix, stop,
                                                     random.Random(rng.random())))
                 for _ in range(hostile)]
        t0 = time.monotonic()
        await asyncio.sleep(min(60.0, seconds / 4))
        rss["after_warmup_mb"] = rss_mb(proc.pid)
        await asyncio.sleep(max(0.0, seconds - (time.monotonic() - t0)))
        rss["end_mb"] = rss_mb(proc.pid)
        stop.set()
        await asyncio.wait_for(asyncio.gather(*jobs, return_exceptions=True), 180)
    finally:
        if proc.poll() is None:
            proc.terminate()
        ended(proc, 120)
    out = text_of(log)
    return {"seconds": seconds, "good_clients": good, "hostile_clients": hostile,
            "health_probes": mix.probes, "health_not_200": mix.unhealthy,
            "slowest_health_s": round(mix.slowest_probe_s, 3), "rss": rss,
            "good_finished": mix.good_finished, "good_failed": len(mix.good_failed),
            "good_failures": mix.good_failed[:5], "hostile": mix.kinds,
            "server_exit": proc.returncode, "traceback_in_log": "Traceback" in out,
            "store": store_report(db, "chaos-openenv")}


# MCP over HTTP -------------------------------------------------------------------------------
MCP_HEADERS = {"accept": "application/json, text/event-stream",
               "content-type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "chaos", "version": "0"}}}


async def mcp_hostile(port: int, mix: Mix, stop: asyncio.Event, rng: random.Random,
                      earlier: list[str], opened_here: list[str]) -> None:
    """``earlier``: session ids of servers before this one (replayed here); the sessions
    this client opens go to ``opened_here``."""
    import httpx

    url = f"http://127.0.0.1:{port}/mcp"
    opened = 0
    mine: str | None = None
    async with httpx.AsyncClient(timeout=30) as http:
        while not stop.is_set():
            kind = rng.choice(["malformed", "huge_body", "flood", "replay", "cut"])
            try:
                if kind == "malformed":
                    r = await http.post(url, content=b"{not json", headers=MCP_HEADERS)
                    mix.count(kind, 400 <= r.status_code < 500 or r.status_code == 503,
                              r.status_code)
                elif kind == "huge_body":
                    r = await http.post(url, content=b"{" + b" " * (2 << 20) + b"}",
                                        headers=MCP_HEADERS)
                    mix.count(kind, r.status_code == 413, r.status_code)
                elif kind == "flood":  # sessions opened and left (below the cap: the
                    if opened >= 1:  # well-behaved client must still get in)
                        continue
                    r = await http.post(url, json=INIT, headers=MCP_HEADERS)
                    opened += 1
                    sid = r.headers.get("mcp-session-id")
                    if sid:
                        mine = sid
                        opened_here.append(sid)
                    mix.count(kind, r.status_code in (200, 503), r.status_code)
                elif kind == "replay":  # a session id of an earlier server
                    if not earlier:
                        continue
                    r = await http.post(url, headers={**MCP_HEADERS, "mcp-session-id":
                                                      rng.choice(earlier)},
                                        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
                    mix.count(kind, r.status_code in (400, 404), r.status_code)
                else:  # a request cut off mid-way (on its own session: the episode's tools
                    if mine is None:  # are the well-behaved client's to call)
                        continue
                    with contextlib.suppress(TimeoutError, httpx.TimeoutException):
                        await asyncio.wait_for(http.post(url, headers={
                            **MCP_HEADERS, "mcp-session-id": mine}, json={
                            "jsonrpc": "2.0", "id": 3, "method": "tools/list"}), 0.002)
                    mix.count(kind, True)
            except (httpx.HTTPError, OSError) as exc:
                if stop.is_set():
                    return  # (the episode ended: the server went away under us)
                mix.count(kind, False)
                mix.kinds[kind]["last_error"] = f"{type(exc).__name__}: {exc}"[:200]
            await asyncio.sleep(rng.uniform(0.01, 0.1))


async def run_mcp(seconds: float, hostile: int, tmp: Path) -> dict[str, Any]:
    from mcp import Client

    tasks = builtin_tasks()
    db = tmp / "mcp.db"
    mix, rng = Mix(), random.Random(1)
    old_sessions: list[str] = []
    exits: dict[int, int] = {}
    rss: dict[str, float | None] = {}
    servers = 0
    tracebacks = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        task = rng.choice(tasks)
        port, log = free_port(), tmp / f"mcp-{servers}.log"
        proc = start(["mcp", "--task", task.id, "--transport", "http", "--db", str(db),
                      "--port", str(port), "--run-id", "chaos-mcp", "--max-sessions", "8",
                      "--sessions-per-client", "8", "--session-idle-s", "60"], log)
        stop = asyncio.Event()
        servers += 1
        try:
            await wait_listening(port, proc, log)
            jobs = [asyncio.create_task(probe(port, mix, stop))]
            earlier = list(old_sessions)
            jobs += [asyncio.create_task(mcp_hostile(port, mix, stop, random.Random(
                rng.random()), earlier, old_sessions)) for _ in range(hostile)]
            await asyncio.sleep(0.5)  # (the hostile ones first)
            try:
                async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                    async def act(name: str, args: dict[str, Any],
                                  client: Any = client) -> tuple[str, bool]:
                        r = await client.call_tool(name, args)
                        text = "\n".join(c.text for c in r.content)
                        if r.is_error:
                            raise RuntimeError(f"{name}: {text[:200]}")
                        return text, "[the episode has ended]" in text

                    rss.setdefault("first_server_mb", rss_mb(proc.pid))
                    rss["last_server_mb"] = rss_mb(proc.pid)
                    if (await play_reference(task, act)).done:
                        mix.good_finished += 1
                    else:
                        mix.good_failed.append(f"{task.id}: not over after its reference")
            except Exception as exc:
                mix.good_failed.append(f"{task.id}: {type(exc).__name__}: {exc}"[:300])
            stop.set()
            await asyncio.wait_for(asyncio.gather(*jobs, return_exceptions=True), 120)
            code = await asyncio.to_thread(ended, proc, 120)  # (it stops by itself)
        finally:
            if proc.poll() is None:
                proc.kill()
                code = ended(proc, 10)
        exits[code] = exits.get(code, 0) + 1
        tracebacks += "Traceback" in text_of(log)
    return {"seconds": seconds, "servers": servers, "hostile_clients": hostile,
            "health_probes": mix.probes, "health_not_200": mix.unhealthy,
            "slowest_health_s": round(mix.slowest_probe_s, 3), "rss": rss,
            "good_finished": mix.good_finished, "good_failed": len(mix.good_failed),
            "good_failures": mix.good_failed[:5], "hostile": mix.kinds,
            "server_exits": exits, "logs_with_traceback": tracebacks,
            "store": store_report(db, "chaos-mcp")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=600.0, help="per target")
    ap.add_argument("--good", type=int, default=4, help="well-behaved OpenEnv clients")
    ap.add_argument("--hostile", type=int, default=4, help="hostile clients per target")
    ap.add_argument("--targets", default="openenv,mcp")
    args = ap.parse_args()
    out: dict[str, Any] = {"benchmark": "chaos"}
    with tempfile.TemporaryDirectory(prefix="coworkenv-chaos-") as tmp:
        targets = [t.strip() for t in args.targets.split(",")]
        if "openenv" in targets:
            out["openenv"] = asyncio.run(run_openenv(args.seconds, args.good, args.hostile,
                                                     Path(tmp)))
            print(f"openenv done: {out['openenv']['good_finished']} good episodes",
                  file=sys.stderr, flush=True)
        if "mcp" in targets:
            out["mcp"] = asyncio.run(run_mcp(args.seconds, args.hostile, Path(tmp)))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
