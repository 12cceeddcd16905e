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
LOOKUP = "directory_search"


def slip_names(task: Any) -> dict[str, list[str]]:
    """For each person of ``task``'s seed, the wrong references a model is seen to make in
    their place (first name, full display name) that resolve to no one in the directory:
    what :class:`OracleAgent` may slip on."""
    people = task.seed.people
    taken = {p.id for p in people} | {g.id for g in task.seed.groups}
    taken_low = {p.email.lower() for p in people} | {g.email.lower() for g in task.seed.groups}
    firsts = [p.name.split()[0].lower() for p in people if p.name.split()]
    out: dict[str, list[str]] = {}
    for p in people:
        full = " ".join(p.name.split())
        first = full.split(" ")[0]
        options = [full] if firsts.count(first.lower()) > 1 else [first, full]
        wrong = [w for w in dict.fromkeys(options) if w
                 and w not in taken and w.lower() not in taken_low]
        if wrong:
            out[p.id] = wrong
    return out


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
    slips: float = 0.0
    """Share of the tool steps naming a person where it first names them wrongly (a first
    name or display name, see :func:`slip_names`), is told ``not_found``, looks them up with
    ``directory_search`` and calls again with the id found: demonstrations of recovering
    from a wrong argument. Only where the episode offers ``directory_search``; each slipped
    call is marked with an ``agent.slip`` event (export keeps it out of the SFT loss)."""
    names: dict[str, list[str]] = field(default_factory=dict)
    """Wrong references by person id (:func:`slip_names`)."""
    lookup: bool = False
    recovering: dict[str, Any] | None = None
    """A slip under way: the step's right arguments, what to search, the phase."""
    current: tuple[str, Any] = ("", None)
    """The call in flight (tool, arguments): what a transient failure retries."""

    def fork(self, steps: list[Step]) -> OracleAgent:
        """This agent as it is now, going on with ``steps`` (which share its past steps):
        the mutation check's way to start a variant where it leaves the reference."""
        return OracleAgent(steps=steps, role=self.role, max_retries=self.max_retries,
                           pc=self.pc, retries=self.retries, results=dict(self.results),
                           waiting=dict(self.waiting) if self.waiting else None,
                           started=self.started, waits=self.waits, inbox=list(self.inbox),
                           blocked=list(self.blocked), resolved=dict(self.resolved),
                           slips=self.slips, names=self.names, lookup=self.lookup,
                           recovering=dict(self.recovering) if self.recovering else None,
                           current=self.current)

    async def handle(self, envelope: Envelope, ctx: ActorContext) -> None:
        if envelope.kind == "task" and not self.started:
            self.started = True
            self.lookup = LOOKUP in (envelope.payload.get("tools") or ())
            self._advance(ctx)
            return
        if self.waiting is None or not self._satisfies(envelope, ctx):
            if envelope.kind in ("message", "notify"):
                self.inbox.append(envelope)
                if self.waiting is not None and "call_id" not in self.waiting:
                    self._wait(ctx)  # asked again by what arrived, it goes on waiting
            return
        if envelope.kind == "timer" and (self.waiting or {}).get("retry"):
            self._call(ctx, *self.current)  # the wait a service asked for is over
            return
        if envelope.kind == "tool_result":
            step = self.steps[self.pc - 1]
            assert isinstance(step, ToolStep)
            error = envelope.payload.get("error") or {}
            if error.get("code") in TRANSIENT and self.retries < self.max_retries:
                self.retries += 1
                after = error.get("retry_after_s")
                if isinstance(after, int | float) and after > 0:  # a service that is down
                    self.waits += 1
                    ctx.timer(float(after), id=f"retry-{self.waits}")
                    self.waiting = {"timer": f"retry-{self.waits}", "retry": True}
                    ctx.record("agent.wait", {"call_id": f"agent-wait-{self.waits}"})
                    return
                self._call(ctx, *self.current)  # the same call again
                return
            self.retries = 0
            slip = self.recovering
            if slip is not None and slip["phase"] != "right":
                if slip["phase"] == "slip" and envelope.payload.get("ok"):
                    self.recovering = None  # (a tool that took the name: nothing to recover)
                else:  # told not_found: look the name up, then call with the id found
                    slip["phase"] = "search" if slip["phase"] == "slip" else "right"
                    if slip["phase"] == "search":
                        self._call(ctx, LOOKUP, {"query": slip["query"]})
                    else:
                        self._call(ctx, step.tool, slip["right"])
                    return
            self.recovering = None
            if step.id:
                self.results[step.id] = envelope.payload.get("result")
        self.waiting = None
        self._advance(ctx)

    def _call(self, ctx: ActorContext, tool: str, args: Any) -> None:
        """Call a tool and wait for its result; a call made while a slip has not yet been
        told ``not_found`` (the first, or its retry after a fault) is marked as the slip."""
        self.current = (tool, args)
        call_id = ctx.call_tool(tool, args)
        self.waiting = {"call_id": call_id}
        if self.recovering is not None and self.recovering["phase"] == "slip":
            ctx.record("agent.slip", {"call_id": call_id})

    def _slip(self, tool: str, args: Any, ctx: ActorContext) -> dict[str, Any] | None:
        """The wrong arguments of a slip at this step, or None (see :attr:`slips`)."""
        if not (self.slips and self.lookup and isinstance(args, dict)) or \
                tool == LOOKUP or ctx.rng.random() >= self.slips:
            return None
        spots = [(k, i, v) for k, val in args.items()
                 for i, v in (enumerate(val) if isinstance(val, list) else [(None, val)])
                 if isinstance(v, str) and v in self.names]
        if not spots:
            return None
        key, i, person = ctx.rng.choice(spots)
        name = ctx.rng.choice(self.names[person])
        wrong = dict(args)
        if i is None:
            wrong[key] = name
        else:
            wrong[key] = [name if j == i else v for j, v in enumerate(args[key])]
        self.recovering = {"right": args, "query": name, "phase": "slip"}
        return wrong

    def waits_for(self, env: Envelope, ctx: ActorContext) -> bool:
        """Whether it waits for this envelope now (a reply, a notice, its timer)."""
        return self.waiting is not None and self._satisfies(env, ctx)

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
                self._call(ctx, step.tool, self._slip(step.tool, args, ctx) or args)
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
