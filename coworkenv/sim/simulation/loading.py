"""Reading a simulation file and checking it whole before anything runs: every problem names
the file, the field and the value."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ...workspace import REGISTRY
from ..errors import TaskFileError
from ..loader import InputLimits, _check_shape, _describe, _merge_company, _read_bounded, load_tasks
from ..policy import POLICIES, parse_policy
from ..task import Task
from .arrivals import _route
from .calendar import Calendar
from .language import Away, Join, Leave, Outage, Reorg, Simulation


@dataclass
class Loaded:
    """A simulation file, checked: the model, its templates by id, its company seed."""

    sim: Simulation
    path: Path
    templates: dict[str, Task]
    company: dict[str, Any]
    calendar: Calendar


def load_simulation(path: str | Path, *, days: int | None = None) -> Loaded:
    """Read and check a simulation file; every problem names the file, the field and the
    value (:class:`~coworkenv.sim.TaskFileError`). ``days``: run only its first working days
    (see :func:`first_days`)."""
    p = Path(path)
    if not p.is_file():
        raise TaskFileError(str(p), ["no such file"])
    limits = InputLimits.from_env()
    try:
        raw = yaml.safe_load(_read_bounded(p, limits))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise TaskFileError(str(p), [f"not YAML{at}: {getattr(exc, 'problem', exc)}"]) from None
    shape = _check_shape(raw, limits)
    if shape is not None:
        raise TaskFileError(str(p), [shape])
    if not isinstance(raw, dict):
        raise TaskFileError(str(p), ["expected one simulation (a mapping with kind: simulation)"])
    if raw.get("kind") != "simulation":
        raise TaskFileError(str(p), [f"kind: expected 'simulation', got {raw.get('kind')!r}"])
    try:
        sim = Simulation.model_validate(raw)
    except ValidationError as exc:
        raise TaskFileError(str(p), [x for e in exc.errors() for x in _describe(e)]) from None
    if days is not None:
        sim = first_days(sim, days, str(p))
    return check_simulation(sim, p)


def first_days(sim: Simulation, days: int, where: str) -> Simulation:
    """The simulation over its first ``days`` working days only (a first look at a long
    one): its clock shortened, and the fixed-time arrivals and world events that fall after
    them left out (a stream whose times all do, with them)."""
    if not 1 <= days <= sim.clock.days:
        raise TaskFileError(where, [f"days: {days} is not within the clock's 1 to "
                                    f"{sim.clock.days} working days"])
    cal = Calendar(sim.clock.start, days, sim.clock.hours)

    def inside(text: str) -> bool:
        try:
            cal.seconds(text)
            return True
        except ValueError:
            return False

    workload = []
    for st in sim.workload:
        if st.at:
            kept = [t for t in st.at if inside(t)]
            if not kept:
                continue
            st = st.model_copy(update={"at": kept})
        workload.append(st)
    events = [ev for ev in sim.events if all(inside(str(getattr(ev, f))) for f in
                                             ("start", "end", "at") if hasattr(ev, f))]
    return sim.model_copy(update={"clock": sim.clock.model_copy(update={"days": days}),
                                  "workload": workload or sim.workload[:0], "events": events})


def check_simulation(sim: Simulation, path: Path) -> Loaded:
    where = str(path)
    folder = path.parent.resolve()
    problems: list[str] = []
    try:
        company = _merge_company({"company": sim.company}, folder)["seed"]
    except KeyError as exc:
        raise TaskFileError(where, [f"company: {exc.args[0]}"]) from None
    people = {str(r.get("id")) for r in company.get("people", [])}
    people |= {str(e.person.get("id")) for e in sim.events if isinstance(e, Join)}
    sources = []
    for i, t in enumerate(sim.tasks):
        tp = (folder / t) if not Path(t).is_absolute() else Path(t)
        if not tp.exists():
            problems.append(f"tasks[{i}]: {t!r}: no such file or folder (looked in {folder})")
        sources.append(tp)
    if problems:
        raise TaskFileError(where, problems)
    templates = {t.id: t for t in load_tasks(sources)}
    cal = Calendar(sim.clock.start, sim.clock.days, sim.clock.hours)
    seats = {s.id for s in sim.roster}
    roles = {s.role for s in sim.roster if s.role}
    queues = {q for s in sim.roster for q in s.queues}

    def person(at: str, pid: str) -> None:
        if pid not in people:
            problems.append(f"{at}: unknown person {pid!r} (not in company {sim.company!r})")

    def when(at: str, text: str) -> None:
        try:
            cal.seconds(text)
        except ValueError as exc:
            problems.append(f"{at}: {exc}")

    for i, s in enumerate(sim.roster):
        person(f"roster[{i}].person", s.person)
        if [x.id for x in sim.roster].count(s.id) > 1:
            problems.append(f"roster[{i}].id: duplicate agent {s.id!r}")
        if [x.person for x in sim.roster].count(s.person) > 1:
            problems.append(f"roster[{i}].person: {s.person!r} is already another agent")
        try:
            parse_policy(s.policy)
        except ValueError:
            problems.append(f"roster[{i}].policy: expected {POLICIES}, got {s.policy!r}")
        apps = {tl.app for tl in REGISTRY.values()}
        for k, name in enumerate(s.tools or []):
            if name not in REGISTRY and name not in apps:
                problems.append(f"roster[{i}].tools[{k}]: {name!r} is neither a tool nor an app")
    for i, pp in enumerate(sim.people):
        person(f"people[{i}].person", pp.person)
    for i, st in enumerate(sim.workload):
        for k, tid in enumerate(st.tasks):
            if tid not in templates:
                known = ", ".join(sorted(templates)[:8])
                problems.append(f"workload[{i}].tasks[{k}]: unknown task {tid!r} (templates: "
                                f"{known}{', ...' if len(templates) > 8 else ''})")
        r = _route(st, sim)
        if r.agent is not None and r.agent not in seats:
            problems.append(f"workload[{i}].to: unknown agent {r.agent!r} (agents: "
                            f"{', '.join(sorted(seats))})")
        if r.role is not None and r.role not in roles:
            problems.append(f"workload[{i}].to.role: no agent has role {r.role!r}")
        if r.queue is not None and r.queue not in queues:
            problems.append(f"workload[{i}].to.queue: no agent serves queue {r.queue!r}")
        for k, t in enumerate(st.at):
            when(f"workload[{i}].at[{k}]", t)
        for k, who in enumerate(st.requesters):
            person(f"workload[{i}].requesters[{k}]", who)
        if st.on is not None and st.on.message is not None:
            person(f"workload[{i}].on.message.from", st.on.message.sender)
            person(f"workload[{i}].on.message.to", st.on.message.to)
        if st.on is not None and st.on.done is not None and st.on.done not in templates:
            problems.append(f"workload[{i}].on.done: unknown task {st.on.done!r}")
        for k, tid in enumerate(st.tasks):
            tpl = templates.get(tid)
            if tpl is None:
                continue
            for pid in {tpl.user.person, *(c.person for c in tpl.coworkers)}:
                if pid not in people and pid != tpl.agent:
                    problems.append(f"workload[{i}].tasks[{k}]: task {tid!r} needs person "
                                    f"{pid!r}, who is not in company {sim.company!r}")
    for i, ev in enumerate(sim.events):
        if isinstance(ev, Outage):
            when(f"events[{i}].from", ev.start)
            when(f"events[{i}].to", ev.end)
            apps = {tl.app for tl in REGISTRY.values()}
            if ev.app is not None and ev.app not in apps:
                problems.append(f"events[{i}].app: unknown app {ev.app!r}")
            problems += [f"events[{i}].tools: unknown tool {t!r}" for t in ev.tools
                         if t not in REGISTRY]
        elif isinstance(ev, Away):
            person(f"events[{i}].person", ev.person)
            when(f"events[{i}].from", ev.start)
            when(f"events[{i}].to", ev.end)
        elif isinstance(ev, Leave):
            person(f"events[{i}].person", ev.person)
            when(f"events[{i}].at", ev.at)
        elif isinstance(ev, Reorg):
            when(f"events[{i}].at", ev.at)
            for pid, fields in ev.changes.items():
                person(f"events[{i}].changes", pid)
                if "manager" in fields:
                    person(f"events[{i}].changes.{pid}.manager", fields["manager"])
        else:
            when(f"events[{i}].at", ev.at)
    docs = {str(d.get("id")) for d in company.get("docs", [])}
    for i, rule in enumerate(sim.safety):
        for d in getattr(rule, "docs", []) or []:
            if d not in docs:
                problems.append(f"safety[{i}].docs: unknown document {d!r} (not in company "
                                f"{sim.company!r})")
    if problems:
        raise TaskFileError(where, problems)
    return Loaded(sim, path, templates, company, cal)


