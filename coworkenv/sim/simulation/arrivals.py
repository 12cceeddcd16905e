"""Arrivals: the requests entering a simulation, each a task template instantiated at its time.

An arrival's own seed entities (a ticket, a document) get ids of their own (``T1`` becomes
``T1-7`` for the 7th arrival), its times are counted from the arrival, and its requester may
be drawn from a list of people. Arrivals share one workspace (the company's), so one request's
actions can change another's facts.
"""

from __future__ import annotations

import json
import random
import re
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..cases import bind_task
from ..task import OutOfOffice, Task, clock_minutes
from .calendar import Calendar
from .language import SIM_RULE, Away, Leave, Route, Simulation, Stream


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
    case: dict[str, str] | None = None
    """The template's case it is bound to (a hand-off's: the one its message named; else
    drawn when it is instantiated)."""
    cause: str | None = None
    """The arrival whose agent's message caused it (a hand-off)."""


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
    time, and the simulation's out-of-office windows and response settings for its people;
    bound to its case (a template with ``cases``: the arrival's, else one drawn for it)."""
    n = arrival.key.lstrip("a").lstrip("0") or "0"
    raw = template.template_data()
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
    if template.cases:
        case = arrival.case or template.cases[random.Random(zlib.crc32(
            f"{sim.seed}:{arrival.key}:case".encode())).randrange(len(template.cases))]
        data = bind_task(data, case)
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


