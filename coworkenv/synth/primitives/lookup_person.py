"""The ``lookup_person`` primitive: a directory with roles and teams; the request names a role,
not a person. It adds nothing of its own: the person found is the one asked next."""

from __future__ import annotations

from typing import Any

from ..primitive import Composition, Primitive


def build(c: Composition, st: dict[str, Any]) -> None:
    """Nothing of its own."""


LOOKUP_PERSON = Primitive(
    "lookup_person", "gather", (frozenset({"directory"}),), ("tool_coordination",),
    provides=("a directory with roles and teams; the request names a role, not a person"),
    grading=("none of its own: the person found is the one asked next"),
    build=build)
