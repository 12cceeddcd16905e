"""The ``ask_parallel`` primitive: several people asked at once, each answering on their own
time."""

from __future__ import annotations

from typing import Any

from ..primitive import Composition, Primitive
from .ask import build as ask

TOGETHER = ["Ask them all at once.", "Ask them all at the same time.",
            "Send the questions together; don't wait for one before the next.",
            "Ask everyone in one go.", "No need to ask them one by one."]


def build(c: Composition, st: dict[str, Any]) -> None:
    k = int(st.get("n", 2))
    for _ in range(k):
        ask(c, st)
    c.goals[-k:] = [" ".join([*c.goals[-k:], c.words.choice(TOGETHER)])]


ASK_PARALLEL = Primitive(
    "ask_parallel", "gather", (frozenset({"chat", "email"}),), ("multi_turn_communication",),
    provides=("several people asked at once, each answering on their own time"),
    grading=("a gate per figure"),
    build=build)
