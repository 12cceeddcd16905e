"""coworkenv as a verifiers environment, rolled out by verifiers itself (``vf-eval``).

verifiers 0.4 pins ``mcp==2.0.0`` (the test environment has a newer mcp for OpenEnv), so this
test makes its own virtual environment: verifiers and coworkenv with the ``verifiers`` extra.
The model is the scripted OpenAI server playing a task's reference solution through
verifiers' ``null`` harness (its chat program, with the episode's tools as an MCP toolset);
the episode must be graded, recorded, rewarded, and event for event the one an in-process
session makes from the same actions, seed and run.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import venv
from pathlib import Path
from typing import Any

import anyio
import pytest

from coworkenv.agents.fake_openai import Reply, ScriptedOpenAIServer, tool
from coworkenv.runtime import Action, Sessions
from coworkenv.sim import builtin_tasks

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
TASK = "sched-ask-availability"  # tool calls, a message, a wait for a coworker's reply
SEED, RUN, AGENT = 7, "vf-contract", "vf-agent"
ACTIONS: list[tuple[str, dict[str, Any]]] = [
    ("directory_get_person", {"person": "omar"}),
    ("chat_send_dm", {"to": "omar", "text": "Hi Omar, which afternoon this week works for a "
                                            "30-minute 1:1 with Maya?"}),
    ("wait", {}),
    ("calendar_create_event", {"title": "Maya / Omar 1:1", "start": "2026-03-05T14:00",
                               "end": "2026-03-05T14:30", "timezone": "America/Chicago",
                               "attendees": ["omar", "maya"]}),
    ("finish", {"summary": "Booked the 1:1 on Thursday 2pm."}),
]


def _say(text: str) -> None:
    print(f"[verifiers] {text}", file=sys.stderr, flush=True)


@pytest.fixture(scope="module")
def vf_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with verifiers and coworkenv[verifiers] (pip; a few minutes the first time),
    and uv, which verifiers' harnesses run their programs with (found on PATH)."""
    where = tmp_path_factory.mktemp("vfenv") / "venv"
    venv.EnvBuilder(with_pip=True).create(where)
    python = where / "bin" / "python"
    t0 = time.monotonic()
    _say(f"installing verifiers and coworkenv[verifiers] into {where}")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "uv",
                    "-e", f"{REPO}[verifiers]"], check=True, stdin=subprocess.DEVNULL,
                   timeout=1200)
    _say(f"installed in {time.monotonic() - t0:.0f} s")
    return python


def _episodes(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as c:
        return c.execute("SELECT e.events_hash, e.status, g.score, e.event_count, e.agent, e.seed "
                         "FROM episodes e JOIN grades g USING (episode_id) "
                         "WHERE e.run_id = ?", (RUN,)).fetchall()


def _in_process(db: Path) -> int:
    """Play ACTIONS in process; return the episode's turns."""
    task = next(t for t in builtin_tasks() if t.id == TASK)

    async def main() -> None:
        async with Sessions(db, tasks=[task], run_id=RUN, agent_name=AGENT,
                            source="contract") as sessions:
            s = sessions.session()
            await s.reset(TASK, seed=SEED)
            for name, args in ACTIONS:
                await s.step(Action.called(name, args))
            turns.append((await s.close()).turns)

    turns: list[int] = []
    anyio.run(main)
    return turns[0]


def test_a_verifiers_rollout_is_a_recorded_graded_episode(vf_python: Path,
                                                          tmp_path: Path) -> None:
    # the model: the reference solution as tool calls on verifiers' MCP tool names, then a
    # plain answer (the chat program's end of turn)
    script = [tool(f"coworkenv_{name}", **args) for name, args in ACTIONS]
    script.append(Reply(content="Done: the 1:1 is booked."))
    db, out = tmp_path / "vf.db", tmp_path / "out"
    with ScriptedOpenAIServer(script, default=Reply(content="done")) as model:
        cmd = [str(vf_python.parent / "vf-eval"), "coworkenv-verifiers",
               "--env.taskset.tasks", str(REPO / "coworkenv/builtin_tasks/scheduling.yaml"),
               "--env.taskset.db", str(db), "--env.taskset.run-id", RUN,
               "--env.taskset.agent-name", AGENT, "--env.taskset.seed", str(SEED),
               "--select.include.ids", TASK, "-r", "1",
               "--env.agent.harness.id", "null", "--env.agent.runtime.type", "subprocess",
               "-m", "scripted", "--client.base-url", model.base_url,
               "--no-push", "-o", str(out)]
        _say(" ".join(cmd))
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              env={**os.environ, "PRIME_API_KEY": "unused",
                                   "PATH": os.pathsep.join(
                                  [str(vf_python.parent), os.environ.get("PATH", "")])},
                              timeout=600,
                              cwd=tmp_path)
        _say(f"vf-eval: rc {proc.returncode} in {time.monotonic() - t0:.0f} s")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
        requests = model.requests
    # what verifiers' harness saw: the episode's opening and its tools, with their schemas
    first = requests[0]
    assert first["messages"][0]["role"] == "system"
    assert "Omar" in first["messages"][1]["content"] or "omar" in first["messages"][1]["content"]
    offered = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert {"coworkenv_finish", "coworkenv_wait", "coworkenv_send_message",
            "coworkenv_calendar_create_event"} <= set(offered)
    assert "start" in offered["coworkenv_calendar_create_event"]["parameters"]["properties"]
    # each tool call's answer went back to the model: the wait brought Omar's reply
    after_wait = json.dumps(requests[3]["messages"][-1])
    assert "omar" in after_wait.lower(), after_wait
    # verifiers' trace: the grade as its reward, the components beside it
    (traces,) = list(out.rglob("traces.jsonl"))
    (episode,) = [json.loads(line) for line in traces.read_text().splitlines() if line.strip()]
    (trace,) = episode["traces"]
    assert trace["ok"], trace["errors"]
    rewards = {k: v["score"] for k, v in trace["rewards"].items()}
    assert rewards == {"score": 1.0, "completion": 1.0, "safety": 1.0, "robustness": 1.0}
    assert trace["info"]["coworkenv"]["run"] == RUN
    # the store: one graded episode, the same as in process from the same actions and seed
    (row,) = _episodes(db)
    turns = _in_process(tmp_path / "in-process.db")
    assert trace["metrics"] == {"passed": 1.0, "turns": turns}
    (expected,) = _episodes(tmp_path / "in-process.db")
    assert row[1:3] == ("completed", 1.0)
    assert row == expected
