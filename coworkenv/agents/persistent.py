"""Agents of persistent seats: one agent for a seat over a whole simulation.

Everything addressed to the seat reaches the agent as it happens: each request (a ``task``
envelope naming its arrival), replies, notices, hand-offs, the end of a request it did not
close itself (``request_closed``). Its actions may name the request they are for (``re``);
the kernel credits each to one open arrival either way (see
:mod:`coworkenv.sim.simulation.attribution`).

- :class:`PersistentModelAgent`: one conversation with a model over the run. Its prompt stays
  under a budget: before a call that would pass it, the oldest turns leave the prompt (their
  open requests stay listed), or are replaced by the model's own summary of them. What the
  model was sent at each call is recorded exactly (``agent.model_call``: a call after a cut
  holds its whole prompt; ``agent.summary_call`` for a summary). Its memory is the workspace's
  ``memory`` app (its notes are events like any other).
- :class:`PersistentOracle`: the reference solutions of all its open arrivals played at once,
  each as far as it can go, interleaved as their replies come: deterministic interleaving for
  tests and for the mutation check.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..bus import Envelope
from ..sim.actor import Actor, ActorContext
from ..sim.episode import AGENT_ACTIONS
from ..sim.task import Task
from .chat import (
    estimate_tokens,
    render_incoming,
    request_digest,
    request_message,
    seat_prompt,
    with_re,
)
from .openai_agent import OpenAIAgent
from .oracle import OracleAgent

SUMMARY_PROMPT = ("You summarize an AI coworker's earlier work for itself: the requests it "
                  "got (with their ids), what it did and learned, what it promised, what is "
                  "still open. Keep every figure, name, id and date exactly. At most 150 "
                  "words.")


@dataclass
class PersistentModelAgent(OpenAIAgent):
    """See the module's docstring. ``budget_tokens``: the largest prompt it sends;
    ``trim``: ``oldest`` or ``summarize``."""

    budget_tokens: int = 16000
    trim: str = "oldest"
    takes_re: bool = True
    requests: dict[str, str] = field(default_factory=dict)
    """Its open requests: id -> the request as it was first told."""
    summary: str = ""
    largest_prompt: int = 0
    """The largest prompt it sent (estimated tokens)."""
    cuts: int = 0

    async def handle(self, envelope: Envelope, ctx: ActorContext) -> None:
        p = envelope.payload
        if envelope.kind == "task":
            if not self.messages:
                self.messages = [{"role": "system", "content": seat_prompt(
                    p.get("me") or {}, str(p.get("start", "")), p.get("apps"))}]
                self.tools = with_re(self.tools if not p.get("tools") else
                                     _tools(list(p["tools"])))
            msg = request_message(p, ctx.now_dt.strftime("%a %d %b %H:%M"))
            self.requests[str(p.get("arrival"))] = str(msg["content"])
            self.messages.append(msg)
        elif envelope.kind == "notify" and p.get("notification") == "request_closed":
            key = str(p.get("arrival"))
            self.requests.pop(key, None)
            self.messages.append({"role": "user", "content": f"[request {key} closed: "
                                                             f"{p.get('termination')}]"})
        else:
            told = render_incoming(envelope.kind, p)
            if told is None:
                return
            tag = p.get("arrival")
            if tag in self.requests and told["role"] == "user":
                told = {**told, "content": str(told["content"]).replace("] ", f", re {tag}] ",
                                                                         1)}
            self.messages.append(told)
            if envelope.kind == "tool_result":
                self.pending.discard(str(p.get("call_id")))
        if not self.pending:
            await self._decide(ctx)

    def _act(self, tc: Any, ctx: ActorContext) -> bool:
        acted = super()._act(tc, ctx)
        if acted and tc.function.name == "finish":
            try:
                key = json.loads(tc.function.arguments or "{}").get("re")
            except ValueError:
                key = None
            self.requests.pop(str(key), None)
        return acted

    async def _call(self, ctx: ActorContext) -> Any:
        await self._fit(ctx)
        self.largest_prompt = max(self.largest_prompt,
                                  estimate_tokens(self.messages, self.tools))
        return await super()._call(ctx)

    def _noted(self) -> dict[str, Any]:
        return {"prompt_estimate": estimate_tokens(self.messages, self.tools),
                "budget_tokens": self.budget_tokens}

    async def _fit(self, ctx: ActorContext) -> None:
        """Keep the next prompt under the budget: above it, the oldest turns leave (whole:
        an assistant turn with the results of its calls), down to 60% of the budget so that
        cuts are rare; the requests they held that are still open stay listed in a note
        after the system prompt, with the summary of what left (``summarize``)."""
        if estimate_tokens(self.messages, self.tools) <= self.budget_tokens:
            return
        system, body = self.messages[0], self.messages[1:]
        if body and str(body[0].get("content", "")).startswith("[earlier]"):
            body = body[1:]  # (the last cut's note: made anew)
        groups: list[list[dict[str, Any]]] = []
        for m in body:
            if m.get("role") == "tool" and groups:
                groups[-1].append(m)
            else:
                groups.append([m])
        target = int(self.budget_tokens * 0.6)
        dropped: list[dict[str, Any]] = []
        while len(groups) > 1:
            kept = [m for g in groups for m in g]
            if estimate_tokens([system, self._note(dropped), *kept], self.tools) <= target:
                break
            dropped.extend(groups.pop(0))
        if self.trim == "summarize" and dropped:
            self.summary = await self._summarize(ctx, dropped)
        kept = [m for g in groups for m in g]
        self.messages = [system, self._note(dropped), *kept]
        self.sent, self.replied = 0, -1  # (the next call's record holds its whole prompt)
        self.cuts += 1
        ctx.record("agent.context_cut", {"dropped": len(dropped), "kept": len(kept),
                                         "open": sorted(self.requests),
                                         "estimate": estimate_tokens(self.messages,
                                                                     self.tools)})

    def _note(self, dropped: list[dict[str, Any]]) -> dict[str, Any]:
        """What stands for the turns that left: the open requests they held, the summary."""
        said = {str(m.get("content")) for m in dropped}
        gone = [text for text in self.requests.values() if text in said]
        lines = ["[earlier] The start of this conversation was cut."]
        if gone:
            lines.append("Requests still open from it:")
            lines += [f"- {t[:600]}" for t in gone]
        if self.summary:
            lines.append(f"Summary of earlier work: {self.summary}")
        lines.append("Look up what you noted with memory_search.")
        return {"role": "user", "content": "\n".join(lines)}

    async def _summarize(self, ctx: ActorContext, dropped: list[dict[str, Any]]) -> str:
        text = "\n".join(f"{m.get('role')}: {m.get('content') or ''}"
                         + "".join(f" [calls {c['function']['name']} "
                                   f"{c['function']['arguments']}]"
                                   for c in m.get("tool_calls") or ())
                         for m in dropped)
        if self.summary:
            text = f"Earlier summary: {self.summary}\n\n{text}"
        request = {"model": self.endpoint.model, "temperature": self.endpoint.temperature,
                   "max_tokens": 300, "seed": ctx.seed % 2**31,
                   "messages": [{"role": "system", "content": SUMMARY_PROMPT},
                                {"role": "user", "content": text[-24_000:]}]}
        digest = request_digest(request)
        resp, seconds = await ctx.complete(self.endpoint, request)
        out = ((resp.choices[0].message.content if resp.choices else "") or "").strip()
        ctx.record("agent.summary_call", {
            "request": request, "summary": out, "latency_s": round(seconds, 4),
            "digest": digest,
            "usage": resp.usage.model_dump() if resp.usage else None})
        return out or self.summary


def _tools(names: list[str]) -> list[dict[str, Any]]:
    from .chat import agent_tools

    return agent_tools(names)


class _SubContext(ActorContext):
    """One open arrival's part of a persistent oracle: what it sends goes out through the
    seat's context (credited to an arrival there), naming its arrival (``re``) unless the
    oracle leaves that to the links; its calls and timers are routed back to it."""

    def __init__(self, parent: ActorContext, key: str, owner: PersistentOracle) -> None:
        super().__init__(parent._kernel, parent.name, parent.person,
                         zlib.crc32(f"{parent.seed}:{key}".encode()))
        self.parent, self.key, self.owner = parent, key, owner
        self.finished = False

    def send(self, to: str, kind: str, payload: dict[str, Any], *, delay: float = 0.0) -> None:
        if kind == "timer" or (kind in AGENT_ACTIONS and self.owner.explicit):
            payload = {**payload, "re": self.key}
        if kind == "finish":
            self.finished = True
        self.parent.send(to, kind, payload, delay=delay)

    def call_tool(self, tool: str, arguments: dict[str, Any], *, delay: float = 0.0,
                  as_person: str | None = None, call_id: str | None = None,
                  **extra: Any) -> str:
        self.tool_calls += 1
        call_id = call_id or f"{self.name}-{self.key}-{self.tool_calls}"
        self.owner.calls[call_id] = self.key
        return super().call_tool(tool, arguments, delay=delay, as_person=as_person,
                                 call_id=call_id, **extra)


@dataclass
class PersistentOracle(Actor):
    """See the module's docstring. ``tasks``: an open arrival's task by key (the kernel's);
    ``explicit``: name each action's arrival (``re``), else leave it to the links."""

    tasks: Callable[[str], Task]
    explicit: bool = True
    role: str = "agent"
    subs: dict[str, tuple[OracleAgent, _SubContext]] = field(default_factory=dict)
    calls: dict[str, str] = field(default_factory=dict)
    """Call id -> the arrival whose part made the call."""

    async def handle(self, envelope: Envelope, ctx: ActorContext) -> None:
        p = envelope.payload
        if envelope.kind == "task":
            new = str(p.get("arrival"))
            self.subs[new] = (OracleAgent(list(self.tasks(new).reference)),
                              _SubContext(ctx, new, self))
        elif envelope.kind == "notify" and p.get("notification") == "request_closed":
            self.subs.pop(str(p.get("arrival")), None)
            return
        key = self._route(envelope, ctx)
        if key is None or key not in self.subs:
            return
        sub, sctx = self.subs[key]
        await sub.handle(envelope, sctx)
        if sctx.finished:
            del self.subs[key]

    def _route(self, env: Envelope, ctx: ActorContext) -> str | None:
        p = env.payload
        if env.kind == "task":
            return str(p.get("arrival"))
        if env.kind == "tool_result":
            return self.calls.pop(str(p.get("call_id")), None)
        if env.kind == "timer":
            return str(p.get("re")) if p.get("re") is not None else None
        tag = p.get("arrival")
        if tag in self.subs:
            return str(tag)
        # (another agent's arrival reaching this seat: the part that waits for it, else the
        # part whose request the writer takes part in)
        for k, (sub, sctx) in self.subs.items():
            if sub.waits_for(env, sctx):
                return k
        sender = p.get("from") if env.kind == "message" else p.get("sender")
        for k in self.subs:
            if sender in {m.person for m in self.tasks(k).cast()}:
                return k
        return None
