"""A scripted model for a persistent seat, to answer from a :class:`ScriptedOpenAIServer`
(``responder=Playbook(...)``): for each request the seat is handed, a plan of function calls
chosen by the request's words; the next call of a request goes out when the result of its last
comes back, and a ``wait`` step holds the plan until a message or notice for that request
comes; a ``wait`` step with ``minutes`` or ``until`` is the model's own wait with a time, and
the plan goes on when its wake comes (the first of those asleep). All requests that can go on
get their next call in one reply. Steps are ``(function name, arguments)``; arguments may be
a function of the messages the model was sent (to use what a call returned, what a person
said, what the conversation still holds). Every call names its request (``re``) unless
``name_requests`` is off; anything it has no plan for gets a ``wait``; a request that offers
no functions (a persistent agent asking for a summary of its earlier turns) gets a summary
naming the requests it saw.

It is what a test or a benchmark lists, not what a model thinks: a deterministic stand-in for a
model behind the real HTTP path, the real persistent agent, its prompts, cuts and memory.

    playbook = Playbook([(r"See my email (E1-\\d+): book", lambda hit, messages: [
        ("email_read", {"email_id": hit[1]}), ("finish", {})])])
    with ScriptedOpenAIServer(responder=playbook) as srv:
        ...
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from .fake_openai import Reply, tool

Messages = list[dict[str, Any]]
Arguments = dict[str, Any] | Callable[[Messages], dict[str, Any]]
Step = tuple[str, Arguments]
Plan = Callable[["re.Match[str]", Messages], list[Step]]


class Playbook:
    """See the module's docstring. ``plans``: (a regular expression searched in the request's
    text, the plan it makes from the match and the messages); the first that matches wins."""

    def __init__(self, plans: Sequence[tuple[str, Plan]], *, name_requests: bool = True) -> None:
        self.plans = [(re.compile(p, re.S), make) for p, make in plans]
        self.steps: dict[str, deque[Step]] = {}
        self.waiting: set[str] = set()
        self.asleep: deque[str] = deque()
        self.name_requests = name_requests
        self.calls: dict[str, str] = {}
        """Call id (the ids it gives its calls) -> the request it was for, until answered."""
        self.made = 0

    def __call__(self, request: dict[str, Any]) -> Reply:
        messages: Messages = request["messages"]
        if not request.get("tools"):  # (a summary of earlier turns)
            seen = sorted(set(re.findall(r"\[request (a\d+) from", json.dumps(messages))))
            return Reply(content=f"Earlier I worked on requests {', '.join(seen) or 'none'}.")
        ready: list[str] = []
        for m in _since_last_turn(messages):
            content = str(m.get("content") or "")
            if m["role"] == "user" and (hit := re.match(r"\[request (a\d+) from", content)):
                if hit[1] not in self.steps:
                    plan = next(((make, found) for rx, make in self.plans
                                 if (found := rx.search(content))), None)
                    self.steps[hit[1]] = deque(plan[0](plan[1], messages) if plan
                                               else [("finish", {})])
                    ready.append(hit[1])
            elif m["role"] == "tool":
                key = self.calls.pop(str(m.get("tool_call_id")), None)
                if key is not None and key not in self.waiting and key not in self.asleep:
                    ready.append(key)  # (a wait's own result is no answer)
            elif (hit := re.search(r", re (a\d+)\]", content)) and hit[1] in self.waiting:
                self.waiting.discard(hit[1])
                ready.append(hit[1])
            elif content.startswith("[wake]") and self.asleep:
                ready.append(self.asleep.popleft())
        calls: list[tuple[str, str, str]] = []
        for key in dict.fromkeys(ready):  # (each request that can go on: its next step)
            if not self.steps.get(key):
                continue
            name, args = self.steps[key].popleft()
            if name == "wait" and isinstance(args, dict) and args:
                self.asleep.append(key)  # (its own wait with a time: its wake goes on)
            elif name == "wait":
                self.waiting.add(key)
            given = args(messages) if callable(args) else args
            self.made += 1
            call_id = f"pb-{self.made}"
            self.calls[call_id] = key
            calls.append((name, json.dumps({**given, **({"re": key} if self.name_requests
                                                        else {})}), call_id))
        if not calls:
            return tool("wait")
        return Reply(tool_calls=calls, finish_reason="tool_calls")


def _since_last_turn(messages: Messages) -> Messages:
    """What the model was told since it last spoke (everything, when it never did)."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "assistant":
            return messages[i + 1:]
    return messages[1:]


def last_result(messages: Messages) -> dict[str, Any]:
    """The result of the last function call in ``messages`` (its JSON)."""
    for m in reversed(messages):
        if m.get("role") == "tool":
            try:
                out: dict[str, Any] = json.loads(str(m.get("content")))
                return out
            except ValueError:
                return {}
    return {}
