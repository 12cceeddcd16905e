"""The composer: a workflow requirement and a seed become a plan of primitives, and the plan
becomes one task: seed workspace, cast, timeline, reference solution, checks, gates, safety
rules and an instruction that states goals, not steps.

A plan is a list of :class:`Stage` (a primitive and its parameters), drawn by
:mod:`~coworkenv.synth.draw`, read from a process (:mod:`~coworkenv.synth.bpmn`) or proposed
by a model. Each primitive is a registered part (:mod:`~coworkenv.synth.primitive`) whose
builder works on the composer through :class:`~coworkenv.synth.primitive.Composition`; the
composer keeps what is shared: binding people and figures, buckets and ordering, gates from
dependencies, and the instruction. Stages run in phases: independent work first (``setup``),
then everything that learns values (``gather``: all questions go out together, then the
answers are awaited, so parallel asks overlap in simulated time), then work that depends on
what was learned (``depend``, ``act``), then the deliverable (``finish``). Every value learned
has a source event; one gate per value says no write states it before that event, which is
how the plan's dependencies become gates.
"""

from __future__ import annotations

import random
import re
import zlib
from collections.abc import Sequence
from typing import Any

from ..sim.loader import company
from ..workspace.apps import default_apps
from .draw import draw_named, draw_plan
from .palette import EXTRA_PEOPLE, METRICS, OPENINGS, START, money_text
from .plan import PlanError, Stage, plan_shape
from .primitive import BUCKETS, PHASES, PRIMITIVES, Spec, Value
from .requirement import WorkflowRequirement

_GENERIC = {"lead", "manager", "head", "team", "desk", "the", "and", "senior", "junior",
            "officer", "specialist", "director"}


class Composer:
    """Builds one task from a plan, binding people, documents, figures and times."""

    def __init__(self, req: WorkflowRequirement, rng: random.Random, tid: str) -> None:
        self.req, self.rng, self.tid = req, rng, tid
        self.agent, self.user = req.agent, req.user
        self.company = company(req.company)
        """The company's shared directory and workspace (read once)."""
        directory = self.company.get("people", [])
        self.directory = {p["id"]: p for p in directory}
        internal = [p["id"] for p in directory if not p.get("external")
                    and p["id"] not in (req.agent, req.user)]
        own = [p for p in req.parameters.people if p in internal]
        rest = [p for p in internal if p not in own]
        rng.shuffle(own)
        rng.shuffle(rest)
        self.pool = own + rest
        self.used: list[str] = []
        metrics = list(dict.fromkeys([*req.parameters.metrics, *METRICS]))
        rng.shuffle(metrics)
        self.metrics = metrics
        self.buckets: dict[str, list[Spec]] = {b: [] for b in BUCKETS}
        self.checks: list[Spec] = []
        self.safety: list[Spec] = []
        self.cast: dict[str, Spec] = {}
        self.seed: dict[str, Any] = {}
        self.timeline: list[Spec] = []
        self.goals: list[str] = []
        self.values: list[Value] = []
        self.amounts: set[str] = set()
        """Every figure drawn so far: no two figures of a task (nor a figure and the stale
        value it replaces) are the same, so a check on one never matches another."""
        self.after_approval: list[dict[str, Any]] = []
        self.approved_event: dict[str, Any] | None = None
        self.apps = set(req.apps) | {"directory"}
        self.channel = "chat" if "chat" in self.apps else "email"
        self.n = 0
        self.report: dict[str, Any] = {"to": self.user, "via": "email" if "email" in self.apps
                                       else "chat"}
        self.clarified: dict[str, Any] | None = None
        self.outcomes: list[tuple[str, dict[str, Any]]] = []
        """What the report states besides figures (a moved meeting, a new owner), with the
        event that made it true."""
        self.has_change = False
        self.min_coworkers = 2 if req.primitives is None else 0
        """An office plan works with people; a requirement's own primitives say whom they
        need."""
        self.intro = ""
        self.rules: list[str] = []
        """Rules a process states (when approval is needed)."""
        self.amount_range: tuple[int, int] | None = None
        self.range_for = "any"
        """The range of the first figure, when a process's condition decides on it."""
        self.state: dict[str, Any] = {}
        """What a primitive leaves for a later one, by the primitive's name."""
        self.report_steps: list[Spec] = []
        self.plan: list[Stage] = []
        self.words = random.Random(zlib.crc32(tid.encode()))
        """Wording choices (openings, phrasings): drawn apart from ``rng``, so that how a
        sentence is put never changes what the plan binds."""
        self.names: dict[str, list[str]] = {}
        """The names given so far, by kind (see :meth:`fresh_name`)."""

    # binding ------------------------------------------------------------------------------
    def person(self, role: str | None = None) -> str:
        """A coworker not yet in the plan: each plays one part, so that what one person says
        is never mistaken for another part's answer; with ``role`` (a process lane), someone
        whose role or team says it. When the company has no one left, a new colleague joins
        its directory for this task."""
        free = [p for p in self.pool if p not in self.used]
        if role:
            words = [w for w in re.findall(r"[a-z]+", role.lower())
                     if len(w) > 2 and w not in _GENERIC]

            def fits(text: str) -> bool:
                return any(w in text.lower() for w in words)

            fit = [p for p in free if fits(f"{self.directory[p].get('role', '')} "
                                           f"{self.directory[p].get('team', '')}")]
            if fit:
                free = fit + [p for p in free if p not in fit]
            elif len(self.used) < 8:
                known = [e for e in EXTRA_PEOPLE if fits(f"{e[1]} {e[2]}")
                         and e[0].split()[0].lower() not in self.directory]
                if known:
                    pid = self.hire(*known[0])
                else:
                    pid = self.hire(f"{role.title()} Desk", role.title(),
                                    words[0] if words else "ops", "America/New_York",
                                    pid=re.sub(r"[^a-z]", "", role.lower())[:12] or "colleague")
                free = [pid, *free]
        if not free:
            extra = [e for e in EXTRA_PEOPLE if e[0].split()[0].lower() not in self.directory]
            if not extra:
                raise PlanError(f"the plan needs more than {len(self.used)} coworkers")
            free = [self.hire(*extra[self.rng.randrange(len(extra))])]
        pid = str(free[0])
        self.used.append(pid)
        return pid

    def hire(self, name: str, role: str, team: str, tz: str, pid: str | None = None) -> str:
        """A new colleague in the company's directory for this task; their person id."""
        pid = pid or name.split()[0].lower()
        row = {"id": pid, "name": name, "email": f"{pid}@{self.req.company}.test",
               "role": role, "team": team, "manager": self.user, "timezone": tz}
        self.add_seed("people", row)
        self.directory[pid] = row
        self.pool.append(pid)
        return pid

    def metric(self) -> str:
        if not self.metrics:
            raise PlanError("the plan asks for more figures than the requirement and the "
                            "palette name")
        return self.metrics.pop()

    def fresh_name(self, kind: str, choices: Sequence[str], fallback: Sequence[str] = (),
                   *, draw: bool = True) -> str:
        """A name of ``kind`` (a seed kind: a meeting's title, a queue's name, a channel)
        that no other of the task or its company contains or is contained in, so that a check
        that finds one by its name never finds another: drawn from ``choices`` (else from
        ``fallback``; ``draw``: else the first that fits). Names come from the company and
        the requirement, never from counters."""
        given = self.names.setdefault(kind, [])
        taken = [str(row[k]) for row in [*self.company.get(kind, []),
                                         *self.seed.get(kind, [])]
                 for k in ("id", "name", "title") if row.get(k)] + given

        def fit(options: list[str]) -> list[str]:
            return [x for x in dict.fromkeys(options) if not any(
                x.lower() in t.lower() or t.lower() in x.lower() for t in taken)]

        fits = fit(list(choices)) or fit(list(fallback))
        if not fits:
            raise PlanError(f"no {kind} name left among {[*choices, *fallback]}")
        pick = self.rng.choice(fits) if draw else fits[0]
        given.append(pick)
        return pick

    def name(self, pid: str) -> str:
        return str(self.directory.get(pid, {}).get("name", pid)).split()[0]

    def cid(self, what: str) -> str:
        self.n += 1
        return f"{what}-{self.n}"

    def member(self, pid: str) -> Spec:
        if pid not in self.cast:
            lo = self.rng.choice([3, 5, 10, 20, 40])
            self.cast[pid] = {"person": pid, "facts": [], "response": {
                "delay_minutes": [lo, lo + self.rng.choice([5, 10, 30])]}}
        return self.cast[pid]

    def add_seed(self, kind: str, row: Spec) -> None:
        self.seed.setdefault(kind, []).append(row)

    def say(self, pid: str, text: str) -> Spec:
        """The agent's message to a person, on the plan's channel."""
        if self.channel == "chat":
            return {"kind": "tool", "tool": "chat_send_dm", "args": {"to": pid, "text": text}}
        return {"kind": "tool", "tool": "email_send", "args": {
            "to": [pid], "subject": text.split("?")[0][:60], "body": text}}

    def add_row(self, table: str, row: Spec) -> None:
        """A row of an app's table (a plugin's) in the seed (``seed.tables``)."""
        self.seed.setdefault("tables", {}).setdefault(table, []).append(row)

    def learn(self, v: Value) -> None:
        """A figure the plan learns, with its gate: no write states it before its source."""
        self.values.append(v)
        self.gate_value(v)

    def gate_value(self, v: Value) -> None:
        self.checks.append({"id": self.cid("learned-first"), "kind": "order", "gate": True,
                            "description": f"{v.name} is stated only after it was learned",
                            "first": v.source, "then": {"text": {"contains": [v.text]}}})

    # figures ------------------------------------------------------------------------------
    def money(self, kind: str = "any") -> str:
        """An amount for a figure: the one a process condition decides on within its range
        (the approved document's, or else the first figure)."""
        if self.amount_range is not None and self.range_for in ("any", kind):
            lo, hi = self.amount_range
            self.amount_range = None
            return self.fresh_money(lo, hi, floor=False)
        return self.fresh_money(*self.req.parameters.amounts)

    def fresh_money(self, lo: int, hi: int, *, floor: bool = True) -> str:
        """An amount no other figure of this task has (``floor``: at least $100)."""
        for _ in range(64):
            amount = money_text(self.rng, lo, hi) if floor else \
                f"${self.rng.randint(lo, hi) // 10 * 10:,}"
            if amount not in self.amounts:
                break
        else:
            raise PlanError(f"the amount range {lo}..{hi} is too narrow for this plan's figures")
        self.amounts.add(amount)
        return amount


    def channels(self) -> list[Spec]:
        """The company's internal channels the agent is a member of."""
        return [c for c in self.company.get("channels", [])
                if self.agent in c.get("members", []) and c.get("internal_only", True)]


    def outsider(self, vendor: str, mailbox: str, label: str) -> str:
        """An outside sender (a vendor's mailbox) in this task's directory; their id."""
        pid = f"{mailbox}-{self.tid[-5:]}-{self.n}"
        self.n += 1
        self.add_seed("people", {"id": pid, "name": f"{vendor} {label}",
                                 "email": f"{mailbox}@{vendor.lower()}.test", "external": True})
        return pid

    def email(self, sender: str, subject: str, body: str, hhmm: str) -> str:
        """An email to the agent in the seed, sent on the first morning; its id."""
        eid = f"m-{self.tid[-5:]}-{self.n}"
        self.n += 1
        self.add_seed("emails", {"id": eid, "sender": sender, "to": [self.agent],
                                 "subject": subject, "body": body, "thread": eid,
                                 "sent_at": f"2026-03-02T{hhmm}:00Z"})
        return eid


    # assembly -----------------------------------------------------------------------------
    def build(self, plan: list[Stage]) -> Spec:
        ordered = sorted(plan, key=lambda s: (PHASES.index(PRIMITIVES[s.primitive].phase),
                                              PRIMITIVES[s.primitive].rank))
        self.plan = ordered
        for st in ordered:
            if not PRIMITIVES[st.primitive].last:
                PRIMITIVES[st.primitive].build(self, st.params)
        for name in dict.fromkeys(s.primitive for s in ordered if PRIMITIVES[s.primitive].last):
            PRIMITIVES[name].build(self, next(s.params for s in ordered if s.primitive == name))
        if self.approved_event is not None:
            for sel in self.after_approval:
                self.checks.append({"id": self.cid("after-approval"), "kind": "order",
                                    "gate": True, "first": self.approved_event, "then": sel})
        steps = [s for b in BUCKETS for s in self.buckets[b]]
        steps += [*self.report_steps, {"kind": "finish", "summary": "done"}]
        return self._spec(ordered, steps)

    def _spec(self, plan: list[Stage], raw: list[Spec]) -> Spec:
        accept: dict[str, str] = {}
        steps = []
        for i, s in enumerate(raw):
            for key, kind in (("_accept", "premature"), ("_accept_stale", "stale")):
                reason = s.pop(key, None)
                if reason:
                    accept[f"{kind}:{i}"] = reason
            steps.append(s)
        lo, hi = self.req.difficulty
        n = len(plan)
        diff = "easy" if n <= 3 else "medium" if n <= 5 else "hard"
        order = ["easy", "medium", "hard"]
        diff = order[min(max(order.index(diff), order.index(lo)), order.index(hi))]
        caps = self._capabilities(steps)
        if not caps:
            raise PlanError("the plan exercises no capability")
        cast = len([p for p in self.cast if p != self.user])
        if not self.min_coworkers <= cast <= 8:
            raise PlanError(f"a plan works with {self.min_coworkers} to 8 coworkers, not {cast}")
        opening = self.intro or self.words.choice(OPENINGS)
        instruction = " ".join([*([opening] if opening else []), *self.goals, *self.rules])
        if self.req.constraints and self.rng.random() < 0.5:
            instruction += " " + self.rng.choice(self.req.constraints)
        spec: Spec = {
            "id": self.tid, "family": f"{self.req.id}/composed", "capabilities": caps,
            "difficulty": diff, "company": self.req.company, "start": START.isoformat(),
            "agent": self.agent, "user": self.cast.pop(self.user, {"person": self.user}),
            "coworkers": list(self.cast.values()), "seed": self.seed,
            "timeline": self.timeline, "instruction": instruction, "reference": steps,
            "checks": self.checks, "safety": self.safety,
            "limits": {"max_turns": max(40, 3 * len(steps)), "max_sim_minutes": 5 * 24 * 60},
            "plan": {"shape": plan_shape(plan), "primitives": [s.primitive for s in plan],
                     "figures": [{"name": v.name, "text": v.text} for v in self.values]}}
        if accept:
            spec["mutation"] = {"accept": accept}
        if not set(self.req.apps) <= set(default_apps()):  # a plugin's app: name them all
            spec["apps"] = list(dict.fromkeys(["directory", *self.req.apps]))
        return spec

    def _capabilities(self, steps: list[Spec]) -> list[str]:
        from ..workspace import REGISTRY

        apps = {REGISTRY[s["tool"]].app for s in steps if s["kind"] == "tool"}
        caps = []
        if len(apps) >= 3:
            caps.append("tool_coordination")
        if any(f for m in self.cast.values() for f in m.get("facts", [])):
            caps.append("multi_turn_communication")
        if self.timeline and any(s["kind"] == "wait" for s in steps):
            caps.append("dynamic_workspace_state")
        if self.safety:
            caps.append("safety_sensitive_handling")
        return caps



def compose(req: WorkflowRequirement, rng: random.Random, tid: str,
            plan: list[Stage] | None = None, stages: tuple[int, int] | None = None) -> Spec:
    """One task spec for ``req``: from ``plan``; for a requirement read from a process, from
    one path through it; else from a plan drawn with ``rng`` (drawn again, up to 20 times,
    while it cannot be bound), of a length in ``stages`` when given."""
    if plan is not None:
        return Composer(req, rng, tid).build(plan)
    if req.process is not None:
        from .bpmn import ProcessGraph, plan_from_process

        graph = ProcessGraph.model_validate(req.process)
        for _ in range(20):
            path, bind = plan_from_process(graph, rng)
            c = Composer(req, rng, tid)
            c.amount_range = bind["amount_range"]
            c.range_for = bind.get("range_for", "any")
            c.min_coworkers = 0  # the process says who takes part
            c.rules = list(bind["rules"])
            try:
                spec = c.build(path)
            except PlanError:
                continue
            spec["family"] = f"{req.id}/process"
            return spec
        raise PlanError(f"{req.id}: no path through the process could be bound")
    for _ in range(20):
        c = Composer(req, rng, tid)
        if stages is not None:
            c.min_coworkers = 0  # a short plan may need no one but the user
        try:
            if req.primitives is not None:
                return c.build(draw_named(req, rng, stages))
            return c.build(draw_plan(req, rng, stages))
        except PlanError:
            continue
    raise PlanError(f"{req.id}: no plan could be bound in 20 draws")

