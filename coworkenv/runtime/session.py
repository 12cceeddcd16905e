"""Episodes driven step by step from outside: :class:`Sessions` and :class:`Session`.

A session is one episode whose agent seat is held by the caller: ``reset`` starts the episode
and returns what the agent is told first; ``step(action)`` takes one action (a tool call, a
message, a wait, finish) and returns what the agent was told until it is next asked to act,
with the reward and whether the episode is over. Everything else is a normal episode: the
user and coworkers answer over the bus, the virtual clock jumps over waits, every event goes
to the store, and the finished episode is graded, so replay, the viewer, regrade and export
work on sessions as on any run.

    async with Sessions(db="runs/s.db", tasks=["examples/tasks"]) as sessions:
        s = sessions.session()
        obs = await s.reset("share-onboarding")
        obs, reward, done, info = await s.step(Action.tool("directory_search", query="kate"))
        ...
        result = await s.close()          # the graded episode

Many sessions run at once on one event loop; each holds at most one decision in flight (the
agent's seat hands over one observation and waits for one action: bounded streams of one).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pydantic import Field, TypeAdapter, ValidationError

from ..agents.chat import agent_tools, opening, render_incoming, wake_delay
from ..bus import Bus, Envelope, MemoryBus
from ..sim.actor import Actor, ActorContext
from ..sim.clock import make_clock
from ..sim.episode import EpisodeKernel, EpisodeResult, EpisodeSpec
from ..sim.errors import RunConfigError, SessionFailedError
from ..sim.grading import GradeWeights
from ..sim.task import Task, task_toolset
from ..store import EventStore

Kind = Literal["tool", "message", "wait", "finish", "end"]


@dataclass(frozen=True)
class Action:
    """One action of the agent. ``end`` is the policy stopping: its ``text`` (if any) goes to
    the user, then the episode finishes."""

    kind: Kind
    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def tool(cls, name: str, **arguments: Any) -> Action:
        return cls("tool", name, arguments)

    @classmethod
    def message(cls, to: str, text: str) -> Action:
        return cls("message", "send_message", {"to": to, "text": text})

    @classmethod
    def wait(cls, *, minutes: float | None = None, until: str | None = None) -> Action:
        """Nothing now: the agent is asked again when something arrives (a reply, the end of
        an outage it ran into) or, with ``minutes`` or ``until`` (``HH:MM``, the next one to
        come, or ISO-8601), at that time at the latest (or the episode ends when nothing ever
        will)."""
        args: dict[str, Any] = {}
        if minutes is not None:
            args["minutes"] = minutes
        if until is not None:
            args["until"] = until
        return cls("wait", "wait", args)

    @classmethod
    def finish(cls, summary: str = "") -> Action:
        return cls("finish", "finish", {"summary": summary})

    @classmethod
    def end(cls, text: str = "") -> Action:
        return cls("end", "", {"text": text})

    @classmethod
    def called(cls, name: str, arguments: dict[str, Any] | None = None) -> Action:
        """The action a function call of the agent is: ``send_message``, ``wait`` and
        ``finish`` are theirs, any other name a workspace tool."""
        kind = {"send_message": "message", "wait": "wait", "finish": "finish"}.get(name, "tool")
        return cls(kind, name, dict(arguments or {}))  # type: ignore[arg-type]

    def problem(self) -> str | None:
        """What is wrong with a message's arguments, as the error a tool-calling agent reads
        (None: nothing); other actions are checked where they land (the tool service)."""
        a = self.arguments
        if self.kind == "message" and not (isinstance(a.get("to"), str)
                                           and isinstance(a.get("text"), str)):
            return json.dumps({"ok": False, "error": {
                "code": "invalid_arguments",
                "message": "send_message needs `to` (a person id) and `text`"}})
        if self.kind == "wait":
            try:
                wake_delay(a, datetime.now(UTC))
            except ValueError as exc:
                return json.dumps({"ok": False, "error": {"code": "invalid_arguments",
                                                          "message": f"wait: {exc}"}})
        return None


SEED_MAX = 2**63 - 1
_SEED = TypeAdapter(Annotated[int, Field(strict=True, ge=0, le=SEED_MAX)])


def check_seed(seed: object) -> int | None:
    """``seed`` as an episode takes it (None: the session's own), or a
    :class:`RunConfigError` that says what was expected: an integer from 0 to 2**63-1 (what
    SQLite stores as an integer), never a string, a float or a boolean."""
    if seed is None:
        return None
    try:
        return int(_SEED.validate_python(seed))
    except ValidationError:
        raise RunConfigError(f"seed: expected an integer from 0 to 2**63-1, got "
                             f"{str(seed)[:40]!r} ({type(seed).__name__})") from None


EPISODE_OVER = json.dumps({"ok": False, "error": {
    "code": "episode_over", "message": "The episode has ended; nothing was done."}})
"""What a tool-calling agent reads when it acts after its episode ended."""


def answer_texts(action: Action, obs: Observation) -> list[str]:
    """What a tool-calling agent reads after ``action``: an acknowledgement for a message or
    finish (they have no tool result), then each thing it was told."""
    acks = {"message": {"ok": True, "sent": True}, "finish": {"ok": True, "finished": True}}
    head = [json.dumps(acks[action.kind])] if action.kind in acks else []
    return [*head, *(str(m["content"]) for m in obs.messages)]


@dataclass(frozen=True)
class Observation:
    """What the agent was told: chat messages, rendered as for any model agent (the opening
    system prompt and task on reset; tool results, messages and notifications after)."""

    messages: list[dict[str, Any]]
    done: bool = False

    @property
    def text(self) -> str:
        return "\n".join(str(m.get("content") or "") for m in self.messages)


class SessionAgent(Actor):
    """The agent's seat, held from outside: at each decision point it sends what it was told
    since the last one, and waits for the next action."""

    role = "agent"

    def __init__(self) -> None:
        self._told_in: MemoryObjectSendStream[list[dict[str, Any]]]
        self.told: MemoryObjectReceiveStream[list[dict[str, Any]]]
        self._told_in, self.told = anyio.create_memory_object_stream[list[dict[str, Any]]](1)
        self.actions: MemoryObjectSendStream[Action]
        self._actions_out: MemoryObjectReceiveStream[Action]
        self.actions, self._actions_out = anyio.create_memory_object_stream[Action](1)
        self.buffer: list[dict[str, Any]] = []
        self.pending: set[str] = set()
        self.user = ""
        self.opening: list[dict[str, Any]] = []
        self.acted = 0
        self.waits = 0

    def end(self) -> None:
        """The episode is over: whoever waits to be told is told so (``EndOfStream``) once
        what was already sent has been received."""
        self._told_in.close()

    def close(self) -> None:
        """Close the seat's streams (the episode is over)."""
        for stream in (self._told_in, self.told, self.actions, self._actions_out):
            stream.close()

    async def handle(self, envelope: Envelope, ctx: ActorContext) -> None:
        p = envelope.payload
        if envelope.kind == "task":
            self.user = str(p.get("from"))
            self.opening = opening(p)
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
        await self._told_in.send(told)
        action = await self._actions_out.receive()
        self.acted += 1
        call_id = f"s-{self.acted}"
        if action.kind == "wait":
            self.acted -= 1  # not an action: the agent is asked again when something arrives
            self.waits += 1
            wait_id = f"s-wait-{self.waits}"
            try:
                delay = wake_delay(action.arguments, ctx.now_dt)
            except ValueError:
                delay = None  # (refused at the edge: Action.problem)
            shown: dict[str, Any] = {k: action.arguments[k] for k in ("minutes", "until")
                     if k in action.arguments and delay is not None}
            ctx.record("agent.wait", {"call_id": wait_id, **shown})
            if delay is not None:  # ... and at that time at the latest
                ctx.timer(delay, wake=True, id=wait_id,
                          at=(ctx.now_dt + timedelta(seconds=delay)).strftime("%a %H:%M"))
        elif action.kind == "tool":
            self.pending.add(call_id)
            ctx.call_tool(action.name, action.arguments, call_id=call_id)
        elif action.kind == "message":
            ctx.say(str(action.arguments["to"]), str(action.arguments["text"]), call_id=call_id)
        else:  # finish, or the policy stopped (its last text goes to the user)
            text = str(action.arguments.get("text") or "").strip()
            if action.kind == "end" and text:
                ctx.say(self.user, text, as_text=True)
            summary = action.arguments.get("summary")
            left = {"abandoned": True} if action.arguments.get("abandoned") is True else {}
            ctx.finish(str(summary or ("" if action.kind == "finish" else "session ended")),
                       call_id=call_id, **left)


class Session:
    """One episode driven step by step (see the module doc). Made by :meth:`Sessions.session`."""

    def __init__(self, host: Sessions) -> None:
        self.host = host
        self.task: Task | None = None
        self.spec: EpisodeSpec | None = None
        self.kernel: EpisodeKernel | None = None
        self.agent: SessionAgent | None = None
        self.result: EpisodeResult | None = None
        self.error: BaseException | None = None
        """What the episode's kernel raised, if it did (``close`` raises it again)."""
        self.steps = 0
        self._ended: anyio.Event | None = None

    @property
    def done(self) -> bool:
        return self._ended is not None and self._ended.is_set()

    async def reset(self, task: Task | str, *, seed: int | None = None) -> Observation:
        """Start an episode of ``task`` (a task or the id of one the host holds); return the
        opening (system prompt and task) and anything else told before the first decision.
        A session that is still running is finished first."""
        seed = check_seed(seed)
        self.host.check_healthy()
        if self.kernel is not None and not self.done:
            await self.close()
        if self.agent is not None:
            self.agent.close()
        t = await self.host._admit(task)
        n = next(self.host._counter)
        self.task, self.steps, self.result, self.error = t, 0, None, None
        self._ended = anyio.Event()
        self.spec = EpisodeSpec(t, self.host.run_id, f"{self.host.run_id}:{t.id}:{n}:0", n, 0,
                                seed if seed is not None else _seed(self.host.run_id, t.id, n),
                                self.host.agent_name, self.host.role, self.host.tools)
        self.agent = SessionAgent()
        self.host._sessions.add(self)  # (open again: the host ends it if the caller does not)
        self.kernel = EpisodeKernel(self.spec, bus=self.host.bus, store=self.host.store,
                                    agent=self.agent, cast=self.host.cast(t),
                                    clock=make_clock("virtual"), weights=self.host.weights)
        self.host._start(self)
        told = await self._next()
        assert self.agent is not None
        self._raise_failure()
        return Observation([*self.agent.opening, *(told or [])], done=told is None)

    def _raise_failure(self) -> None:
        """An episode the simulator could not carry (its kernel raised, or the store stopped
        recording) ends in an error for its caller, never in a reward."""
        if self.error is not None:
            raise SessionFailedError(f"episode {self.spec.episode_id if self.spec else '?'} "
                                     f"failed in the simulator: {_said(self.error)}") \
                from self.error

    async def _run(self) -> None:
        assert self.kernel is not None
        assert self._ended is not None
        assert self.agent is not None
        agent, ended = self.agent, self._ended
        try:
            self.result = await self.kernel.run()
        except Exception as exc:  # (this session fails; the host is unhealthy from now on)
            self.error = exc
            self.host._failed(exc)
        finally:
            ended.set()
            agent.end()
            # over: the host has nothing left to end (a long-lived host, a server, kept every
            # finished session, its workspace and its events, until it stopped)
            self.host._sessions.discard(self)

    async def _next(self) -> list[dict[str, Any]] | None:
        """What the agent is told before its next decision (None: the episode ended). One
        receive: the episode's end closes the stream (what was sent before still arrives)."""
        assert self.agent is not None
        try:
            return await self.agent.told.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            return None

    async def step(self, action: Action) -> tuple[Observation, float, bool, dict[str, Any]]:
        """Take one action; return (what the agent was told until its next decision, the
        reward, whether the episode is over, info). The reward is 0 until the episode ends,
        then its grade's score; ``info`` holds the grade's components at the end."""
        if self.kernel is None or self.agent is None:
            raise RunConfigError("session: reset() starts an episode before step()")
        if self.done:
            self._raise_failure()
            return Observation([], done=True), 0.0, True, {**self.state(),
                                                           "error": "episode_over"}
        await self.agent.actions.send(action)
        if action.kind != "wait":
            self.steps += 1
        told = await self._next()
        if told is None:  # ended: whatever was rendered but not yet handed over
            self._raise_failure()
            await self.host.recorded()  # (a reward only once it is on record)
            told, self.agent.buffer = self.agent.buffer, []
            return Observation(told, done=True), self._reward(), True, self.state()
        return Observation(told), 0.0, False, self.state()

    def _reward(self) -> float:
        r = self.result
        return float(r.score) if r is not None and r.status == "completed" else 0.0

    def state(self) -> dict[str, Any]:
        """Where the episode stands: ids, steps taken, simulated seconds, and at the end its
        termination and grade."""
        out: dict[str, Any] = {"episode_id": self.spec.episode_id if self.spec else None,
                               "task_id": self.task.id if self.task else None,
                               "steps": self.steps, "done": self.done,
                               "sim_time_s": self.kernel.clock.now if self.kernel else 0.0}
        r = self.result
        if r is not None:
            out.update(status=r.status, termination=r.termination, score=r.score,
                       completion=r.completion, safety=r.safety, robustness=r.robustness,
                       passed=r.passed, failure=r.failure)
        return out

    async def close(self, text: str = "", *, abandoned: bool = False) -> EpisodeResult:
        """End the episode (if the agent did not: ``text`` goes to the user) and return its
        graded result. ``abandoned``: the caller left without finishing (a client gone, an
        idle session expired): the episode ends with termination ``abandoned``."""
        if self.kernel is None or self.agent is None or self._ended is None:
            raise RunConfigError("session: reset() starts an episode before close()")
        ended = self._ended
        last = Action("end", "", {"text": text, **({"abandoned": True} if abandoned else {})})
        if not self.done:
            with anyio.CancelScope(shield=True):
                async with anyio.create_task_group() as tg:
                    async def end() -> None:
                        await self.agent.actions.send(last)  # type: ignore[union-attr]

                    async def drain() -> None:  # (an observation may be waiting: drop it)
                        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError):
                            while True:
                                await self.agent.told.receive()  # type: ignore[union-attr]

                    tg.start_soon(end)
                    tg.start_soon(drain)
                    await ended.wait()
                    tg.cancel_scope.cancel()
        self.release()
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result

    def release(self) -> None:
        """Let go of the seat of an episode that is over (its caller read what it wanted):
        :meth:`close` does this; a server whose client finished calls it alone."""
        if self.agent is not None:
            self.agent.close()
        self.host._sessions.discard(self)


class Sessions:
    """Where sessions run: one bus, one store writer and one run record shared by every
    session, in the caller's event loop (``async with``). ``tasks`` are the task sources
    sessions may name by id; any :class:`Task` may also be given to ``reset`` directly."""

    def __init__(self, db: str | Path, *, tasks: Sequence[str | Path | Task] = (),
                 run_id: str | None = None, agent_name: str = "session", role: str = "student",
                 cast: Callable[[Task], dict[str, Actor]] | None = None,
                 tools: list[str] | None = None, weights: GradeWeights | None = None,
                 bus: Bus | None = None, source: str = "session",
                 wall_timeout_s: float | None = None) -> None:
        from ..agents import cast_factory
        from ..sim import Task as TaskType
        from ..sim import load_tasks
        from ..sim.runner import check_run_id
        from .run import check_db

        self.db = check_db(Path(db))
        self.run_id = run_id or time.strftime("session-%Y%m%d-%H%M%S-") + \
            f"{time.time_ns() % 1_000_000:06d}"
        check_run_id(self.run_id)
        if role not in ("teacher", "student"):
            raise RunConfigError(f"role: expected teacher or student, got {role!r}")
        self.agent_name, self.role, self.source = agent_name, role, source
        self.cast = cast or cast_factory("scripted")
        self.tools = tools
        self.weights = weights or GradeWeights()
        self.wall_timeout_s = wall_timeout_s
        given = [t for t in tasks if isinstance(t, TaskType)]
        paths = [Path(t) for t in tasks if not isinstance(t, TaskType)]
        self.tasks: dict[str, Task] = {}
        for t in [*given, *(load_tasks(paths) if paths else [])]:
            self.tasks[t.id] = self._fit(t)
        self._saved: set[str] = set()
        self._offered: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        self.bus = bus or MemoryBus()
        self.store = EventStore(self.db)
        self._counter = itertools.count()
        self._tg: anyio.abc.TaskGroup | None = None
        self._sessions: set[Session] = set()  # (open ones: a closed session is let go)
        self._failure: BaseException | None = None

    def _fit(self, task: Task) -> Task:
        """A session waits on its caller between actions: a wall budget that fits it."""
        if self.wall_timeout_s is None:
            return task
        limits = task.limits.model_copy(update={"wall_timeout_s": max(
            task.limits.wall_timeout_s, self.wall_timeout_s)})
        return task.model_copy(update={"limits": limits})

    def toolset(self, task_id: str) -> list[str]:
        """The tools a session of this task offers (the host's ``tools`` or the task's)."""
        return task_toolset(self.task(task_id), self.tools)

    def offered(self, task_id: str) -> list[dict[str, Any]]:
        """The functions a session of this task offers, with their schemas (the tools,
        ``send_message``, ``wait``, ``finish``): one list per tool set, shared by every
        session that offers it, so read it and never change it."""
        names = tuple(self.toolset(task_id))
        if names not in self._offered:
            self._offered[names] = agent_tools(list(names))
        return self._offered[names]

    def task(self, task_id: str) -> Task:
        try:
            return self.tasks[task_id]
        except KeyError:
            raise RunConfigError(f"task_id {task_id!r} is not among the session host's tasks "
                                 f"({len(self.tasks)} loaded)") from None

    def session(self) -> Session:
        if self._tg is None:
            raise RunConfigError("sessions: open the host first (async with Sessions(...))")
        s = Session(self)
        self._sessions.add(s)
        return s

    @property
    def failure(self) -> BaseException | None:
        """Why sessions can no longer be trusted to be recorded (None: they can): the store's
        writer stopped, or an episode failed inside the simulator. A server turns it into an
        unhealthy ``/health``, errors to its clients and a non-zero exit."""
        return self.store.failure or self._failure

    def _failed(self, exc: BaseException) -> None:
        if self._failure is None:
            self._failure = exc

    async def recorded(self) -> None:
        """Wait until what was written so far is committed; raise
        :class:`SessionFailedError` if it cannot be."""
        self.check_healthy()
        try:
            await self.store.flush()
        except Exception:
            self.check_healthy()
            raise

    def check_healthy(self) -> None:
        """Raise :class:`SessionFailedError` once :attr:`failure` is set."""
        failure = self.failure
        if failure is not None:
            raise SessionFailedError(f"the session host can no longer record episodes in "
                                     f"{self.db}: {_said(failure)}") from failure

    async def _admit(self, task: Task | str) -> Task:
        t = self.task(task) if isinstance(task, str) else self.tasks.setdefault(
            task.id, self._fit(task))
        if t.id not in self._saved:
            self._saved.add(t.id)
            await self.store.save_tasks(self.run_id, [(t.id, t.family, list(t.capabilities),
                                                       t.model_dump_json())])
        return t

    def _start(self, s: Session) -> None:
        assert self._tg is not None
        self._tg.start_soon(s._run)

    async def __aenter__(self) -> Sessions:
        self._stack = anyio.create_task_group()
        await self.bus.__aenter__()
        try:
            await self.store.__aenter__()
            self._counter = itertools.count(self._next_trial())
            await self.store.create_run(self.run_id, self.agent_name,
                                        {"role": self.role, "source": self.source,
                                         "tasks": sorted(self.tasks)})
            self._tg = await self._stack.__aenter__()
        except BaseException:
            await self.store.__aexit__(None, None, None)
            await self.bus.__aexit__(None, None, None)
            raise
        return self

    @property
    def open(self) -> int:
        """Sessions whose episode is still running (a finished one is let go at once)."""
        return len(self._sessions)

    def _next_trial(self) -> int:
        """Where the trials go on in a run opened again (the same ``run_id`` given to another
        server, or after a restart): after its last one, so that no episode id is taken
        twice."""
        if self.store.uri:  # (in memory: a new store holds no run)
            return 0
        with contextlib.closing(sqlite3.connect(self.store.target)) as c:
            (n,) = c.execute("SELECT coalesce(max(trial) + 1, 0) FROM episodes WHERE run_id=?",
                             (self.run_id,)).fetchone()
        return int(n)

    async def __aexit__(self, *exc: Any) -> None:
        try:
            with anyio.CancelScope(shield=True):
                for s in list(self._sessions):  # every episode ends recorded and graded
                    if s.kernel is not None and not s.done:  # (left open: abandoned)
                        with contextlib.suppress(Exception):  # (on record: self.failure)
                            await s.close(abandoned=True)
                    elif s.agent is not None:
                        s.agent.close()
            await self._stack.__aexit__(*exc)
        finally:
            self._tg = None
            try:
                await self.store.finish_run(self.run_id)
            finally:
                await self.store.__aexit__(*exc)
                await self.bus.__aexit__(*exc)


def _said(exc: BaseException) -> str:
    """An exception and its cause in one line."""
    text = f"{type(exc).__name__}: {exc}"
    cause = exc.__cause__ or exc.__context__
    if cause is not None and str(cause) not in text:
        text += f" ({type(cause).__name__}: {cause})"
    return text[:300]


def _seed(run_id: str, task_id: str, n: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{run_id}:{task_id}:{n}".encode()).digest()[:4], "big")
