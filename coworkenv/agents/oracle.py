"""Agents that need no model: the oracle (runs the reference solution) and the no-op."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..bus import Envelope
from ..sim.actor import Actor, ActorContext
from ..sim.task import (
    FinishStep,
    MessageStep,
    Step,
    ToolStep,
    WaitStep,
    clock_minutes,
    resolve_refs,
)

TRANSIENT = frozenset({"rate_limited", "server_error", "unavailable"})


@dataclass
class OracleAgent(Actor):
    """Executes a task's reference solution through the same bus and tools as any agent.

    It waits where the solution says to wait (for a person's reply, a notification, or a
    stretch of time), so it exercises the simulator exactly as a model-backed agent would.
    """

    steps: list[Step]
    role: str = "agent"
    max_retries: int = 8
    """Transient failures (rate limits, server errors) are retried this many times."""
    pc: int = 0
    retries: int = 0
    results: dict[str, Any] = field(default_factory=dict)
    waiting: dict[str, Any] | None = None
    started: bool = False
    waits: int = 0
    inbox: list[Envelope] = field(default_factory=list)
    """Messages and notifications not yet waited for (replies may come in any order)."""
    blocked: list[int] = field(default_factory=list)
    """Indexes of the wait steps that really waited (what they wait for had not come yet)."""
    resolved: dict[int, Any] = field(default_factory=dict)
    """What each step actually sent, by step index: tool arguments or message text with every
    ``${step.path}`` reference filled in (the mutation check replays these)."""

    def fork(self, steps: list[Step]) -> OracleAgent:
        """This agent as it is now, going on with ``steps`` (which share its past steps):
        the mutation check's way to start a variant where it leaves the reference."""
        return OracleAgent(steps=steps, role=self.role, max_retries=self.max_retries,
                           pc=self.pc, retries=self.retries, results=dict(self.results),
                           waiting=dict(self.waiting) if self.waiting else None,
                           started=self.started, waits=self.waits, inbox=list(self.inbox),
                           blocked=list(self.blocked), resolved=dict(self.resolved))

    async def handle(self, envelope: Envelope, ctx: ActorContext) -> None:
        if envelope.kind == "task" and not self.started:
            self.started = True
            self._advance(ctx)
            return
        if self.waiting is None or not self._satisfies(envelope, ctx):
            if envelope.kind in ("message", "notify"):
                self.inbox.append(envelope)
                if self.waiting is not None and "call_id" not in self.waiting:
                    self._wait(ctx)  # asked again by what arrived, it goes on waiting
            return
        if envelope.kind == "tool_result":
            step = self.steps[self.pc - 1]
            assert isinstance(step, ToolStep)
            error = envelope.payload.get("error") or {}
            if error.get("code") in TRANSIENT and self.retries < self.max_retries:
                self.retries += 1
                call_id = ctx.call_tool(step.tool, resolve_refs(step.args, self.results))
                self.waiting = {"call_id": call_id}
                return
            self.retries = 0
            if step.id:
                self.results[step.id] = envelope.payload.get("result")
        self.waiting = None
        self._advance(ctx)

    def _satisfies(self, env: Envelope, ctx: ActorContext) -> bool:
        w = self.waiting or {}
        p = env.payload
        if "call_id" in w:
            return env.kind == "tool_result" and p.get("call_id") == w["call_id"]
        if "timer" in w:
            return env.kind == "timer" and p.get("id") == w["timer"]
        if "person" in w:
            sender = p.get("from") if env.kind == "message" else p.get("sender")
            return env.kind in ("message", "notify") and sender == w["person"]
        if "notification" in w:
            return env.kind == "notify" and p.get("notification") == w["notification"]
        return False

    def _wait(self, ctx: ActorContext) -> None:
        """Say that it waits, as a model-backed agent does with its ``wait`` function, so
        that the demonstration shows the decision (the log's ``agent.wait`` events)."""
        self.waits += 1
        ctx.record("agent.wait", {"call_id": f"agent-wait-{self.waits}"})

    def _advance(self, ctx: ActorContext) -> None:
        while self.pc < len(self.steps):
            step = self.steps[self.pc]
            self.pc += 1
            if isinstance(step, ToolStep):
                args = resolve_refs(step.args, self.results)
                self.resolved[self.pc - 1] = args
                call_id = ctx.call_tool(step.tool, args)
                self.waiting = {"call_id": call_id}
                return
            if isinstance(step, MessageStep):
                text = str(resolve_refs(step.text, self.results))
                self.resolved[self.pc - 1] = text
                ctx.say(step.to, text)
            elif isinstance(step, WaitStep):
                if step.minutes is not None or step.until is not None:
                    delay = step.minutes * 60 if step.minutes is not None else \
                        clock_minutes(str(step.until), ctx.start) * 60 - ctx.now
                    ctx.timer(max(0.0, delay), id=self.pc)
                    self.waiting = {"timer": self.pc}
                elif step.message_from is not None:
                    self.waiting = {"person": step.message_from}
                else:
                    self.waiting = {"notification": step.notification}
                early = next((e for e in self.inbox if self._satisfies(e, ctx)), None)
                if early is None:
                    self.blocked.append(self.pc - 1)
                    self._wait(ctx)
                    return
                self.inbox.remove(early)  # it already came: go on
                self.waiting = None
            elif isinstance(step, FinishStep):
                ctx.finish(step.summary)
                return
        ctx.finish("reference solution complete")


class NoopAgent(Actor):
    """Does nothing and finishes at once: the baseline every task's checks must fail."""

    role = "agent"

    async def handle(self, envelope: Envelope, ctx: ActorContext) -> None:
        if envelope.kind == "task":
            ctx.finish("no-op")
