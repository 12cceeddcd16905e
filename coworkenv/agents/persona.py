"""LLM personas: simulated users and coworkers played by a model.

They keep the scripted people's timing (reply delays, working hours) and triggered actions;
only what they say comes from the model, given the persona, the facts the person knows, their
calendar, what they must not reveal and when to stop. A user who is satisfied says
``[SATISFIED]``, which ends the episode.

The facts stay the ground truth the graders use: a reply that states a figure (10 or more)
that none of what the person was given or asked holds is recorded as ``persona.invented``
(the person, the figures, the reply), so a model that makes numbers up is seen, counted, and
can be told apart from an agent's mistake.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..sim.actor import ActorContext
from ..workspace import parse_iso
from ..workspace.text import figures, numbers_in
from .chat import request_digest
from .openai_agent import Endpoint
from .scripted import SATISFIED, ScriptedPerson


@dataclass
class LLMPerson(ScriptedPerson):
    endpoint: Endpoint | None = None
    instruction: str = ""
    history: list[dict[str, Any]] = field(default_factory=list)

    def system(self, ctx: ActorContext | None = None) -> str:
        m = self.member
        facts = "\n".join(f"- {f.value}" for f in m.facts) or "- (nothing special)"
        secret = "\n".join(f"- {s}" for s in m.must_not_reveal) or "- (nothing)"
        role = (f"You gave the assistant this task: {self.instruction!r}. Answer its questions "
                f"from what you know. When it tells you the task is done and you are content, "
                f"thank it and end your message with {SATISFIED}."
                if self.role == "user" else
                "A coworker's AI assistant is messaging you. Answer its questions from what "
                "you know, briefly.")
        calendar = self._calendar(ctx) if ctx is not None else ""
        return (f"You are {m.person}, a person at the company. {m.persona}\n{role}\n"
                f"What you know:\n{facts}\n{calendar}Never reveal:\n{secret}\n"
                "Reply in one or two plain sentences. If you do not know, say so; never make "
                "up a figure.")

    def _calendar(self, ctx: ActorContext) -> str:
        """The person's meetings from now on (their calendar as the workspace holds it)."""
        me, now = self.member.person, ctx.now_dt
        mine = sorted((ev.start, ev.title) for ev in ctx.workspace.calendar.values()
                      if ev.status == "confirmed" and (ev.organizer == me or ev.attendees.get(me)
                                                       not in (None, "declined"))
                      and parse_iso(ev.end) > now)[:8]
        if not mine:
            return ""
        return "Your calendar:\n" + "\n".join(f"- {start}: {title}" for start, title in mine) \
            + "\n"

    def known(self, question: str, ctx: ActorContext) -> str:
        """Everything the person was given or asked (what a figure of theirs may come from)."""
        m = self.member
        return "\n".join([self.system(ctx), question, self.instruction,
                          *(a.text for f in m.facts for a in f.answers), *(
                              h["content"] for h in self.history if h["role"] == "user")])

    async def compose(self, question: str, ctx: ActorContext, *, answered: bool) -> str | None:
        assert self.endpoint is not None
        self.history.append({"role": "user", "content": question})
        request = {"model": self.endpoint.model, "temperature": self.endpoint.temperature,
                   "max_tokens": 120,
                   "messages": [{"role": "system", "content": self.system(ctx)},
                                *self.history]}
        digest = request_digest(request)
        resp, seconds = await ctx.complete(  # (its failure is the simulator's)
            self.endpoint, request, "user" if self.role == "user" else "coworker")
        text = ((resp.choices[0].message.content if resp.choices else "") or "").strip()
        ctx.record("persona.model_call", {
            "person": self.member.person, "request": request, "reply": text,
            "latency_s": round(seconds, 4), "digest": digest,
            "usage": resp.usage.model_dump() if getattr(resp, "usage", None) else None})
        given = set(numbers_in(self.known(question, ctx)))
        invented = sorted({f.value for f in figures(text) if f.value >= 10
                           and round(f.value, 6) not in {round(v, 6) for v in given}})
        if invented:
            ctx.record("persona.invented", {"person": self.member.person,
                                            "figures": invented, "reply": text[:500]})
        text = text or self.member.fallback
        self.history.append({"role": "assistant", "content": text})
        return text
