"""coworkenv as a verifiers environment (``verifiers.v1``; the ``verifiers`` extra).

verifiers loads an environment by the id of an installed package that exports one
``Taskset`` and one ``Env`` (its ``__all__``): ours is ``coworkenv-verifiers`` (the
``coworkenv_verifiers`` package re-exports this module)::

    vf-eval coworkenv-verifiers --env.taskset.tasks '["examples/tasks"]' \\
        --env.taskset.db runs/vf.db --env.agent.harness.id null \\
        --env.agent.runtime.type subprocess -m MODEL ...

- **Taskset** (:class:`CoworkTaskset`): one verifiers task per coworkenv task (the task files
  or folders in ``tasks``; the built-in tasks when empty), keyed by the coworkenv task id.
- **Tools as a toolset**: each episode's tools (the task's workspace tools, ``send_message``,
  ``wait``, ``finish``; their own JSON schemas) are an MCP server over streamable HTTP that
  the environment runs for that episode (:func:`coworkenv.serve.mcp.episode_http`) and lends
  to the agent's harness; every call is the agent's action in the episode.
- **Env** (:class:`CoworkEnv`): an episode is a coworkenv :class:`~coworkenv.runtime.Session`
  recorded in the taskset's ``db`` (replay, the viewer, regrade and export work on it). Its
  opening (system prompt and task) is the verifiers task's system prompt and prompt; the agent
  runs until its harness stops (the model answers without a tool call, or a turn limit), then
  the episode is ended and graded.
- **Rewards**: the grade's ``score`` (weight 1) and its components ``completion``, ``safety``
  and ``robustness`` (weight 0, so a trace's reward is the grade's score), plus metrics
  ``passed`` and ``turns``, and the coworkenv run and episode (``info``).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import verifiers.v1 as vf
from pydantic import Field
from verifiers.v1.mcp.launch import SharedToolServer

from ..runtime.session import Sessions
from ..sim import builtin_tasks, load_tasks
from ..sim.task import Task

__all__ = ["CoworkData", "CoworkEnv", "CoworkEnvConfig", "CoworkTask", "CoworkTaskset",
           "CoworkTasksetConfig"]

TOOL_SERVER = "coworkenv"
"""The name of the episode's tool server, as harnesses see it."""


def _tasks(paths: list[str]) -> list[Task]:
    return load_tasks([Path(p) for p in paths]) if paths else builtin_tasks()


class CoworkTasksetConfig(vf.TasksetConfig):  # type: ignore[misc]
    tasks: list[str] = Field(default_factory=list)
    """Task files or folders (the built-in tasks when empty)."""
    db: str = "runs/verifiers.db"
    """The SQLite store the episodes are recorded in."""
    tools: list[str] | None = None
    """The tools offered (None: each task's own)."""
    run_id: str | None = None
    """The coworkenv run the episodes belong to (None: a new one)."""
    agent_name: str = "verifiers"
    """The agent's name in the store."""
    seed: int | None = None
    """Every episode's seed (None: one per episode, from the run, the task and its number)."""


class CoworkData(vf.TaskData):  # type: ignore[misc]
    task_id: str
    """The coworkenv task."""


class CoworkTask(vf.Task[CoworkData]):  # type: ignore[misc]
    @property
    def key(self) -> str:
        """The coworkenv task id: the prompt is filled in per episode, the task is not."""
        return str(self.data.task_id)


class CoworkTaskset(vf.Taskset[CoworkTask, CoworkTasksetConfig]):  # type: ignore[misc]
    def load(self) -> Any:
        for task in _tasks(self.config.tasks):
            yield CoworkTask(CoworkData(id=task.id, name=task.id, task_id=task.id,
                                        description=f"{task.family} ({task.difficulty})"),
                             self.config.task)


class CoworkEnvConfig(vf.EnvConfig):  # type: ignore[misc]
    agent: vf.AgentConfig = vf.AgentConfig()
    """The agent under test (``--env.agent.*``)."""


class CoworkEnv(vf.Env[CoworkEnvConfig]):  # type: ignore[misc]
    """Each verifiers episode is one recorded coworkenv episode (see the module doc)."""

    sessions: Sessions | None = None
    _stack: contextlib.AsyncExitStack | None = None

    async def start(self) -> None:
        cfg = self.config.taskset
        self._stack = contextlib.AsyncExitStack()
        self.sessions = await self._stack.enter_async_context(Sessions(
            cfg.db, tasks=_tasks(cfg.tasks), run_id=cfg.run_id, agent_name=cfg.agent_name,
            tools=cfg.tools, source="verifiers", wall_timeout_s=3600.0))

    async def stop(self) -> None:
        stack, self._stack, self.sessions = self._stack, None, None
        if stack is not None:
            await stack.aclose()

    async def run(self, task: Any, agents: Any) -> None:
        from .mcp import episode_http

        if self.sessions is None:  # (run outside serving(): open the store for this run)
            await self.start()
        assert self.sessions is not None
        task_id = task.data.task_id
        session = self.sessions.session()
        first = await session.reset(task_id, seed=self.config.taskset.seed)
        system = "\n\n".join(str(m.get("content") or "") for m in first.messages
                             if m.get("role") == "system")
        told = "\n\n".join(str(m.get("content") or "") for m in first.messages
                           if m.get("role") != "system")
        offered = self.sessions.offered(task_id)
        trace = None
        try:
            async with episode_http(session, offered, "\n\n".join([system, told])) as served:
                tools = {TOOL_SERVER: SharedToolServer(url=served.url, local=True,
                                                       external=True)}
                trace = await agents.agent.run(task.with_data(system_prompt=system,
                                                              prompt=told), tools=tools)
        finally:
            result = await session.close()
        if trace is None:
            return
        trace.record_reward("score", result.score)
        for name in ("completion", "safety", "robustness"):
            trace.record_reward(name, getattr(result, name), 0.0)
        trace.record_metric("passed", float(result.passed))
        trace.record_metric("turns", float(result.turns))
        trace.info["coworkenv"] = {"episode": result.episode_id, "run": self.sessions.run_id,
                                   "termination": result.termination,
                                   "db": str(self.config.taskset.db)}
