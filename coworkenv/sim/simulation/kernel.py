"""The simulation kernel: the episode kernel (:class:`~coworkenv.sim.episode.EpisodeKernel`)
over days, with a roster of agents, a stream of arrivals and world events.

It is the episode kernel, not a second one: one virtual clock, one bus (every envelope makes
its round trip as in an episode), one log, one workspace and the one reducer. What it adds:

- **seats**: each agent of the roster is an actor ``agent.<id>`` acting as its person. A seat
  works one arrival at a time (its queue holds the others: backlog); each arrival gets a new
  agent from the seat's policy, and its actions take ``action_minutes`` of simulated time;
- **people**: each person of the company is one actor who plays, for every arrival they take
  part in, that arrival's cast member (facts, triggers, delays, out-of-office), answering the
  agent working on it;
- **arrivals**: at its time an arrival's own seed entities enter the workspace (recorded as
  events), its timeline and triggers are scheduled from then, and it is queued at its seat.
  When its agent finishes (or its time limit, turn limit or the simulation's end comes) it is
  graded at once against the shared log, scoped to it: the events from its arrival on, with
  its seat's actions only from when the seat took it up, its agent named ``agent`` and the
  other agents named as the people they are; and the workspace without the entities other
  arrivals created before it. Its grade and that view are recorded as an episode of the run,
  so ``eval``, ``export``, ``replay`` and the viewer read arrivals as they read episodes;
- **world events**: outages (an app's or some tools' calls by agents fail as ``unavailable``
  with ``retry_after_s`` for a window), people joining, out-of-office periods.

Grading and recording happen between two deliveries, so the event order is the same on any
bus, and an interrupted simulation resumed (re-run from its start, its recorded prefix checked
hash for hash and not written again) ends with the same grades and hashes.
"""

from __future__ import annotations

import zlib
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import anyio
import anyio.lowlevel

from ...bus import Bus
from ...store import MEASURED, EventsHasher, EventStore
from ...workspace import REGISTRY, WorkspaceSeed, WorkspaceState, apply_event
from ...workspace.models import Person, ws_event
from ..actor import Actor, ActorContext, ModelEndpoint
from ..cases import named_case
from ..clock import VirtualClock
from ..episode import EpisodeKernel, _Delivery
from ..eventlog import EventLog
from ..grading import GradeWeights
from ..services import ToolService
from ..task import CROSS_ARRIVAL, clock_minutes
from .arrivals import Arrival, instantiate, timed_arrivals
from .grades import Grading
from .language import SEAT_PREFIX, STRUCTURAL, Join, Outage, Reorg, Route, Seat
from .loading import Loaded, SimulationLimits
from .records import (
    MODEL_SLOT,
    AgentFactory,
    Answers,
    ArrivalOutcome,
    Live,
    PersonFactory,
    Resume,
    SimCheck,
    SimulationError,
)
from .seats import PersistentFactory, Seats
from .world import (
    Outages,
    PersistentSeatActor,
    PersistentSeatContext,
    PersonContext,
    PersonHub,
    SeatActor,
    SeatContext,
    SimWorld,
)


@dataclass(frozen=True)
class _Names:
    """What the episode kernel's transport reads of its spec: the run's and log's ids."""

    run_id: str
    episode_id: str


class SimulationKernel(Seats, Grading, EpisodeKernel):
    """See the module's docstring. ``policies``: each seat's agent factory."""

    def __init__(self, loaded: Loaded, *, run_id: str, bus: Bus, store: EventStore | None,
                 policies: dict[str, AgentFactory], person: PersonFactory,
                 agent_names: dict[str, str], roles: dict[str, str],
                 weights: GradeWeights | None = None, resume: Resume | None = None,
                 drain_hours: float = 24.0,
                 persistent: dict[str, PersistentFactory] | None = None,
                 answers: Answers | None = None) -> None:
        sim = loaded.sim
        self.loaded, self.sim, self.cal = loaded, sim, loaded.calendar
        self.run_id = run_id
        self.episode_id = f"{run_id}:@simulation"
        self.weights = weights
        self.bus, self.store = bus, store
        self.clock = VirtualClock()
        self.start = sim.clock.start
        self.policies, self.make_person = policies, person
        self.agent_names, self.roles = agent_names, roles
        self.resume_state = resume or Resume()
        self.answers = answers
        """Recorded model answers served before the model is asked (resume, replay)."""
        self._model_calls: dict[str, int] = {}
        self.live_model_calls = 0
        self.model_by_day: dict[str, dict[str, int]] = {}
        self.model_by_arrival: dict[str, dict[str, int]] = {}
        """Model calls, tokens and their latency by simulated day (ISO date), and by arrival
        (:data:`MODEL_SLOT`)."""
        self._halt: SimulationError | None = None
        self.horizon = self.cal.after_working(self.cal.end_s, drain_hours * 3600)
        self._log = EventLog()
        self._unsaved: list[tuple[Any, ...]] = []
        self._hash = EventsHasher()
        self.turns = 0
        self._stop: str | None = None
        self._failure: tuple[Any, str] | None = None
        self._retryable = False
        self.state = WorkspaceState()
        seed = WorkspaceSeed.model_validate(loaded.company)
        self._company_events = seed.events()
        self.company_ids = {(t, r.id) for t, rows in seed.rows() for r in rows}
        self.seats = {s.id: s for s in sim.roster}
        self.seat_of_person = {s.person: s.id for s in sim.roster}
        self._person_of: dict[str, str] = {}
        self._actor_of: dict[str, str] = {}
        self.actors: dict[str, Actor] = {}
        self._contexts: dict[str, ActorContext] = {}
        self.sim_seed = sim.seed
        self._persistent_factories = dict(persistent or {})
        self.persistent_seats = set(self._persistent_factories)
        self._agents: dict[str, Actor] = {}
        self.open: dict[str, dict[str, Live]] = {}
        self.focus: dict[str, str] = {}
        self.entity_owner: dict[str, str] = {}
        self.seat_tools: dict[str, list[str]] = {}
        self.attribution_counts: dict[str, dict[str, int]] = {}
        self.unsure: list[dict[str, Any]] = []
        self.causes: dict[str, str] = {}
        """Arrival -> the arrival whose agent's message caused it (a hand-off)."""
        self.caused: dict[str, list[str]] = {}
        """Arrival -> the hand-offs its agent's messages made."""
        self.unmatched: dict[str, list[str]] = {}
        """Arrival -> its agent's hand-off messages that named no template's case."""
        self.handoff_info: dict[str, dict[str, Any]] = {}
        """A graded hand-off arrival -> what its cause's checks read of it."""
        self._deferred: list[Live] = []
        """Arrivals ended whose grade waits for the hand-offs they made."""
        self._final = False
        self.replying: dict[str, str | None] = {}
        self.call_arrival: dict[str, str] = {}
        self.model_use: dict[str, dict[str, int]] = {}
        """Model calls per agent (and ``people``): calls, tokens, the largest prompt."""
        self.entity_rows: dict[str, list[int]] = {}
        """Entity id -> the seqs of the events that made and changed it (kept only with
        persistent seats: an arrival's view may need an entity another arrival made)."""
        """Arrival -> the arrival whose agent's message caused it (a hand-off)."""
        for s in sim.roster:
            name = SEAT_PREFIX + s.id
            self._person_of[name], self._actor_of[s.person] = s.person, name
            if s.id in self.persistent_seats:
                self.actors[name] = PersistentSeatActor(self, s)
                self._contexts[name] = PersistentSeatContext(self, name, s, self._seed_of(name))
            else:
                self.actors[name] = SeatActor(self, s)
                self._contexts[name] = SeatContext(self, name, s, self._seed_of(name))
        for p in seed.people:
            if p.id not in self.seat_of_person:
                self._add_person(p.id)
        windows = []
        for ev in sim.events:
            if isinstance(ev, Outage):
                tools = set(ev.tools) | {n for n, t in REGISTRY.items() if t.app == ev.app}
                windows.append((self.cal.seconds(ev.start), self.cal.seconds(ev.end), tools,
                                ev.message))
        self._outages = windows
        self._blocked: dict[str, tuple[float, str | None]] = {}
        """Agents that ran into an outage and wait: (its end, the arrival it was for)."""
        self._handling: _Delivery | None = None
        self.tools = ToolService(self.state, self._record, faults=Outages(self, windows),
                                 agents=frozenset(SEAT_PREFIX + s for s in self.seats),
                                 tagged=frozenset(SEAT_PREFIX + s for s in self.persistent_seats))
        for name, actor in (("tools", self.tools), ("world", SimWorld(self))):
            self.actors[name] = actor
            self._contexts[name] = ActorContext(self, name, None, self._seed_of(name))
        self._topics: dict[str, str] = {}
        self.on_quiet = None
        self.live: dict[str, Live] = {}
        self.owner: dict[str, str] = {}
        """The seat of every arrival so far (by key)."""
        self.queues: dict[str, deque[Live]] = {s: deque() for s in self.seats}
        self.working: dict[str, Live | None] = dict.fromkeys(self.seats)
        self.seat_turns: dict[str, int] = dict.fromkeys(self.seats, 0)
        self.over_budget: set[str] = set()
        self._ended: list[Live] = []
        self.outcomes: list[ArrivalOutcome] = []
        self.pending: dict[str, Arrival] = {}
        self._structural: list[tuple[Any, ...]] = []
        """Changes to the company's structure since the setup (see STRUCTURAL)."""
        self._setup_end = 0
        self._setup_rows: list[tuple[Any, ...]] = []
        self._timed = timed_arrivals(sim, self.cal)
        self._numbered = len(self._timed)
        self.bounds = SimulationLimits.from_env()
        self._made: dict[int, int] = {}
        """Arrivals made as it runs (triggers, a script) by the simulated minute they come."""
        self._fired: set[tuple[int, str]] = set()
        self.backlog: list[tuple[float, int]] = []
        """(start of a simulated hour, most arrivals waiting or in work during it): the
        backlog over the run, one entry per hour in which it changed (bounded by the run's
        length, not its number of arrivals)."""
        self.after_settle: list[Callable[[], Awaitable[None]]] = []
        """Called after each delivery, once arrivals are settled (scenario scripts)."""
        self.timers: dict[str, Callable[[], Any]] = {}
        self.on_closed: list[Callable[[Live, ArrivalOutcome], None]] = []
        """Told of each arrival once it is graded and recorded."""
        self.stopping: Callable[[], bool] | None = None
        """Asked after each delivery: True stops the simulation there (an interrupt)."""
        self._said: dict[str, str] = {}
        self._turns: dict[int, int] = {}
        self.spec = _Names(run_id, self.episode_id)  # type: ignore[assignment]
        self.extra_checks: list[SimCheck] = []
        self._setup_seats(list(loaded.templates.values()))

    # names and seeds ----------------------------------------------------------------------
    def _seed_of(self, name: str) -> int:
        return zlib.crc32(f"{self.sim_seed}:{name}".encode())

    def _add_person(self, pid: str) -> None:
        self._person_of[pid], self._actor_of[pid] = pid, pid
        self.actors[pid] = PersonHub(self, pid)
        self._contexts[pid] = ActorContext(self, pid, pid, self._seed_of(pid))

    # recording -----------------------------------------------------------------------------
    def _record(self, actor: str, kind: str, payload: dict[str, Any],
                text: str | None = None) -> None:
        super()._record(actor, kind, payload, text)
        if kind.startswith("ws.") and kind.split(".", 2)[1] in STRUCTURAL and self._setup_end:
            self._structural.append(self._unsaved[-1])  # (the row just recorded)
        if self.persistent_seats and kind.startswith("ws."):
            self.entity_rows.setdefault(str(payload.get("id")), []).append(len(self._log) - 1)
        if self.persistent_seats and actor in ("tools", "world") and kind.startswith("ws."):
            d = self._handling  # (what the arrival's own actions made is its own)
            tag = payload.get("arrival") if actor == "world" else (
                d.payload.get("arrival") if d is not None and d.kind == "tool_call" else None)
            if tag is not None:
                self.entity_owner.setdefault(str(payload.get("id")), str(tag))
        if kind in MEASURED:
            self._count_model_call(actor, kind, payload)
        elif kind == "persona.invented":
            self._use("people")["invented"] += 1
        if kind == "fault.injected" and payload.get("failure") == "unavailable":
            # an agent ran into an outage: woken at its end unless it sets its own timer
            d, now = self._handling, self.clock.now
            ends = [hi for lo, hi, tools, _ in self._outages if lo <= now < hi
                    and payload.get("tool") in tools]
            if ends:
                self._blocked[str(payload.get("caller"))] = (
                    max(ends), d.payload.get("arrival") if d is not None else None)
        r = self.resume_state
        if r.rows and len(self._log) == r.rows and self._hash.hexdigest() != r.digest:
            raise SimulationError(
                f"resume: the simulation did not replay what {self.store.path if self.store else ''} "
                f"recorded (its first {r.rows} events differ): a resume re-runs the simulation "
                "from its start, which gives the same events only with scripted agents and the "
                "same simulation file")

    async def _save(self) -> None:
        if self.store is not None and self._unsaved:
            batch, self._unsaved = self._unsaved, []
            skip = self.resume_state.rows
            if skip:
                batch = [row for row in batch if row[1] >= skip]
            if batch:
                await self.store.append_rows(batch)

    # running -----------------------------------------------------------------------------
    async def run_simulation(self) -> None:
        """Run the simulation to its end: every arrival graded and recorded."""
        sim = self.sim
        if self.store is not None and not self.resume_state.rows:
            await self.store.start_episode(
                episode_id=self.episode_id, run_id=self.run_id, task_id="@simulation",
                family="simulation", trial=0, attempt=0, seed=sim.seed,
                agent=", ".join(f"{k}={v}" for k, v in self.agent_names.items()),
                role="simulation")
        self._record("kernel", "episode.start", {
            "simulation": sim.id, "seed": sim.seed, "start": self.start.isoformat(),
            "days": sim.clock.days, "agents": {s.id: s.person for s in sim.roster}})
        for kind, payload in self._company_events:
            apply_event(self.state, kind, payload)
            self._record("setup", kind, payload)
        self._setup_end = len(self._log)
        self._setup_rows = list(self._log.rows_from(1))
        await self._save()  # (before any arrival's events name them as their prefix)
        for a in self._timed:
            self._schedule_arrival(a)
        for i, ev in enumerate(sim.events):
            if isinstance(ev, Join | Reorg):
                self.clock.schedule(self.cal.seconds(ev.at), _Delivery(
                    "world", "kernel", "world_event", {"index": i}), priority=0)
            elif isinstance(ev, Outage):
                for edge, at in (("start", ev.start), ("end", ev.end)):
                    self.clock.schedule(self.cal.seconds(at), _Delivery(
                        "world", "kernel", "world_event", {"index": i, "edge": edge}),
                        priority=0)
        await self._save()
        try:
            await self._serve()
        finally:
            await self._save()

    def _schedule_arrival(self, a: Arrival) -> None:
        self.pending[a.key] = a
        self.clock.schedule(a.at, _Delivery("world", "kernel", "arrival", {
            "key": a.key, "task": a.template}), priority=0)

    async def _loop(self) -> None:
        end = self.cal.end_s
        delivered = 0
        await self._settle()
        while True:
            nxt = self.clock.peek_time()
            if nxt is None or nxt > self.horizon or (nxt > end and not self.live):
                break
            s = await self.clock.next()
            assert s is not None
            await self._deliver(s.item)
            if self.stopping is not None and self.stopping():
                return  # (interrupted: what is recorded stays; a resume goes on)
            if self._halt is not None:
                raise self._halt
            if self._failure is not None:
                raise SimulationError(f"the simulation failed at its {self._failure[0]} "
                                      f"boundary: {self._failure[1]}")
            await self._settle()
            if len(self._unsaved) >= 256:
                await self._save()
            delivered += 1
            if delivered % 64 == 0:  # let the loop's other tasks in (signals, the writer)
                await anyio.lowlevel.checkpoint()
        for live in list(self.live.values()):
            self.end(live, "sim_end" if live.started is not None else "dropped")
        await self._settle()
        self._final = True  # (what waited for hand-offs that never came is graded now)
        self._ended.extend(self._deferred)
        self._deferred.clear()
        await self._settle()

    def _use(self, who: str) -> dict[str, int]:
        return self.model_use.setdefault(who, dict.fromkeys(
            ("calls", "prompt_tokens", "completion_tokens", "prompt_max", "summaries",
             "invented", "latency_ms"), 0))

    async def model_call(self, actor: str, endpoint: ModelEndpoint, request: dict[str, Any],
                         boundary: Any) -> tuple[Any, float]:
        """An actor's model call: the recorded answer to its n-th call where one is served
        (n counts its recorded calls), else the endpoint's."""
        if self.answers is not None:
            try:
                got = self.answers.answer(actor, self._model_calls.get(actor, 0), request)
            except SimulationError as exc:
                self._halt = exc  # (the whole run stops, not the arrival the call was for)
                raise
            if got is not None:
                return got
        self.live_model_calls += 1
        return await endpoint.complete(request, boundary)

    def recorded_ahead(self, actor: str) -> list[dict[str, Any]]:
        """The recorded answers of ``actor``'s next calls, for its remote worker to serve."""
        if self.answers is None:
            return []
        return self.answers.ahead(actor, self._model_calls.get(actor, 0))

    def answered_elsewhere(self, actor: str, calls: int, served: int, differs: int | None,
                           where: str) -> None:
        """Calls made by ``actor``'s remote worker, ``served`` of them from the recording."""
        self.live_model_calls += calls - served
        if self.answers is None:
            return
        try:
            self.answers.elsewhere(actor, self._model_calls.get(actor, 0), calls, served,
                                   differs, where)
        except SimulationError as exc:
            self._halt = exc  # (the whole run stops, as for a call made here)
            raise

    def _count_model_call(self, actor: str, kind: str, payload: dict[str, Any]) -> None:
        """Each agent's (and the people's) model use: calls, tokens, the largest prompt."""
        self._model_calls[actor] = self._model_calls.get(actor, 0) + 1
        who = actor.removeprefix(SEAT_PREFIX) if actor.startswith(SEAT_PREFIX) else "people"
        use = self._use(who)
        usage = payload.get("usage") or {}
        # (tokens as the server counted them; else as the agent estimated its prompt)
        prompt = int(usage.get("prompt_tokens") or payload.get("prompt_estimate") or 0)
        use["calls"] += 1
        use["summaries"] += kind == "agent.summary_call"
        completion = int(usage.get("completion_tokens") or 0)
        use["prompt_tokens"] += prompt
        use["completion_tokens"] += completion
        ms = round(float(payload.get("latency_s") or 0.0) * 1000)
        use["latency_ms"] += ms
        # by simulated day, and by the arrival whose envelope its agent was handling
        day = (self.start + timedelta(seconds=self.clock.now)).date().isoformat()
        d = self._handling
        key = d.payload.get("arrival") if d is not None else None
        if key is None and actor.startswith(SEAT_PREFIX):
            # (a tool's result: the arrival the seat works on; a persistent seat's focus)
            live = self.current(actor.removeprefix(SEAT_PREFIX))
            key = live.arrival.key if live is not None else None
        for slot in (self.model_by_day.setdefault(day, dict.fromkeys(MODEL_SLOT, 0)),
                     *([self.model_by_arrival.setdefault(str(key), dict.fromkeys(MODEL_SLOT, 0))]
                       if key is not None else [])):
            slot["calls"] += 1
            slot["prompt_tokens"] += prompt
            slot["completion_tokens"] += completion
            slot["tokens"] += prompt + completion
            slot["latency_ms"] += ms
        if kind == "agent.model_call":
            use["prompt_max"] = max(use["prompt_max"], prompt)

    def submit(self, sender: str, to: str, kind: str, payload: dict[str, Any],
               delay: float) -> None:
        if kind == "timer" and sender == to:
            self._blocked.pop(sender, None)  # (it wakes itself)
        super().submit(sender, to, kind, payload, delay)

    def _wake_blocked(self, end: float, message: str) -> None:
        """At an outage's end: tell each agent that ran into it and is still waiting."""
        for actor, (until, key) in list(self._blocked.items()):
            if until == end:
                del self._blocked[actor]
                self.submit("tools", actor, "notify", {
                    "notification": "service_restored", "message": message,
                    **({"arrival": key} if key is not None else {})}, 0.0)

    async def _deliver(self, d: _Delivery) -> None:
        self._handling = d
        if d.to == "kernel" and d.kind == "deadline":
            live = self.live.get(str(d.payload.get("key")))
            if live is None or live.end is not None:
                return  # (over already: nothing to record)
            if live.deadline > self.clock.now:  # (working time left: looked at again then)
                self.clock.schedule(live.deadline, d, priority=2)
                return
        if d.kind in ("message", "notify") and d.to in self.actors:
            self._on_message(d)
        seat = d.to.removeprefix(SEAT_PREFIX)
        if seat in self.persistent_seats and d.to != seat:
            self.handing(seat, d.kind, d.payload)
        await super()._deliver(d)

    def _to_kernel(self, d: _Delivery) -> None:
        p = d.payload
        if d.kind == "finish":
            seat = d.sender.removeprefix(SEAT_PREFIX)
            live = self.open[seat].get(str(p.get("arrival"))) \
                if seat in self.persistent_seats else self.current(seat)
            if live is not None and live.arrival.key == p.get("arrival"):
                self.end(live, "agent_finished")
        elif d.kind == "satisfied":
            live = self.live.get(str(p.get("arrival")))
            if live is not None and live.started is not None:
                self.end(live, "user_satisfied")
        elif d.kind == "arrival":
            a = self.pending.pop(str(p["key"]))
            self._arrive(a)
        elif d.kind == "deadline":
            live = self.live.get(str(p.get("key")))
            if live is not None:
                self.end(live, "max_sim_time")
        elif d.kind == "world_event":
            ev = self.sim.events[int(p["index"])]
            if isinstance(ev, Join):
                person = Person.model_validate(ev.person)
                kind, payload = ws_event("directory", "seeded", person)
                apply_event(self.state, kind, payload)
                self._record("world", kind, payload)
                if person.id not in self.actors:
                    self._add_person(person.id)
            elif isinstance(ev, Outage) and p.get("edge") == "end":
                what = ev.app if ev.app is not None else ", ".join(ev.tools)
                self._wake_blocked(self.cal.seconds(ev.end), f"{what} is available again")
            elif isinstance(ev, Reorg):
                for pid, fields in ev.changes.items():
                    old = self.state.people.get(pid)
                    if old is None:
                        continue
                    kind, payload = ws_event("directory", "updated",
                                             old.model_copy(update=fields))
                    apply_event(self.state, kind, payload)
                    self._record("world", kind, payload)
        elif d.kind == "script":
            fn = self.timers.pop(str(p.get("id")), None)
            if fn is not None:
                fn()

    def _on_message(self, d: _Delivery) -> None:
        """Arrivals ``on`` a message: one person writing to another (once per arrival the
        writer works on, or per message from someone who is not an agent). A message from an
        agent makes a hand-off: its arrival is built from the message (the template and case
        it names) and caused by the writer's arrival; one that names none makes nothing and is
        recorded (``sim.handoff_unmatched``)."""
        p = d.payload
        sender = p.get("from") if d.kind == "message" else p.get("sender")
        to = self._person_of.get(d.to)
        if sender is None or to is None:
            return
        for si, stream in enumerate(self.sim.workload):
            on = stream.on
            if on is None or on.message is None:
                continue
            if on.message.sender != sender or on.message.to != to:
                continue
            seat = self.seat_of_person.get(str(sender))
            if seat in self.persistent_seats:  # (its actions carry the arrival they are for)
                live = self.open[seat].get(str(p.get("arrival")))
            else:
                live = self.current(seat) if seat is not None else None
            cause = live.arrival.key if live is not None else None
            once = (si, cause) if cause is not None else None
            if once is not None and once in self._fired:
                continue
            text = str(p.get("text") or f"{p.get('subject', '')} {p.get('body', '')}").strip()
            bound = self._bind_handoff(si, text)
            if bound is None:
                self._record("kernel", "sim.handoff_unmatched", {
                    "stream": si, "from": sender, "to": to, "cause": cause,
                    "text": text[:500]})
                self.unmatched.setdefault(cause or "", []).append(text[:200])
                continue
            if once is not None:
                self._fired.add(once)
            self.add_arrival(bound[0], stream.to if isinstance(stream.to, Route)
                             else Route(agent=self._seat_for(stream.to)),
                             self.clock.now + on.after_minutes * 60, str(sender), text,
                             stream=si, family=stream.family, case=bound[1], cause=cause)

    def _bind_handoff(self, si: int, text: str) -> tuple[str, dict[str, str] | None] | None:
        """The template (in turn, from the stream's next) and case a message names: a
        template without cases takes any message; one with cases, the first case whose
        ``match`` values it mentions."""
        tasks = self.sim.workload[si].tasks
        turn = self._turns.get(si, 0)
        for i in range(len(tasks)):
            tpl = self.loaded.templates[tasks[(turn + i) % len(tasks)]]
            case = named_case(tpl.cases, tpl.match, text) if tpl.cases else None
            if case is not None or not tpl.cases:
                self._turns[si] = turn + i + 1
                return tasks[(turn + i) % len(tasks)], dict(case) if case else None
        return None

    def _new_arrival(self, stream: int, at: float, requester: str | None,
                     said: str | None = None) -> None:
        s = self.sim.workload[stream]
        turn = self._turns.get(stream, 0)
        self._turns[stream] = turn + 1
        self.add_arrival(s.tasks[turn % len(s.tasks)], s.to if isinstance(s.to, Route)
                         else Route(agent=self._seat_for(s.to)), at, requester, said,
                         stream=stream, family=s.family)

    def add_arrival(self, template: str, route: Route, at: float, requester: str | None = None,
                    said: str | None = None, *, stream: int = -1, family: str | None = None,
                    case: dict[str, str] | None = None, cause: str | None = None) -> str:
        """Schedule one more arrival (an event-triggered one, or a script's); its key. Past
        the bounds (:class:`~.loading.SimulationLimits`) the simulation stops, in one line."""
        key = f"a{self._numbered:04d}"
        self._numbered += 1
        minute = int(max(at, self.clock.now) // 60)
        self._made[minute] = self._made.get(minute, 0) + 1
        if self._halt is None and (self._numbered > self.bounds.max_arrivals or
                                   self._made[minute] > self.bounds.max_arrivals_per_minute):
            many = self._numbered > self.bounds.max_arrivals
            what = (f"more than {self.bounds.max_arrivals:,} arrivals in the run "
                    "(COWORKENV_SIM_MAX_ARRIVALS)" if many else
                    f"more than {self.bounds.max_arrivals_per_minute:,} arrivals in one "
                    "simulated minute (COWORKENV_SIM_MAX_ARRIVALS_PER_MINUTE)")
            self._halt = SimulationError(
                f"the simulation stopped at {self.cal.at(minute * 60.0):%a %d %b %H:%M}: {what}, "
                f"the last "
                f"of {template!r}" + (f" from workload[{stream}]" if stream >= 0 else "") +
                (" (on: triggers that make arrivals without the clock moving?)" if not many
                 else "") + "; raise the variable to let it go on")
            return key
        if said:
            self._said[key] = said
        if cause is not None:
            self.causes[key] = cause
            self.caused.setdefault(cause, []).append(key)
        self._schedule_arrival(Arrival(key, template, stream, max(at, self.clock.now),
                                       requester, route, family, case, cause))
        return key

    def _seat_for(self, ref: str) -> str:
        return next((s.id for s in self.sim.roster if ref in (s.id, s.person)), ref)

    def _route(self, r: Route) -> Seat:
        if r.agent is not None:
            return self.seats[r.agent]
        pool = [s for s in self.sim.roster if (r.role is not None and s.role == r.role)
                or (r.queue is not None and r.queue in s.queues)]
        return min(pool, key=lambda s: len(self.queues[s.id]) + (self.working[s.id] is not None))

    def _arrive(self, a: Arrival) -> None:
        seat = self._route(a.route)
        template = self.loaded.templates[a.template]
        task = instantiate(template, a, self.cal, self.company_ids, self.sim, seat.person)
        said = self._said.pop(a.key, None) if self._said else None
        if said:
            who = self.state.people.get(a.requester or "")
            task = task.model_copy(update={"instruction": f"{task.instruction}\n\n"
                                           f"{who.name if who else a.requester} wrote: {said}"})
        live = Live(a, task, seat, len(self._log))
        self.live[a.key] = live
        self.owner[a.key] = seat.id
        self._record("kernel", "sim.arrival", {"arrival": a.key, "task_id": task.id,
                                               "template": a.template, "agent": seat.id,
                                               "requester": task.user.person})
        for kind, payload in task.seed.events():
            table, eid = kind.split(".", 2)[1], str(payload.get("id"))
            if (table, eid) in self.company_ids or eid in self.state.tables.get(table, {}):
                continue
            apply_event(self.state, kind, payload)
            self._record("world", kind, {**payload, "arrival": a.key})
        for i, m in enumerate(task.cast()):
            if m.person in self.seat_of_person or m.person not in self.actors:
                continue  # another agent acts by its own policy
            hub = self.actors[m.person]
            assert isinstance(hub, PersonHub)
            role = "user" if i == 0 else "coworker"
            actor = self.make_person(task, m, role, seat.person)
            hub.personas[a.key] = (actor, PersonContext(
                self, m.person, a.key, self._seed_of(f"{a.key}:{m.person}")))
            for ti, trig in enumerate(m.triggers):
                if trig.timed:
                    at = trig.at_minutes if trig.at is None else clock_minutes(trig.at,
                                                                               task.start)
                    self.clock.schedule(a.at + float(at or 0.0) * 60, _Delivery(
                        m.person, m.person, "trigger", {"index": ti, "arrival": a.key}),
                        priority=0)
        for i, ev in enumerate(task.timeline):
            self.clock.schedule(a.at + ev.minutes(task.start) * 60, _Delivery(
                "world", "world", "timeline", {"index": i, "arrival": a.key}), priority=0)
        if seat.id in self.persistent_seats:
            self._note_backlog()
            self._hand_over(live)
            return
        self.queues[seat.id].append(live)
        self._note_backlog()
        if self.working[seat.id] is None:
            self._start_next(seat.id)

    def _note_backlog(self) -> None:
        n = len(self.live)
        hour = self.clock.now // 3600 * 3600
        if self.backlog and self.backlog[-1][0] == hour:
            if n > self.backlog[-1][1]:
                self.backlog[-1] = (hour, n)
        else:
            self.backlog.append((hour, n))

    async def _settle(self) -> None:
        """Grade and record the arrivals that ended (one whose checks read the hand-offs it
        made, once those have ended too), start what their seats have queued, then let
        scenario scripts look."""
        while self._ended:
            live = self._ended.pop(0)
            if self._awaits_handoffs(live):
                self._deferred.append(live)
            else:
                await self._close(live)
                ready = [x for x in self._deferred if not self._awaits_handoffs(x)]
                for x in ready:
                    self._deferred.remove(x)
                self._ended.extend(ready)
            seat = live.seat.id
            if self.working.get(seat) is live:
                self.working[seat] = None
            self._start_next(seat)
        for hook in list(self.after_settle):
            await hook()

    def _awaits_handoffs(self, live: Live) -> bool:
        """An ended arrival whose checks read its hand-offs, some of which have not ended."""
        if self._final or not any(isinstance(c, CROSS_ARRIVAL) for c in live.task.checks):
            return False
        return any(k in self.pending or (k in self.live and not self.live[k].closed)
                   for k in self.caused.get(live.arrival.key, ()))
