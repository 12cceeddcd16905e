"""The episode kernel: one simulated stretch of a working day, recorded event by event.

Every envelope travels on the bus; the kernel delivers one at a time and waits until the
episode is quiescent (the receiving actor has finished handling it) before popping the next
item from the clock. Delivery order is therefore fixed by the clock's heap alone, whatever
the transport's timing: the same task, seed and scripted actors give the same events.
"""

from __future__ import annotations

import copy
import os
import secrets
import threading
import time
import zlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import anyio

from ..bus import Bus, Envelope, Subscription
from ..store import EventRecord, EventsHasher, EventStore
from ..store._records import encode_payload
from ..workspace import WorkspaceState, apply_event
from .actor import Actor, ActorContext, ModelEndpoint, let_go
from .checks import CheckResult
from .clock import Clock, VirtualClock
from .errors import Boundary, EpisodeFailure
from .eventlog import EventLog
from .grading import Grade, GradeWeights, grade
from .services import ToolService, World
from .task import SqlCheck, Task, clock_minutes, task_toolset

AGENT_ACTIONS = frozenset({"tool_call", "message", "finish"})
_INSTANT = frozenset({"tools", "world"})
"""The simulator's own actors: they handle an envelope without waiting on anything."""


@dataclass(frozen=True, slots=True)
class EpisodeSpec:
    task: Task
    run_id: str
    episode_id: str
    trial: int = 0
    attempt: int = 0
    seed: int = 0
    agent_name: str = ""
    role: str = "student"
    tools: list[str] | None = None
    """Overrides the task's toolset (tool or app names)."""


@dataclass(slots=True)
class EpisodeResult:
    episode_id: str
    task_id: str
    family: str
    trial: int
    status: str
    termination: str
    completion: float
    turns: int
    sim_time: float
    wall_time: float
    event_count: int
    events_hash: str
    state_hash: str
    failure_boundary: str | None = None
    failure: str | None = None
    checks: list[CheckResult] = field(default_factory=list)
    safety: float = 0.0
    robustness: float = 0.0
    score: float = 0.0
    passed: bool = False
    grade: Grade | None = None
    retryable: bool = False


@dataclass(slots=True)
class _Delivery:
    sender: str
    to: str
    kind: str
    payload: dict[str, Any]


_RANDOM = bytearray()
_RANDOM_LOCK = threading.Lock()


def _token() -> str:
    """16 hex digits from the operating system's random source, read 4 KiB at a time (one
    system call per 512 envelopes instead of one each); a forked process reads its own."""
    with _RANDOM_LOCK:
        if not _RANDOM:
            _RANDOM.extend(secrets.token_bytes(4096))
        tok = _RANDOM[-8:].hex()
        del _RANDOM[-8:]
    return tok


os.register_at_fork(after_in_child=_RANDOM.clear)


_SEEDS: dict[int, tuple[Task, WorkspaceState, list[tuple[str, dict[str, Any], str]]]] = {}


def seeded(task: Task) -> tuple[WorkspaceState, list[tuple[str, dict[str, Any], str]]]:
    """The task's seed state (a fresh copy) and its seed events, built once per task object.

    Entities are immutable in practice (tools replace them with copies), so episodes of the
    same task share them; only the tables are copied.
    """
    hit = _SEEDS.get(id(task))
    if hit is None or hit[0] is not task:
        state = WorkspaceState()
        events = []
        for kind, payload in task.seed.events():
            apply_event(state, kind, payload)
            events.append((kind, payload, encode_payload(payload)))
        if len(_SEEDS) > 10_000:
            _SEEDS.clear()
        hit = _SEEDS[id(task)] = (task, state, events)
    return hit[1].copy(), hit[2]


class EpisodeKernel:
    def __init__(self, spec: EpisodeSpec, *, bus: Bus, store: EventStore | None, agent: Actor,
                 cast: dict[str, Actor], clock: Clock, faults: Any = None,
                 weights: GradeWeights | None = None) -> None:
        self.weights = weights
        self.spec = spec
        self.task = spec.task
        self.bus = bus
        self.store = store
        self.clock = clock
        self.start: datetime = self.task.start
        self.state, self._seed_events = seeded(self.task)
        # Each event as the row it is stored as (its payload as canonical JSON text, not as
        # the dict it was made from), older rows packed (see EventLog: about 40 bytes a row
        # instead of 450); :attr:`events` decodes them, as a replay of the store would.
        self._log = EventLog()
        self._unsaved: list[tuple[Any, ...]] = []  # rows for the store, not yet queued
        self._hash = EventsHasher()
        self.turns = 0
        self._stop: str | None = None
        self._failure: tuple[Boundary, str] | None = None
        self._retryable = False
        self._inbox: Subscription
        # actor names: "agent", person ids of the cast, "tools", "world"
        self._person_of: dict[str, str] = {"agent": self.task.agent}
        self._actor_of: dict[str, str] = {self.task.agent: "agent"}
        for member in self.task.cast():
            self._person_of[member.person] = member.person
            self._actor_of[member.person] = member.person
        self.tools = ToolService(self.state, self._record, faults=faults)
        self.actors: dict[str, Actor] = {"agent": agent, **cast, "tools": self.tools,
                                         "world": World(self.task.timeline)}
        self._contexts = {name: ActorContext(self, name, self._person_of.get(name),
                                             zlib.crc32(f"{spec.seed}:{name}".encode()))
                          for name in self.actors}
        self._topics: dict[str, str] = {}
        self.on_quiet: Any = None
        """Called with the kernel after each delivery (the episode is quiescent then)."""
        self.hash_state = True
        """Hash the final workspace (forks, which only the grade is wanted of, skip it)."""
        self.grade_off_loop = any(isinstance(c, SqlCheck) for c in spec.task.checks)
        """Grade in a worker thread (tasks with SQL checks, whose queries may take their whole
        step budget), so one episode's grading never holds up the others on the loop."""
        self._rng_states: dict[str, Any] | None = None

    def fork(self, spec: EpisodeSpec, agent: Actor) -> EpisodeKernel:
        """A copy of this episode as it is now, between two deliveries, that goes on with
        ``agent`` in the agent's seat (``resume()`` runs it). Used by the mutation check: a
        sabotaged solution that shares the reference's first steps starts from there instead
        of replaying them. Needs the virtual clock, and people whose state is copyable."""
        if not isinstance(self.clock, VirtualClock):
            raise ValueError("only an episode on the virtual clock can be forked")
        new = object.__new__(EpisodeKernel)
        new.weights, new.spec, new.task, new.bus, new.store = (
            self.weights, spec, spec.task, self.bus, None)
        new.clock = VirtualClock()
        new.clock.now, new.clock._heap, new.clock._seq = (
            self.clock.now, list(self.clock._heap), self.clock._seq)
        new.start = self.start
        new.state, new._seed_events = self.state.copy(), self._seed_events
        new._log, new._unsaved, new._hash = self._log.copy(), [], self._hash.copy()
        new.turns, new._stop, new._failure, new._retryable = self.turns, None, None, False
        new._person_of, new._actor_of = self._person_of, self._actor_of
        new.tools = ToolService(new.state, new._record, calls=self.tools.calls,
                                failures=self.tools.failures, faults=None)
        cast = {n: a.copy() if hasattr(a, "copy") else copy.deepcopy(a)
                for n, a in self.actors.items() if n not in ("agent", "tools", "world")}
        new.actors = {"agent": agent, **cast, "tools": new.tools, "world": self.actors["world"]}
        # a snapshot (never run itself) is forked once per mutant: its random states are
        # read once; a live episode's are read each time
        cached = self._rng_states
        states = cached if cached is not None and self.on_quiet is None else {
            name: ctx.rng_state() for name, ctx in self._contexts.items()}
        new._contexts = {name: ctx.copy_for(new, states[name])
                         for name, ctx in self._contexts.items()}
        new._rng_states = states  # the new kernel's contexts start from these
        new._topics = {}
        new.on_quiet = None
        new.hash_state = False
        new.grade_off_loop = False
        return new

    async def resume(self) -> EpisodeResult:
        """Run a forked episode to its end, from where it was forked."""
        t0 = time.perf_counter()
        try:
            await self._serve()
        except Exception as exc:
            self._fail("runtime", exc)
        return await self._finish(time.perf_counter() - t0)

    async def _serve(self) -> None:
        """Deliver until the episode stops, on its own topics (refused traffic recorded)."""
        topic = self.bus.topic(self.spec.run_id, self.spec.episode_id, "+")
        with self.bus.watch_rejections(topic, self._refused):
            async with self.bus.subscribe(topic, max_buffer=64) as self._inbox:
                await self._loop()

    def release(self) -> None:
        """Let go of the actors and their contexts once the episode is over and its result
        taken: they refer back to the kernel, and such a cycle is freed only by a full garbage
        collection, which a long run makes rarely (see ``RunOptions.tune_gc``): thousands of
        finished episodes would wait for it in memory."""
        for actor in self.actors.values():
            let_go(actor)  # (a remote agent's worker lets the episode go)
        self._contexts.clear()
        self.actors.clear()
        self.tools.record = None  # (the kernel's bound method)

    # the Kernel protocol for contexts ---------------------------------------------------
    @property
    def workspace(self) -> WorkspaceState:
        return self.state

    @property
    def clock_now(self) -> float:
        return self.clock.now

    def actor_for(self, person: str) -> str | None:
        return self._actor_of.get(person)

    def person_for(self, actor: str) -> str | None:
        return self._person_of.get(actor)

    def submit(self, sender: str, to: str, kind: str, payload: dict[str, Any],
               delay: float) -> None:
        if sender == "agent" and kind in AGENT_ACTIONS:
            if self.turns >= self.task.limits.max_turns:  # one action more than allowed:
                self._stop = self._stop or "max_turns"  # refused, and not counted as a turn
                return
            self.turns += 1
        self.clock.schedule(self.clock.now + max(0.0, delay), _Delivery(sender, to, kind, payload))

    def note(self, actor: str, kind: str, payload: dict[str, Any]) -> None:
        self._record(actor, kind, payload)

    async def model_call(self, actor: str, endpoint: ModelEndpoint, request: dict[str, Any],
                         boundary: Any) -> tuple[Any, float]:
        """An actor's model call: the endpoint's answer (a simulation may serve a recorded
        one)."""
        return await endpoint.complete(request, boundary)

    def recorded_ahead(self, actor: str) -> list[dict[str, Any]]:
        """An episode serves no recorded answers (a simulation may)."""
        return []

    def answered_elsewhere(self, actor: str, calls: int, served: int, differs: int | None,
                           where: str) -> None:
        """Nothing to account for: an episode serves no recorded answers."""

    # recording ----------------------------------------------------------------------------
    @property
    def events(self) -> list[EventRecord]:
        """The episode's events so far, decoded from the text they are stored as (a new list
        on each call: read it once)."""
        return [EventRecord.from_row(row) for row in self._log]

    def _record(self, actor: str, kind: str, payload: dict[str, Any],
                text: str | None = None) -> None:
        if text is None:
            text = encode_payload(payload)
        seq, now, wall = len(self._log), round(self.clock.now, 6), time.time()
        self._hash.update(seq, now, actor, kind, text)
        row = (self.spec.episode_id, seq, now, wall, actor, kind, text)
        self._log.append(row)  # (the one tuple serves the log and the store)
        self._unsaved.append(row)

    async def _save(self) -> None:
        if self.store is not None and self._unsaved:
            batch, self._unsaved = self._unsaved, []
            await self.store.append_rows(batch)

    # running -------------------------------------------------------------------------------
    async def run(self) -> EpisodeResult:
        spec, task = self.spec, self.task
        t0 = time.perf_counter()
        if self.store is not None:
            await self.store.start_episode(
                episode_id=spec.episode_id, run_id=spec.run_id, task_id=task.id,
                family=task.family, trial=spec.trial, attempt=spec.attempt, seed=spec.seed,
                agent=spec.agent_name, role=spec.role)
        self._record("kernel", "episode.start", {"task_id": task.id, "trial": spec.trial,
                                                 "seed": spec.seed, "start": task.start.isoformat(),
                                                 "agent": task.agent})
        for kind, payload, text in self._seed_events:
            self._record("setup", kind, payload, text)
        me = self.state.people[task.agent].model_dump(mode="json")
        self.submit(task.user.person, "agent", "task",
                    {**task.opening(me), "tools": task_toolset(task, spec.tools)}, 0.0)
        for i, ev in enumerate(task.timeline):
            self.clock.schedule(ev.minutes(task.start) * 60, _Delivery(
                "world", "world", "timeline", {"index": i, **({"id": ev.id} if ev.id else {})}),
                priority=0)
        for member in task.cast():
            for ti, trig in enumerate(member.triggers):
                if trig.timed:
                    at = trig.at_minutes if trig.at is None else clock_minutes(trig.at,
                                                                               task.start)
                    self.clock.schedule(float(at or 0.0) * 60, _Delivery(
                        member.person, member.person, "trigger", {"index": ti}), priority=0)
        await self._save()
        if self.on_quiet is not None:
            self.on_quiet(self)  # (before the first delivery, too)
        try:
            with anyio.move_on_after(task.limits.wall_timeout_s) as scope:
                await self._serve()
            if scope.cancelled_caught:
                self._stop = "wall_timeout"
        except Exception as exc:  # a bug in the kernel or transport: the episode fails alone
            self._fail("runtime", exc)
        return await self._finish(time.perf_counter() - t0)

    async def _loop(self) -> None:
        limit = self.task.limits.max_sim_minutes * 60
        while self._stop is None:
            nxt = self.clock.peek_time()
            if nxt is None:
                self._stop = "agent_idle"  # nothing scheduled and the agent did not finish
                return
            if nxt > limit:
                self._stop = "max_sim_time"
                return
            s = await self.clock.next()
            assert s is not None
            await self._deliver(s.item)
            if len(self._unsaved) >= 64:
                await self._save()
            if self.on_quiet is not None and self._stop is None:
                self.on_quiet(self)

    async def _deliver(self, d: _Delivery) -> None:
        """Publish one envelope, take it back off the bus, and let its actor handle it.

        Only one envelope of an episode is ever in flight, and handling it completes before
        the clock may move: that is the episode's quiescence, and what makes its event order
        independent of the transport. On the memory bus the envelope is back at once; over
        MQTT it makes the round trip through the broker.
        """
        seq = len(self._log)
        self._record(d.sender, d.kind, {"to": d.to, **d.payload})
        if d.to == "kernel":
            self._to_kernel(d)
            return
        if d.to not in self.actors:
            return
        # (validated from a dict: pydantic's model_construct, which skips validation, is
        # slower than its validator in Rust, about 8 against 3 us; the id is unguessable, so a
        # forged envelope cannot take its place)
        env = Envelope.model_validate({
            "id": f"{self.spec.episode_id}#{seq}.{_token()}", "run": self.spec.run_id,
            "episode": self.spec.episode_id, "topic": self._topic(d.to), "sender": d.sender,
            "kind": d.kind, "payload": d.payload, "sim_time": self.clock.now, "seq": seq})
        await self.bus.publish(env)
        while True:
            got = await self._inbox.receive()
            if got.id == env.id:
                break  # anything else is a stray copy (a redelivery) and is skipped
        name = d.to
        actor = self.actors[name]
        if name not in _INSTANT:
            # an agent or a person may take real time (a model call): queue what is recorded
            # so far first, so a crash while it thinks loses nothing already recorded
            await self._save()
        try:
            await actor.handle(got, self._contexts[name])
        except EpisodeFailure as exc:
            self._retryable = exc.retryable
            self._fail(exc.boundary, exc)
        except Exception as exc:
            self._fail(_boundary(name, actor), exc)

    def _to_kernel(self, d: _Delivery) -> None:
        """An envelope for the kernel itself (recorded already): the agent's ``finish``, the
        user's ``satisfied``; a simulation adds its own kinds."""
        if d.kind == "finish":  # (a session whose client left ends as ``abandoned``)
            self._stop = "abandoned" if d.payload.get("abandoned") is True else "agent_finished"
        elif d.kind == "satisfied":
            self._stop = "user_satisfied"

    def _topic(self, actor: str) -> str:
        """The topic of one of this episode's actors (built once per actor)."""
        topic = self._topics.get(actor)
        if topic is None:
            topic = self._topics[actor] = self.bus.topic(self.spec.run_id,
                                                          self.spec.episode_id, actor)
        return topic

    def _refused(self, topic: str, reason: str, detail: dict[str, Any]) -> None:
        """A message on this episode's topics that the bus refused (forged, retained, not an
        envelope): on record, and nothing else."""
        self._record("bus", "bus.rejected", {"topic": topic, "reason": reason, **detail})

    def _fail(self, boundary: Boundary, exc: BaseException) -> None:
        if self._failure is None:
            msg = exc.message if isinstance(exc, EpisodeFailure) else f"{type(exc).__name__}: {exc}"
            self._failure = (boundary, msg)
            self._record("kernel", "episode.failure", {"boundary": boundary, "error": msg})
        self._stop = "failed"

    async def _finish(self, wall: float) -> EpisodeResult:
        spec, task = self.spec, self.task
        termination = self._stop or "failed"
        self._record("kernel", "episode.end", {"termination": termination, "turns": self.turns})
        g: Grade | None = None
        if self._failure is None:
            try:
                g = await self._grade()
            except Exception as exc:
                self._failure = ("grading", f"{type(exc).__name__}: {exc}")
        checks = g.checks if g else []
        completion = g.completion if g else 0.0
        status = "failed" if self._failure else "completed"
        dumped = self.state.to_json() if self.hash_state or self.store is not None else None
        result = EpisodeResult(
            episode_id=spec.episode_id, task_id=task.id, family=task.family, trial=spec.trial,
            status=status, termination=termination, completion=completion, turns=self.turns,
            sim_time=self.clock.now, wall_time=wall, event_count=len(self._log),
            events_hash=self._hash.hexdigest(),
            state_hash=self.state.state_hash(dumped) if self.hash_state else "",
            failure_boundary=self._failure[0] if self._failure else None,
            failure=self._failure[1] if self._failure else None, checks=checks,
            safety=g.safety if g else 0.0, robustness=g.robustness if g else 0.0,
            score=g.score if g else 0.0, passed=g.passed if g else False, grade=g,
            retryable=self._retryable and self._failure is not None)
        if self.store is not None:
            # encoded before the first wait, and the dump let go: thousands of episodes that
            # finish together may wait on the store, each holding only its rows' text
            projection = [(spec.episode_id, app, eid, encode_payload(row))
                          for app, rows in (dumped or {}).items() for eid, row in rows.items()]
            del dumped
            await self._save()
            await self.store.executemany(
                "INSERT OR REPLACE INTO projection (episode_id, app, entity_id, data) "
                "VALUES (?, ?, ?, ?)", projection)
            if g is not None:
                await save_grade(self.store, spec.episode_id, g)
            await self.store.finish_episode(
                spec.episode_id, status=status, sim_time=result.sim_time, turns=self.turns,
                termination=termination, completion=completion if status == "completed" else None,
                event_count=result.event_count, events_hash=result.events_hash,
                state_hash=result.state_hash, failure_boundary=result.failure_boundary,
                failure=result.failure, outcome={"wall_time": round(wall, 6)})
        return result

    async def _grade(self) -> Grade:
        """Grade the finished episode. Its events are decoded for this only, and let go
        before the episode waits on the store, as thousands that finish together may."""
        events = self.events
        if self.grade_off_loop:  # (the state and events no longer change)
            return await anyio.to_thread.run_sync(grade, self.task, self.state, events,
                                                  self.weights)
        return grade(self.task, self.state, events, self.weights)


async def save_grade(store: EventStore, episode_id: str, g: Grade) -> None:
    await store.save_grade(
        episode_id, completion=g.completion, safety=g.safety, robustness=g.robustness,
        score=g.score, passed=g.passed, detail=g.detail(),
        checks=[(c.id, c.kind, c.weight, c.passed, c.detail, c.evidence) for c in g.checks])


def _boundary(name: str, actor: Actor) -> Boundary:
    if name == "agent":
        return "agent"
    if name == "tools":
        return "tool"
    if name == "world":
        return "world"
    return "user" if actor.role == "user" else "coworker"
