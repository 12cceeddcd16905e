"""The actors a simulation adds to the episode kernel's: each agent's seat, each person of
the company, the arrivals' timelines, and the outages the tool service asks about.

They reach the kernel only through :class:`Host` (what :class:`~.kernel.SimulationKernel`
offers them), so this module sits below the kernel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ...bus import Envelope
from ..actor import Actor, ActorContext, Kernel
from ..episode import AGENT_ACTIONS
from ..errors import EpisodeFailure

if TYPE_CHECKING:
    from ..clock import Clock
    from .attribution import Attribution
    from .language import Seat
    from .records import Live


class Host(Kernel, Protocol):
    """What the simulation's actors need of its kernel (beside what every actor's context
    needs of an episode's)."""

    clock: Clock
    live: dict[str, Live]
    owner: dict[str, str]
    seat_of_person: dict[str, str]
    persistent_seats: set[str]

    def current(self, seat: str) -> Live | None: ...

    def take_turn(self, live: Live) -> bool: ...

    def end(self, live: Live, termination: str,
            failure: tuple[str, str] | None = None) -> None: ...

    def thinking(self, call: dict[str, Any]) -> float:
        """Simulated seconds a model call takes (the simulation's ``time``)."""

    def attribute(self, seat: Seat, kind: str, to: str,
                  payload: dict[str, Any]) -> Attribution:
        """Which open arrival of a persistent seat an action counts for (recorded)."""

    def take_seat_turn(self, seat: Seat) -> bool:
        """Count an action credited to no arrival against the seat's budget."""

    def persistent_agent(self, seat: Seat) -> Actor:
        """The one agent of a persistent seat."""

    def seat_failed(self, seat: Seat, failure: tuple[str, str]) -> None:
        """A persistent seat's agent raised: its open arrivals end failed."""


class Outages:
    """Fault injection for a simulation's outage windows (the tool service asks it about the
    agents' calls)."""

    def __init__(self, kernel: Host, windows: list[tuple[float, float, set[str],
                                                                       str]]) -> None:
        self.kernel = kernel
        self.windows = windows

    def failure(self, tool: str) -> dict[str, Any] | None:
        now = self.kernel.clock.now
        for lo, hi, tools, message in self.windows:
            if lo <= now < hi and tool in tools:
                return {"ok": False, "error": {"code": "unavailable", "field": None,
                                               "message": message,
                                               "retry_after_s": round(hi - now, 3)},
                        "injected": True}
        return None

    def delay(self, tool: str) -> float:
        return 0.0


class SeatContext(ActorContext):
    """A seat's handle: what its agent sends is tagged with the arrival it works on, takes the
    seat's action time, and counts against the arrival's and the seat's turn limits."""

    def __init__(self, kernel: Host, name: str, seat: Seat, seed: int) -> None:
        super().__init__(kernel, name, seat.person, seed)
        self.seat = seat
        self.sim = kernel
        self.think = 0.0
        """Simulated seconds the agent's model calls took since it was handed the envelope
        it is handling: its actions come that much later (the simulation's ``time``)."""

    def record(self, kind: str, payload: dict[str, Any]) -> None:
        if kind == "agent.model_call":
            self.think += self.sim.thinking(payload)
        super().record(kind, payload)

    def send(self, to: str, kind: str, payload: dict[str, Any], *, delay: float = 0.0) -> None:
        live = self.sim.current(self.seat.id)
        if live is None or live.end is not None:
            return  # an idle seat, or an arrival already over: its actions go nowhere
        if kind in AGENT_ACTIONS and to != self.name:
            if not self.sim.take_turn(live):
                return
            if kind != "finish":
                delay += self.seat.action_minutes * 60 + self.think
        super().send(to, kind, {**payload, "arrival": live.arrival.key}, delay=delay)


class PersistentSeatContext(SeatContext):
    """A persistent seat's handle: each action of its one agent is credited to one of the
    seat's open arrivals (:mod:`.attribution`; recorded as ``sim.attribution``), tagged with
    it, and counted against its limits; an action credited to none still happens, counted
    against the seat's budget only."""

    def send(self, to: str, kind: str, payload: dict[str, Any], *, delay: float = 0.0) -> None:
        if kind not in AGENT_ACTIONS or to == self.name:
            ActorContext.send(self, to, kind, payload, delay=delay)  # (its own timers)
            return
        credit = self.sim.attribute(self.seat, kind, to, payload)
        payload = {k: v for k, v in payload.items() if k != "re"}
        live = self.sim.live.get(credit.arrival) if credit.arrival is not None else None
        payload["credited"] = credit.via  # (on the action: how it was credited)
        if live is not None:
            if not self.sim.take_turn(live):
                return
            payload["arrival"] = live.arrival.key
        elif kind == "finish" or not self.sim.take_seat_turn(self.seat):
            return  # (nothing open to finish; or the seat's budget is spent)
        if kind != "finish":
            delay += self.seat.action_minutes * 60 + self.think
        ActorContext.send(self, to, kind, payload, delay=delay)


class PersonContext(ActorContext):
    """A person's handle while playing one arrival's cast member: what they send is tagged
    with that arrival (their replies reach the agent working on it, and no other)."""

    def __init__(self, kernel: Host, name: str, key: str, seed: int) -> None:
        super().__init__(kernel, name, name, seed)
        self.key = key

    def send(self, to: str, kind: str, payload: dict[str, Any], *, delay: float = 0.0) -> None:
        super().send(to, kind, {**payload, "arrival": self.key}, delay=delay)


class SeatActor(Actor):
    """The actor of one seat: hands each envelope to the agent of the arrival it works on."""

    role = "agent"

    def __init__(self, kernel: Host, seat: Seat) -> None:
        self.sim = kernel
        self.seat = seat

    async def handle(self, envelope: Envelope, ctx: ActorContext) -> None:
        live = self.sim.current(self.seat.id)
        if live is None or live.agent is None or live.end is not None:
            return
        tag = envelope.payload.get("arrival")
        if tag is not None and tag != live.arrival.key and \
                self.sim.owner.get(str(tag)) == self.seat.id:
            later = self.sim.live.get(str(tag))
            if later is not None and later.started is None:
                later.mailbox.append(envelope)  # for an arrival still in its queue
            return  # else a late reply or timer of an arrival it has finished
        # (another agent's arrival reaching this one: a hand-off, for the work at hand)
        if isinstance(ctx, SeatContext):
            ctx.think = 0.0
        try:
            await live.agent.handle(envelope, ctx)
            if envelope.kind == "task" and live.mailbox:
                early, live.mailbox = live.mailbox, []
                for env in early:
                    if live.end is None:
                        await live.agent.handle(env, ctx)
        except EpisodeFailure as exc:
            self.sim.end(live, "failed", (exc.boundary, exc.message))
        except Exception as exc:
            self.sim.end(live, "failed", ("agent", f"{type(exc).__name__}: {exc}"))


class PersistentSeatActor(Actor):
    """The actor of a persistent seat: hands everything addressed to the seat (requests as
    they arrive, replies, notices, hand-offs, its own timers) to its one agent."""

    role = "agent"

    def __init__(self, kernel: Host, seat: Seat) -> None:
        self.sim = kernel
        self.seat = seat

    async def handle(self, envelope: Envelope, ctx: ActorContext) -> None:
        if isinstance(ctx, SeatContext):
            ctx.think = 0.0
        try:
            await self.sim.persistent_agent(self.seat).handle(envelope, ctx)
        except EpisodeFailure as exc:
            self.sim.seat_failed(self.seat, (exc.boundary, exc.message))
        except Exception as exc:
            self.sim.seat_failed(self.seat, ("agent", f"{type(exc).__name__}: {exc}"))


class PersonHub(Actor):
    """One person of the company, playing each arrival's cast member for them."""

    role = "coworker"

    def __init__(self, kernel: Host, person: str) -> None:
        self.sim = kernel
        self.person = person
        self.personas: dict[str, tuple[Actor, PersonContext]] = {}

    async def handle(self, envelope: Envelope, ctx: ActorContext) -> None:
        p = envelope.payload
        key: str | None = None
        if envelope.kind in ("trigger", "timer"):
            key = p.get("arrival")
        elif envelope.kind in ("message", "notify"):
            sender = p.get("from") if envelope.kind == "message" else p.get("sender")
            seat = self.sim.seat_of_person.get(str(sender))
            if seat in self.sim.persistent_seats:  # (its actions carry their arrival)
                key = p.get("arrival")
            else:
                live = self.sim.current(seat) if seat is not None else None
                key = live.arrival.key if live is not None else None
        entry = self.personas.get(key) if key is not None else None
        if entry is None:
            return
        actor, pctx = entry
        try:
            await actor.handle(envelope, pctx)
        except Exception as exc:
            live = self.sim.live.get(str(key))
            if live is not None:
                self.sim.end(live, "failed", (actor.role if actor.role in ("user", "coworker")
                                              else "coworker", f"{type(exc).__name__}: {exc}"))


class SimWorld(Actor):
    """The arrivals' timelines: at its time, a person of one arrival acts."""

    role = "world"

    def __init__(self, kernel: Host) -> None:
        self.sim = kernel

    async def handle(self, envelope: Envelope, ctx: ActorContext) -> None:
        if envelope.kind != "timeline":
            return
        live = self.sim.live.get(str(envelope.payload.get("arrival")))
        if live is None:
            return
        ev = live.task.timeline[int(envelope.payload["index"])]
        act = ev.action
        tag = {"arrival": live.arrival.key}
        if act.kind == "tool":
            assert act.tool is not None
            ctx.send("tools", "tool_call", {"call_id": f"world-{live.arrival.key}-"
                                            f"{envelope.payload['index']}", "tool": act.tool,
                                            "arguments": act.args, "as": ev.actor, **tag})
        else:
            target = ctx.actor_for(act.to or "")
            if target is not None:
                ctx.send(target, "message", {"from": ev.actor, "text": act.text, **tag})
