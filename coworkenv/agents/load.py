"""A load agent: what benchmarks and scale tests run when they measure the simulator, not a
model. It thinks a fixed time of real time per decision, then makes the next call of a
cycle of tool calls, and finishes after a set number of calls.

The default cycle for a task (:func:`office_mix`) is the work of an office day in small:
three writes that change the workspace and notify someone (an email to a coworker, a post in
a channel, a comment on a document) and two reads (the document, the inbox). A benchmark of
reads alone measures neither the reducer, nor the notifications, nor the events they write.
"""

from __future__ import annotations

from typing import Any

import anyio

from ..bus import Envelope
from ..sim import Actor, ActorContext, Task

Call = tuple[str, dict[str, Any]]
"""A tool and its arguments."""


def office_mix(task: Task) -> list[Call]:
    """A cycle of three writes that notify someone and two reads, on the task's own people,
    channels and documents (those of its seed that exist)."""
    people = [p.id for p in task.seed.people if p.id != task.agent]
    if not people:
        raise ValueError(f"task {task.id}: its seed has no one for the agent to write to")
    coworker = next((p for p in people if p != task.user.person), people[0])
    channel = task.seed.channels[0].id if task.seed.channels else None
    doc = task.seed.docs[0].id if task.seed.docs else None
    calls: list[Call] = [("email_send", {"to": [coworker], "subject": "status",
                                         "body": "A short status update."})]
    if channel is not None:
        calls.append(("chat_post", {"channel": channel, "text": "status: on track"}))
    if doc is not None:
        calls.append(("docs_read", {"doc_id": doc}))
    calls.append(("email_list", {"limit": 5}))
    if doc is not None:
        calls.append(("docs_comment", {"doc_id": doc, "text": "Read; looks good."}))
    return calls


class LoadAgent(Actor):
    """``steps`` tool calls (the cycle ``calls``, from the start), ``think`` seconds of real
    time before each decision, then a finish."""

    role = "agent"

    def __init__(self, steps: int, calls: list[Call], think: float = 0.0) -> None:
        if not calls:
            raise ValueError("calls: give at least one (tool, arguments)")
        self.left, self.calls, self.think = steps, calls, think
        self.made = 0

    @classmethod
    def for_task(cls, task: Task, steps: int, think: float = 0.0) -> LoadAgent:
        """The task's :func:`office_mix`."""
        return cls(steps, office_mix(task), think)

    async def handle(self, envelope: Envelope, ctx: ActorContext) -> None:
        if envelope.kind not in ("task", "tool_result"):
            return
        if self.think:
            await anyio.sleep(self.think)
        if self.left == 0:
            ctx.finish("done")
            return
        self.left -= 1
        tool, args = self.calls[self.made % len(self.calls)]
        self.made += 1
        ctx.call_tool(tool, args)
