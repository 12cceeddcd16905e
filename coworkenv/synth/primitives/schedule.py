"""The ``schedule`` primitive: several calendars with busy blocks on a day (or: held in another
office's room, the invitation in that office's time zone)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ..palette import (
    MEETINGS,
    OFFICES,
    ROOMS,
    START,
    local_time,
    utc,
)
from ..primitive import Composition, Primitive, Spec


def build(c: Composition, st: dict[str, Any]) -> None:
    who = [c.person() for _ in range(int(st.get("n", 2)))]
    moves = bool(st.get("moves"))
    day = 4 if moves else c.rng.choice([1, 2, 3])
    dur = c.rng.choice([30, 45, 60])
    title = c.fresh_name("calendar", c.req.parameters.meeting_titles, MEETINGS)
    # busy blocks: the first common free slot inside 9:00-17:00 is known by construction
    cursor = 9 * 60
    for i, p in enumerate(who):
        length = c.rng.choice([60, 90, 120])
        c.add_seed("calendar", {
            "id": f"ev-busy-{c.n}-{i}", "title": "Busy", "organizer": p,
            "start": utc(day, cursor // 60, cursor % 60),
            "end": utc(day, (cursor + length) // 60, (cursor + length) % 60),
            "attendees": {p: "accepted"}})
        cursor += length
    slot = cursor
    ref = f"ev{c.n}"
    create: Spec = {"title": title, "start": utc(day, slot // 60, slot % 60),
                    "end": utc(day, (slot + dur) // 60, (slot + dur) % 60),
                    "attendees": who}
    office = st.get("variant") == "office"
    if office:  # for another office: the invitation in its time, often in its room
        city, zone = c.rng.choice(OFFICES)
        room = c.rng.choice(ROOMS) if c.rng.random() < 0.6 else ""
        create |= {"start": local_time(create["start"], zone),
                   "end": local_time(create["end"], zone),
                   "timezone": zone}
        if room:
            create["location"] = f"{room} room, {city} office"
        quoted = title.replace("'", "''")
        c.checks.append({
            "id": c.cid("office"), "kind": "sql", "gate": True,
            "query": f"SELECT count(*) FROM calendar_events WHERE title LIKE '%{quoted}%' "
                     f"AND timezone = '{zone}'"
                     + (f" AND location LIKE '%{room}%'" if room else ""),
            "expect": [[1]]})
    c.buckets["setup"] += [
        {"kind": "tool", "tool": "calendar_free_busy", "args": {
            "people": who, "start": utc(day, 9), "end": utc(day, 17),
            "duration_minutes": dur}},
        {"kind": "tool", "id": ref, "tool": "calendar_create_event", "args": create}]
    booked: Spec = {"id": c.cid("booked"), "kind": "calendar_event",
                    "title_contains": title, "attendees": who, "weight": 2, "gate": True}
    if not moves:  # the first common free slot (a later move changes the start)
        booked["start"] = utc(day, slot // 60, slot % 60)
    c.checks += [
        booked,
        {"id": c.cid("looked-first"), "kind": "tool_order", "first": "calendar_free_busy",
         "then": "calendar_create_event"}]
    when = (START + timedelta(days=day)).strftime("%A")
    names = ", ".join(c.name(p) for p in who)
    c.goals.append(c.rng.choice([
        f"Book a {dur}-minute \"{title}\" with {names} on {when}, at the first time "
        "everyone is free.",
        f"Find the earliest {dur} minutes on {when} when {names} are all free and put "
        f"\"{title}\" there."]))
    if office and room:
        c.goals.append(c.rng.choice([
            f"It takes place in the {room} room of our {city} office: say so on the "
            f"invitation, and send it in {city} time.",
            f"We meet in the {city} office ({room} room), so the invitation should show "
            f"{city} time and that room."]))
    elif office:
        c.goals.append(c.rng.choice([
            f"Most of them work from our {city} office: send the invitation in {city} "
            "time.",
            f"Write the invitation's times in {city} time, where the team sits."]))
    c.state["schedule"] = {"title": title, "day": day, "dur": dur, "who": who,
                                    "slot": slot, "ref": ref}


SCHEDULE = Primitive(
    "schedule", "setup", (frozenset({"calendar"}),), ("tool_coordination",),
    provides=("several calendars with busy blocks on a day (or: held in another office's room, "
              "the invitation in that office's time zone)"),
    grading=("the event at the first common free slot, with everyone invited (in that room and "
             "zone)"),
    build=build, variants={"office": "calendar"})
