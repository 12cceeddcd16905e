"""A primitive's contract, checked by what it composes.

:func:`check_primitive_contract` checks one registered primitive in two parts:

- statically, what loading checks (:func:`coworkenv.synth.primitive.check_primitive`);
- by behaviour: for every variant it can draw (and none), the smallest plan with it (what it
  needs first, and the deliverable) is composed with a few seeds, and each task must pass
  validation exactly as ``coworkenv synth`` applies it: it parses, its static checks hold, the
  oracle passes twice alike, a no-op agent fails, it exercises a capability, and its grader
  kills every applicable mutant of the reference solution.

A built-in primitive is composed with a requirement that has every built-in app (with an
``ask`` beside it, as every office task works with people); a plugin's, with the requirement
its record names (``example``), or the one given. From Python::

    from coworkenv.synth import check_primitive_contract
    report = check_primitive_contract("retail_cancel")
    assert report.ok, report.problems

and from the command line: ``coworkenv primitives --check NAME``.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.resources import files

from .compose import Composer
from .draw import PlanProposal, StageProposal, plan_of
from .plan import PlanError, Stage, plan_shape
from .primitive import PRIMITIVES, check_primitive
from .reading import load_requirement
from .requirement import Parameters, WorkflowRequirement
from .validate import validate_task

BUILT_IN_APPS = ["directory", "email", "chat", "calendar", "docs", "tickets"]
OFFICE = WorkflowRequirement(
    id="primitive-check", role="assistant", goal="the primitive contract check",
    apps=BUILT_IN_APPS,
    capabilities={"tool_coordination": 1, "multi_turn_communication": 1,
                  "dynamic_workspace_state": 1, "safety_sensitive_handling": 1},
    parameters=Parameters(people=["leo", "priya", "omar", "nina", "sam", "jules", "kai"],
                          amounts=(1_000, 50_000)))
"""The requirement built-in primitives are checked with: every built-in app and capability."""


@dataclass
class PrimitiveReport:
    primitive: str
    requirement: str
    plans: list[str] = field(default_factory=list)
    """The plans composed (their shapes), one per variant."""
    tasks: int = 0
    accepted: int = 0
    mutants: int = 0
    """Mutants of the reference solutions, every one of which the graders killed or accepted."""
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and self.tasks > 0 and self.accepted == self.tasks


def example_requirement(name: str) -> WorkflowRequirement:
    """The requirement a primitive is checked with: its record's ``example`` (a requirement
    file in its package, ``package:path``), else :data:`OFFICE`."""
    prim = PRIMITIVES[name]
    if not prim.example:
        return OFFICE
    package, _, path = prim.example.partition(":")
    return load_requirement(str(files(package) / path))


def check_plans(name: str, req: WorkflowRequirement) -> list[list[Stage]]:
    """The smallest plan with ``name`` for each of its variants ``req``'s apps allow (and
    without one): what it needs first, then it (and, for an office requirement, an ``ask``),
    then the deliverable (:func:`plan_of` adds the requirement's)."""
    prim = PRIMITIVES[name]
    names = [*prim.needs, name]
    if req.primitives is None:  # an office task works with people: someone is asked
        names = [*([] if name in ("ask", "ask_parallel") else ["ask"]), *names, "ask"]
    proposal = PlanProposal(stages=[StageProposal(primitive=n) for n in names])
    base, problems = plan_of(proposal, req)
    if problems:
        raise PlanError("; ".join(problems))
    plans = []
    for variant in ["", *(v for v, app in prim.variants.items() if not app or app in req.apps)]:
        plan = [Stage(s.primitive, dict(s.params)) for s in base]
        if variant:
            next(s for s in plan if s.primitive == name).params["variant"] = variant
        plans.append(plan)
    return plans


def check_primitive_contract(name: str, requirement: WorkflowRequirement | None = None,
                             seeds: int = 3,
                             progress: Callable[[str], None] | None = None) -> PrimitiveReport:
    """Check primitive ``name`` against the contract (see the module's docstring)."""
    req = requirement or example_requirement(name)
    report = PrimitiveReport(name, req.id)
    others = {n: p for n, p in PRIMITIVES.items() if n != name}
    report.problems += [f"record: {p}" for p in check_primitive(PRIMITIVES[name], others)]
    try:
        plans = check_plans(name, req)
    except PlanError as exc:
        report.problems.append(f"plan: cannot be planned with requirement {req.id}: {exc}")
        return report
    for plan in plans:
        shape = plan_shape(plan)
        report.plans.append(shape)
        for seed in range(seeds):
            label = f"{shape} (seed {seed})"
            rng = random.Random(zlib.crc32(f"{name}:{shape}:{seed}".encode()))
            c = Composer(req, rng, f"check-{name}-{seed:05d}")
            c.min_coworkers = 0
            try:
                spec = c.build([Stage(s.primitive, dict(s.params)) for s in plan])
            except PlanError as exc:
                report.problems.append(f"{label}: cannot be composed: {exc}")
                continue
            rep = validate_task(spec, label, mutate=True)
            report.tasks += 1
            report.accepted += rep.accepted
            if rep.mutation is not None:
                report.mutants += len(rep.mutation.results)
            report.problems += [f"{label}: {line}" for line in rep.text().splitlines()]
            if progress is not None:
                progress(f"{label}: {'valid' if rep.accepted else 'refused'}")
    return report
