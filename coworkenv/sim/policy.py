"""The names of agent policies (``--agent`` values and a roster's ``policy``): a grammar only.

What each policy builds lives in :mod:`coworkenv.agents.factory`; the simulator reads the
names (to check a simulation file, to choose a seat's memory mode) without building anything.
"""

from __future__ import annotations

from dataclasses import dataclass

POLICIES = "oracle | noop | openai:MODEL | teacher:openai:MODEL | remote | remote:GROUP"
AGENT_SPECS = POLICIES


@dataclass(frozen=True)
class AgentSpec:
    kind: str  # oracle, noop, openai, remote (session, custom: set by the runtime)
    model: str = ""
    teacher: bool = False

    @property
    def role(self) -> str:
        return "teacher" if self.teacher or self.kind == "oracle" else "student"

    @property
    def model_backed(self) -> bool:
        """A model answers for it (its replies differ run to run unless recorded)."""
        return self.kind == "openai"


def parse_policy(spec: str) -> AgentSpec:
    """``oracle``, ``noop``, ``openai:MODEL``, ``teacher:openai:MODEL``, ``remote`` or
    ``remote:GROUP``; anything else is a ``ValueError`` naming what is expected."""
    teacher = spec.startswith("teacher:")
    rest = spec.removeprefix("teacher:")
    if rest in ("oracle", "noop", "remote") and not teacher:
        return AgentSpec(rest)
    if rest.startswith("remote:") and rest[7:] and not teacher:  # a group of workers
        return AgentSpec("remote", rest[7:])
    if rest.startswith("openai:") and rest[7:]:
        return AgentSpec("openai", rest[7:], teacher)
    raise ValueError(f"agent: expected {AGENT_SPECS}, got {spec!r}")
