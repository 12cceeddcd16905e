"""A plan: the primitives a task is made of, in order, each with its parameters. Plans are
drawn by the composer or read from a process (``bpmn``), and consumed by the composer; this
module depends on neither."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Stage:
    primitive: str
    params: dict[str, Any] = field(default_factory=dict)

    def label(self) -> str:
        extra = self.params.get("variant") or self.params.get("n") or ""
        return f"{self.primitive}{f':{extra}' if extra else ''}"


class PlanError(ValueError):
    """A plan that cannot be bound (e.g. more parts than people)."""


def plan_shape(plan: list[Stage]) -> str:
    return ">".join(s.label() for s in plan)
