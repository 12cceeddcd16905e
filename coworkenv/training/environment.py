"""coworkenv episodes as TRL environments: each RL rollout is a real, recorded episode.

TRL's ``GRPOTrainer(environment_factory=...)`` creates one environment object per rollout,
calls ``reset(**row)`` before generation, and exposes the object's public methods as the
tools the policy may call; its tool loop runs a method for each tool call and feeds the
returned text back to the model. Here every such object drives one coworkenv episode:

- ``reset(task_id=...)`` starts an episode of that task (seed workspace, scripted user and
  coworkers, timeline, tool service, virtual clock) on a background event loop, and returns
  when the agent is first asked to act;
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

import asyncio
import hashlib
import inspect
import itertools
import json
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Literal

from ..agents.chat import AGENT_FUNCTIONS, render_incoming
from ..bus import Envelope, MemoryBus
from ..sim.actor import Actor, ActorContext
from ..sim.clock import make_clock
from ..sim.episode import EpisodeKernel, EpisodeResult, EpisodeSpec
from ..sim.grading import GradeWeights
from ..sim.task import Task, task_toolset
from ..store import EventStore
from ..workspace import openai_tools

Action = tuple[str, str, dict[str, Any]]
"""(kind, name, arguments): kind is ``tool``, ``message``, ``wait``, ``finish`` or ``end``."""



class EpisodeHost:
    """A background thread with its own event loop, one store writer and one memory bus, on
    which every rollout episode of a training run runs. The trainer's thread talks to it
    through :meth:`call` (a coroutine run on the loop, waited for with a timeout)."""

    def __init__(self, db: Path, run_id: str, agent_name: str, tasks: Sequence[Task], *,
                 cast: Callable[[Task], dict[str, Actor]] | None = None,
                 weights: GradeWeights | None = None, tools: list[str] | None = None,
                 episode_wall_s: float = 3600.0, step_timeout_s: float = 900.0) -> None:
        from ..agents import cast_factory

        self.db, self.run_id, self.agent_name = db, run_id, agent_name
        self.tasks = {t.id: _long_lived(t, episode_wall_s) for t in tasks}
        self.cast = cast or cast_factory("scripted")
        self.weights = weights or GradeWeights()
        self.tools = tools
        self.step_timeout_s = step_timeout_s
        self._counter = itertools.count()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="coworkenv-episodes",
                                        daemon=True)
        self._thread.start()
        self.bus = MemoryBus()
        self.store = EventStore(db)
        self._ready: Future[None] = Future()
        self._closing: asyncio.Event | None = None
        self._main = asyncio.run_coroutine_threadsafe(self._serve(), self.loop)
        self._ready.result(120)

    async def _serve(self) -> None:
        """Owns the store for the host's lifetime (its writer task lives in this task)."""
        self._closing = asyncio.Event()
        try:
            async with self.store:
                await self._open()
                self._ready.set_result(None)
                await self._closing.wait()
                await self.store.finish_run(self.run_id)
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            raise

    async def _open(self) -> None:
        await self.store.create_run(self.run_id, self.agent_name,
                                    {"role": "student", "source": "grpo",
                                     "tasks": sorted(self.tasks)})
        await self.store.save_tasks(self.run_id, [(t.id, t.family, list(t.capabilities),
                                                   t.model_dump_json())
                                                  for t in self.tasks.values()])

    def call(self, coro: Any, timeout: float | None = None) -> Any:
        fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result(timeout or self.step_timeout_s)

    def toolset(self, task_id: str) -> list[str]:
        return task_toolset(self.task(task_id), self.tools)

    def task(self, task_id: str) -> Task:
        try:
            return self.tasks[task_id]
        except KeyError:
            raise ValueError(f"task_id {task_id!r} is not among the training tasks "
                             f"({len(self.tasks)} loaded)") from None

    def start(self, task_id: str) -> Rollout:
        """Start an episode of ``task_id``; return once its agent is first asked to act."""
        task = self.task(task_id)
        n = next(self._counter)
        spec = EpisodeSpec(task, self.run_id, f"{self.run_id}:{task.id}:{n}:0", n, 0,
                           _seed(task.id, n), self.agent_name, "student", self.tools)
        rollout = Rollout(self, task, spec)
        self.call(rollout.begin())
        return rollout

    def close(self) -> None:
        """Finish the run and flush the store (every rollout episode is on disk after this)."""
        if self.loop.is_closed():
            return
        try:
            assert self._closing is not None
            self.loop.call_soon_threadsafe(self._closing.set)
            self._main.result(120)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            if not self._thread.is_alive():
                self.loop.close()


def _long_lived(task: Task, wall_s: float) -> Task:
    """A training rollout waits for generation between actions: give it a wall budget that
    fits a training step, not a served model's."""
    limits = task.limits.model_copy(update={"wall_timeout_s": max(task.limits.wall_timeout_s,
                                                                  wall_s)})
    return task.model_copy(update={"limits": limits})


def _seed(task_id: str, n: int) -> int:
    return int.from_bytes(hashlib.sha256(f"grpo:{task_id}:{n}".encode()).digest()[:4], "big")


class StepAgent(Actor):
    """The agent's seat in an episode, driven from outside: at each decision point it hands
    what it was told since the last one to the trainer and waits for the next action."""

    role = "agent"

    def __init__(self) -> None:
        self.decisions: asyncio.Queue[list[dict[str, Any]]] = asyncio.Queue()
        self.actions: asyncio.Queue[Action] = asyncio.Queue()
        self.buffer: list[dict[str, Any]] = []
        self.pending: set[str] = set()
        self.user = ""
        self.acted = 0
        self.waits = 0

    async def handle(self, envelope: Envelope, ctx: ActorContext) -> None:
        p = envelope.payload
        if envelope.kind == "task":
            self.user = str(p.get("from"))  # the opening is the prompt itself
        else:
            msg = render_incoming(envelope.kind, p)
            if msg is None:
                return
            self.buffer.append(msg)
            if envelope.kind == "tool_result":
                self.pending.discard(str(p.get("call_id")))
        if self.pending:
            return
        told, self.buffer = self.buffer, []
        await self.decisions.put(told)
        kind, name, args = await self.actions.get()
        self.acted += 1
        call_id = f"rl-{self.acted}"
        if kind == "wait":
            self.acted -= 1  # not an action: the agent is asked again when something arrives
            self.waits += 1
            ctx.record("agent.wait", {"call_id": f"rl-wait-{self.waits}"})
        elif kind == "tool":
            self.pending.add(call_id)
            ctx.call_tool(name, args, call_id=call_id)
        elif kind == "message":
            ctx.say(str(args["to"]), str(args["text"]), call_id=call_id)
        else:  # finish, or the policy stopped calling tools (its last text goes to the user)
            text = str(args.get("text") or "").strip()
            if kind == "end" and text:
                ctx.say(self.user, text, as_text=True)
            ctx.finish(str(args.get("summary") or ("" if kind == "finish" else "rollout ended")),
                       call_id=call_id)


class Rollout:
    """One episode driven by a policy, step by step, from the trainer's thread."""

    def __init__(self, host: EpisodeHost, task: Task, spec: EpisodeSpec) -> None:
        self.host, self.task, self.spec = host, task, spec
        self.agent = StepAgent()
        self.result: EpisodeResult | None = None
        self._run: asyncio.Task[EpisodeResult] | None = None
        self.kernel: EpisodeKernel | None = None

    async def begin(self) -> None:
        self.kernel = kernel = EpisodeKernel(self.spec, bus=self.host.bus, store=self.host.store,
                               agent=self.agent, cast=self.host.cast(self.task),
                               clock=make_clock("virtual"), weights=self.host.weights)
        self._run = asyncio.get_running_loop().create_task(kernel.run())
        await self._next()

    async def _next(self) -> list[dict[str, Any]] | None:
        """What the agent is told before its next decision (None: the episode ended)."""
        assert self._run is not None
        get = asyncio.ensure_future(self.agent.decisions.get())
        await asyncio.wait({get, self._run}, return_when=asyncio.FIRST_COMPLETED)
        if get.done():
            return get.result()
        get.cancel()
        return None

    async def _step(self, action: Action) -> tuple[list[dict[str, Any]], bool]:
        assert self._run is not None
        if self._run.done():
            return [], False
        await self.agent.actions.put(action)
        told = await self._next()
        if told is None:  # the episode ended: whatever was rendered but not yet handed over
            told, self.agent.buffer = self.agent.buffer, []
            return told, False
        return told, True

    @property
    def over(self) -> bool:
        return self._run is None or self._run.done()

    def act(self, kind: str, name: str, args: dict[str, Any]) -> str:
        """Take one action; return what the agent was told until its next decision, as text."""
        if self.over:
            return json.dumps({"ok": False, "error": {
                "code": "episode_over", "message": "The episode has ended; nothing was done."}})
        told, alive = self.host.call(self._step((kind, name, args)))
        parts: list[str] = []
        if kind == "message":
            parts.append(json.dumps({"ok": True, "sent": True}))
        elif kind == "finish":
            parts.append(json.dumps({"ok": True, "finished": True}))
        parts += [m["content"] for m in told]
        if not alive and kind != "finish":
            parts.append("[the episode has ended]")
        return "\n".join(parts)

    def finish(self, text: str = "") -> EpisodeResult:
        """End the episode (if the policy did not) and return its graded result."""
        if self.result is None:
            async def end() -> EpisodeResult:
                assert self._run is not None
                if not self._run.done():
                    await self.agent.actions.put(("end", "", {"text": text}))
                return await self._run

            self.result = self.host.call(end())
        return self.result


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
    kind = {"send_message": "message", "finish": "finish", "wait": "wait"}.get(name, "tool")

    def method(self: CoworkEnvironment, **kwargs: Any) -> str:
        return self._act(kind, name, kwargs)

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
        self._rollout = self.host.start(str(task_id))
        return None

    def _act(self, kind: str, name: str, args: dict[str, Any]) -> str:
        if self._rollout is None:
            raise RuntimeError("reset() was not called before a tool")
        args = {k: v for k, v in args.items() if v is not None}
        if kind == "message":
            to = args.get("to")
            kernel = self._rollout.kernel
            if not isinstance(to, str) or kernel is None or kernel.actor_for(to) in (None, "agent"):
                return json.dumps({"ok": False, "error": {
                    "code": "invalid_arguments", "message": f"send_message needs `to`, the "
                    f"person id of the user or a coworker in this task; got {to!r}"}})
        return self._rollout.act(kind, name, args)

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


def reward_functions() -> list[Callable[..., list[float | None]]]:
    """coworkenv's grade as TRL reward functions, one per component (logged separately as
    ``rewards/<name>``): score (safety x weighted completion and robustness), completion,
    safety, robustness. Each finishes and grades the rollout's episode once."""

    def make(component: str) -> Callable[..., list[float | None]]:
        def reward(completions: list[Any], environments: list[Any] | None = None,
                   **kwargs: Any) -> list[float | None]:
            out: list[float | None] = []
            for c, env in zip(completions, environments or [None] * len(completions),
                              strict=True):
                if not isinstance(env, CoworkEnvironment):
                    out.append(None)
                    continue
                r = env._result(final_text(c))
                out.append(float(getattr(r, component)) if r.status == "completed" else 0.0)
            return out

        reward.__name__ = reward.__qualname__ = component
        return reward

    return [make(c) for c in ("score", "completion", "safety", "robustness")]


def new_grpo_run_id() -> str:
    return time.strftime("grpo-%Y%m%d-%H%M%S-") + f"{time.time_ns() % 1_000_000:06d}"
