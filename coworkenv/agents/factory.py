"""Building the actors of an episode from an ``--agent`` value and a task."""

from __future__ import annotations

from collections.abc import Callable

from ..sim.actor import Actor
from ..sim.task import Task
from .oracle import NoopAgent, OracleAgent
from .scripted import ScriptedPerson

AgentFactory = Callable[[Task], Actor]

TEACHERS = {"oracle"}


def agent_factory(spec: str) -> AgentFactory:
    """``oracle`` or ``noop`` (model-backed agents are added by their own modules)."""
    if spec == "oracle":
        return lambda task: OracleAgent(list(task.reference))
    if spec == "noop":
        return lambda task: NoopAgent()
    raise ValueError(f"--agent: expected 'oracle' or 'noop', got {spec!r}")


def scripted_cast(task: Task) -> dict[str, Actor]:
    """The user and coworkers of a task as scripted, deterministic people."""
    tz = {p.id: p.timezone for p in task.seed.people}
    cast: dict[str, Actor] = {}
    for i, member in enumerate(task.cast()):
        cast[member.person] = ScriptedPerson(member, tz.get(member.person, "UTC"),
                                             role="user" if i == 0 else "coworker",
                                             agent_person=task.agent)
    return cast
