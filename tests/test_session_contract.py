"""One session contract, four ways in: the same scripted actions (a task's reference solution,
with a fixed seed) give the same episode, event for event, whether the agent seat is held in
process (``Sessions``), over MCP (stdio and streamable HTTP) or over OpenEnv (WebSocket)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from coworkenv.runtime import Action, Sessions
from coworkenv.sim import Task, builtin_tasks

from .conftest import free_port, play_reference, wait_for_port

TASK = "sched-ask-availability"  # tool calls, a message, a wait for a coworker's reply
SEED, RUN, AGENT = 7, "contract", "contract-agent"


def _task() -> Task:
    return next(t for t in builtin_tasks() if t.id == TASK)


def _episode(db: Path) -> tuple[str, str, float, int]:
    with sqlite3.connect(db) as c:
        (row,) = c.execute("SELECT e.events_hash, e.status, g.score, e.event_count FROM "
                           "episodes e JOIN grades g USING (episode_id) WHERE e.run_id = ?",
                           (RUN,)).fetchall()
    return row  # type: ignore[no-any-return]


def in_process(db: Path) -> None:

    async def main() -> None:
        async with Sessions(db, tasks=[_task()], run_id=RUN, agent_name=AGENT,
                            source="contract") as sessions:
            s = sessions.session()
            await s.reset(TASK, seed=SEED)

            async def act(name: str, args: dict[str, Any]) -> tuple[str, bool]:
                obs, _, done, _ = await s.step(Action.called(name, args))
                return obs.text, done

            await play_reference(_task(), act)

    anyio.run(main)


def over_mcp(db: Path, transport: str) -> None:
    from mcp import Client, StdioServerParameters

    args = ["-m", "coworkenv.cli", "mcp", "--task", TASK, "--db", str(db), "--run-id", RUN,
            "--agent-name", AGENT, "--seed", str(SEED)]

    async def drive(client: Any) -> None:
        async def act(name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
            r = await client.call_tool(name, arguments)
            text = "\n".join(c.text for c in r.content)
            if name == "send_message" or name == "finish":  # (the acknowledgement first)
                text = text.split("\n", 1)[1] if "\n" in text else ""
            return text, "[the episode has ended]" in text

        await play_reference(_task(), act)

    if transport == "stdio":
        async def main() -> None:
            async with Client(StdioServerParameters(command=sys.executable, args=args)) as c:
                await drive(c)
        anyio.run(main)
        return
    port = free_port()
    proc = subprocess.Popen([sys.executable, *args, "--transport", "http", "--port", str(port)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_port(proc, port)

        async def main() -> None:
            async with Client(f"http://127.0.0.1:{port}/mcp") as c:
                await drive(c)
        anyio.run(main)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()


def over_openenv(db: Path) -> None:
    from openenv.core.env_server.mcp_types import CallToolAction
    from openenv.core.mcp_client import MCPToolClient

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "coworkenv.cli", "serve-env", "--db",
                             str(db), "--port", str(port), "--run-id", RUN, "--agent-name",
                             AGENT], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_port(proc, port)

        async def main() -> None:
            async with MCPToolClient(base_url=f"http://127.0.0.1:{port}",
                                     message_timeout_s=120) as env:
                await env.reset(task_id=TASK, seed=SEED)

                async def act(name: str, args: dict[str, Any]) -> tuple[str, bool]:
                    r = await env.step(CallToolAction(tool_name=name, arguments=args))
                    return str(r.observation.result["text"]), bool(r.done)

                await play_reference(_task(), act)
        anyio.run(main)
    finally:
        proc.terminate()
        proc.communicate(timeout=60)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, float, int]:
    db = tmp_path_factory.mktemp("contract") / "in-process.db"
    in_process(db)
    return _episode(db)


@pytest.mark.parametrize("way", ["mcp-stdio", "mcp-http", "openenv"])
def test_the_same_actions_give_the_same_episode(way: str, tmp_path: Path,
                                                reference: tuple[str, str, float, int]) -> None:
    db = tmp_path / f"{way}.db"
    if way == "openenv":
        over_openenv(db)
    else:
        over_mcp(db, way.removeprefix("mcp-"))
    events_hash, status, score, count = _episode(db)
    assert (status, score) == ("completed", 1.0) == reference[1:3]
    assert (events_hash, count) == (reference[0], reference[3]), way
