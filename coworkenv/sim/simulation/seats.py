"""The seats of a simulation: how each agent of the roster takes up its arrivals.

A **per-arrival** seat works one arrival at a time, with a new agent from its policy for each
(the others wait in its queue: backlog). A **persistent** seat has one agent for the whole run:
each arrival is handed to it the moment it comes (a ``task`` envelope naming the arrival), the
agent chooses what to work on and may interleave its open arrivals, and each of its actions is
credited to one of them (:mod:`.attribution`). When an arrival of a persistent seat ends by
anything but the agent's own ``finish`` (its time limit, its turns, the user satisfied), the
agent is told (a ``request_closed`` notice).

A part of :class:`~.kernel.SimulationKernel` (its mixin).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...workspace import REGISTRY, WorkspaceState
from ..actor import Actor
from ..clock import Clock
from ..episode import _Delivery
from ..eventlog import EventLog
from ..task import Task, task_toolset
from .attribution import Attribution, attribute, strings
from .calendar import Calendar
from .language import SEAT_PREFIX, Seat, Simulation
from .records import Live

PersistentFactory = Callable[[Seat, Callable[[str], Task]], Actor]
"""(seat, the task of an arrival by key) -> the one agent of a persistent seat."""
MEMORY_TOOLS = ("memory_write", "memory_search", "memory_read", "memory_forget")
"""What every persistent seat may call beside its arrivals' tools."""
_ITS_OWN = frozenset({"agent_finished"})
UNSURE_KEPT = 500
"""How many of the ambiguous or uncredited actions the simulation's record lists (all are
in its log as ``sim.attribution``, and counted)."""
"""Terminations the agent brought about itself (it is not told of them)."""


def seat_toolset(seat: Seat, templates: list[Task]) -> list[str]:
    """A persistent seat's tools: its own ``tools`` as given (the ``memory`` app, or some of
    its tools, among them for its notes), else every tool its arrivals may offer and
    memory's."""
    names: set[str] = set()
    for t in templates:
        names.update(task_toolset(t, seat.tools))
    if seat.tools is None:
        names.update(n for n in MEMORY_TOOLS if n in REGISTRY)
    return sorted(names)


class _Idle(Actor):
    """Stands in for an agent its policy could not make (its arrival has failed)."""

    role = "agent"

    async def handle(self, envelope: Any, ctx: Any) -> None:
        return None


class Seats:
    """See the module's docstring; what it uses of the kernel is declared here."""

    sim: Simulation
    cal: Calendar
    clock: Clock
    state: WorkspaceState
    live: dict[str, Live]
    seats: dict[str, Seat]
    queues: dict[str, deque[Live]]
    working: dict[str, Live | None]
    seat_turns: dict[str, int]
    over_budget: set[str]
    policies: dict[str, Callable[[Task], Actor]]
    agent_names: dict[str, str]
    roles: dict[str, str]
    persistent_seats: set[str]
    open: dict[str, dict[str, Live]]
    """A persistent seat's open arrivals, oldest first."""
    focus: dict[str, str]
    """A persistent seat's arrival of its last credited action (or its newest)."""
    entity_owner: dict[str, str]
    """Entity id -> the arrival that owns it (seeded with it, or made by its actions)."""
    seat_tools: dict[str, list[str]]
    replying: dict[str, str | None]
    """The arrival of what a persistent seat's agent is handling now (what it replies to)."""
    call_arrival: dict[str, str]
    """A persistent seat's call in flight -> the arrival it was credited to."""
    attribution_counts: dict[str, dict[str, int]]
    unsure: list[dict[str, Any]]
    """Actions credited to an arrival among several it could be for, or to none."""
    _persistent_factories: dict[str, PersistentFactory]
    _agents: dict[str, Actor]
    _ended: list[Live]
    _person_of: dict[str, str]
    _log: EventLog
    causes: dict[str, str]

    if TYPE_CHECKING:  # (the kernel's own)
        def _record(self, actor: str, kind: str, payload: dict[str, Any],
                    text: str | None = None) -> None: ...

        def submit(self, sender: str, to: str, kind: str, payload: dict[str, Any],
                   delay: float) -> None: ...


    def _setup_seats(self, templates: list[Task]) -> None:
        for sid in self.persistent_seats:
            self.seat_tools[sid] = seat_toolset(self.seats[sid], templates)
            self.open[sid] = {}
            self.attribution_counts[sid] = {}

    # both kinds of seat ---------------------------------------------------------------------
    def current(self, seat: str) -> Live | None:
        """The arrival a seat works on: a per-arrival seat's one, a persistent seat's focus."""
        if seat in self.persistent_seats:
            key = self.focus.get(seat)
            return self.open[seat].get(key) if key is not None else None
        return self.working.get(seat)

    def take_turn(self, live: Live) -> bool:
        """Count one action of the arrival's agent; False: refused (a limit is reached)."""
        seat = live.seat
        if live.turns >= live.task.limits.max_turns:
            self.end(live, "max_turns")
            return False
        if not self._seat_budget(seat, live):
            return False
        live.turns += 1
        return True

    def take_seat_turn(self, seat: Seat) -> bool:
        """Count an action credited to no arrival against the seat's budget."""
        return self._seat_budget(seat, None)

    def _seat_budget(self, seat: Seat, live: Live | None) -> bool:
        if seat.max_turns is not None and self.seat_turns[seat.id] >= seat.max_turns:
            if seat.id not in self.over_budget:
                self.over_budget.add(seat.id)
                self._record("kernel", "sim.budget", {"agent": seat.id,
                                                      "max_turns": seat.max_turns})
            if live is not None:
                self.end(live, "budget")
            return False
        self.seat_turns[seat.id] += 1
        return True

    def end(self, live: Live, termination: str, failure: tuple[str, str] | None = None) -> None:
        """End an arrival (graded once the current delivery is over)."""
        if live.end is not None:
            return
        live.end, live.failure = termination, failure
        self._ended.append(live)
        sid = live.seat.id
        if sid in self.persistent_seats and termination not in _ITS_OWN and \
                termination not in ("sim_end", "dropped"):
            self.submit("kernel", SEAT_PREFIX + sid, "notify", {
                "notification": "request_closed", "arrival": live.arrival.key,
                "termination": termination}, 0.0)

    def deadline(self, limit_s: float) -> float:
        """When an arrival taken up now reaches its time limit: ``limit_s`` seconds of working
        time from now (a request taken up at 16:30 with ten hours goes on the next day, also
        past the last day of the clock)."""
        return self.cal.after_working(self.clock.now, limit_s)

    def _take_up(self, live: Live, agent: Actor, tools: list[str]) -> None:
        """A seat takes an arrival up: its agent is handed the request, its clock starts."""
        seat = live.seat
        live.started, live.started_seq = self.clock.now, len(self._log)
        live.agent = agent
        live.policy = self.agent_names.get(seat.id, "")
        live.role = self.roles.get(seat.id, "student")
        me = self.state.people[seat.person].model_dump(mode="json")
        self.submit(live.task.user.person, SEAT_PREFIX + seat.id, "task", {
            **live.task.opening(me), "tools": tools, "arrival": live.arrival.key}, 0.0)
        limit = live.task.limits.max_sim_minutes * 60
        live.deadline = self.deadline(limit)
        # first looked at after the limit in calendar time (never later than in working time),
        # then moved on to the working-time deadline while the arrival is still open
        self.clock.schedule(self.clock.now + limit, _Delivery(
            "kernel", "kernel", "deadline", {"key": live.arrival.key}), priority=2)

    def _start_next(self, seat_id: str) -> None:
        """A per-arrival seat takes up the next arrival of its queue (if it is free)."""
        q = self.queues[seat_id]
        if not q or self.working[seat_id] is not None:
            return
        live = q.popleft()
        self.working[seat_id] = live
        try:
            agent = self.policies[seat_id](live.task)
        except Exception as exc:  # (a policy that cannot make its agent fails this arrival)
            self._take_up(live, _Idle(), [])
            self.end(live, "failed", ("agent", f"{type(exc).__name__}: {exc}"))
            return
        self._take_up(live, agent, task_toolset(live.task, live.seat.tools))

    # persistent seats ---------------------------------------------------------------------
    def _hand_over(self, live: Live) -> None:
        """A persistent seat's arrival: handed to its one agent the moment it comes."""
        sid = live.seat.id
        self.open[sid][live.arrival.key] = live
        self.focus[sid] = live.arrival.key
        self._take_up(live, self.persistent_agent(live.seat), self.seat_tools[sid])

    def persistent_agent(self, seat: Seat) -> Actor:
        """The one agent of a persistent seat (made when its first arrival comes)."""
        agent = self._agents.get(seat.id)
        if agent is None:
            agent = self._agents[seat.id] = self._persistent_factories[seat.id](
                seat, lambda key: self.live[key].task)
        return agent

    def attribute(self, seat: Seat, kind: str, to: str,
                  payload: dict[str, Any]) -> Attribution:
        """Which open arrival of a persistent seat an action counts for, recorded as a
        ``sim.attribution`` event (see :mod:`.attribution`)."""
        open_ = self.open[seat.id]
        names = list(strings(payload.get("arguments")))
        if kind == "message":
            names.append(self._person_of.get(to, to))
        elif kind == "finish":
            names += list(strings(payload.get("summary")))
        re = payload.get("re")
        credit = attribute(
            explicit=str(re) if re is not None else None, names=names,
            open_keys=list(open_), owners=self.entity_owner,
            cast={k: frozenset(m.person for m in lv.task.cast()) for k, lv in open_.items()},
            replying=self.replying.get(seat.id), focus=self.focus.get(seat.id))
        if credit.arrival is not None:
            self.focus[seat.id] = credit.arrival
            if kind == "tool_call":  # (its result, when it comes, is a reply to that arrival)
                self.call_arrival[str(payload.get("call_id"))] = credit.arrival
        how = credit.via.split(" ", 1)[0] + (" (ambiguous)" if credit.ambiguous else "")
        counts = self.attribution_counts[seat.id]
        counts[how] = counts.get(how, 0) + 1
        record = {"agent": seat.id, "action": kind, "tool": payload.get("tool"),
                  "call_id": payload.get("call_id"), **({"re": re} if re is not None else {}),
                  **credit.record()}
        self._record("kernel", "sim.attribution", record)
        if (credit.ambiguous or credit.arrival is None) and len(self.unsure) < UNSURE_KEPT:
            self.unsure.append({"t": self.clock.now, **record})
        return credit

    def handing(self, seat_id: str, kind: str, payload: dict[str, Any]) -> None:
        """What a persistent seat's agent is handed now, for what it replies to: a request,
        a call's result, a message or notice for one of its arrivals (or for an arrival
        another agent works on because of one of its own: a hand-off's answer)."""
        key: Any = None
        if kind == "tool_result":
            key = self.call_arrival.pop(str(payload.get("call_id")), None)
        elif kind in ("task", "message", "notify", "timer"):
            key = payload.get("arrival") if kind != "timer" else payload.get("re")
            if key is not None and key not in self.open[seat_id]:
                key = self.causes.get(str(key))  # (a hand-off's: the arrival it came from)
        self.replying[seat_id] = str(key) if key is not None else None

    def seat_failed(self, seat: Seat, failure: tuple[str, str]) -> None:
        """A persistent seat's agent raised: its open arrivals end failed (at its boundary);
        the agent is kept for the arrivals still to come."""
        for live in list(self.open[seat.id].values()):
            self.end(live, "failed", failure)

    def thinking(self, call: dict[str, Any]) -> float:
        """Simulated seconds a model call takes (the simulation's ``time``)."""
        t = self.sim.time
        if t.thinking == "latency":
            return float(call.get("latency_s") or 0.0) * t.factor
        if t.thinking == "tokens":
            usage = call.get("usage") or {}
            return float(usage.get("completion_tokens") or 0) * t.seconds_per_token * t.factor
        return 0.0
