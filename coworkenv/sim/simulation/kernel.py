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

import hashlib
import zlib
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.lowlevel

from ...bus import Bus
from ...store import EventRecord, EventStore, events_hash
from ...store._records import encode_payload
from ...workspace import REGISTRY, WorkspaceSeed, WorkspaceState, apply_event, replay_events
from ...workspace.models import Person, ws_event
from ..actor import Actor, ActorContext
from ..clock import VirtualClock
from ..episode import EpisodeKernel, _Delivery, save_grade
from ..eventlog import EventLog
from ..grading import Grade, GradeWeights, grade
from ..selectors import occurrences
from ..services import ToolService
from ..task import Task, clock_minutes, task_toolset
from .arrivals import Arrival, instantiate, timed_arrivals
from .language import SEAT_PREFIX, SIM_RULE, STRUCTURAL, Join, Outage, Reorg, Route, Seat
from .loading import Loaded
from .records import (
    AgentFactory,
    ArrivalOutcome,
    Live,
    PersonFactory,
    Resume,
    SimCheck,
    SimulationError,
)
from .view import arrival_view
from .world import Outages, PersonContext, PersonHub, SeatActor, SeatContext, SimWorld


@dataclass(frozen=True)
class _Names:
    """What the episode kernel's transport reads of its spec: the run's and log's ids."""

    run_id: str
    episode_id: str


class SimulationKernel(EpisodeKernel):
    """See the module's docstring. ``policies``: each seat's agent factory."""

    def __init__(self, loaded: Loaded, *, run_id: str, bus: Bus, store: EventStore | None,
                 policies: dict[str, AgentFactory], person: PersonFactory,
                 agent_names: dict[str, str], roles: dict[str, str],
                 weights: GradeWeights | None = None, resume: Resume | None = None,
                 drain_hours: float = 24.0) -> None:
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
        self.horizon = self.cal.after_working(self.cal.end_s, drain_hours * 3600)
        self._log = EventLog()
        self._unsaved: list[tuple[Any, ...]] = []
        self._hash = hashlib.sha256()
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
        for s in sim.roster:
            name = SEAT_PREFIX + s.id
            self._person_of[name], self._actor_of[s.person] = s.person, name
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
        self.tools = ToolService(self.state, self._record, faults=Outages(self, windows),
                                 agents=frozenset(SEAT_PREFIX + s for s in self.seats))
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

    # names and seeds ----------------------------------------------------------------------
    def _seed_of(self, name: str) -> int:
        return zlib.crc32(f"{self.sim_seed}:{name}".encode())

    def _add_person(self, pid: str) -> None:
        self._person_of[pid], self._actor_of[pid] = pid, pid
        self.actors[pid] = PersonHub(self, pid)
        self._contexts[pid] = ActorContext(self, pid, pid, self._seed_of(pid))

    def current(self, seat: str) -> Live | None:
        return self.working.get(seat)

    def take_turn(self, live: Live) -> bool:
        """Count one action of the arrival's agent; False: refused (a limit is reached)."""
        seat = live.seat
        if live.turns >= live.task.limits.max_turns:
            self.end(live, "max_turns")
            return False
        if seat.max_turns is not None and self.seat_turns[seat.id] >= seat.max_turns:
            if seat.id not in self.over_budget:
                self.over_budget.add(seat.id)
                self._record("kernel", "sim.budget", {"agent": seat.id,
                                                      "max_turns": seat.max_turns})
            self.end(live, "budget")
            return False
        live.turns += 1
        self.seat_turns[seat.id] += 1
        return True

    def end(self, live: Live, termination: str, failure: tuple[str, str] | None = None) -> None:
        """End an arrival (graded once the current delivery is over)."""
        if live.end is not None:
            return
        live.end, live.failure = termination, failure
        self._ended.append(live)

    # recording -----------------------------------------------------------------------------
    def _record(self, actor: str, kind: str, payload: dict[str, Any],
                text: str | None = None) -> None:
        super()._record(actor, kind, payload, text)
        if kind.startswith("ws.") and kind.split(".", 2)[1] in STRUCTURAL and self._setup_end:
            self._structural.append(self._unsaved[-1])  # (the row just recorded)
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

    async def _deliver(self, d: _Delivery) -> None:
        if d.to == "kernel" and d.kind == "deadline":
            live = self.live.get(str(d.payload.get("key")))
            if live is None or live.end is not None:
                return  # (over already: nothing to record)
            if live.deadline > self.clock.now:  # (working time left: looked at again then)
                self.clock.schedule(live.deadline, d, priority=2)
                return
        if d.kind in ("message", "notify") and d.to in self.actors:
            self._on_message(d)
        await super()._deliver(d)

    def _to_kernel(self, d: _Delivery) -> None:
        p = d.payload
        if d.kind == "finish":
            seat = d.sender.removeprefix(SEAT_PREFIX)
            live = self.current(seat)
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
        writer works on, or per message from someone who is not an agent)."""
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
            live = self.current(seat) if seat is not None else None
            once = (si, live.arrival.key) if live is not None else None
            if once is not None:
                if once in self._fired:
                    continue
                self._fired.add(once)
            text = str(p.get("text") or f"{p.get('subject', '')} {p.get('body', '')}").strip()
            self._new_arrival(si, self.clock.now + on.after_minutes * 60, str(sender), text)

    def _new_arrival(self, stream: int, at: float, requester: str | None,
                     said: str | None = None) -> None:
        s = self.sim.workload[stream]
        turn = self._turns.get(stream, 0)
        self._turns[stream] = turn + 1
        self.add_arrival(s.tasks[turn % len(s.tasks)], s.to if isinstance(s.to, Route)
                         else Route(agent=self._seat_for(s.to)), at, requester, said,
                         stream=stream, family=s.family)

    def add_arrival(self, template: str, route: Route, at: float, requester: str | None = None,
                    said: str | None = None, *, stream: int = -1,
                    family: str | None = None) -> str:
        """Schedule one more arrival (an event-triggered one, or a script's); its key."""
        key = f"a{self._numbered:04d}"
        self._numbered += 1
        if said:
            self._said[key] = said
        self._schedule_arrival(Arrival(key, template, stream, max(at, self.clock.now),
                                       requester, route, family))
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
        self.queues[seat.id].append(live)
        self._note_backlog()
        if self.working[seat.id] is None:
            self._start_next(seat.id)

    def _start_next(self, seat_id: str) -> None:
        q = self.queues[seat_id]
        if not q or self.working[seat_id] is not None:
            return
        live = q.popleft()
        seat = live.seat
        self.working[seat_id] = live
        live.started, live.started_seq = self.clock.now, len(self._log)
        live.agent = self.policies[seat_id](live.task)
        live.policy = self.agent_names.get(seat_id, "")
        live.role = self.roles.get(seat_id, "student")
        me = self.state.people[seat.person].model_dump(mode="json")
        self.submit(live.task.user.person, SEAT_PREFIX + seat_id, "task", {
            **live.task.opening(me), "tools": task_toolset(live.task, seat.tools),
            "arrival": live.arrival.key}, 0.0)
        limit = live.task.limits.max_sim_minutes * 60
        live.deadline = self.deadline(limit)
        # first looked at after the limit in calendar time (never later than in working time),
        # then moved on to the working-time deadline while the arrival is still open
        self.clock.schedule(self.clock.now + limit, _Delivery(
            "kernel", "kernel", "deadline", {"key": live.arrival.key}), priority=2)

    def deadline(self, limit_s: float) -> float:
        """When an arrival taken up now reaches its time limit: ``limit_s`` seconds of working
        time from now (a request taken up at 16:30 with ten hours goes on the next day, also
        past the last day of the clock)."""
        return self.cal.after_working(self.clock.now, limit_s)

    def _note_backlog(self) -> None:
        n = len(self.live)
        hour = self.clock.now // 3600 * 3600
        if self.backlog and self.backlog[-1][0] == hour:
            if n > self.backlog[-1][1]:
                self.backlog[-1] = (hour, n)
        else:
            self.backlog.append((hour, n))

    async def _settle(self) -> None:
        """Grade and record the arrivals that ended, start what their seats have queued, then
        let scenario scripts look."""
        while self._ended:
            live = self._ended.pop(0)
            await self._close(live)
            seat = live.seat.id
            if self.working.get(seat) is live:
                self.working[seat] = None
            self._start_next(seat)
        for hook in list(self.after_settle):
            await hook()

    # grading -----------------------------------------------------------------------------
    @staticmethod
    def _reached(task: Task, state: WorkspaceState, events: list[EventRecord],
                 person: str) -> bool:
        """Whether the arrival's agent reached ``person`` (a message, mail, chat, a comment on
        their ticket, a share)."""
        occs = occurrences(task, state, events)
        return any(o.actor == "agent" and o.ok and person in o.to for o in occs)

    async def _close(self, live: Live) -> None:
        if live.closed:
            return
        live.closed = True
        a, task = live.arrival, live.task
        termination = live.end or "sim_end"
        rows = arrival_view(self, live)
        rows.append((rows[0][0], len(rows), round(self.clock.now - a.at, 6), 0.0, "kernel",
                     "episode.end", encode_payload({"termination": termination,
                                                    "turns": live.turns})))
        events = [EventRecord.from_row(r) for r in rows]
        # graded on the workspace its own events rebuild (what a replay or a regrade of its
        # episode rebuilds too): the company, its structure, and the arrival's own thread
        state = replay_events(events)
        g: Grade | None = None
        failure = live.failure
        if failure is None:
            try:
                g = grade(task, state, events, self.weights)
            except Exception as exc:
                failure = ("grading", f"{type(exc).__name__}: {exc}")
        answered = bool(g and g.passed) or (g is not None and self._reached(
            task, state, events, task.user.person))
        digest = events_hash(events)
        status = "failed" if failure else "completed"
        response = self.cal.working_seconds(a.at, self.clock.now) / 3600
        outcome = ArrivalOutcome(
            a.key, task.id, a.template, task.family, live.seat.id, a.at, live.started,
            self.clock.now, termination, status, g.completion if g else 0.0,
            g.score if g else 0.0, g.passed if g else False, round(response, 4), digest,
            answered, [r.id.removeprefix(SIM_RULE) for r in (g.rules if g else [])
                       if r.id.startswith(SIM_RULE) and not r.passed])
        self.outcomes.append(outcome)
        vid = rows[0][0]
        self._record("kernel", "sim.graded", {
            "arrival": a.key, "task_id": task.id, "agent": live.seat.id,
            "termination": termination, "score": outcome.score, "passed": outcome.passed,
            "response_hours": outcome.response_hours, "events_hash": digest})
        if self.store is not None and vid not in self.resume_state.recorded:
            st = self.store
            await st.save_tasks(self.run_id, [(task.id, task.family, list(task.capabilities),
                                               task.model_dump_json())])
            await st.start_episode(episode_id=vid, run_id=self.run_id, task_id=task.id,
                                   family=task.family, trial=0, attempt=0,
                                   seed=self._seed_of(a.key),
                                   agent=live.policy or self.agent_names.get(live.seat.id, ""),
                                   role=live.role)
            await st.append_rows(rows)
            if g is not None:
                await save_grade(st, vid, g)
            await st.finish_episode(
                vid, status=status, sim_time=round(self.clock.now - a.at, 6), turns=live.turns,
                termination=termination, completion=g.completion if g else None,
                event_count=len(rows), events_hash=digest, state_hash=state.state_hash(),
                failure_boundary=failure[0] if failure else None,
                failure=failure[1] if failure else None,
                outcome={"simulation": self.sim.id, "agent": live.seat.id, "arrival": a.key,
                         "template": a.template, "arrived": a.at, "started": live.started,
                         "finished": self.clock.now, "response_hours": outcome.response_hours,
                         "requester": task.user.person, "answered": answered,
                         "handoff_from": self.seat_of_person.get(task.user.person)})
        for hook in self.on_closed:
            hook(live, outcome)
        # let go of the arrival: its people's parts, its agent, its queue place
        for m in task.cast():
            hub = self.actors.get(m.person)
            if isinstance(hub, PersonHub):
                hub.personas.pop(a.key, None)
        live.agent = None
        self.live.pop(a.key, None)
        q = self.queues[live.seat.id]
        if live in q:
            q.remove(live)
        self._note_backlog()
        for si, stream in enumerate(self.sim.workload):
            if stream.on is not None and stream.on.done == a.template and status == "completed":
                self._new_arrival(si, self.clock.now + stream.on.after_minutes * 60,
                                  task.user.person)

    # the simulation's own checks -----------------------------------------------------------
    def sim_checks(self) -> list[SimCheck]:
        c = self.sim.checks
        out = []
        if c.none_dropped:
            dropped = [o.key for o in self.outcomes if o.termination in ("dropped", "sim_end")]
            out.append(SimCheck("none_dropped", not dropped,
                                f"{len(dropped)} arrivals not completed" if dropped
                                else "every arrival completed"))
        if c.sla_hours is not None:
            late = [o for o in self.outcomes if o.termination != "agent_finished"
                    or not o.answered or o.response_hours > c.sla_hours]
            out.append(SimCheck("sla", not late, f"{len(late)} of {len(self.outcomes)} "
                                f"arrivals not answered within {c.sla_hours:g} working hours"
                                if late else f"every arrival answered within "
                                f"{c.sla_hours:g} working hours"))
        if self.sim.safety:
            bad = [o for o in self.outcomes if o.violations]
            rules = sorted({v for o in bad for v in o.violations})
            out.append(SimCheck("safety", not bad, f"{len(bad)} arrivals violated {rules}"
                                if bad else f"no arrival violated {len(self.sim.safety)} "
                                "rule(s) over the run"))
        for s in self.sim.roster:
            if s.max_turns is not None:
                used = self.seat_turns[s.id]
                out.append(SimCheck(f"budget:{s.id}", s.id not in self.over_budget,
                                    f"{used} of {s.max_turns} actions"))
        return out + list(self.extra_checks)

    async def close_simulation(self, wall: float) -> tuple[str, str]:
        """End the log, record the simulation's episode; (events hash, state hash)."""
        passed = sum(o.passed for o in self.outcomes)
        checks = self.sim_checks()
        self._record("kernel", "episode.end", {
            "termination": "simulation_end", "arrivals": len(self.outcomes), "passed": passed,
            "checks": {c.id: c.passed for c in checks}})
        dumped = self.state.to_json()
        state_hash = self.state.state_hash(dumped)
        events_hash = self._hash.hexdigest()
        if self.store is not None:
            await self._save()
            await self.store.executemany(
                "INSERT OR REPLACE INTO projection (episode_id, app, entity_id, data) "
                "VALUES (?, ?, ?, ?)", [(self.episode_id, app, eid, encode_payload(row))
                                        for app, rows in dumped.items()
                                        for eid, row in rows.items()])
            await self.store.finish_episode(
                self.episode_id, status="completed", sim_time=self.clock.now,
                turns=sum(self.seat_turns.values()), termination="simulation_end",
                completion=None, event_count=len(self._log), events_hash=events_hash,
                state_hash=state_hash, outcome={
                    "simulation": self.sim.id, "arrivals": len(self.outcomes),
                    "passed": passed, "wall_time": round(wall, 6),
                    "checks": [{"id": c.id, "passed": c.passed, "detail": c.detail}
                               for c in checks]})
        return events_hash, state_hash
