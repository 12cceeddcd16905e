"""Scripted simulated people: deterministic answers from known facts, with delays, working
hours and triggered actions, as the task's cast describes them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from ..bus import Envelope
from ..sim.actor import Actor, ActorContext
from ..sim.task import Action, CastMember

SATISFIED = "[SATISFIED]"
"""A user who writes this is satisfied: the episode ends (termination ``user_satisfied``)."""


def matching_facts(member: CastMember, text: str) -> list[str]:
    low = text.lower()
    return [f.value for f in member.facts if any(k.lower() in low for k in f.keywords)]


@dataclass
class ScriptedPerson(Actor):
    """A user or coworker who answers what they are asked, when they are at work."""

    member: CastMember
    timezone: str = "UTC"
    role: str = "coworker"
    agent_person: str = ""
    fired: set[int] = field(default_factory=set)

    def _reply_delay(self, ctx: ActorContext) -> float:
        lo, hi = self.member.response.delay_minutes
        delay = ctx.rng.uniform(lo, hi) * 60
        hours = self.member.response.working_hours
        if hours is None:
            return delay
        tz = ZoneInfo(self.timezone)
        when = (ctx.now_dt + timedelta(seconds=delay)).astimezone(tz)
        start = _at(when, hours[0])
        end = _at(when, hours[1])
        if when < start:
            when = start + timedelta(minutes=ctx.rng.uniform(lo, hi))
        elif when > end or when.weekday() >= 5:
            nxt = when + timedelta(days=1)
            while nxt.weekday() >= 5:
                nxt += timedelta(days=1)
            when = _at(nxt, hours[0]) + timedelta(minutes=ctx.rng.uniform(lo, hi))
        return max(0.0, (when - ctx.now_dt).total_seconds())

    async def handle(self, envelope: Envelope, ctx: ActorContext) -> None:
        p = envelope.payload
        if envelope.kind == "trigger":
            trig = self.member.triggers[int(p["index"])]
            self._act(trig.actions, ctx, trig.after_minutes * 60, channel=None)
            return
        question, channel = self._question(envelope)
        if question is None or not self.member.response.available:
            return
        delay = self._reply_delay(ctx)
        answered = False
        for ti, trig in enumerate(self.member.triggers):
            if trig.asked and ti not in self.fired and any(
                    k.lower() in question.lower() for k in trig.asked):
                self.fired.add(ti)
                self._act(trig.actions, ctx, delay + trig.after_minutes * 60, channel=channel)
                answered = True
        text = await self.compose(question, ctx, answered=answered)
        if text:
            self._reply(text, ctx, delay, channel)
            if self.role == "user" and SATISFIED in text:
                ctx.send("kernel", "satisfied", {"from": self.member.person}, delay=delay)

    async def compose(self, question: str, ctx: ActorContext, *, answered: bool) -> str | None:
        """What to answer: the matching facts, else the fallback (unless a trigger answered)."""
        facts = matching_facts(self.member, question)
        if facts:
            return " ".join(facts)
        return None if answered else self.member.fallback

    def _question(self, env: Envelope) -> tuple[str | None, dict[str, Any] | None]:
        """What the agent asked, and how to answer (None if this is not a question to us)."""
        p = env.payload
        if env.kind == "message" and p.get("from") == self.agent_person:
            return str(p.get("text", "")), {"via": "message"}
        if env.kind == "notify" and p.get("sender") == self.agent_person:
            if p.get("notification") == "chat":
                return str(p.get("text", "")), {"via": "chat", "dm": p.get("dm"),
                                                "channel": p.get("channel")}
            if p.get("notification") == "email":
                return f"{p.get('subject', '')} {p.get('body', '')}", {
                    "via": "email", "email_id": p.get("email_id")}
        return None, None

    def _reply(self, text: str, ctx: ActorContext, delay: float,
               channel: dict[str, Any] | None) -> None:
        via = (channel or {}).get("via", "message")
        if via == "chat":
            assert channel is not None
            if channel.get("dm"):
                ctx.call_tool("chat_send_dm", {"to": self.agent_person, "text": text},
                              delay=delay)
            else:
                ctx.call_tool("chat_post", {"channel": channel["channel"], "text": text},
                              delay=delay)
        elif via == "email":
            assert channel is not None
            ctx.call_tool("email_reply", {"email_id": channel["email_id"], "body": text},
                          delay=delay)
        else:
            ctx.say(self.agent_person, text, delay=delay)

    def _act(self, actions: list[Action], ctx: ActorContext, delay: float,
             channel: dict[str, Any] | None) -> None:
        for a in actions:
            if a.kind == "tool":
                assert a.tool is not None
                ctx.call_tool(a.tool, a.args, delay=delay)
            elif a.kind == "message":
                ctx.say(a.to or self.agent_person, a.text or "", delay=delay)
            else:
                self._reply(a.text or "", ctx, delay, channel)


def _at(day: datetime, hhmm: str) -> datetime:
    h, m = (int(x) for x in hhmm.split(":"))
    return day.replace(hour=h, minute=m, second=0, microsecond=0)
