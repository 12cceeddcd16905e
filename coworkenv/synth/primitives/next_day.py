"""The ``next_day`` primitive: a deliverable due the next working morning, not before."""

from __future__ import annotations

from typing import Any

from ..primitive import Composition, Primitive


def build(c: Composition, st: dict[str, Any]) -> None:
    c.state["next_day"] = True


NEXT_DAY = Primitive(
    "next_day", "finish", (frozenset(),), (),
    provides=("a deliverable due the next working morning, not before"),
    grading=("a gate: nothing delivered before the next morning"),
    build=build)
