"""The ``ask_reminder`` primitive: a busy person who answers only when reminded later."""

from __future__ import annotations

from typing import Any

from ..primitive import Composition, Primitive
from .ask import build as ask


def build(c: Composition, st: dict[str, Any]) -> None:
    ask(c, st, "reminder")


ASK_REMINDER = Primitive(
    "ask_reminder", "gather", (frozenset({"chat", "email"}),), ("multi_turn_communication",),
    provides=("a busy person who answers only when reminded later"),
    grading=("a gate on the figure; when to remind is the agent's choice"),
    build=build)
