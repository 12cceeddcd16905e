"""Scripted simulated people: deterministic answers from known facts, with delays, working
hours and triggered actions, as the task's cast describes them."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from ..bus import Envelope
from ..sim.actor import Actor, ActorContext
from ..sim.selectors import lookup
from ..sim.task import Action, CastMember, Fact
from ..workspace import WorkspaceState, parse_iso
from ..workspace.text import mentions

SATISFIED = "[SATISFIED]"
"""A user who writes this is satisfied: the episode ends (termination ``user_satisfied``)."""


def matching_facts(member: CastMember, text: str,
                   workspace: WorkspaceState | None = None) -> list[str]:
    """What a person answers to a question: for each fact it asks about, the first
    conditional answer that holds (over the question, and the workspace as it is now), else
    the fact's value."""
    low = text.lower()
    out = []
    for f in member.facts:
        if any(k.lower() in low for k in f.keywords):
            out.append(answer(f, text, workspace))
    return out


def answer(fact: Fact, question: str, workspace: WorkspaceState | None) -> str:
    for a in fact.answers:
        if a.asked is not None and not a.asked.matches(question):
            continue
        value = lookup(workspace, a.lookup) if a.lookup is not None and workspace is not None \
            else None
        if a.mentions_lookup is not None:
            said = value is not None and mentions(question, value)
            if said != a.mentions_lookup:
                continue
        if a.lookup is not None and not a.holds_for(value):
            continue
        return a.text.replace("{value}", value or "")
    return fact.value


@dataclass
class ScriptedPerson(Actor):
    """A user or coworker who answers what they are asked, when they are at work."""

    member: CastMember
    timezone: str = "UTC"
    role: str = "coworker"
    agent_person: str = ""
    fired: set[int] = field(default_factory=set)

    def _reply_delay(self, ctx: ActorContext) -> float:
        """When the reply comes: after the drawn delay, inside working hours, after any
        out-of-office range and (with ``response.calendar``) after the meeting they are in."""
        r = self.member.response
        lo, hi = r.delay_minutes
        delay = ctx.rng.uniform(lo, hi) * 60
        if r.working_hours is None and not r.calendar and not r.out_of_office:
            return delay
        tz = ZoneInfo(self.timezone)
        when = (ctx.now_dt + timedelta(seconds=delay)).astimezone(tz)
        for _ in range(64):  # each pass moves the time forward; stop when nothing does
            moved = when
            for ooo in r.out_of_office:
                if ooo.start <= moved < ooo.end:
                    moved = ooo.end.astimezone(tz) + timedelta(minutes=ctx.rng.uniform(lo, hi))
            if r.working_hours is not None:
                moved = self._in_hours(moved, r.working_hours, ctx, lo, hi)
            if r.calendar:
                end = self._busy_until(ctx, moved)
                if end is not None:
                    moved = end.astimezone(tz) + timedelta(minutes=ctx.rng.uniform(lo, hi))
            if moved == when:
                break
            when = moved
        return max(0.0, (when - ctx.now_dt).total_seconds())

    @staticmethod
    def _in_hours(when: datetime, hours: tuple[str, str], ctx: ActorContext, lo: float,
                  hi: float) -> datetime:
        start = _at(when, hours[0])
        end = _at(when, hours[1])
        if when.weekday() < 5 and start <= when <= end:
            return when
        nxt = when if when < start and when.weekday() < 5 else when + timedelta(days=1)
        while nxt.weekday() >= 5:
            nxt += timedelta(days=1)
        return _at(nxt, hours[0]) + timedelta(minutes=ctx.rng.uniform(lo, hi))

    def _busy_until(self, ctx: ActorContext, when: datetime) -> datetime | None:
        """The end of the meeting this person is in at ``when`` (their calendar as it is)."""
        me = self.member.person
        for ev in ctx.workspace.calendar.values():
            if ev.status != "confirmed":
                continue
            if me != ev.organizer and ev.attendees.get(me) in (None, "declined"):
                continue
            start, end = parse_iso(ev.start), parse_iso(ev.end)
            if start <= when < end:
                return end
        return None

    def _away(self, ctx: ActorContext) -> str | None:
        """The out-of-office note in force now, if any."""
        now = ctx.now_dt
        for ooo in self.member.response.out_of_office:
            if ooo.start <= now < ooo.end and ooo.auto_reply:
                return ooo.auto_reply
        return None

    def copy(self) -> ScriptedPerson:
        """The same person with their own memory of what fired (for a forked episode)."""
        new = copy.copy(self)
        new.fired = set(self.fired)
        return new

    async def handle(self, envelope: Envelope, ctx: ActorContext) -> None:
        p = envelope.payload
        if envelope.kind == "trigger":
            trig = self.member.triggers[int(p["index"])]
            self._act(trig.actions, ctx, trig.after_minutes * 60, channel=None)
            return
        if envelope.kind == "timer" and "question" in p:  # a reply that reads the workspace
            await self._answer(str(p["question"]), ctx, 0.0, p.get("channel"),
                               bool(p.get("answered")))
            return
        question, channel = self._question(envelope)
        if question is None or not self.member.response.available:
            return
        if channel is not None and channel.get("via") == "chat" and not channel.get("dm") \
                and not self._addressed(question, ctx):
            return  # a channel post to everyone: only who is named, or knows, answers
        away = self._away(ctx)
        if away is not None:
            self._reply(away, ctx, 60.0, channel)
        delay = self._reply_delay(ctx)
        answered = False
        for ti, trig in enumerate(self.member.triggers):
            if trig.asked and ti not in self.fired and any(
                    k.lower() in question.lower() for k in trig.asked):
                self.fired.add(ti)
                self._act(trig.actions, ctx, delay + trig.after_minutes * 60, channel=channel)
                answered = True
        if self._reads_workspace(question):
            # its answer depends on the workspace when it is given, not when it was asked
            ctx.timer(delay, question=question, channel=channel, answered=answered)
            return
        await self._answer(question, ctx, delay, channel, answered)

    async def _answer(self, question: str, ctx: ActorContext, delay: float,
                      channel: dict[str, Any] | None, answered: bool) -> None:
        text = await self.compose(question, ctx, answered=answered)
        if text:
            self._reply(text, ctx, delay, channel)
            if self.role == "user" and SATISFIED in text:
                ctx.send("kernel", "satisfied", {"from": self.member.person}, delay=delay)

    def _addressed(self, text: str, ctx: ActorContext) -> bool:
        """Whether a channel post is for this person: it names them (id, first or full name)
        or asks about something they know or act on (a fact's or a trigger's keywords)."""
        low = text.lower()
        me = self.member.person
        person = ctx.workspace.people.get(me)
        names = {me, *([person.name, person.name.split()[0]] if person and person.name
                       else [])}
        if any(re.search(rf"(?<!\w){re.escape(n.lower())}(?!\w)", low) for n in names if n):
            return True  # (an @mention too)
        keys = [k for f in self.member.facts for k in f.keywords]
        keys += [k for t in self.member.triggers for k in t.asked or ()]
        return any(k.lower() in low for k in keys)

    def _reads_workspace(self, question: str) -> bool:
        low = question.lower()
        return any(a.lookup is not None for f in self.member.facts for a in f.answers
                   if any(k.lower() in low for k in f.keywords))

    async def compose(self, question: str, ctx: ActorContext, *, answered: bool) -> str | None:
        """What to answer: the matching facts, else the fallback (unless a trigger answered)."""
        facts = matching_facts(self.member, question, ctx.workspace)
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
