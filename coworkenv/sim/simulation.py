"""The simulation language: a company that runs for days, with a roster of agents under test,
a workload of arrivals and world events (``kind: simulation`` files; ``coworkenv schema
simulation`` prints the JSON schema, generated from these models).

A simulation file names task files (the *templates* of its requests); each arrival is one
template instantiated at its arrival time: its own seed entities (a ticket, a document) get
ids of their own (``T1`` becomes ``T1-7`` for the 7th arrival), its times are counted from
the arrival, and its requester may be drawn from a list of people. Arrivals share one
workspace (the company's), so one request's actions can change another's facts.

Times in a simulation are ``dN HH:MM`` (the N-th *working* day of the simulation, d1 being
the first; weekends are skipped), ``HH:MM`` (the first day) or ISO-8601 with offset.
"""

from __future__ import annotations

import json
import random
import re
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..workspace import REGISTRY
from .errors import TaskFileError
from .loader import InputLimits, _check_shape, _describe, _merge_company, _read_bounded, load_tasks
from .task import OutOfOffice, Response, SafetyRule, Task, clock_minutes

POLICIES = "oracle | noop | openai:MODEL | teacher:openai:MODEL | remote | remote:GROUP"
SIM_RULE = "sim."
"""The prefix of a simulation-wide safety rule's id in each arrival's task."""


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Seat(Model):
    """One agent under test: the person it acts as, what it does, and its own policy."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$", description="Name of the agent "
                    "(routing, summaries, exports)")
    person: str = Field(description="Person id in the company's directory it acts as")
    role: str = Field(default="", description="What it does (arrivals may be routed by role)")
    policy: str = Field(default="oracle", description=POLICIES)
    tools: list[str] | None = Field(default=None, description="Tools or apps it may use "
                                    "(default: each arrival's own toolset)")
    queues: list[str] = Field(default_factory=list, description="Work queues it takes "
                              "arrivals from")
    action_minutes: float = Field(default=0.5, ge=0, description="Simulated minutes each of "
                                  "its actions takes (a tool call, a message)")
    max_turns: int | None = Field(default=None, ge=1, description="A budget of actions over "
                                  "the whole simulation (checked as a simulation-level check)")


class Clock(Model):
    start: datetime = Field(description="When the simulation starts (ISO-8601 with offset); "
                            "the first working day")
    days: int = Field(default=5, ge=1, le=400, description="Working days it runs")
    hours: tuple[str, str] = Field(default=("09:00", "17:00"), description="Working hours, "
                                   "local HH:MM in the start's offset")

    @model_validator(mode="after")
    def _aware(self) -> Clock:
        if self.start.tzinfo is None:
            raise ValueError("start: give an offset (e.g. 2026-03-02T09:00:00-05:00)")
        for h in self.hours:
            if not re.fullmatch(r"\d{1,2}:\d{2}", h):
                raise ValueError(f"hours: {h!r} is not HH:MM")
        if _hm(self.hours[0]) >= _hm(self.hours[1]):
            raise ValueError(f"hours: {self.hours[0]} is not before {self.hours[1]}")
        return self


class Poisson(Model):
    per_hour: float = Field(gt=0, le=10_000, description="Mean arrivals per working hour (per "
                            "requester, when the stream names requesters)")


class Route(Model):
    """Where an arrival goes: one agent, the least busy agent of a role, or a queue."""

    agent: str | None = None
    role: str | None = None
    queue: str | None = None

    @model_validator(mode="after")
    def _one(self) -> Route:
        if [self.agent, self.role, self.queue].count(None) != 2:
            raise ValueError("give exactly one of agent, role or queue")
        return self


class OnMessage(Model):
    """An arrival when one person writes to another (a message, DM or mail)."""

    sender: str = Field(alias="from", description="Person id who writes")
    to: str = Field(description="Person id written to")


class On(Model):
    message: OnMessage | None = None
    done: str | None = Field(default=None, description="When an arrival of this task template "
                             "is completed")
    after_minutes: float = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _one(self) -> On:
        if (self.message is None) == (self.done is None):
            raise ValueError("give exactly one of message or done")
        return self


class Stream(Model):
    """Arrivals of task templates: at fixed times, as a Poisson process over working hours,
    or when something happens."""

    task: str | None = Field(default=None, description="One task template id (or `tasks`)")
    tasks: list[str] = Field(default_factory=list, description="Task template ids (drawn in "
                             "turn)")
    to: str | Route = Field(description="An agent id, a person an agent acts as, or a route")
    at: list[str] = Field(default_factory=list, description="Fixed arrival times")
    poisson: Poisson | None = None
    on: On | None = None
    requesters: list[str] = Field(default_factory=list, description="People who ask: each "
                                  "has their own Poisson stream, and is the arrival's user")
    family: str | None = Field(default=None, description="Family on record (default: the "
                               "template's)")

    @model_validator(mode="before")
    @classmethod
    def _task(cls, data: Any) -> Any:
        if isinstance(data, dict) and True in data and "on" not in data:
            data = {("on" if k is True else k): v for k, v in data.items()}  # (YAML 1.1's on)
        return data

    @model_validator(mode="after")
    def _one(self) -> Stream:
        if self.task is not None:
            self.tasks = [self.task, *self.tasks]
            self.task = None
        if not self.tasks:
            raise ValueError("give `task` or `tasks`")
        given = [bool(self.at), self.poisson is not None, self.on is not None]
        if sum(given) != 1:
            raise ValueError("give exactly one of at, poisson or on")
        if self.requesters and self.poisson is None:
            raise ValueError("requesters: only a poisson stream draws requesters")
        return self


class Outage(Model):
    kind: Literal["outage"] = "outage"
    app: str | None = Field(default=None, description="Every tool of this app fails")
    tools: list[str] = Field(default_factory=list, description="Or these tools")
    start: str = Field(alias="from", description="When it starts")
    end: str = Field(alias="to", description="When it ends")
    message: str = "the service is down; try again later"

    @model_validator(mode="after")
    def _what(self) -> Outage:
        if (self.app is None) == (not self.tools):
            raise ValueError("give exactly one of app or tools")
        return self


class Away(Model):
    kind: Literal["out_of_office"] = "out_of_office"
    person: str
    start: str = Field(alias="from")
    end: str = Field(alias="to")
    auto_reply: str | None = None


class Join(Model):
    kind: Literal["join"] = "join"
    at: str
    person: dict[str, Any] = Field(description="A directory entry (id, name, email, role, ...)")


class Leave(Model):
    """A person leaves: from then on they ask nothing, and whoever writes to them gets the
    auto-reply (their directory entry stays: mail to a former colleague is not an error)."""

    kind: Literal["leave"] = "leave"
    at: str
    person: str
    auto_reply: str = "I have left the company; this mailbox is no longer read."


class Reorg(Model):
    """A reorganisation: people change team, manager or role at a time (a directory change,
    on record like any other)."""

    kind: Literal["reorg"] = "reorg"
    at: str
    changes: dict[str, dict[str, str]] = Field(description="Person id -> the fields that "
                                               "change (team, manager, role)")

    @model_validator(mode="after")
    def _fields(self) -> Reorg:
        for pid, fields in self.changes.items():
            bad = sorted(set(fields) - {"team", "manager", "role"})
            if bad:
                raise ValueError(f"changes.{pid}: only team, manager and role change in a "
                                 f"reorganisation, not {bad}")
        return self


WorldEvent = Annotated[Outage | Away | Join | Leave | Reorg, Field(discriminator="kind")]


class SimChecks(Model):
    sla_hours: float | None = Field(default=None, gt=0, description="Every arrival is completed "
                                    "within this many working hours of arriving")
    none_dropped: bool = Field(default=True, description="Every arrival is completed before the "
                               "simulation ends")


class Person(Model):
    """How one person of the company responds, across every request they take part in."""

    person: str
    persona: str = ""
    response: Response | None = None


class Simulation(Model):
    kind: Literal["simulation"] = "simulation"
    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    company: str = Field(description="companies/NAME.yaml beside the file, else a built-in one")
    clock: Clock
    seed: int = 0
    tasks: list[str] = Field(min_length=1, description="Task files and folders (templates), "
                             "relative to this file")
    roster: list[Seat] = Field(min_length=1)
    people: list[Person] = Field(default_factory=list)
    workload: list[Stream] = Field(min_length=1)
    events: list[WorldEvent] = Field(default_factory=list)
    safety: list[SafetyRule] = Field(default_factory=list, description="Safety rules over the "
                                     "whole run: every arrival is graded against them too")
    checks: SimChecks = Field(default_factory=SimChecks)


# times ---------------------------------------------------------------------------------
def _hm(text: str) -> int:
    h, m = text.split(":")
    return int(h) * 60 + int(m)


_SIM_TIME = re.compile(r"^(?:d(\d+)\s+)?(\d{1,2}):(\d{2})$")


@dataclass(frozen=True)
class Calendar:
    """Working days and hours of a simulation: its times, in seconds since its start."""

    start: datetime
    days: int
    hours: tuple[str, str]

    def day(self, n: int) -> datetime:
        """Midnight (local) of the n-th working day (1-based)."""
        d = self.start.replace(hour=0, minute=0, second=0, microsecond=0)
        k = 0
        while True:
            if d.weekday() < 5:
                k += 1
                if k == n:
                    return d
            d += timedelta(days=1)

    @property
    def end_s(self) -> float:
        """The end of the last working day."""
        last = self.day(self.days) + timedelta(minutes=_hm(self.hours[1]))
        return (last - self.start).total_seconds()

    def seconds(self, text: str) -> float:
        """Seconds from the start to a simulation time (``dN HH:MM``, ``HH:MM``, ISO-8601)."""
        m = _SIM_TIME.match(text.strip())
        if m:
            n = int(m.group(1) or 1)
            if not 1 <= n <= self.days:
                raise ValueError(f"{text!r}: day {n} is outside the simulation's "
                                 f"{self.days} working days")
            when = self.day(n) + timedelta(hours=int(m.group(2)), minutes=int(m.group(3)))
        else:
            try:
                when = datetime.fromisoformat(text)
            except ValueError:
                raise ValueError(f"{text!r} is not a time (dN HH:MM, HH:MM or ISO-8601)") \
                    from None
            if when.tzinfo is None:
                when = when.replace(tzinfo=self.start.tzinfo)
        s = (when - self.start).total_seconds()
        if s < 0:
            raise ValueError(f"{text!r} is before the simulation starts")
        return s

    def at(self, seconds: float) -> datetime:
        return self.start + timedelta(seconds=seconds)

    def windows(self) -> list[tuple[float, float]]:
        """Each working day's working hours, in seconds since the start."""
        out = []
        for n in range(1, self.days + 1):
            d = self.day(n)
            a = (d + timedelta(minutes=_hm(self.hours[0])) - self.start).total_seconds()
            b = (d + timedelta(minutes=_hm(self.hours[1])) - self.start).total_seconds()
            if b > 0:
                out.append((max(0.0, a), b))
        return out

    def working_seconds(self, a: float, b: float) -> float:
        """Working seconds between two times."""
        return sum(max(0.0, min(b, hi) - max(a, lo)) for lo, hi in self.windows())

    def from_working(self, w: float) -> float | None:
        """The time after ``w`` working seconds from the start (None: after the end)."""
        for lo, hi in self.windows():
            if w <= hi - lo:
                return lo + w
            w -= hi - lo
        return None


# arrivals ------------------------------------------------------------------------------
@dataclass(slots=True)
class Arrival:
    """One request entering the simulation: a template instantiated, routed, timed."""

    key: str
    """``a0007``: its place in the simulation (also the suffix of its own entity ids)."""
    template: str
    stream: int
    at: float
    """Seconds since the simulation's start."""
    requester: str | None = None
    route: Route = field(default_factory=lambda: Route(agent="?"))
    family: str | None = None


def _route(stream: Stream, sim: Simulation) -> Route:
    if isinstance(stream.to, Route):
        return stream.to
    for seat in sim.roster:
        if stream.to in (seat.id, seat.person):
            return Route(agent=seat.id)
    return Route(agent=stream.to)  # (refused by check_simulation)


def timed_arrivals(sim: Simulation, cal: Calendar) -> list[Arrival]:
    """Every arrival known in advance (fixed times and Poisson streams), in time order,
    numbered; arrivals ``on`` events are made as their events happen."""
    out: list[tuple[float, int, int, str, str | None]] = []
    away = _away_windows(sim, cal)
    for si, s in enumerate(sim.workload):
        turn = 0
        if s.at:
            for t in s.at:
                out.append((cal.seconds(t), si, turn, s.tasks[turn % len(s.tasks)], None))
                turn += 1
        elif s.poisson is not None:
            asking: list[str | None] = list(s.requesters) or [None]
            for who in asking:
                rng = random.Random(zlib.crc32(f"{sim.seed}:{si}:{who}".encode()))
                rate = s.poisson.per_hour / 3600.0
                w = rng.expovariate(rate)
                while (at := cal.from_working(w)) is not None:
                    at = float(round(at))  # (arrivals on whole seconds)
                    if who is None or not any(a <= at < b for a, b in away.get(who, [])):
                        out.append((at, si, turn, s.tasks[turn % len(s.tasks)], who))
                        turn += 1
                    w += rng.expovariate(rate)
    out.sort(key=lambda x: (x[0], x[1], x[2]))
    return [Arrival(f"a{i:04d}", tpl, si, t, who, _route(sim.workload[si], sim),
                    sim.workload[si].family) for i, (t, si, _, tpl, who) in enumerate(out)]


def away(sim: Simulation, cal: Calendar) -> list[tuple[str, float, float, str | None]]:
    """(person, from, to, auto-reply) of every out-of-office period and departure (a
    departure lasts past the simulation's end)."""
    out: list[tuple[str, float, float, str | None]] = []
    for ev in sim.events:
        if isinstance(ev, Away):
            out.append((ev.person, cal.seconds(ev.start), cal.seconds(ev.end), ev.auto_reply))
        elif isinstance(ev, Leave):
            out.append((ev.person, cal.seconds(ev.at), cal.end_s + 365 * 86400, ev.auto_reply))
    return out


def _away_windows(sim: Simulation, cal: Calendar) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {}
    for who, a, b, _ in away(sim, cal):
        out.setdefault(who, []).append((a, b))
    return out


def instantiate(template: Task, arrival: Arrival, cal: Calendar, company_ids: set[tuple[str, str]],
                sim: Simulation, seat_person: str) -> Task:
    """The arrival's own task: the template with its own seed entities renamed (``T1`` ->
    ``T1-<n>``), its requester, the seat's person as the agent, its start at the arrival
    time, and the simulation's out-of-office windows and response settings for its people."""
    n = arrival.key.lstrip("a").lstrip("0") or "0"
    raw = template.model_dump(mode="json")
    own = sorted({row.id for table, rows in template.seed.rows() for row in rows
                  if (table, row.id) not in company_ids}, key=len, reverse=True)
    text = json.dumps(raw)
    renames: list[tuple[str, str]] = [(i, f"{i}-{n}") for i in own]
    if arrival.requester is not None and arrival.requester != template.user.person:
        renames.append((template.user.person, arrival.requester))
    if seat_person != template.agent:
        renames.append((template.agent, seat_person))
    if renames:
        pattern = re.compile("|".join(rf"(?<![\w-]){re.escape(a)}(?![\w-])" for a, _ in renames))
        table = dict(renames)
        text = pattern.sub(lambda m: table[m.group(0)], text)
    data = json.loads(text)
    data["safety"] = [*data.get("safety", []), *(
        {**r.model_dump(mode="json"), "id": f"{SIM_RULE}{r.id}"} for r in sim.safety)]
    start = cal.at(arrival.at)
    shift = start - template.start
    data["id"] = f"{template.id}.{arrival.key}"
    data["start"] = start.isoformat()
    if arrival.family:
        data["family"] = arrival.family
    for ev in data.get("timeline", []):
        if ev.get("at") is not None:  # a clock time of the template: as far from its start
            ev["at_minutes"] = max(0.0, _template_minutes(ev.pop("at"), template))
    for member in [data["user"], *data.get("coworkers", [])]:
        for trig in member.get("triggers", []):
            if trig.get("at") is not None:
                trig["at_minutes"] = max(0.0, _template_minutes(trig.pop("at"), template))
        _shift_response(member, sim, cal, shift)
    # seeded mail and chat of the request: sent at its arrival, as far apart as in the template
    for key in ("emails", "chat"):
        for row in data.get("seed", {}).get(key, []):
            if row.get("id") in {b for _, b in renames} and row.get("sent_at"):
                row["sent_at"] = _shifted(row["sent_at"], shift)
    return Task.model_validate(data)


def _template_minutes(at: str, template: Task) -> float:
    return clock_minutes(at, template.start)


def _shifted(iso: str, shift: timedelta) -> str:
    try:
        return (datetime.fromisoformat(iso.replace("Z", "+00:00")) + shift).isoformat()
    except ValueError:
        return iso


def _shift_response(member: dict[str, Any], sim: Simulation, cal: Calendar,
                    shift: timedelta) -> None:
    """A cast member's response settings: the simulation's for that person, else the
    template's; plus the simulation's out-of-office windows for them."""
    who = member.get("person")
    for p in sim.people:
        if p.person == who:
            if p.response is not None:
                member["response"] = p.response.model_dump(mode="json")
            if p.persona and not member.get("persona"):
                member["persona"] = p.persona
    resp = member.setdefault("response", {})
    ooo = list(resp.get("out_of_office", []))
    for person, a, b, reply in away(sim, cal):
        if person == who:
            ooo.append(OutOfOffice(start=cal.at(a), end=cal.at(b),
                                   auto_reply=reply).model_dump(mode="json"))
    if ooo:
        resp["out_of_office"] = ooo


# loading and checking ------------------------------------------------------------------
@dataclass
class Loaded:
    """A simulation file, checked: the model, its templates by id, its company seed."""

    sim: Simulation
    path: Path
    templates: dict[str, Task]
    company: dict[str, Any]
    calendar: Calendar


def load_simulation(path: str | Path) -> Loaded:
    """Read and check a simulation file; every problem names the file, the field and the
    value (:class:`~coworkenv.sim.TaskFileError`)."""
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
    return check_simulation(sim, p)


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
            from ..agents.factory import parse_agent  # (agents sit above sim: names only)

            parse_agent(s.policy)
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


def simulation_schema() -> dict[str, Any]:
    return Simulation.model_json_schema(by_alias=True)

