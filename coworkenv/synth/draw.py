"""Drawing plans: a requirement's capabilities, apps and difficulty become a plan of
primitives; and plans proposed by a model, checked against the registered primitives.

The office plans are drawn by :func:`draw_plan` (the built-in primitives, weighted by the
requirement's capabilities). A requirement that names its own ``primitives`` (a plugin's,
say) gets a plan drawn from those only (:func:`draw_named`): one to three of them by its
difficulty, weighted by capability, every one a drawn one needs, and the deliverables it
names.
"""

from __future__ import annotations

import random
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .plan import PlanError, Stage
from .primitive import PHASES, PRIMITIVES
from .requirement import WorkflowRequirement


def _usable(req: WorkflowRequirement, name: str) -> bool:
    allowed = set(req.apps) | {"directory"}
    return all(not need or need & allowed for need in PRIMITIVES[name].apps)


def draw_plan(req: WorkflowRequirement, rng: random.Random,
              stages: tuple[int, int] | None = None) -> list[Stage]:
    """A plan of primitives for a requirement: its capabilities decide what is likely, its
    apps what is possible, its difficulty range how long the plan is, unless ``stages``
    (lowest, highest; the final report counted) sets the length: the plan is then drawn as
    usual and cut to a length in that range, dropping stages nothing later needs."""
    w = {c: float(v) for c, v in req.capabilities.items()}
    lo, hi = req.difficulty
    size = {"easy": (4, 6), "medium": (6, 9), "hard": (9, 12)}
    order = ["easy", "medium", "hard"]
    level = order[rng.randint(order.index(lo), order.index(hi))]
    target = rng.randint(*(stages or size[level]))
    plan: list[Stage] = []

    def p(x: float) -> bool:
        return rng.random() < x

    def add(name: str, **params: Any) -> bool:
        if _usable(req, name):
            plan.append(Stage(name, params))
            return True
        return False

    safety = w.get("safety_sensitive_handling", 0.0)
    dynamic = w.get("dynamic_workspace_state", 0.0)
    multi = w.get("multi_turn_communication", 0.0)
    if safety and p(0.3 + safety):
        add("injection")
    if p(0.35 + dynamic):
        moves = p(0.4 + dynamic) and _usable(req, "change_meeting")
        if add("schedule", n=rng.choice([2, 2, 3]), moves=moves) and moves:
            add("change_meeting")
    gathers = ["ask", "ask_parallel", "ask_reminder", "escalate_ooo", "handoff", "lookup_doc"]
    weights = [3, 2 + 3 * multi, 1 + 2 * multi, 1 + 2 * multi, 1 + 2 * dynamic, 2]
    for _ in range(rng.randint(1, 4 if level != "easy" else 2)):
        name = rng.choices(gathers, weights)[0]
        if name == "escalate_ooo" and any(s.primitive == name for s in plan):
            continue  # one auto-reply at a time: two would arrive together
        add(name, **({"n": rng.choice([2, 3, 4])} if name == "ask_parallel" else {}))
    if p(0.2 + 0.3 * multi):
        add("clarify")
    if any(s.primitive == "lookup_doc" for s in plan):
        if p(0.3 + dynamic):
            add("change_figure")
        if p(0.45):
            add("approval", mark=p(0.5))
    if p(0.3 + dynamic) and add("change_ticket"):
        pass
    if p(0.55):
        add("ticket")
    if p(0.3):
        add("work_ticket")
    if p(0.35 + safety):
        add("share")
    if p(0.2 + 0.3 * dynamic):
        add("move_meeting")
    for name, chance in (("forward", 0.25), ("triage", 0.15), ("invite", 0.15)):
        if p(chance) and not (name == "forward" and any(s.primitive == "injection"
                                                         for s in plan)):
            add(name)  # (a plan with an injection forbids forwarding mail at all)
    while len(plan) + 1 < target:
        name = rng.choices(gathers, weights)[0]
        if name == "escalate_ooo" and any(s.primitive == name for s in plan):
            continue
        if not add(name, **({"n": 2} if name == "ask_parallel" else {})):
            break
    if p(0.3):
        add("next_day")
    add("report")
    if stages is not None:
        _cut(plan, target, rng)
    variants = [v for v, app in (("email", "email"), ("channel", "chat")) if app in req.apps]
    if variants and not any(s.primitive in ("change_figure", "approval") for s in plan):
        for s in plan:  # (a figure that changes or is approved lives in a document)
            if s.primitive == "lookup_doc" and p(0.5):
                s.params["variant"] = rng.choice(variants)
    for s in plan:  # half of these steps ask for other arguments of the same tools
        if s.primitive == "lookup_doc":
            continue  # (its variants are drawn above: only where no figure changes)
        usable = [v for v, app in PRIMITIVES[s.primitive].variants.items() if app in req.apps]
        if usable and p(0.5):
            s.params["variant"] = rng.choice(usable)
    return plan


def draw_named(req: WorkflowRequirement, rng: random.Random,
               stages: tuple[int, int] | None = None) -> list[Stage]:
    """A plan from the primitives the requirement names (``primitives:``): how many of them
    by its difficulty (easy: one, medium: one or two, hard: two or three; ``stages``, the
    deliverable counted, bounds it instead), which ones weighted by how much of the
    requirement's capabilities each exercises, a variant for half of those that have one,
    what a drawn one needs first, and the deliverables it names (``last`` ones) at the end."""
    names = [n for n in req.primitives or [] if _usable(req, n)]
    body = [n for n in names if not PRIMITIVES[n].last]
    last = [n for n in names if PRIMITIVES[n].last]
    if not body:
        raise PlanError(f"{req.id}: none of its primitives {req.primitives} can be drawn with "
                        f"its apps {req.apps}")
    w = {str(c): float(v) for c, v in req.capabilities.items()}
    order = ["easy", "medium", "hard"]
    lo, hi = (order.index(d) for d in req.difficulty)
    span = {"easy": (1, 1), "medium": (1, 2), "hard": (2, 3)}[order[rng.randint(lo, hi)]]
    if stages is not None:
        span = (max(1, stages[0] - len(last)), max(1, stages[1] - len(last)))
    k = min(rng.randint(*span), len(body))
    weights = [0.25 + max((w.get(c, 0.0) for c in PRIMITIVES[n].capabilities), default=0.0)
               for n in body]
    chosen: list[str] = []
    while len(chosen) < k:
        pick = rng.choices(body, weights)[0]
        if pick not in chosen:
            chosen.append(pick)
    for n in list(chosen):
        chosen[:0] = [need for need in PRIMITIVES[n].needs if need not in chosen]
    plan = [Stage(n, {}) for n in sorted(chosen, key=lambda n: (
        PHASES.index(PRIMITIVES[n].phase), chosen.index(n)))]
    for s in plan:
        usable = [v for v, app in PRIMITIVES[s.primitive].variants.items()
                  if not app or app in req.apps]
        if usable and rng.random() < 0.5:
            s.params["variant"] = rng.choice(usable)
    return plan + [Stage(n, {}) for n in last]


def _cut(plan: list[Stage], target: int, rng: random.Random) -> None:
    """Drop random stages (never the report, never one a remaining stage needs) until the plan
    has ``target`` stages."""
    while len(plan) > target:
        needed = {n for s in plan for n in PRIMITIVES[s.primitive].needs}
        free = [i for i, s in enumerate(plan)
                if s.primitive != "report" and s.primitive not in needed]
        if not free:
            return
        del plan[rng.choice(free)]



# plans proposed by a model --------------------------------------------------------------
class StageProposal(BaseModel):
    """One step of a proposed plan."""

    model_config = ConfigDict(extra="forbid")
    primitive: str = Field(description="A workflow primitive (one of the catalog's names)")
    n: int | None = Field(default=None, ge=2, le=4, description="ask_parallel: people asked; "
                          "schedule: attendees")
    role: str | None = Field(default=None, description="Who does it, as a role (e.g. 'finance "
                             "manager'); the composer binds a person")
    step: str | None = Field(default=None, description="What it is about, in a few words (e.g. "
                             "'Give the delivery cost', 'File the order ticket')")


    @field_validator("primitive")
    @classmethod
    def _registered(cls, v: str) -> str:
        if v not in PRIMITIVES:
            raise ValueError(f"no primitive {v!r} is registered (known: "
                             f"{', '.join(sorted(PRIMITIVES))})")
        return v


class PlanProposal(BaseModel):
    """What a model proposes for one task: a plan of primitives, and how to introduce it."""

    model_config = ConfigDict(extra="forbid")
    stages: list[StageProposal] = Field(min_length=1, max_length=12)
    intro: str = Field(default="", max_length=300, description="One sentence of context that "
                       "opens the instruction (a goal, never a tool or a step list)")


def plan_of(proposal: PlanProposal, req: WorkflowRequirement) -> tuple[list[Stage], list[str]]:
    """The stages of a proposal, and what is wrong with it (empty when it can be composed)."""
    problems: list[str] = []
    plan: list[Stage] = []
    seen: set[str] = set()
    for i, sp in enumerate(proposal.stages):
        prim = PRIMITIVES[sp.primitive]
        if not _usable(req, sp.primitive):
            problems.append(f"stages[{i}].primitive: {sp.primitive} needs apps "
                            f"{[sorted(a) for a in prim.apps]}, the requirement has {req.apps}")
        missing = [nd for nd in prim.needs if nd not in seen]
        if missing:
            problems.append(f"stages[{i}].primitive: {sp.primitive} needs {missing} earlier")
        seen.add(sp.primitive)
        params: dict[str, Any] = {k: v for k, v in (("n", sp.n), ("role", sp.role),
                                                    ("step", sp.step)) if v is not None}
        if sp.primitive == "schedule" and any(s.primitive == "change_meeting"
                                              for s in proposal.stages[i:]):
            params["moves"] = True
        plan.append(Stage(sp.primitive, params))
    if sum(s.primitive == "escalate_ooo" for s in plan) > 1:
        problems.append("stages: at most one escalate_ooo (two auto-replies arrive together)")
    from ..workspace import REGISTRY

    named = [t for t in REGISTRY if t in proposal.intro]
    if named:
        problems.append(f"intro: names tools {named}; say the goal, not the steps")
    if req.primitives is None:
        if not any(s.primitive == "report" for s in plan):
            plan.append(Stage("report", {}))
    else:  # the deliverables the requirement names
        plan += [Stage(n, {}) for n in req.primitives
                 if PRIMITIVES[n].last and not any(s.primitive == n for s in plan)]
    return plan, problems
