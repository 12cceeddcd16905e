"""Reading a simulation file and checking it whole before anything runs: every problem names
the file, the field and the value."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ...workspace import REGISTRY
from ...workspace.models import Person
from ..describe import _describe
from ..errors import TaskFileError
from ..loader import InputLimits, _check_shape, _merge_company, _read_bounded, load_tasks
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

    @property
    def expected_arrivals(self) -> int:
        """Arrivals the workload draws, on average: its fixed times, and each Poisson stream's
        rate over the clock's working hours (for each of its requesters); arrivals that
        ``on:`` triggers make come besides."""
        return round(expected_arrivals(self.sim, self.calendar))


def expected_arrivals(sim: Simulation, cal: Calendar) -> float:
    """See :attr:`Loaded.expected_arrivals`."""
    hours = cal.working_seconds(0.0, cal.end_s) / 3600
    return sum(len(st.at) + (st.poisson.per_hour * hours * max(1, len(st.requesters))
                             if st.poisson is not None else 0.0) for st in sim.workload)


@dataclass(frozen=True)
class SimulationLimits:
    """Bounds a simulation file cannot escape; each can be raised with its environment
    variable. A file over one is refused at load with one line (what it holds, the bound,
    the variable), before it takes the time or the memory of a run; the run itself stops with
    one line where its ``on:`` triggers would go past them."""

    max_arrivals: int = 1_000_000
    """COWORKENV_SIM_MAX_ARRIVALS: arrivals in one run (expected at load; counted as it runs)."""
    max_arrivals_per_minute: int = 1_000
    """COWORKENV_SIM_MAX_ARRIVALS_PER_MINUTE: arrivals in one simulated minute (a chain of
    triggers that makes arrivals without the clock moving is stopped by it)."""
    max_agents: int = 1_000
    """COWORKENV_SIM_MAX_AGENTS: agents of the roster."""
    max_people: int = 100_000
    """COWORKENV_SIM_MAX_PEOPLE: people of the company, with those who join."""

    @classmethod
    def from_env(cls) -> SimulationLimits:
        import os

        env, d = os.environ, cls()
        return cls(int(env.get("COWORKENV_SIM_MAX_ARRIVALS", d.max_arrivals)),
                   int(env.get("COWORKENV_SIM_MAX_ARRIVALS_PER_MINUTE",
                               d.max_arrivals_per_minute)),
                   int(env.get("COWORKENV_SIM_MAX_AGENTS", d.max_agents)),
                   int(env.get("COWORKENV_SIM_MAX_PEOPLE", d.max_people)))


def load_simulation(path: str | Path, *, days: int | None = None) -> Loaded:
    """Read and check a simulation file; every problem names the file, the field and the
    value (:class:`~coworkenv.sim.TaskFileError`). ``days``: run only its first working days
    (see :func:`first_days`)."""
    p = Path(path)
    if p.is_dir():
        raise TaskFileError(str(p), ["is a folder, not a simulation file (kind: simulation)"])
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
        raise TaskFileError(str(p), [x for e in exc.errors()
                                     for x in _describe(e, Simulation)]) from None
    loaded = check_simulation(sim, p)  # (whole: what lies past a shortened clock too)
    if days is None:
        return loaded
    short = first_days(sim, days, str(p))
    return Loaded(short, p, loaded.templates, loaded.company,
                  Calendar(short.clock.start, short.clock.days, short.clock.hours))


def first_days(sim: Simulation, days: int, where: str) -> Simulation:
    """The simulation over its first ``days`` working days only (a first look at a long
    one): its clock shortened, and the fixed-time arrivals and world events that fall after
    them left out (a stream whose times all do, with them)."""
    if not 1 <= days <= sim.clock.days:
        raise TaskFileError(where, [f"days: {days} is not within the clock's 1 to "
                                    f"{sim.clock.days} working days"])
    cal = Calendar(sim.clock.start, days, sim.clock.hours)

    def inside(text: str, *, starts: bool = False) -> bool:
        try:
            at = cal.seconds(text)
        except ValueError:
            return False
        return not starts or at <= cal.end_s  # (what starts after its end: left out too)

    workload = []
    for st in sim.workload:
        if st.at:
            kept = [t for t in st.at if inside(t, starts=True)]
            if not kept:
                continue
            st = st.model_copy(update={"at": kept})
        workload.append(st)
    events = [ev for ev in sim.events if all(inside(str(getattr(ev, f)), starts=f != "end")
                                             for f in ("start", "end", "at") if hasattr(ev, f))]
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
    staff = {str(r.get("id")) for r in company.get("people", [])}
    people = staff | {str(e.person.get("id")) for e in sim.events if isinstance(e, Join)}
    bounds = SimulationLimits.from_env()
    if len(sim.roster) > bounds.max_agents:
        raise TaskFileError(where, [f"roster: {len(sim.roster):,} agents, more than "
                                    f"{bounds.max_agents:,} (raise COWORKENV_SIM_MAX_AGENTS "
                                    "to run it)"])
    if len(people) > bounds.max_people:
        raise TaskFileError(where, [f"company: {len(people):,} people with those who join, "
                                    f"more than {bounds.max_people:,} (raise "
                                    "COWORKENV_SIM_MAX_PEOPLE to run it)"])
    sources = []
    for i, t in enumerate(sim.tasks):  # (named as given: beside the file as it was named)
        tp = (path.parent / t) if not Path(t).is_absolute() else Path(t)
        if not tp.exists():
            problems.append(f"tasks[{i}]: {t!r}: no such file or folder (looked in "
                            f"{path.parent})")
        sources.append(tp)
    if problems:
        raise TaskFileError(where, problems)
    templates = {t.id: t for t in load_tasks(sources)}
    cal = Calendar(sim.clock.start, sim.clock.days, sim.clock.hours)
    seats = {s.id for s in sim.roster}
    roles = {s.role for s in sim.roster if s.role}
    queues = {q for s in sim.roster for q in s.queues}

    acts_as = {s.id: s.person for s in sim.roster}

    def person(at: str, pid: str) -> None:
        if pid in people:
            return
        if pid in acts_as:
            problems.append(f"{at}: {pid!r} is an agent of the roster, not a person of company "
                            f"{sim.company!r}: agent {pid!r} acts as person {acts_as[pid]!r}; "
                            f"write {acts_as[pid]!r}")
        else:
            problems.append(f"{at}: unknown person {pid!r} (not in company {sim.company!r})")

    def when(at: str, text: str, *, starts: bool = True) -> float | None:
        """Seconds since the start of a time of the file (None: refused); what ``starts``
        then (an arrival, an event) may not come after the clock's end."""
        try:
            t = cal.seconds(text)
        except ValueError as exc:
            problems.append(f"{at}: {exc}")
            return None
        if starts and t > cal.end_s:
            problems.append(f"{at}: {text!r} is after the clock's end (d{sim.clock.days} "
                            f"{sim.clock.hours[1]}, {cal.at(cal.end_s).isoformat()})")
            return None
        return t

    def window(at: str, ev: Outage | Away) -> float | None:
        """An outage's or an absence's start, checked with its end (which may lie past the
        clock's end, but not before, or at, its start)."""
        a = when(f"{at}.from", ev.start)
        b = when(f"{at}.to", ev.end, starts=False)
        if a is not None and b is not None and b <= a:
            problems.append(f"{at}.to: {ev.end!r} {'is before' if b < a else 'is'} its start "
                            f"({at}.from: {ev.start!r}): it must end after it starts")
        return a

    ids: dict[str, int] = {}
    acting: dict[str, int] = {}
    for i, s in enumerate(sim.roster):
        person(f"roster[{i}].person", s.person)
        if s.id in ids:
            problems.append(f"roster[{i}].id: duplicate agent {s.id!r} (also roster[{ids[s.id]}])")
        if s.person in acting:
            problems.append(f"roster[{i}].person: {s.person!r} is already another agent "
                            f"(roster[{acting[s.person]}])")
        ids.setdefault(s.id, i)
        acting.setdefault(s.person, i)
        try:
            parse_policy(s.policy)
        except ValueError:
            problems.append(f"roster[{i}].policy: expected {POLICIES}, got {s.policy!r}")
        apps = {tl.app for tl in REGISTRY.values()}
        for k, name in enumerate(s.tools or []):
            if name not in REGISTRY and name not in apps:
                problems.append(f"roster[{i}].tools[{k}]: {name!r} is neither a tool nor an app")
    listed: dict[str, int] = {}
    for i, pp in enumerate(sim.people):
        person(f"people[{i}].person", pp.person)
        if pp.person in listed:
            problems.append(f"people[{i}].person: {pp.person!r} is listed twice (also "
                            f"people[{listed[pp.person]}])")
        listed.setdefault(pp.person, i)
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
        asking: dict[str, int] = {}
        for k, who in enumerate(st.requesters):
            person(f"workload[{i}].requesters[{k}]", who)
            if who in asking:  # (their one stream, drawn twice: the same arrivals twice)
                problems.append(f"workload[{i}].requesters[{k}]: {who!r} is listed twice "
                                f"(also requesters[{asking[who]}])")
            asking.setdefault(who, k)
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
    problems += trigger_cycles(sim)
    joins: dict[str, tuple[int, str, float | None]] = {}
    for i, ev in enumerate(sim.events):
        if isinstance(ev, Join):
            problems += _join(i, ev, staff, sim.company, joins, when(f"events[{i}].at", ev.at))
    left: dict[str, int] = {}

    def joined(at: str, pid: str, t: float | None) -> None:
        """A person of the file's joins, named by an event before they join."""
        j, text, since = joins.get(pid, (-1, "", None))
        if t is not None and since is not None and t < since:
            problems.append(f"{at}: {pid!r} joins only at {text!r} (events[{j}])")

    for i, ev in enumerate(sim.events):
        if isinstance(ev, Outage):
            window(f"events[{i}]", ev)
            apps = {tl.app for tl in REGISTRY.values()}
            if ev.app is not None and ev.app not in apps:
                problems.append(f"events[{i}].app: unknown app {ev.app!r} (apps: "
                                f"{', '.join(sorted(apps))})")
            problems += [f"events[{i}].tools: unknown tool {t!r}" for t in ev.tools
                         if t not in REGISTRY]
        elif isinstance(ev, Away):
            person(f"events[{i}].person", ev.person)
            joined(f"events[{i}].person", ev.person, window(f"events[{i}]", ev))
        elif isinstance(ev, Leave):
            person(f"events[{i}].person", ev.person)
            joined(f"events[{i}].person", ev.person, when(f"events[{i}].at", ev.at))
            if ev.person in left:
                problems.append(f"events[{i}].person: {ev.person!r} leaves twice (also "
                                f"events[{left[ev.person]}])")
            left.setdefault(ev.person, i)
        elif isinstance(ev, Reorg):
            since = when(f"events[{i}].at", ev.at)
            for pid, fields in ev.changes.items():
                person(f"events[{i}].changes", pid)
                joined(f"events[{i}].changes.{pid}", pid, since)
                if "manager" in fields:
                    person(f"events[{i}].changes.{pid}.manager", fields["manager"])
    docs = {str(d.get("id")) for d in company.get("docs", [])}
    rules: dict[str, int] = {}
    for i, rule in enumerate(sim.safety):
        if rule.id in rules:  # (each arrival's task holds them all: ids are its rules')
            problems.append(f"safety[{i}].id: duplicate id {rule.id!r} (also "
                            f"safety[{rules[rule.id]}])")
        rules.setdefault(rule.id, i)
        for d in getattr(rule, "docs", []) or []:
            if d not in docs:
                problems.append(f"safety[{i}].docs: unknown document {d!r} (not in company "
                                f"{sim.company!r})")
    if problems:
        raise TaskFileError(where, problems)
    expected = expected_arrivals(sim, cal)
    if expected > bounds.max_arrivals:
        raise TaskFileError(where, [
            f"workload: about {round(expected):,} arrivals expected over {sim.clock.days} "
            f"working days, more than {bounds.max_arrivals:,} (lower the rates or the days, "
            "or raise COWORKENV_SIM_MAX_ARRIVALS to run it)"])
    return Loaded(sim, path, templates, company, cal)


def _join(i: int, ev: Join, staff: set[str], company: str,
          joins: dict[str, tuple[int, str, float | None]], t: float | None) -> list[str]:
    """A join's problems: its entry is not a directory entry, or its person is already in
    the company, or joins twice. ``joins``: who joins, by which event and when (added to)."""
    try:
        pid = Person.model_validate(ev.person).id
    except ValidationError as exc:
        return [f"events[{i}].person.{x}" for e in exc.errors() for x in _describe(e, Person)]
    if pid in staff:
        return [f"events[{i}].person.id: {pid!r} is already in company {company!r} (a join "
                "adds someone new)"]
    if pid in joins:
        return [f"events[{i}].person.id: {pid!r} joins twice (also events[{joins[pid][0]}])"]
    joins[pid] = (i, ev.at, t)
    return []


def trigger_cycles(sim: Simulation) -> list[str]:
    """Chains of ``on: {done: ...}`` streams that come back to where they started with no
    time between them (``after_minutes`` 0 all the way round): an agent may finish an arrival
    at once (noop does, and finishing takes no simulated time), so each completion would make
    the next at the same instant and the clock would never move. One problem per cycle found,
    naming its first stream and the templates round it (``A -> B -> A``)."""
    edges: dict[str, list[tuple[str, int]]] = {}
    for i, st in enumerate(sim.workload):
        if st.on is not None and st.on.done is not None and st.on.after_minutes == 0:
            for tid in dict.fromkeys(st.tasks):
                edges.setdefault(st.on.done, []).append((tid, i))
    problems: list[str] = []
    done: set[str] = set()
    for root in edges:
        if root in done:
            continue
        # depth first, without recursion: the path (template, the stream that made it) and,
        # for each of its templates, the edges still to follow
        path: list[tuple[str, int]] = [(root, -1)]
        todo = [iter(edges.get(root, []))]
        on_path = {root: 0}
        while todo:
            step = next(todo[-1], None)
            if step is None:
                node, _ = path.pop()
                todo.pop()
                del on_path[node]
                done.add(node)
                continue
            nxt, via = step
            if nxt in on_path:
                k = on_path[nxt]
                names = [t for t, _ in path[k:]] + [nxt]
                streams = [v for _, v in path[k + 1:]] + [via]
                where = ", ".join(f"workload[{v}]" for v in sorted(set(streams)))
                problems.append(
                    f"workload[{streams[0]}].on.done: {' -> '.join(names)} is a cycle of "
                    f"triggers with no time between them (after_minutes 0 on {where}): an "
                    "arrival may be finished at once, which takes no time, so it would never "
                    "let the clock move; give one of them after_minutes > 0")
            elif nxt not in done:
                on_path[nxt] = len(path)
                path.append((nxt, via))
                todo.append(iter(edges.get(nxt, [])))
    return problems
