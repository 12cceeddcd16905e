"""Remote agent workers: the agent under training served from another process or host.

The runner's side is :class:`RemoteAgentProxy`, an ordinary actor in the episode: it forwards
each envelope for the agent to the worker that holds the episode (a request on the bus) and
replays the worker's answer, a list of actions, through its own context. The kernel waits for
it like for any actor, so the clock and the event order are exactly those of a local run.

Which parts are the broker's (MQTT 5, on Mosquitto) and which are ours:

- *Handing out episodes* is ours: a new episode's claim goes to one worker that the pool
  holds for alive (by its heartbeats, as counted on the runner's own clock), on the worker's
  own topic: the least busy first; one with room answers that it holds the episode, a full
  one that it is full, and the claim goes to the next. The episode then sticks to that
  worker (its agent's state lives there), on the same topic, by request and reply. (Not an
  MQTT shared subscription: the broker hands its messages in turn to every session it
  keeps, a dead worker's included until the session expires, minutes later; every claim
  that went there waited for nothing.)
- *A lost worker* is the broker's to tell: each worker's connection carries a last will on
  ``<prefix>/_workers/<id>`` that the broker publishes the moment the connection drops
  (a killed process, a cut network, a hung loop that stops its keepalives). Ours: heartbeats
  on the same topic, which say that a worker exists at all (MQTT has no presence), its
  capacity, and that it is still answering. A will is final only when the worker is not
  heard from again within ``heartbeat_timeout`` of its last heartbeat: a broker restart
  drops every connection (and publishes the wills of workers that are alive and reconnect).
  Silence is counted from when the runner's own link came up: in an outage nothing can be
  heard. Heartbeats are signed and stamped (``bus/_fresh.py``): one played back from a
  worker that died is stale. A request whose answer a broker restart lost is asked again
  after the reconnect; the worker keeps its last answers to give them again.
- *Sessions* are the broker's: every client's session outlives a short drop (what was queued
  for it arrives after the reconnect) and expires on the broker by itself when the client
  never comes back. What the broker still keeps of a worker counts for nothing here: a
  worker is in the pool while its heartbeats come, and a claim goes only to a worker in the
  pool whose last will has not come and that answered its last claim (a claim left
  unanswered sets a worker aside until it is heard from again).

A lost worker's episodes fail with a clear reason and, being retryable, run again as new
attempts on another worker; a simulation's arrival (which runs once) goes to another worker
instead, given the arrival's envelopes so far again (:class:`RemoteAgentProxy`).
"""

from __future__ import annotations

import contextlib
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..bus import Bus, BusError, BusTimeoutError, Envelope, new_id
from ..sim.actor import Actor, ActorContext, ModelEndpoint
from ..sim.errors import EpisodeFailure
from ..sim.task import Task
from ..store import MEASURED
from ..workspace import WorkspaceState
from .chat import request_digest

HEARTBEAT_S = 1.0
CLAIM_TIMEOUT_S = 2.0
"""How long a claim waits for a worker's answer before it goes to the next worker (a worker
answers at once, full or not: one that does not is gone, or hung, and is set aside until it
is heard from again)."""
MAX_MOVES = 3
"""How many times a simulation's arrival goes to another worker when its worker is lost."""
CLAIM_HELD_S = 120.0
"""How long a worker keeps room for an episode it claimed whose first request has not come
(as long as a bus takes an envelope as fresh: the request may have waited out an outage)."""
IDLE_HELD_S = 1800.0
"""How long a worker keeps an episode that has had no request (its runner's end notice never
came: the runner was killed, or the notice was lost) before it lets it go and its room."""
ENDS_BUFFER = 4096
"""End notices a pool holds for the bus at most (one more is dropped: that worker lets the
episode go after IDLE_HELD_S instead)."""


@dataclass
class WorkerInfo:
    worker_id: str
    policy: str
    capacity: int
    last_seen: float
    episodes: int = 0
    group: str = ""
    """The workers' group it serves ("": the default one)."""
    bus: str | None = None
    """The id of the worker's bus (one per process), from its heartbeats."""
    will: str | None = None
    """Why it is lost if it stays silent: its last will came (its connection dropped). A
    broker restart drops every connection and publishes the wills of workers that are alive
    and come back: a heartbeat after the will clears it. No claim goes to it meanwhile."""
    unanswered: float | None = None
    """When a claim to it went unanswered (``time.monotonic()``); no claim goes to it until
    a heartbeat comes after that."""


class RemotePool:
    """The runner's view of the live workers (from their heartbeats)."""

    def __init__(self, bus: Bus, *, heartbeat_timeout: float = 4.0,
                 wait_for_worker: float = 60.0, serial: bool = False) -> None:
        self.bus = bus
        self.heartbeat_timeout = heartbeat_timeout
        self.wait_for_worker = wait_for_worker
        self.serial = serial
        """The pool's runner waits for each claim before anything else moves (a simulation:
        its kernel awaits the arrival's agent), so places its own open episodes hold cannot
        free while a claim waits: with every live worker's places held by them, the claim
        fails at once (it would wait forever) instead of waiting for room."""
        self.workers: dict[str, WorkerInfo] = {}
        self.gone: dict[str, str] = {}
        """Workers that said they stop: why each was lost."""
        self._changed = anyio.Event()
        self._tg: TaskGroup | None = None
        self._turn = 0
        self._given: dict[str, int] = {}
        """The turn (of claims) at which each worker was last given an episode."""
        self._ends: MemoryObjectSendStream[tuple[str, str, str]] | None = None
        self._ends_told = anyio.Event()

    async def __aenter__(self) -> RemotePool:
        self._ends, ends = anyio.create_memory_object_stream[tuple[str, str, str]](ENDS_BUFFER)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        await self._tg.start(self._listen, name="remote-pool")
        self._tg.start_soon(self._tell_ends, ends, name="remote-pool-ends")
        return self

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None,
                        tb: TracebackType | None) -> None:
        assert self._tg is not None
        if self._ends is not None:  # the last end notices go out (a moment at most)
            self._ends.close()
            with anyio.CancelScope(shield=True), anyio.move_on_after(2.0):
                await self._ends_told.wait()
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(et, ev, tb)

    def end(self, worker_id: str, run: str, episode: str) -> None:
        """An episode that worker holds is over (whatever ended it): its room in this pool's
        count is free, and the worker is told to let the episode go (``agent.end``, sent
        soon after by the pool; a worker that never hears it lets the episode go once idle
        for IDLE_HELD_S)."""
        self.release(worker_id)
        if self._ends is not None:
            with contextlib.suppress(anyio.WouldBlock, anyio.ClosedResourceError):
                self._ends.send_nowait((worker_id, run, episode))

    async def _tell_ends(self, ends: MemoryObjectReceiveStream[tuple[str, str, str]]) -> None:
        async with ends:
            async for worker_id, run, episode in ends:
                note = Envelope(run=run, episode=episode,
                                topic=self.bus.topic(run, episode, "agent", worker_id),
                                sender="kernel", kind="agent.end", payload={})
                with contextlib.suppress(BusError):
                    await self.bus.publish(note)
        self._ends_told.set()

    async def _listen(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        async with self.bus.subscribe(f"{self.bus.prefix}/_workers/+") as sub:
            task_status.started()
            async for env in sub:
                p = env.payload
                w = self.workers.get(env.sender)
                bus = p.get("bus")
                if p.get("lost"):  # its last will, published by the broker
                    if w is not None and (w.bus is None or w.bus == bus):  # (not an older
                        w.will = (f"remote worker {env.sender} lost: its connection to the "
                                  "broker dropped (last will)")  # process's of the same id)
                elif p.get("stopping"):
                    self.gone[env.sender] = f"remote worker {env.sender} stopped"
                    self.workers.pop(env.sender, None)
                elif w is None:
                    self.workers[env.sender] = WorkerInfo(env.sender, str(p.get("policy")),
                                                          int(p.get("capacity", 1)),
                                                          time.monotonic(),
                                                          group=str(p.get("group") or ""),
                                                          bus=bus)
                else:
                    w.last_seen, w.will, w.bus = time.monotonic(), None, bus or w.bus
                    if w.unanswered is not None and w.unanswered < w.last_seen:
                        w.unanswered = None  # (heard from again: it may have claims)
                self._changed.set()
                self._changed = anyio.Event()

    def lost(self, worker_id: str) -> str | None:
        w = self.workers.get(worker_id)
        if w is None:
            return self.gone.get(worker_id, f"remote worker {worker_id} stopped")
        up = self.bus.connected_since()
        if up is None:  # our own link is down: nothing can be heard (the bus gives up on
            return None  # the broker after its reconnect_timeout, and says so)
        now = time.monotonic()
        quiet = now - max(w.last_seen, up)
        if quiet > self.heartbeat_timeout:
            return w.will or f"remote worker {worker_id} lost (no heartbeat for {quiet:.1f}s)"
        return None

    def live(self, group: str = "") -> list[WorkerInfo]:
        """The workers of ``group`` in the pool: heard from within the heartbeat timeout."""
        return [w for w in self.workers.values()
                if w.group == group and self.lost(w.worker_id) is None]

    def _claimable(self, live: list[WorkerInfo]) -> list[WorkerInfo]:
        """The live workers a claim may go to, the least busy first (by the episodes this
        pool gave each, for its capacity; then the one given an episode longest ago): none
        whose last will came or that left a claim unanswered, since it was last heard."""
        ok = [w for w in live if w.will is None and w.unanswered is None]
        self._turn += 1
        return sorted(ok, key=lambda w: (w.episodes / max(1, w.capacity),
                                         self._given.get(w.worker_id, 0)))

    async def _claim(self, w: WorkerInfo, run: str, episode: str, sim_time: float,
                     group: str) -> bool:
        """Ask one worker to hold the episode: True if it does; False if it is full, or
        said nothing (then it is set aside until heard from again)."""
        # a new envelope each time: receivers drop an id they have seen
        claim = Envelope(run=run, episode=episode,
                         topic=self.bus.topic(run, episode, "agent", w.worker_id),
                         sender="kernel", kind="agent.claim", payload={"group": group},
                         sim_time=sim_time)
        try:
            reply = await self.bus.request(claim, timeout=CLAIM_TIMEOUT_S,
                                           alive=lambda: self.lost(w.worker_id)
                                           or w.will, check_every=0.1)
        except BusTimeoutError:
            if w.will is None:
                w.unanswered = time.monotonic()
            return False
        if reply.kind != "agent.claimed":
            return False  # full: the next one
        w.episodes += 1
        self._given[w.worker_id] = self._turn
        return True

    async def assign(self, run: str, episode: str, sim_time: float = 0.0,
                     group: str = "") -> WorkerInfo:
        """A worker for a new episode: the claim goes to the live workers (by their
        heartbeats), the least busy first, one at a time; the first that answers with room
        holds the episode. While all are full (or none can be claimed: its last will came,
        or it left a claim unanswered) claims go out again as heartbeats come, as long as any
        is alive; with none for ``wait_for_worker`` seconds, the episode fails. ``group``:
        only workers of that group (``coworkenv worker --group``). A ``serial`` pool's claim
        fails at once when its own open episodes hold every live place (see ``serial``)."""
        deadline = time.monotonic() + self.wait_for_worker
        while True:
            live = self.live(group)
            if live:
                deadline = time.monotonic() + self.wait_for_worker
                for w in self._claimable(live):
                    if await self._claim(w, run, episode, sim_time, group):
                        return w
                if self.serial and all(w.episodes >= w.capacity for w in live):
                    raise EpisodeFailure("agent", self._no_room(live, group))
            left = deadline - time.monotonic()
            if left <= 0:
                of = f" of group {group!r}" if group else ""
                raise EpisodeFailure("agent", f"no remote worker{of} on {self.bus.prefix}/"
                                     f"_workers within {self.wait_for_worker:g}s (start "
                                     "`coworkenv worker` with the same --bus"
                                     + (f" and --group {group}" if group else "") +
                                     "; a worker that runs already may sign with another "
                                     "key: give both the same COWORKENV_BUS_KEY)")
            with anyio.move_on_after(min(left, 0.5)):
                await self._changed.wait()

    @staticmethod
    def _no_room(live: list[WorkerInfo], group: str) -> str:
        places = sum(w.capacity for w in live)
        of = f" of group {group!r}" if group else ""
        return (f"no room for this arrival: the {len(live)} live remote worker(s){of} have "
                f"{places} place(s) (--capacity), all held by this simulation's open "
                "arrivals, and the simulation waits on this one (none of them can end "
                "meanwhile). A simulation needs a place for every arrival open at once, at "
                "least one per remote agent: start more workers (`coworkenv worker`"
                + (f" --group {group}" if group else "") + ") or give them a larger "
                "--capacity")

    def release(self, worker_id: str) -> None:
        w = self.workers.get(worker_id)
        if w is not None:
            w.episodes = max(0, w.episodes - 1)


@dataclass
class RemoteAgentProxy(Actor):
    """Stands in for the agent in the episode; the agent itself runs in a worker.
    ``episode``: the id the worker holds the agent's state under (default: the episode's;
    a simulation gives each arrival its own); ``group``: the workers' group that serves it.

    A worker lost while the episode waits on it: an episode of a run fails (retryable: it runs
    again as a new attempt elsewhere); a simulation's arrival, which runs once, goes to
    another worker, which is given the arrival's envelopes so far again (their answers
    dropped: the world has them already) and then the one that waits. Its agent's state is
    then that of the lost worker's agent as far as the agent decides the same given the same
    envelopes and seed (a policy such as ``oracle`` does; a model-backed agent is asked
    again)."""

    pool: RemotePool
    task: Task
    timeout: float = 3600.0
    role: str = "agent"
    worker: WorkerInfo | None = None
    done: bool = False
    """Its worker has let the episode go (the agent finished) or been told to (ended)."""
    episode: str | None = None
    group: str = ""
    held: tuple[str, str] | None = None
    """(run, episode id) its worker holds the agent under, once a worker took it."""
    sent: list[tuple[Envelope, int]] = field(default_factory=list)
    """A simulation's arrival: the envelopes given to its worker so far, each with the tool
    calls made before it (for another worker, if that one is lost: its agent then makes the
    same calls, under the same ids)."""
    moves: int = 0

    def _payload(self, envelope: Envelope, ctx: ActorContext, w: WorkerInfo,
                 calls: int | None = None) -> dict[str, Any]:
        payload: dict[str, Any] = {"envelope": envelope.model_dump(mode="json"),
                                   "tool_calls": ctx.tool_calls if calls is None else calls}
        answers = ctx.recorded_answers()
        if answers:  # (a resumed or replayed simulation: the worker serves them)
            payload["answers"] = answers
        if envelope.kind == "task":
            payload["setup"] = {
                "seed": ctx.seed, "person": ctx.person, "start": ctx.start.isoformat(),
                "name": ctx.name,  # (its calls' ids as the agent in process would make them)
                "actors": {m.person: ctx.actor_for(m.person) for m in self.task.cast()},
                # only a teacher that follows the reference solution is shown it
                "reference": [s.model_dump(mode="json") for s in self.task.reference]
                if w.policy == "oracle" else None}
        return payload

    async def _ask(self, envelope: Envelope, ctx: ActorContext, held: str,
                   calls: int | None = None) -> Envelope:
        """The worker's answer to one envelope (the worker assigned first, if none is);
        ``calls``: the tool calls made before it (default: the context's now)."""
        if self.worker is None:
            self.worker = await self.pool.assign(envelope.run, held, envelope.sim_time,
                                                 self.group)
            self.held = (envelope.run, held)
            if self.episode is not None:  # (a simulation: which worker took which arrival)
                ctx.record("agent.worker", {"worker": self.worker.worker_id,
                                            "group": self.group})
        w = self.worker
        bus = self.pool.bus
        req = Envelope(run=envelope.run, episode=held,
                       topic=bus.topic(envelope.run, held, "agent", w.worker_id),
                       sender="kernel", kind="agent.request",
                       payload=self._payload(envelope, ctx, w, calls),
                       sim_time=envelope.sim_time, seq=envelope.seq)
        return await bus.request(req, timeout=self.timeout,
                                 alive=lambda: self.pool.lost(w.worker_id))

    async def _move(self, envelope: Envelope, ctx: ActorContext, held: str, why: str
                    ) -> Envelope:
        """A simulation's arrival whose worker was lost: another worker takes it, is given
        the envelopes so far again (their answers dropped), then this one."""
        while True:
            assert self.worker is not None
            lost = self.pool.lost(self.worker.worker_id)
            if lost is None or self.moves >= MAX_MOVES:
                raise EpisodeFailure("agent", lost or why, retryable=True)
            self.pool.release(self.worker.worker_id)
            self.worker, self.moves = None, self.moves + 1
            try:
                for past, calls in self.sent:
                    again = await self._ask(past, ctx, held, calls)
                    if again.kind == "agent.error":
                        return again  # (its error is the arrival's)
                return await self._ask(envelope, ctx, held)
            except BusTimeoutError as exc:
                why = str(exc)

    async def handle(self, envelope: Envelope, ctx: ActorContext) -> None:
        held = self.episode or envelope.episode
        before = ctx.tool_calls
        try:
            reply = await self._ask(envelope, ctx, held)
        except BusTimeoutError as exc:
            if self.episode is None or self.worker is None:  # (a run's episode: retried;
                # its place is given back when it is over: ended)
                raise EpisodeFailure("agent", str(exc), retryable=True) from None
            reply = await self._move(envelope, ctx, held, str(exc))
        w = self.worker
        assert w is not None
        if self.episode is not None:
            self.sent.append((envelope, before))
        if reply.kind == "agent.error":
            raise EpisodeFailure("agent", f"remote worker {w.worker_id}: "
                                 f"{reply.payload.get('error')}")
        records = reply.payload.get("records", [])
        calls = sum(kind in MEASURED for kind, _ in records)
        if calls:
            ctx.answered_elsewhere(calls, int(reply.payload.get("served") or 0),
                                   reply.payload.get("differs"), f"remote worker {w.worker_id}")
        for kind, body in records:
            ctx.record(kind, body)
        ctx.tool_calls = int(reply.payload.get("tool_calls", ctx.tool_calls))
        for a in reply.payload.get("actions", []):
            to = ctx.name if a["to"] == "agent" else a["to"]  # (its own timers: an older
            # worker names the agent "agent")
            ctx.send(to, a["kind"], a["payload"], delay=a.get("delay", 0.0))
            if a["kind"] == "finish":
                self.pool.release(w.worker_id)
                self.done = True

    def ended(self) -> None:
        """The episode or arrival is over without the agent's ``finish`` (turns or time ran
        out, the simulation ended, it failed): its worker is told to let it go (it would
        keep its room for it, and fill up)."""
        if self.worker is not None and self.held is not None and not self.done:
            self.pool.end(self.worker.worker_id, *self.held)
            self.done = True


# the worker's side ------------------------------------------------------------------------
@dataclass
class _Collector:
    """The Kernel protocol for a context in a worker: actions are collected, not applied."""

    start: datetime
    actors: dict[str, str]
    person: str
    name: str = "agent"
    """The agent's actor name in the runner's kernel."""
    now: float = 0.0
    actions: list[dict[str, Any]] = field(default_factory=list)
    records: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    recorded: deque[dict[str, Any]] = field(default_factory=deque)
    """The recorded answers the runner sent with this request (a resumed or replayed
    simulation), served in order to the same requests."""
    calls: int = 0
    served: int = 0
    differs: int | None = None

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

    async def model_call(self, actor: str, endpoint: ModelEndpoint, request: dict[str, Any],
                         boundary: Any) -> tuple[Any, float]:
        """The recorded answer where the runner sent one for this very request (its digest),
        else the model's; from the first request that differs on, the model's."""
        i, self.calls = self.calls, self.calls + 1
        if self.recorded:
            entry = self.recorded.popleft()
            if entry.get("digest") == request_digest(request):
                from openai.types.chat import ChatCompletion

                self.served += 1
                return (ChatCompletion.model_validate(entry["response"]),
                        float(entry.get("latency_s") or 0.0))
            self.differs, self.recorded = i, deque()
        return await endpoint.complete(request, boundary)

    def recorded_ahead(self, actor: str) -> list[dict[str, Any]]:
        return []  # (a worker's agent makes its own calls)

    def answered_elsewhere(self, actor: str, calls: int, served: int, differs: int | None,
                           where: str) -> None:
        pass

    def actor_for(self, person: str) -> str | None:
        if person == self.person:
            return self.name
        return self.actors.get(person)

    def person_for(self, actor: str) -> str | None:
        return self.person if actor == self.name else actor


class Worker:
    """Serves agent decisions for episodes run elsewhere (``coworkenv worker``)."""

    def __init__(self, bus: Bus, make_agent: Callable[[dict[str, Any]], Actor], policy: str, *,
                 capacity: int = 64, worker_id: str | None = None,
                 heartbeat: float = HEARTBEAT_S, group: str = "") -> None:
        self.bus = bus
        self.group = group
        self.make_agent = make_agent
        self.policy = policy
        self.capacity = capacity
        self.worker_id = worker_id or f"w-{new_id()[:10]}"
        self.heartbeat = heartbeat
        self.episodes: dict[str, tuple[Actor, ActorContext, _Collector]] = {}
        self.claimed: dict[str, float] = {}
        """Episodes claimed whose first request has not come yet (when claimed)."""
        self.seen: dict[str, float] = {}
        """When each episode held last had a request (``time.monotonic()``)."""
        self.handled = 0
        self._limit = anyio.Semaphore(capacity)
        self._busy: set[str] = set()
        self._answers: OrderedDict[str, tuple[str, dict[str, Any]]] = OrderedDict()
        """The last answers, by correlation id, for requests asked again."""
        self._keep_answers = max(1024, 4 * capacity)
        bus.set_last_will(self._presence(lost=True))  # (the bus is not open yet)

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
                    if req.kind == "agent.claim":
                        await self._claim(req)
                        continue
                    if req.kind == "agent.end":  # (its runner is done with it)
                        self._let_go(f"{req.run}/{req.episode}")
                        continue
                    corr = req.correlation_id or req.id
                    if corr in self._busy:
                        continue  # asked again while the answer is being made: it will come
                    if corr in self._answers:  # asked again: the answer was lost
                        kind, payload = self._answers[corr]
                        with contextlib.suppress(BusError):
                            await self.bus.reply(req, sender=self.worker_id, kind=kind,
                                                 payload=payload)
                        continue
                    await self._limit.acquire()
                    tg.start_soon(self._handle, req)
            tg.cancel_scope.cancel()
        await self._announce(stopping=True)

    def _presence(self, *, stopping: bool = False, lost: bool = False) -> Envelope:
        return Envelope(
            run="_", episode="_", topic=f"{self.bus.prefix}/_workers/{self.worker_id}",
            sender=self.worker_id, kind="worker.heartbeat",
            payload={"policy": self.policy, "capacity": self.capacity, "group": self.group,
                     "active": len(self.episodes), "handled": self.handled,
                     "bus": self.bus.bus_id,
                     "stopping": stopping or lost, "lost": lost})

    async def _announce(self, *, stopping: bool = False) -> None:
        with contextlib.suppress(BusError):
            await self.bus.publish(self._presence(stopping=stopping))

    def _let_go(self, key: str) -> None:
        self.episodes.pop(key, None)
        self.claimed.pop(key, None)
        self.seen.pop(key, None)

    async def _claim(self, claim: Envelope) -> None:
        """Answer a claim: held while there is room (episodes held and claimed, below
        capacity), else full (the runner asks the next worker)."""
        now = time.monotonic()
        for key, at in list(self.claimed.items()):
            if now - at > CLAIM_HELD_S:  # claimed, never started (its runner went elsewhere)
                del self.claimed[key]
        for key, at in list(self.seen.items()):
            if now - at > IDLE_HELD_S:  # held, no request since (its end notice never came)
                self._let_go(key)
        key = f"{claim.run}/{claim.episode}"
        full = len(self.episodes) + len(self.claimed) >= self.capacity \
            or claim.payload.get("group", "") != self.group
        if not full:
            self.claimed[key] = now
        with contextlib.suppress(BusError, ValueError):
            await self.bus.reply(claim, sender=self.worker_id,
                                 kind="agent.full" if full else "agent.claimed",
                                 payload={"worker": self.worker_id, "policy": self.policy,
                                          "capacity": self.capacity})

    async def _beat(self) -> None:
        while True:
            await anyio.sleep(self.heartbeat)
            await self._announce()

    async def _handle(self, req: Envelope) -> None:
        """Answer one request, and keep the answer: a runner whose link dropped while it
        waited asks again (a new envelope, the same correlation id), and gets it again."""
        corr = req.correlation_id or req.id
        try:
            self._busy.add(corr)
            kind, payload = await self._decide(req)
            self._answers[corr] = (kind, payload)
            if len(self._answers) > self._keep_answers:
                self._answers.popitem(last=False)
            await self.bus.reply(req, sender=self.worker_id, kind=kind, payload=payload)
        finally:
            self._busy.discard(corr)
            self._limit.release()

    async def _decide(self, req: Envelope) -> tuple[str, dict[str, Any]]:
        env = Envelope.model_validate(req.payload["envelope"])
        key = f"{req.run}/{req.episode}"  # (a simulation's arrival: one of its own)
        setup = req.payload.get("setup")
        if setup is not None and key not in self.claimed:
            # an episode starts here only after this worker claimed it: a request played
            # back (to a worker restarted under the same id, say) holds no room
            return "agent.error", {"error": f"episode {key} was not claimed by this worker"}
        if setup is not None:
            self.claimed.pop(key, None)
            name = str(setup.get("name") or "agent")
            col = _Collector(datetime.fromisoformat(setup["start"]), setup["actors"],
                             setup["person"], name)
            ctx = ActorContext(col, name, setup["person"], int(setup["seed"]))
            self.episodes[key] = (self.make_agent(setup), ctx, col)
        if key not in self.episodes:
            return "agent.error", {"error": f"unknown episode {key} (worker restarted?)"}
        agent, ctx, col = self.episodes[key]
        self.seen[key] = time.monotonic()
        col.now = env.sim_time
        col.actions, col.records = [], []
        col.recorded = deque(req.payload.get("answers") or ())
        col.calls, col.served, col.differs = 0, 0, None
        ctx.tool_calls = int(req.payload.get("tool_calls", ctx.tool_calls))
        try:
            await agent.handle(env, ctx)
        except EpisodeFailure as exc:
            return "agent.error", {"error": exc.message}
        if any(a["kind"] == "finish" for a in col.actions):
            self._let_go(key)
        self.handled += 1
        out: dict[str, Any] = {"actions": col.actions, "records": col.records,
                               "tool_calls": ctx.tool_calls}
        if req.payload.get("answers"):
            out.update(served=col.served, differs=col.differs)
        return "agent.actions", out
