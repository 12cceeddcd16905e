"""The ``clarify`` primitive: an underspecified request: where the result should go is known to
the user only."""

from __future__ import annotations

from typing import Any

from ..primitive import Composition, Primitive


def build(c: Composition, st: dict[str, Any]) -> None:
    channels = [c["id"] for c in c.channels()]
    if "chat" in c.apps and channels:
        dest = c.rng.choice(channels)
        answer = f"Post it in #{dest}, please."
        c.report = {"via": "channel", "channel": dest}
    else:
        dest = c.person()
        answer = f"Email it to {c.name(dest)}, please."
        c.report = {"via": "email", "to": dest}
    u = c.member(c.user)
    u["facts"].append({"key": "where", "value": answer, "keywords": ["where", "send"]})
    c.buckets["clarify"] += [
        {"kind": "message", "to": c.user,
         "text": "Where should I send the summary when it's done?",
         "_accept": "when to ask the user where the summary goes is the agent's choice"},
        {"kind": "wait", "message_from": c.user}]
    c.clarified = {"actor": c.user, "to": c.agent,
                      "text": {"contains": [answer.split(",")[0].split()[-1]]}}


CLARIFY = Primitive(
    "clarify", "gather", (frozenset(),), ("multi_turn_communication",),
    provides=("an underspecified request: where the result should go is known to the user only"),
    grading=("a gate: the result goes where the user said, after they said it"),
    build=build)
