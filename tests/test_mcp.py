"""`coworkenv mcp`: one live episode served over MCP, driven by the official SDK's client as
the agent under test, over stdio and streamable HTTP; every call is the agent's event in the
log, and the episode is graded and recorded."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from coworkenv.sim import Task, builtin_tasks
from coworkenv.sim.task import ToolStep
from coworkenv.store import Reader

from .conftest import free_port, play_reference, wait_for_port

TASK = "share-onboarding"


def _task(task_id: str) -> Task:
    return next(t for t in builtin_tasks() if t.id == task_id)


async def drive(client: Any, task: Task) -> list[str]:
    """Play the reference solution as MCP tool calls; return each call's text."""
    async def act(name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        r = await client.call_tool(name, arguments)
        assert not r.is_error, r
        text = "\n".join(c.text for c in r.content)
        return text, "[the episode has ended]" in text

    return await play_reference(task, act)


async def agent_session(client: Any, task: Task) -> None:
    assert task.instruction in (client.instructions or "")  # the opening is the instructions
    names = {t.name for t in (await client.list_tools()).tools}
    assert {"send_message", "wait", "finish"} <= names
    assert {st.tool for st in task.reference if isinstance(st, ToolStep)} <= names
    said = await drive(client, task)
    assert said[-1].startswith('{"ok": true, "finished": true}')
    assert "[the episode has ended]" in said[-1]
    after = await client.call_tool("email_list", {})
    assert after.is_error and "episode_over" in after.content[0].text


def _recorded(db: Path, run_id: str, task: Task) -> None:
    with Reader(db) as r:
        (g,) = r.graded_episodes(run_id)
        assert g["score"] == 1.0 and g["termination"] == "agent_finished", g
        events = list(r.events(g["episode_id"]))
    calls = [e for e in events if e.actor == "agent" and e.kind == "tool_call"]
    assert len(calls) == sum(isinstance(st, ToolStep) for st in task.reference)


def test_stdio(tmp_path: Path) -> None:
    from mcp import Client, StdioServerParameters

    db, task = tmp_path / "m.db", _task(TASK)
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "coworkenv.cli", "mcp", "--task", TASK, "--db", str(db), "--run-id", "mcp-stdio"])

    async def main() -> None:
        async with Client(params) as client:
            await agent_session(client, task)

    anyio.run(main)
    for _ in range(100):  # the server records the episode as the client leaves
        if db.exists():
            with Reader(db) as r:
                if r.graded_episodes("mcp-stdio"):
                    break
        time.sleep(0.1)
    _recorded(db, "mcp-stdio", task)


def test_streamable_http(tmp_path: Path) -> None:
    from mcp import Client

    db, task, port = tmp_path / "h.db", _task(TASK), free_port()
    proc = subprocess.Popen([sys.executable, "-m", "coworkenv.cli", "mcp", "--task", TASK,
                             "--db", str(db), "--run-id", "mcp-http", "--transport", "http",
                             "--port", str(port)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_port(proc, port)

        async def main() -> None:
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                await agent_session(client, task)

        anyio.run(main)
        out, _ = proc.communicate(timeout=60)  # it stops by itself once the episode is over
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    assert "score 1.000" in out, out
    _recorded(db, "mcp-http", task)


def test_unknown_task_is_one_line(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "coworkenv.cli", "mcp", "--task", "nope",
                        "--db", str(tmp_path / "x.db")], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip() == "error: --task: no task 'nope' among the 20 loaded (built-in; " \
                               "give --tasks PATH for others)"
