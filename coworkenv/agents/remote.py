"""Remote agent workers: the agent under training served from another process or host.

The runner's side is :class:`RemoteAgentProxy`, an ordinary actor in the episode: it forwards
each envelope for the agent to the worker that holds the episode (a request on the bus) and
replays the worker's answer, a list of actions, through its own context. The kernel waits for
it like for any actor, so the clock and the event order are exactly those of a local run.

Workers announce themselves with heartbeats on ``<prefix>/_workers/<id>``; the
:class:`RemotePool` gives each new episode to the live worker with the fewest episodes. A
worker whose heartbeats stop is lost: its episodes fail with a clear reason and, being
retryable, run again as new attempts on another worker.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ..bus import Bus, BusError, BusTimeoutError, Envelope, new_id
from ..sim.actor import Actor, ActorContext
from ..sim.errors import EpisodeFailure
from ..sim.task import Task
from ..workspace import WorkspaceState

HEARTBEAT_S = 1.0


@dataclass
class WorkerInfo:
    worker_id: str
    policy: str
    capacity: int
    last_seen: float
    episodes: int = 0


class RemotePool:
    """The runner's view of the live workers (from their heartbeats)."""

    def __init__(self, bus: Bus, *, heartbeat_timeout: float = 4.0,
                 wait_for_worker: float = 60.0) -> None:
        self.bus = bus
        self.heartbeat_timeout = heartbeat_timeout
        self.wait_for_worker = wait_for_worker
        self.workers: dict[str, WorkerInfo] = {}
        self._changed = anyio.Event()
        self._tg: TaskGroup | None = None

    async def __aenter__(self) -> RemotePool:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        await self._tg.start(self._listen, name="remote-pool")
        return self

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None,
                        tb: TracebackType | None) -> None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(et, ev, tb)

    async def _listen(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        async with self.bus.subscribe(f"{self.bus.prefix}/_workers/+") as sub:
            task_status.started()
            async for env in sub:
                p = env.payload
                w = self.workers.get(env.sender)
                if p.get("stopping"):
                    self.workers.pop(env.sender, None)
                elif w is None:
                    self.workers[env.sender] = WorkerInfo(env.sender, str(p.get("policy")),
                                                          int(p.get("capacity", 1)),
                                                          time.monotonic())
                else:
                    w.last_seen = time.monotonic()
                self._changed.set()
                self._changed = anyio.Event()

    def lost(self, worker_id: str) -> str | None:
        w = self.workers.get(worker_id)
        if w is None:
            return f"remote worker {worker_id} stopped"
        quiet = time.monotonic() - w.last_seen
        if quiet > self.heartbeat_timeout:
            return f"remote worker {worker_id} lost (no heartbeat for {quiet:.1f}s)"
        return None

    async def assign(self) -> WorkerInfo:
        deadline = time.monotonic() + self.wait_for_worker
        while True:
            live = [w for w in self.workers.values() if self.lost(w.worker_id) is None]
            if live:
                w = min(live, key=lambda w: (w.episodes / max(1, w.capacity), w.worker_id))
                w.episodes += 1
                return w
            left = deadline - time.monotonic()
            if left <= 0:
                raise EpisodeFailure("agent", f"no remote worker on {self.bus.prefix}/_workers "
                                     f"within {self.wait_for_worker:g}s (start `coworkenv "
                                     "worker` with the same --bus)")
            with anyio.move_on_after(min(left, 0.5)):
                await self._changed.wait()

    def release(self, worker_id: str) -> None:
        w = self.workers.get(worker_id)
        if w is not None:
            w.episodes = max(0, w.episodes - 1)


@dataclass
class RemoteAgentProxy(Actor):
    """Stands in for the agent in the episode; the agent itself runs in a worker."""

    pool: RemotePool
    task: Task
    timeout: float = 3600.0
    role: str = "agent"
    worker: WorkerInfo | None = None
    done: bool = False

    async def handle(self, envelope: Envelope, ctx: ActorContext) -> None:
        if self.worker is None:
            self.worker = await self.pool.assign()
        w = self.worker
        payload: dict[str, Any] = {"envelope": envelope.model_dump(mode="json")}
        if envelope.kind == "task":
            payload["setup"] = {
                "seed": ctx.seed, "person": ctx.person, "start": ctx.start.isoformat(),
                "actors": {m.person: ctx.actor_for(m.person) for m in self.task.cast()},
                # only a teacher that follows the reference solution is shown it
                "reference": [s.model_dump(mode="json") for s in self.task.reference]
                if w.policy == "oracle" else None}
        bus = self.pool.bus
        req = Envelope(run=envelope.run, episode=envelope.episode,
                       topic=bus.topic(envelope.run, envelope.episode, "agent", w.worker_id),
                       sender="kernel", kind="agent.request", payload=payload,
                       sim_time=envelope.sim_time, seq=envelope.seq)
        try:
            reply = await bus.request(req, timeout=self.timeout,
                                      alive=lambda: self.pool.lost(w.worker_id))
        except BusTimeoutError as exc:
            self.pool.release(w.worker_id)
            raise EpisodeFailure("agent", str(exc), retryable=True) from None
        if reply.kind == "agent.error":
            raise EpisodeFailure("agent", f"remote worker {w.worker_id}: "
                                 f"{reply.payload.get('error')}")
        for kind, body in reply.payload.get("records", []):
            ctx.record(kind, body)
        for a in reply.payload.get("actions", []):
            ctx.send(a["to"], a["kind"], a["payload"], delay=a.get("delay", 0.0))
            if a["kind"] == "finish":
                self.pool.release(w.worker_id)


# the worker's side ------------------------------------------------------------------------
@dataclass
class _Collector:
    """The Kernel protocol for a context in a worker: actions are collected, not applied."""

    start: datetime
    actors: dict[str, str]
    person: str
    now: float = 0.0
    actions: list[dict[str, Any]] = field(default_factory=list)
    records: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def clock_now(self) -> float:
        return self.now

    @property
    def workspace(self) -> WorkspaceState:
        raise RuntimeError("an agent sees the workspace only through its tools")

    def submit(self, sender: str, to: str, kind: str, payload: dict[str, Any],
               delay: float) -> None:
        self.actions.append({"to": to, "kind": kind, "payload": payload, "delay": delay})

    def note(self, actor: str, kind: str, payload: dict[str, Any]) -> None:
        self.records.append((kind, payload))

    def actor_for(self, person: str) -> str | None:
        if person == self.person:
            return "agent"
        return self.actors.get(person)

    def person_for(self, actor: str) -> str | None:
        return self.person if actor == "agent" else actor


class Worker:
    """Serves agent decisions for episodes run elsewhere (``coworkenv worker``)."""

    def __init__(self, bus: Bus, make_agent: Callable[[dict[str, Any]], Actor], policy: str, *,
                 capacity: int = 64, worker_id: str | None = None,
                 heartbeat: float = HEARTBEAT_S) -> None:
        self.bus = bus
        self.make_agent = make_agent
        self.policy = policy
        self.capacity = capacity
        self.worker_id = worker_id or f"w-{new_id()[:10]}"
        self.heartbeat = heartbeat
        self.episodes: dict[str, tuple[Actor, ActorContext, _Collector]] = {}
        self.handled = 0
        self._limit = anyio.Semaphore(capacity)

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
                    stop_after: float | None = None) -> None:
        topic = f"{self.bus.prefix}/+/+/agent/{self.worker_id}"
        async with self.bus.subscribe(topic, max_buffer=4 * self.capacity) as sub, \
                anyio.create_task_group() as tg:
            tg.start_soon(self._beat, name=f"{self.worker_id}-heartbeat")
            await self._announce()
            task_status.started()
            with anyio.move_on_after(stop_after if stop_after is not None else float("inf")):
                async for req in sub:
                    await self._limit.acquire()
                    tg.start_soon(self._handle, req)
            tg.cancel_scope.cancel()
        await self._announce(stopping=True)

    async def _announce(self, *, stopping: bool = False) -> None:
        with contextlib.suppress(BusError):
            await self.bus.publish(Envelope(
                run="_", episode="_", topic=f"{self.bus.prefix}/_workers/{self.worker_id}",
                sender=self.worker_id, kind="worker.heartbeat",
                payload={"policy": self.policy, "capacity": self.capacity,
                         "active": len(self.episodes), "handled": self.handled,
                         "stopping": stopping}))

    async def _beat(self) -> None:
        while True:
            await anyio.sleep(self.heartbeat)
            await self._announce()

    async def _handle(self, req: Envelope) -> None:
        try:
            env = Envelope.model_validate(req.payload["envelope"])
            key = f"{env.run}/{env.episode}"
            setup = req.payload.get("setup")
            if setup is not None:
                col = _Collector(datetime.fromisoformat(setup["start"]), setup["actors"],
                                 setup["person"])
                ctx = ActorContext(col, "agent", setup["person"], int(setup["seed"]))
                self.episodes[key] = (self.make_agent(setup), ctx, col)
            if key not in self.episodes:
                await self.bus.reply(req, sender=self.worker_id, kind="agent.error",
                                     payload={"error": f"unknown episode {key} (worker restarted?)"})
                return
            agent, ctx, col = self.episodes[key]
            col.now = env.sim_time
            col.actions, col.records = [], []
            try:
                await agent.handle(env, ctx)
            except EpisodeFailure as exc:
                await self.bus.reply(req, sender=self.worker_id, kind="agent.error",
                                     payload={"error": exc.message})
                return
            if any(a["kind"] == "finish" for a in col.actions):
                self.episodes.pop(key, None)
            self.handled += 1
            await self.bus.reply(req, sender=self.worker_id, kind="agent.actions",
                                 payload={"actions": col.actions, "records": col.records})
        finally:
            self._limit.release()
