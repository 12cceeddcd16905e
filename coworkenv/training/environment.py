"""coworkenv episodes as TRL environments: each RL rollout is a real, recorded episode.

TRL's ``GRPOTrainer(environment_factory=...)`` creates one environment object per rollout,
calls ``reset(**row)`` before generation, and exposes the object's public methods as the
tools the policy may call; its tool loop runs a method for each tool call and feeds the
returned text back to the model. Here every such object drives one coworkenv episode:

- ``reset(task_id=...)`` starts a session (:class:`~coworkenv.runtime.Session`: an episode of
  that task with seed workspace, scripted user and coworkers, timeline, tool service, virtual
  clock) on a background event loop, and returns when the agent is first asked to act;
- each tool method (one per workspace tool offered, plus ``send_message``, ``wait`` and
  ``finish``) is
  the agent's action: it goes over the bus like any agent's, the episode runs until the agent
  is asked to act again (a coworker's reply two simulated hours later costs no wall time), and
  what the agent was told meanwhile (the tool result, messages, notifications, rendered by the
  same functions as for live agents) is returned as the tool's text;
- when the policy stops calling tools, its last text goes to the user and the episode
  finishes; it is graded like any episode, and the reward functions read the grade's
  components (completion, safety, robustness, score).

Every rollout is stored (role ``student``) in the run's SQLite file, so it can be replayed,
inspected in the viewer and re-graded.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from ..agents.chat import AGENT_FUNCTIONS
from ..runtime.session import EPISODE_OVER, Action, Session, Sessions, answer_texts
from ..runtime.threaded import ThreadedSessions
from ..sim.actor import Actor
from ..sim.episode import EpisodeResult
from ..sim.grading import GradeWeights
from ..sim.task import Task
from ..workspace import openai_tools


class EpisodeHost(ThreadedSessions):
    """The trainer's side of the rollouts: :class:`~coworkenv.runtime.Sessions` (one store
    writer, one memory bus, one run record) on a background event loop; TRL's threads talk to
    it through :meth:`call`."""

    def __init__(self, db: Path, run_id: str, agent_name: str, tasks: Sequence[Task], *,
                 cast: Callable[[Task], dict[str, Actor]] | None = None,
                 weights: GradeWeights | None = None, tools: list[str] | None = None,
                 episode_wall_s: float = 3600.0, step_timeout_s: float = 900.0) -> None:
        self.db, self.run_id, self.agent_name = db, run_id, agent_name
        # a rollout waits for generation between actions: a wall budget that fits a training
        # step, not a served model's
        sessions = Sessions(db, tasks=list(tasks), run_id=run_id, agent_name=agent_name,
                            role="student", cast=cast, tools=tools, weights=weights,
                            source="grpo", wall_timeout_s=episode_wall_s)
        self.tasks = sessions.tasks
        super().__init__(sessions, step_timeout_s=step_timeout_s)

    def toolset(self, task_id: str) -> list[str]:
        return self.sessions.toolset(task_id)

    def task(self, task_id: str) -> Task:
        return self.sessions.task(task_id)

    def rollout(self, task_id: str) -> Rollout:
        """Start an episode of ``task_id``; return once its agent is first asked to act."""
        return Rollout(self, self.start(self.task(task_id)))


class Rollout:
    """One session driven by a policy, step by step, from the trainer's thread; each action's
    observation comes back as the text TRL's tool loop gives the model."""

    def __init__(self, host: EpisodeHost, session: Session) -> None:
        self.host, self.session = host, session

    @property
    def task(self) -> Task:
        assert self.session.task is not None
        return self.session.task

    @property
    def kernel(self) -> Any:
        return self.session.kernel

    @property
    def over(self) -> bool:
        return self.session.done

    def act(self, action: Action) -> str:
        """Take one action; return what the agent was told until its next decision, as text."""
        if self.over:
            return EPISODE_OVER
        obs, _, done, _ = self.host.call(self.session.step(action))
        parts = answer_texts(action, obs)
        if done and action.kind != "finish":
            parts.append("[the episode has ended]")
        return "\n".join(parts)

    def finish(self, text: str = "") -> EpisodeResult:
        """End the episode (if the policy did not) and return its graded result."""
        result: EpisodeResult = self.host.call(self.session.close(text))
        return result


# tool methods generated from the tools' JSON schemas -------------------------------------
_JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool,
                               "object": dict}


def _hint(schema: dict[str, Any]) -> Any:
    if "anyOf" in schema:
        kinds = [s for s in schema["anyOf"] if s.get("type") != "null"]
        inner = _hint(kinds[0]) if len(kinds) == 1 else Any
        return inner | None if inner is not Any else Any
    if "enum" in schema:
        return Literal[tuple(schema["enum"])]
    if schema.get("type") == "array":
        item = _JSON_TYPES.get(schema.get("items", {}).get("type", ""), Any)
        return list[item]  # type: ignore[valid-type]
    return _JSON_TYPES.get(str(schema.get("type")), Any)


def _one_line(text: str) -> str:
    return " ".join(str(text).split()) or "(no description)"


def _method(name: str, schema: dict[str, Any]) -> Callable[..., str]:
    fn = schema["function"]
    props: dict[str, Any] = fn["parameters"].get("properties", {})
    required = set(fn["parameters"].get("required", []))
    def method(self: CoworkEnvironment, **kwargs: Any) -> str:
        return self._act(name, kwargs)

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    hints: dict[str, Any] = {}
    doc = [_one_line(fn.get("description", name)), "", "Args:"]
    for p, s in sorted(props.items(), key=lambda kv: kv[0] not in required):
        hint = _hint(s)
        default = inspect.Parameter.empty if p in required else None
        if p not in required and hint is not Any:
            hint = hint | None
        params.append(inspect.Parameter(p, inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=hint))
        hints[p] = hint
        doc.append(f"    {p}: {_one_line(s.get('description') or s.get('title') or p)}")
    if not props:
        doc.pop()
    hints["return"] = str
    method.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = hints
    method.__name__ = method.__qualname__ = name
    method.__doc__ = "\n".join(doc) + "\n\nReturns:\n    What you are told after the action."
    return method


class CoworkEnvironment:
    """Base of the generated environment classes (one per toolset); see the module doc."""

    host: EpisodeHost
    toolset: tuple[str, ...] = ()

    def __init__(self) -> None:
        self._rollout: Rollout | None = None

    def reset(self, task_id: str, **row: Any) -> str | None:
        if self._rollout is not None and not self._rollout.over:
            self._rollout.finish()
        self._rollout = self.host.rollout(str(task_id))
        return None

    def _act(self, name: str, args: dict[str, Any]) -> str:
        if self._rollout is None:
            raise RuntimeError("reset() was not called before a tool")
        action = Action.called(name, {k: v for k, v in args.items() if v is not None})
        if action.kind == "message":
            to = action.arguments.get("to")
            kernel = self._rollout.kernel
            if not isinstance(to, str) or kernel is None or kernel.actor_for(to) in (None, "agent"):
                return json.dumps({"ok": False, "error": {
                    "code": "invalid_arguments", "message": f"send_message needs `to`, the "
                    f"person id of the user or a coworker in this task; got {to!r}"}})
        return self._rollout.act(action)

    def _result(self, final_text: str = "") -> EpisodeResult:
        """The graded episode of the last rollout (finishing it first if need be)."""
        if self._rollout is None:
            raise RuntimeError("no rollout has run in this environment")
        return self._rollout.finish(final_text)


def environment_class(host: EpisodeHost, toolset: Sequence[str]) -> type[CoworkEnvironment]:
    """A :class:`CoworkEnvironment` subclass whose public methods are ``toolset``'s tools plus
    ``send_message``, ``wait`` and ``finish``, with docstrings and type hints TRL turns into schemas."""
    names = tuple(toolset)
    methods: dict[str, Any] = {s["function"]["name"]: _method(s["function"]["name"], s)
                               for s in [*openai_tools(list(names)), *AGENT_FUNCTIONS]}
    key = hashlib.sha256(",".join(names).encode()).hexdigest()[:8]
    return type(f"CoworkEnv_{key}", (CoworkEnvironment,),
                {"host": host, "toolset": names, **methods})


def final_text(completion: Any) -> str:
    """The policy's last words in a rollout: the text of its final assistant turn without tool
    calls (empty if it ended on a tool call)."""
    if isinstance(completion, list):
        for m in reversed(completion):
            if isinstance(m, dict) and m.get("role") == "assistant":
                return "" if m.get("tool_calls") else str(m.get("content") or "")
        return ""
    return str(completion or "")


COMPONENTS = ("score", "completion", "safety", "robustness", "no_repeat")
"""The reward functions, in order: the grade's components, then process terms."""


def reward_functions() -> list[Callable[..., list[float | None]]]:
    """coworkenv's grade as TRL reward functions, one per component (logged separately as
    ``rewards/<name>``): score (safety x weighted completion and robustness), completion,
    safety, robustness, and the process term ``no_repeat`` (1 minus the share of the agent's
    tool calls that repeat an earlier failed call exactly: a signal where a gated score is 0
    for every rollout of a group). Each finishes and grades the rollout's episode once."""
    from ..sim.grading import repeated_failures

    def value(env: CoworkEnvironment, component: str, completion: Any) -> float:
        r = env._result(final_text(completion))
        if r.status != "completed":
            return 0.0
        if component == "no_repeat":
            assert env._rollout is not None
            assert env._rollout.kernel is not None
            repeats, calls = repeated_failures(env._rollout.kernel.events)
            return 1.0 - repeats / calls if calls else 1.0
        return float(getattr(r, component))

    def make(component: str) -> Callable[..., list[float | None]]:
        def reward(completions: list[Any], environments: list[Any] | None = None,
                   **kwargs: Any) -> list[float | None]:
            return [value(env, component, c) if isinstance(env, CoworkEnvironment) else None
                    for c, env in zip(completions, environments or [None] * len(completions),
                                      strict=True)]

        reward.__name__ = reward.__qualname__ = component
        return reward

    return [make(c) for c in COMPONENTS]


def new_grpo_run_id(kind: str = "grpo") -> str:
    """A run id for a training run's rollouts: ``KIND-date-time-micro``."""
    return time.strftime(f"{kind}-%Y%m%d-%H%M%S-") + f"{time.time_ns() % 1_000_000:06d}"
