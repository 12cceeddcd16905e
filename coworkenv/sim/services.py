"""Actors the simulator itself provides: the tool service and the world timeline."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..bus import Envelope
from ..workspace import WorkspaceState, execute_tool
from .actor import Actor, ActorContext
from .task import TimelineEvent


@dataclass
class ToolService(Actor):
    """Runs tool calls against the episode's workspace, records their events, replies.

    ``record`` appends each ``ws.*`` event to the episode log as it happens.
    """

    state: WorkspaceState
    record: Any
    calls: int = 0
    failures: int = 0
    role: str = "tools"
    faults: Any = field(default=None)
    agents: frozenset[str] = frozenset({"agent"})
    """The actors whose calls faults apply to (the agents under test)."""
    tagged: frozenset[str] = frozenset()
    """Actors whose notifications name the arrival of the call that caused them (what a
    simulation's persistent seats send and are sent is for one arrival of several)."""

    async def handle(self, envelope: Envelope, ctx: ActorContext) -> None:
        if envelope.kind != "tool_call":
            return
        p = envelope.payload
        caller = envelope.sender
        person = p.get("as") if caller == "world" else ctx.person_for(caller)
        self.calls += 1
        tool = str(p.get("tool", ""))
        faults = self.faults if caller in self.agents else None  # the agents' calls only
        injected = faults.failure(tool) if faults is not None else None
        delay = faults.delay(tool) if faults is not None else 0.0
        if injected is not None or delay:
            self.record("tools", "fault.injected", {
                "call_id": p.get("call_id"), "tool": tool, "caller": caller,
                "failure": injected["error"]["code"] if injected else None,
                "delay": round(delay, 3)})
        notifications: list[Any] = []
        if injected is not None:
            self.failures += 1
            observation: dict[str, Any] = injected
            ok = False
        else:
            out = execute_tool(self.state, person or "", tool, p.get("arguments"), ctx.now_dt)
            for kind, payload in out.events:
                self.record("tools", kind, payload)
            observation, ok, notifications = out.observation, out.ok, out.notifications
            if not ok:
                self.failures += 1
        ctx.send(caller, "tool_result", {"call_id": p.get("call_id"), "tool": p.get("tool"),
                                         **observation}, delay=delay)
        tag = p.get("arrival")
        for n in notifications:
            actor = ctx.actor_for(n.person)
            if actor is not None:
                extra = {"arrival": tag} if tag is not None and (
                    caller in self.tagged or actor in self.tagged) else {}
                ctx.send(actor, "notify", {"notification": n.kind, "person": n.person,
                                           **n.summary, **extra})


@dataclass
class World(Actor):
    """Scheduled world events: at a simulated time, a person acts (tool call or message)."""

    timeline: list[TimelineEvent]
    role: str = "world"

    async def handle(self, envelope: Envelope, ctx: ActorContext) -> None:
        if envelope.kind == "tool_result":
            return
        if envelope.kind != "timeline":
            return
        ev = self.timeline[int(envelope.payload["index"])]
        act = ev.action
        if act.kind == "tool":
            assert act.tool is not None
            ctx.call_tool(act.tool, act.args, as_person=ev.actor)
        else:
            to = act.to or ""
            target = ctx.actor_for(to)
            if target is not None:
                ctx.send(target, "message", {"from": ev.actor, "text": act.text})
