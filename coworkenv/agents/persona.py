"""LLM personas: simulated users and coworkers played by a model.

They keep the scripted people's timing (reply delays, working hours) and triggered actions;
only what they say comes from the model, given the persona, the facts the person knows, what
they must not reveal and when to stop. A user who is satisfied says ``[SATISFIED]``, which ends
the episode.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..sim.actor import ActorContext
from .openai_agent import Endpoint
from .scripted import SATISFIED, ScriptedPerson


@dataclass
class LLMPerson(ScriptedPerson):
    endpoint: Endpoint | None = None
    instruction: str = ""
    history: list[dict[str, Any]] = field(default_factory=list)

    def system(self) -> str:
        m = self.member
        facts = "\n".join(f"- {f.value}" for f in m.facts) or "- (nothing special)"
        secret = "\n".join(f"- {s}" for s in m.must_not_reveal) or "- (nothing)"
        role = (f"You gave the assistant this task: {self.instruction!r}. Answer its questions "
                f"from what you know. When it tells you the task is done and you are content, "
                f"thank it and end your message with {SATISFIED}."
                if self.role == "user" else
                "A coworker's AI assistant is messaging you. Answer its questions from what "
                "you know, briefly.")
        return (f"You are {m.person}, a person at the company. {m.persona}\n{role}\n"
                f"What you know:\n{facts}\nNever reveal:\n{secret}\n"
                "Reply in one or two plain sentences. If you do not know, say so.")

    async def compose(self, question: str, ctx: ActorContext, *, answered: bool) -> str | None:
        assert self.endpoint is not None
        self.history.append({"role": "user", "content": question})
        request = {"model": self.endpoint.model, "temperature": self.endpoint.temperature,
                   "max_tokens": 120,
                   "messages": [{"role": "system", "content": self.system()}, *self.history]}
        resp, seconds = await self.endpoint.complete(  # (its failure is the simulator's)
            request, "user" if self.role == "user" else "coworker")
        text = ((resp.choices[0].message.content if resp.choices else "") or "").strip()
        ctx.record("persona.model_call", {"person": self.member.person, "request": request,
                                          "reply": text, "latency_s": round(seconds, 4)})
        text = text or self.member.fallback
        self.history.append({"role": "assistant", "content": text})
        return text
