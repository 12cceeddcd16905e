"""Building the actors of an episode from an ``--agent`` value and a task."""

from __future__ import annotations

import os
from collections.abc import Callable

from ..sim.actor import Actor
from ..sim.policy import AGENT_SPECS, AgentSpec
from ..sim.policy import parse_policy as parse_agent
from ..sim.simulation.language import Seat
from ..sim.task import Task
from .openai_agent import Endpoint, OpenAIAgent
from .oracle import NoopAgent, OracleAgent, slip_names
from .persistent import PersistentModelAgent, PersistentOracle
from .persona import LLMPerson
from .scripted import ScriptedPerson

AgentFactory = Callable[[Task], Actor]
CastFactory = Callable[[Task], dict[str, Actor]]

__all__ = ["AGENT_SPECS", "AgentFactory", "AgentSpec", "CastFactory", "agent_factory", "cast_factory",
           "endpoint", "parse_agent", "persistent_factory", "scripted_cast",
           "worker_agent_factory"]


def endpoint(model: str, base_url: str | None, api_key_env: str | None,
             **options: object) -> Endpoint:
    if not base_url:
        raise ValueError("base_url is required for a model-backed agent or cast "
                         "(e.g. http://127.0.0.1:8080/v1)")
    key = "not-needed"
    if api_key_env:
        if api_key_env not in os.environ:
            raise ValueError(f"api_key_env: environment variable {api_key_env} is not set")
        key = os.environ[api_key_env]
    return Endpoint(base_url, model, key, **options)  # type: ignore[arg-type]


def agent_factory(spec: str, *, base_url: str | None = None, api_key_env: str | None = None,
                  slips: float = 0.0, **endpoint_options: object) -> AgentFactory:
    """Build agents from an ``--agent`` value. Model-backed agents of one run share one
    :class:`Endpoint`, and every endpoint of one server in one event loop (seats, personas,
    simulations side by side) one bound on calls in flight
    (:class:`~coworkenv.agents.openai_agent.ServerPool`); ``slips``: the oracle's rate of
    wrong person arguments it recovers from (:attr:`OracleAgent.slips`)."""
    s = parse_agent(spec)
    if s.kind == "oracle":
        if slips:
            return lambda task: OracleAgent(list(task.reference), slips=slips,
                                            names=slip_names(task))
        return lambda task: OracleAgent(list(task.reference))
    if s.kind == "noop":
        return lambda task: NoopAgent()
    if s.kind == "openai":
        ep = endpoint(s.model, base_url, api_key_env, **endpoint_options)
        return lambda task: OpenAIAgent(ep)
    raise ValueError(f"agent {spec}: a remote agent is served by `coworkenv worker`")


def persistent_factory(spec: str, *, base_url: str | None = None, api_key_env: str | None = None,
                       links_only: bool = False,
                       **endpoint_options: object) -> Callable[[Seat, Callable[[str], Task]], Actor]:
    """The one agent of a persistent seat, from its policy: the oracle plays the reference
    of every open arrival at once (naming each action's arrival, unless ``links_only``), the
    no-op finishes each request at once, a model keeps one conversation under the seat's
    ``context`` budget. Remote workers serve one arrival's agent each: not persistent."""
    s = parse_agent(spec)
    if s.kind == "oracle":
        return lambda seat, tasks: PersistentOracle(tasks, explicit=not links_only)
    if s.kind == "noop":
        return lambda seat, tasks: NoopAgent()
    if s.kind == "openai":
        ep = endpoint(s.model, base_url, api_key_env, **endpoint_options)
        return lambda seat, tasks: PersistentModelAgent(
            ep, budget_tokens=seat.context.budget_tokens, trim=seat.context.trim)
    raise ValueError(f"memory: persistent: a {spec} agent is served by `coworkenv worker`, "
                     "one arrival's agent at a time; give this seat memory: per_arrival")


def _people(task: Task, make: Callable[[int, object, str], Actor]) -> dict[str, Actor]:
    tz = {p.id: p.timezone for p in task.seed.people}
    return {m.person: make(i, m, tz.get(m.person, "UTC")) for i, m in enumerate(task.cast())}


def scripted_cast(task: Task) -> dict[str, Actor]:
    """The user and coworkers of a task as scripted, deterministic people."""
    return _people(task, lambda i, m, tz: ScriptedPerson(
        m, tz, role="user" if i == 0 else "coworker", agent_person=task.agent))  # type: ignore[arg-type]


def cast_factory(kind: str = "scripted", *, model: str | None = None,
                 base_url: str | None = None, api_key_env: str | None = None) -> CastFactory:
    """``scripted`` (default), ``llm-user`` (the user is a model persona) or ``llm`` (user and
    coworkers are)."""
    if kind == "scripted":
        return scripted_cast
    if kind not in ("llm-user", "llm"):
        raise ValueError(f"cast: expected scripted, llm-user or llm, got {kind!r}")
    ep = endpoint(model or "", base_url, api_key_env, max_tokens=120)

    def make(task: Task) -> dict[str, Actor]:
        def person(i: int, m: object, tz: str) -> Actor:
            role = "user" if i == 0 else "coworker"
            if kind == "llm" or role == "user":
                return LLMPerson(m, tz, role=role, agent_person=task.agent,  # type: ignore[arg-type]
                                 endpoint=ep, instruction=task.instruction)
            return ScriptedPerson(m, tz, role=role, agent_person=task.agent)  # type: ignore[arg-type]
        return _people(task, person)

    return make


def worker_agent_factory(spec: str, *, base_url: str | None = None,
                         api_key_env: str | None = None,
                         **endpoint_options: object) -> Callable[[dict[str, object]], Actor]:
    """Agents for ``coworkenv worker``: built from what the runner sends with each episode
    (the reference solution, for the oracle), not from a task. Serves oracle, noop and
    openai:MODEL."""
    from pydantic import TypeAdapter

    from ..sim.task import Step

    s = parse_agent(spec)
    if s.kind not in ("oracle", "noop", "openai"):
        raise ValueError(f"agent: a worker serves oracle, noop or openai:MODEL, not {spec!r}")
    ep = endpoint(s.model, base_url, api_key_env, **endpoint_options) \
        if s.kind == "openai" else None
    steps = TypeAdapter(list[Step])

    def make(setup: dict[str, object]) -> Actor:
        if s.kind == "oracle":
            if not setup.get("reference"):
                raise ValueError("the runner sent no reference solution")
            return OracleAgent(steps.validate_python(setup["reference"]))
        if s.kind == "noop":
            return NoopAgent()
        assert ep is not None
        return OpenAIAgent(ep)

    return make
