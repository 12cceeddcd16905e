"""`coworkenv serve-env`: the tasks as an OpenEnv environment, driven by OpenEnv's own client
(``MCPToolClient``) with whole episodes at once; each is graded and recorded."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.mcp_client import MCPToolClient

from coworkenv.sim import Task, builtin_tasks
from coworkenv.sim.task import ToolStep
from coworkenv.store import Reader

from .conftest import free_port, play_reference, wait_for_port

ROOT = Path(__file__).resolve().parents[1]


async def episode(url: str, task: Task) -> dict[str, Any]:
    """One whole episode through OpenEnv's client: reset, list the tools, play the reference
    solution as MCP tool calls, read the state."""
    async with MCPToolClient(base_url=url, message_timeout_s=120) as env:
        first = await env.reset(task_id=task.id)
        opening = first.observation.result
        assert task.instruction in opening["text"] and not first.done
        names = {t.name for t in await env.list_tools()}
        assert {"send_message", "wait", "finish"} <= names
        assert {st.tool for st in task.reference if isinstance(st, ToolStep)} <= names
        rewards: list[float | None] = []
        last: Any = None

        async def act(name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
            nonlocal last
            last = await env.step(CallToolAction(tool_name=name, arguments=arguments))
            assert last.observation.error is None, last.observation.error
            rewards.append(last.reward)
            return str(last.observation.result["text"]), bool(last.done)

        await play_reference(task, act)
        state = await env.state()
        return {"task": task.id, "done": last.done, "reward": last.reward,
                "rewards": rewards, "state": state, "final": last.observation.result}


def test_openenv_clients_drive_whole_episodes_at_once(tmp_path: Path) -> None:
    db, port = tmp_path / "oe.db", free_port()
    tasks = builtin_tasks()[:8]
    proc = subprocess.Popen([sys.executable, "-m", "coworkenv.cli", "serve-env", "--db", str(db),
                             "--port", str(port), "--run-id", "openenv-test"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_port(proc, port)

        async def all_at_once() -> list[dict[str, Any]]:
            return await asyncio.gather(*(episode(f"http://127.0.0.1:{port}", t) for t in tasks))

        outcomes = asyncio.run(all_at_once())
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
    assert "run openenv-test finished" in out, out
    for o in outcomes:
        assert o["done"] and o["reward"] == 1.0, o
        assert all(r == 0.0 for r in o["rewards"][:-1]), o  # the grade comes at the end
        assert o["state"].episode_id.startswith(f"openenv-test:{o['task']}:")
        assert o["state"].step_count >= 1
    with Reader(db) as r:
        graded = r.graded_episodes("openenv-test")
    assert sorted(g["task_id"] for g in graded) == sorted(t.id for t in tasks)
    assert all(g["score"] == 1.0 for g in graded)


def test_reset_needs_a_known_task(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from coworkenv.serve.openenv import create_app

    app, _ = create_app(builtin_tasks(), tmp_path / "x.db")
    with TestClient(app) as client:  # (its lifespan opens and closes the sessions)
        r = client.post("/reset", json={"task_id": "nope"})
        assert r.status_code == 200, r.text
        error = r.json()["observation"]["error"]
        assert "task_id 'nope' is not among the server's 20 tasks" in error["message"]


def test_openenv_manifest_names_the_app() -> None:
    import yaml

    manifest = yaml.safe_load((ROOT / "openenv.yaml").read_text())
    module, attr = manifest["app"].split(":")
    assert (module, attr) == ("coworkenv.serve.openenv", "app") and manifest["name"]


def test_json_rpc_mcp_messages_reach_the_episode_after_reset(tmp_path: Path) -> None:
    """OpenEnv's other way in (JSON-RPC ``tools/list`` and ``tools/call`` as ``mcp`` messages on
    the session's WebSocket) serves the episode's own tools once reset has started it, and
    a call is the agent's action in that episode, as a ``CallToolAction`` step is."""
    import json

    from starlette.testclient import TestClient

    from coworkenv.serve.openenv import create_app

    task = next(t for t in builtin_tasks() if t.id == "share-onboarding")
    app, _ = create_app([task], tmp_path / "rpc.db", run_id="rpc")
    with TestClient(app) as client, client.websocket_connect("/ws") as ws:
        ws.send_text(json.dumps({"type": "reset", "data": {"task_id": task.id}}))
        assert task.instruction in ws.receive_json()["data"]["observation"]["result"]["text"]
        ws.send_text(json.dumps({"type": "mcp", "data": {"jsonrpc": "2.0", "id": 1,
                                                          "method": "tools/list"}}))
        tools = {t["name"]: t for t in ws.receive_json()["data"]["result"]["tools"]}
        assert {"directory_get_person", "docs_share", "finish"} <= set(tools)
        assert "person" in json.dumps(tools["directory_get_person"])
        ws.send_text(json.dumps({"type": "mcp", "data": {
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "directory_get_person", "arguments": {"person": "kai"}}}}))
        answer = json.dumps(ws.receive_json()["data"]["result"])
        assert "Kai" in answer, answer
        ws.send_text(json.dumps({"type": "mcp", "data": {
            "jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "finish", "arguments": {"summary": "stop"}}}}))
        ws.receive_json()
    with Reader(tmp_path / "rpc.db") as r:
        (episode,) = r.graded_episodes("rpc")
        kinds = [e.kind for e in r.events(episode["episode_id"])]
    assert {"tool_call", "tool_result", "finish"} <= set(kinds), sorted(set(kinds))
    assert episode["termination"] == "agent_finished", episode
