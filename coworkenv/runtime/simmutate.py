"""The mutation check of a simulation's hand-offs: each grader that reads another arrival is
proven against the sabotage it exists to catch, on the simulation itself.

The simulation runs once with the oracle as written (every arrival and check must pass: a
failure is a false positive), then once per kind of mutant, the oracle of every arrival that
hands work on playing its reference with one sabotage:

- ``handoff_to_wrong_agent``: what it sends the agent it hands to goes to someone else;
- ``handoff_other_case``: it forwards another case's values than its own (the receiving agent
  works on another request than the one asked);
- ``reply_contradicts_decision``: it tells its requester another choice than the hand-off's
  decision.

A mutant is killed when the arrival it was applied to fails. ``coworkenv simulate FILE
--mutate`` prints the report and exits 1 on a survivor or a false positive.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..sim.task import AgreesWithCheck, HandoffCheck, MessageStep, Step, Task, ToolStep
from .simulate import SimulationConfig, load_file, simulate

KINDS = ("handoff_to_wrong_agent", "handoff_other_case", "reply_contradicts_decision")


@dataclass
class MutantResult:
    kind: str
    applied: int = 0
    """Arrivals the sabotage was applied to."""
    killed: int = 0
    survivors: list[str] = field(default_factory=list)
    """Arrivals that passed with it."""


@dataclass
class SimMutationReport:
    simulation: str
    arrivals: int
    false_positives: list[str]
    """Arrivals (and simulation checks) that failed with the oracle as written."""
    mutants: list[MutantResult]

    @property
    def ok(self) -> bool:
        return not self.false_positives and all(m.killed == m.applied for m in self.mutants)


def _to(step: Step) -> set[str]:
    """Whom a step writes to (a message, a DM, mail)."""
    if isinstance(step, MessageStep):
        return {step.to}
    if isinstance(step, ToolStep) and step.tool in ("chat_send_dm", "email_send"):
        to = step.args.get("to")
        return set(to) if isinstance(to, list) else {str(to)}
    return set()


def _readdress(step: Step, old: set[str], new: str) -> Step:
    if isinstance(step, MessageStep):
        return step.model_copy(update={"to": new})
    assert isinstance(step, ToolStep)
    to = step.args.get("to")
    args = {**step.args, "to": [new if t in old else t for t in to] if isinstance(to, list)
            else new}
    return step.model_copy(update={"args": args})


def _retext(step: Step, swap: Callable[[str], str]) -> Step:
    if isinstance(step, MessageStep):
        return step.model_copy(update={"text": swap(step.text)})
    assert isinstance(step, ToolStep)
    return step.model_copy(update={"args": {k: swap(v) if isinstance(v, str) else v
                                            for k, v in step.args.items()}})


def _flipper(choices: list[str], pattern: str | None) -> Callable[[str], str]:
    """What turns a text's decision into another: the next of ``choices``, or a value of
    ``pattern`` with its first digit changed (another figure)."""
    if choices:
        rx = re.compile("|".join(rf"(?<!\w){re.escape(x)}(?!\w)" for x in choices), re.I)
        low = [x.lower() for x in choices]
        return lambda text: rx.sub(
            lambda m: choices[(low.index(m[0].lower()) + 1) % len(choices)], text)
    assert pattern is not None
    value = re.compile(pattern)

    def other(m: re.Match[str]) -> str:
        return re.sub(r"\d", lambda d: str((int(d[0]) + 1) % 10), m[0], count=1)
    return lambda text: value.sub(other, text)


class _Mutator:
    """The mutated reference of one arrival's task, for one kind (None: not applicable)."""

    def __init__(self, loaded: Any, kind: str) -> None:
        self.loaded, self.kind = loaded, kind
        sim = loaded.sim
        self.receivers = {s.on.message.sender: s.on.message.to for s in sim.workload
                          if s.on is not None and s.on.message is not None}
        self.seats = [s.person for s in sim.roster]
        self.people = sorted(str(p.get("id")) for p in loaded.company.get("people", []))
        self.applied: list[str] = []

    def __call__(self, task: Task) -> list[Step] | None:
        steps = list(task.reference)
        checks = task.checks
        to = self.receivers.get(task.agent)
        if self.kind == "handoff_to_wrong_agent" and to and any(
                isinstance(c, HandoffCheck) for c in checks):
            other = next((p for p in self.seats + self.people
                          if p not in (to, task.agent, task.user.person)), None)
            if other is None:
                return None
            out = [_readdress(s, {to}, other) if to in _to(s) else s for s in steps]
        elif self.kind == "handoff_other_case" and to and task.case and len(task.cases) > 1:
            keys = [k for c in checks if isinstance(c, HandoffCheck) for k in c.same]
            other_case = next(c for c in task.cases if c != task.case)
            if not keys:
                return None

            def swap(text: str) -> str:
                for k in keys:
                    text = text.replace(task.case[k], other_case[k])  # type: ignore[index]
                return text
            out = [_retext(s, swap) if to in _to(s) else s for s in steps]
        elif self.kind == "reply_contradicts_decision":
            agree = [c for c in checks if isinstance(c, AgreesWithCheck)]
            if not agree:
                return None
            c = agree[0]
            output = self.loaded.templates[c.task].outputs[c.output]
            told = task.user.person if c.told == "user" else c.told
            flip = _flipper(output.one_of, output.pattern)
            out = [_retext(s, flip) if told in _to(s) else s for s in steps]
        else:
            return None
        if out == steps:
            return None
        self.applied.append(task.id)
        return out


def mutation_check(file: str | Path, *, db: str | Path | None = None) -> SimMutationReport:
    """See the module's docstring. ``db``: where the runs are recorded (default: a
    temporary file, gone after)."""
    from ..agents.oracle import OracleAgent

    loaded, _ = load_file(file)
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(db) if db is not None else Path(tmp) / "mutants.db"
        base = simulate(SimulationConfig(file, agent="oracle", memory="per_arrival", db=store,
                                         run_id="mutants-reference"))
        fp = [f"{o.key} ({o.template})" for o in base.outcomes if not o.passed]
        fp += [f"check {c.id}" for c in base.checks if not c.passed]
        results = []
        for kind in KINDS:
            mutate = _Mutator(loaded, kind)

            def make(task: Task, mutate: _Mutator = mutate) -> Any:
                return OracleAgent(mutate(task) or list(task.reference))
            played = {s.id: (f"mutant:{kind}", make) for s in loaded.sim.roster}
            r = _played(SimulationConfig(file, db=store, run_id=f"mutants-{kind}",
                                         memory="per_arrival"), played)
            failed = {o.task_id for o in r.outcomes if not o.passed}
            res = MutantResult(kind, len(mutate.applied))
            res.killed = sum(t in failed for t in mutate.applied)
            res.survivors = [t for t in mutate.applied if t not in failed]
            results.append(res)
    return SimMutationReport(loaded.sim.id, len(base.outcomes), fp, results)


def _played(config: SimulationConfig, played: dict[str, tuple[str, Any]]) -> Any:
    import anyio

    from .run import unwrapped
    from .simulate import asimulate

    out: list[Any] = []

    async def go() -> list[Any]:
        out.append(await asimulate(config, played=played))
        return []
    unwrapped(lambda: anyio.run(go))
    return out[0]
