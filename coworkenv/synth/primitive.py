"""Workflow primitives as registered parts: the contract a primitive keeps, the narrow view
of the composer its builder works on, and the registry that finds them.

A primitive is a :class:`Primitive` record: what the agent must do (its phase, the apps and
capabilities it uses, what the world and the people must provide, what it implies for
grading, which primitives must come before it) and its ``build``, which adds seed data, cast,
timeline, reference steps, checks, gates and safety rules and a goal sentence to the task
being composed. Primitives are found through the entry-point group ``coworkenv.primitives``,
each entry naming a record (``name = "package.module:RECORD"``); coworkenv's own are
registered the same way, in its ``pyproject.toml``, one module each under
:mod:`coworkenv.synth.primitives`::

    [project.entry-points."coworkenv.primitives"]
    retail_cancel = "coworkenv_retail.primitives.cancel:CANCEL"

Loading checks every record against the contract (:func:`check_primitive`) and refuses one
that breaks it with :class:`~coworkenv.synth.errors.PrimitiveError`, naming the entry point
and each problem. ``coworkenv primitives --check NAME`` runs the behavioural check on top:
every variant composed, validated, the oracle passing, no-op failing, every mutant killed
(:func:`coworkenv.synth.check_primitive_contract`).

A builder sees the task through :class:`Composition` (the plan so far, the company, the
random generator, helpers to bind people and figures and to add gates); it never imports
the composer.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Literal, Protocol, get_args

from .errors import PrimitiveError
from .plan import Stage
from .requirement import WorkflowRequirement

GROUP = "coworkenv.primitives"
"""The entry-point group primitives are registered in."""
Phase = Literal["setup", "gather", "depend", "act", "finish"]
PHASES: tuple[Phase, ...] = ("setup", "gather", "depend", "act", "finish")
BUCKETS = ("setup", "writes", "waits", "depend", "act", "late", "clarify", "tomorrow")
"""Where each reference step goes, in this order: independent work; every question at once;
the answers; work on a changed figure or an approval; dependent writes; mid-task changes the
report mentions; asking the user where it goes; waiting for the next day."""
Spec = dict[str, Any]


@dataclass(slots=True)
class Value:
    """Something the plan learns and states later: a figure, with the event revealing it."""

    name: str
    text: str
    source: dict[str, Any]
    stale: str | None = None


class Composition(Protocol):
    """What a builder sees of the task being composed. Attributes a builder appends to:
    ``buckets`` (reference steps, by :data:`BUCKETS`), ``checks``, ``safety``, ``timeline``,
    ``goals`` (sentences of the instruction), ``values`` (figures learned, each with its
    gate), ``outcomes`` (what the report states besides figures, with the event that made it
    true), ``after_approval`` (writes an approval must precede), ``seed`` (through
    :meth:`add_seed` and :meth:`add_row`) and ``cast`` (through :meth:`member`)."""

    req: WorkflowRequirement
    plan: list[Stage]
    """The whole plan, in the order its stages are built."""
    rng: random.Random
    words: random.Random
    """For wording alone (how a sentence is put), drawn apart from ``rng``."""
    tid: str
    agent: str
    user: str
    apps: set[str]
    directory: dict[str, Spec]
    """The company's people (and those hired for this task), by id."""
    used: list[str]
    channel: str
    """How the agent writes to a person: ``chat`` where the requirement has it, else ``email``."""
    n: int
    buckets: dict[str, list[Spec]]
    checks: list[Spec]
    safety: list[Spec]
    timeline: list[Spec]
    goals: list[str]
    values: list[Value]
    outcomes: list[tuple[str, dict[str, Any]]]
    after_approval: list[dict[str, Any]]
    seed: dict[str, Any]
    cast: dict[str, Spec]
    report: dict[str, Any]
    """Where the deliverable goes: ``{"via": "email"|"chat", "to": id}`` or a channel."""
    report_steps: list[Spec]
    """The deliverable's reference steps, after every bucket (set by a ``last`` primitive)."""
    state: dict[str, Any]
    """What a primitive leaves for a later one (``lookup_doc``'s documents for
    ``change_figure``, ``schedule``'s meeting for ``change_meeting``), by its name."""
    clarified: dict[str, Any] | None
    approved_event: dict[str, Any] | None
    has_change: bool

    def person(self, role: str | None = None) -> str: ...
    def hire(self, name: str, role: str, team: str, tz: str, pid: str | None = None) -> str: ...
    def metric(self) -> str: ...
    def name(self, pid: str) -> str: ...
    def cid(self, what: str) -> str: ...
    def member(self, pid: str) -> Spec: ...
    def add_seed(self, kind: str, row: Spec) -> None: ...
    def add_row(self, table: str, row: Spec) -> None: ...
    def say(self, pid: str, text: str) -> Spec: ...
    def gate_value(self, v: Value) -> None: ...
    def learn(self, v: Value) -> None: ...
    def money(self, kind: str = "any") -> str: ...
    def fresh_money(self, lo: int, hi: int, *, floor: bool = True) -> str: ...
    def channels(self) -> list[Spec]: ...
    def fresh_name(self, kind: str, choices: Sequence[str], fallback: Sequence[str] = (),
                   *, draw: bool = True) -> str: ...
    def outsider(self, vendor: str, mailbox: str, label: str) -> str: ...
    def email(self, sender: str, subject: str, body: str, hhmm: str) -> str: ...


Builder = Callable[[Composition, dict[str, Any]], None]


@dataclass(frozen=True, slots=True)
class Primitive:
    name: str
    phase: Phase
    """setup: independent work done first; gather: asks and lookups that learn values;
    depend: work on what was learned; act: dependent writes; finish: the deliverable."""
    apps: tuple[frozenset[str], ...]
    """App sets it needs: every set must share an app with the requirement's apps."""
    capabilities: tuple[str, ...]
    provides: str
    """What the world and the people must provide."""
    grading: str
    """The checks, gates and safety rules it implies."""
    build: Builder
    """Adds the primitive's part to the task (see :class:`Composition`)."""
    needs: tuple[str, ...] = ()
    """Primitives that must come earlier in the plan."""
    variants: Mapping[str, str] = field(default_factory=dict)
    """Variants a drawn plan may give it (``params["variant"]``), each with the app it needs."""
    rank: int = 0
    """Within its phase, a higher rank is built later (an approval after a corrected figure)."""
    last: bool = False
    """Built once, after every other stage (the deliverable)."""
    drawn: bool = True
    """Offered to requirements that name no ``primitives`` (drawn plans of the office
    primitives, the catalog a model proposes from); a plugin's own are offered only to the
    requirements that name them."""
    example: str = ""
    """A requirement file its contract check composes with, as ``package:path`` inside an
    installed package (default: every built-in app and capability)."""

    def app_sets(self) -> str:
        """The app sets it needs as people read them ("docs and chat/email"); "" for none."""
        return " and ".join("/".join(sorted(a)) for a in self.apps if a)


def check_primitive(p: object, others: Mapping[str, Primitive] = {}) -> list[str]:
    """What ``p`` breaks of the contract, beside the ``others`` already loaded (empty:
    nothing)."""
    if not isinstance(p, Primitive):
        return [f"is a {type(p).__name__}, not a coworkenv Primitive record"]
    problems: list[str] = []
    if not p.name.isidentifier():
        problems.append(f"name: {p.name!r} is not an identifier")
    if p.name in others:
        problems.append(f"name: {p.name!r} is registered already")
    if p.phase not in PHASES:
        problems.append(f"phase: {p.phase!r} is not one of {', '.join(PHASES)}")
    if not isinstance(p.apps, tuple) or not all(isinstance(a, frozenset) for a in p.apps):
        problems.append(f"apps: {p.apps!r} is not a tuple of frozensets of app names")
    from ..sim.task import Capability

    known = set(get_args(Capability))
    problems += [f"capabilities: {c!r} is not one of {', '.join(sorted(known))}"
                 for c in p.capabilities if c not in known]
    if not callable(p.build):
        problems.append("build: not callable")
    if not isinstance(p.variants, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in p.variants.items()):
        problems.append(f"variants: {p.variants!r} is not a mapping of variant to app name")
    if p.example and ":" not in p.example:
        problems.append(f"example: {p.example!r} is not 'package:path' of a requirement file")
    for what in ("provides", "grading"):
        if not str(getattr(p, what) or "").strip():
            problems.append(f"{what}: empty (say it: a model proposing plans reads it)")
    return problems


def discover() -> dict[str, Primitive]:
    """Every primitive registered in the ``coworkenv.primitives`` group, loaded and checked;
    any that cannot be loaded or breaks the contract is refused (:class:`PrimitiveError`
    naming every such entry point and each of its problems)."""
    found: dict[str, Primitive] = {}
    refused: list[str] = []
    where: dict[str, str] = {}
    seen: dict[str, str] = {}
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        at = f"entry point {ep.name} = {ep.value!r} ({GROUP})"
        if ep.name in seen:
            refused.append(f"{at}: name: {ep.name!r} is registered already, by {seen[ep.name]}")
            continue
        seen[ep.name] = at
        try:
            prim = ep.load()
        except Exception as exc:
            refused.append(f"{at}: cannot be loaded: {type(exc).__name__}: {exc}")
            continue
        problems = check_primitive(prim, found)
        if not problems and prim.name != ep.name:
            problems.append(f"name: the record is named {prim.name!r}; a primitive is "
                            "registered under its own name")
        if problems:
            refused.append(f"{at}: " + "; ".join(problems))
            continue
        found[prim.name] = prim
        where[prim.name] = at
    for prim in found.values():
        missing = [n for n in prim.needs if n not in found]
        if missing:
            refused.append(f"{where[prim.name]}: needs: {missing} (no entry point of {GROUP} "
                           "registers it)")
    if refused:
        raise PrimitiveError(f"{len(refused)} primitive(s) refused:\n" + "\n".join(
            f"- {r}" for r in refused))
    if not found:
        raise PrimitiveError(f"no primitive is registered in the {GROUP} entry-point group: "
                             "coworkenv's own are registered when it is installed "
                             "(pip install -e .)")
    return found


class _Registry(Mapping[str, Primitive]):
    """The installed primitives by name, loaded on first use (a builder's module may import
    anything of coworkenv below the composer, so nothing is loaded at import time)."""

    def __init__(self) -> None:
        self._found: dict[str, Primitive] | None = None

    def _all(self) -> dict[str, Primitive]:
        if self._found is None:
            self._found = discover()
        return self._found

    def __getitem__(self, name: str) -> Primitive:
        return self._all()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def reload(self) -> None:
        """Find the registered primitives again (after installing or removing a plugin)."""
        self._found = None


PRIMITIVES = _Registry()
"""The installed primitives, by name."""


def catalog(names: list[str] | None = None) -> str:
    """The primitives (``names``, else every one that is drawn by default) as a model reads
    them when it proposes a plan."""
    chosen = [PRIMITIVES[n] for n in names] if names is not None else \
        [p for p in PRIMITIVES.values() if p.drawn]
    return "\n".join(f"- {p.name} ({p.phase}; apps {p.app_sets() or 'none'}"
                     f"{'; after ' + ', '.join(p.needs) if p.needs else ''}): {p.provides}. "
                     f"Graded: {p.grading}." for p in chosen)
