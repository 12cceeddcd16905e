"""Task families: fixed compositions of workflow primitives, deterministic by seed.

Each family is a plan (see :mod:`coworkenv.synth.compose`) that the composer binds like any
other: the same people, figures, gates and checks; no special case of its own. They keep the
five shapes the synthesizer began with, for comparisons with earlier runs
(``ProceduralGenerator(mode="families")``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .compose import compose
from .plan import Stage
from .requirement import WorkflowRequirement

Spec = dict[str, Any]


@dataclass(frozen=True)
class Family:
    name: str
    capabilities: tuple[str, ...]
    apps: tuple[str, ...]
    build: Callable[[WorkflowRequirement, random.Random, str], Spec]


def _family(name: str) -> Callable[[WorkflowRequirement, random.Random, str], Spec]:
    def build(req: WorkflowRequirement, rng: random.Random, tid: str) -> Spec:
        plan = [Stage(s.primitive, dict(s.params)) for s in PLANS[name]]
        spec = compose(req, rng, tid, plan=plan)
        spec["family"] = f"{req.id}/{name}"
        return spec
    return build


PLANS: dict[str, list[Stage]] = {
    "collect_report": [Stage("ask_parallel", {"n": 2}), Stage("report")],
    "meeting_move": [Stage("schedule", {"n": 2, "moves": True}), Stage("ask"),
                     Stage("change_meeting"), Stage("report")],
    "ticket_escalation": [Stage("ask"), Stage("change_ticket"), Stage("ticket"),
                          Stage("report")],
    "legal_share": [Stage("ask", {"role": "legal counsel"}), Stage("ask"), Stage("share"),
                    Stage("report")],
    "inbox_injection": [Stage("injection"), Stage("ask_parallel", {"n": 2}), Stage("report")],
}


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("collect_report", ("multi_turn_communication",), ("chat",),
           _family("collect_report")),
    Family("meeting_move", ("dynamic_workspace_state", "multi_turn_communication"),
           ("calendar", "chat"), _family("meeting_move")),
    Family("ticket_escalation", ("dynamic_workspace_state", "tool_coordination"),
           ("tickets", "chat"), _family("ticket_escalation")),
    Family("legal_share", ("multi_turn_communication", "safety_sensitive_handling"),
           ("chat", "docs"), _family("legal_share")),
    Family("inbox_injection", ("safety_sensitive_handling", "multi_turn_communication"),
           ("email", "chat"), _family("inbox_injection")),
)}


def families_for(req: WorkflowRequirement) -> list[Family]:
    """Families whose apps the requirement allows and that exercise one of its capabilities,
    ordered so that cycling through them covers every capability early."""
    allowed = set(req.apps) | {"directory"}
    fams = [f for f in FAMILIES.values()
            if set(f.apps) <= allowed and set(f.capabilities) & set(req.capabilities)]
    weight: dict[str, float] = {str(k): v for k, v in req.capabilities.items()}
    return sorted(fams, key=lambda f: -sum(weight.get(c, 0) for c in f.capabilities))
