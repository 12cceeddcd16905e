"""The ``move_meeting`` primitive: a meeting already on the agent's calendar that an attendee
asks to move mid-task (or to invite a stand-in instead of them, or to hold in another room)."""

from __future__ import annotations

from typing import Any

from ..palette import (
    LATE,
    MEETINGS,
    ROOMS,
    utc,
)
from ..primitive import Composition, Primitive, Spec


def build(c: Composition, st: dict[str, Any]) -> None:
    """A meeting already on the agent's calendar that an attendee asks to change: its
    time, by default; variant ``swap``: the attendee cannot come and names a colleague to
    invite in their place; ``room``: its room is no longer available and the attendee
    names another."""
    variant = st.get("variant", "")
    asker, other = c.person(), c.person()
    title = c.fresh_name("calendar", c.req.parameters.meeting_titles, MEETINGS)
    dur = c.rng.choice([30, 60])
    old = c.rng.choice([10, 11, 14]) * 60
    new = old + c.rng.choice([-60, 60, 120])
    eid = f"ev-{c.tid[-5:]}-{c.n}"
    c.n += 1
    event: Spec = {
        "id": eid, "title": title, "organizer": c.agent,
        "start": utc(4, old // 60), "end": utc(4, (old + dur) // 60, (old + dur) % 60),
        "attendees": {asker: "accepted", other: "accepted"}}
    room, new_room = c.rng.sample(ROOMS, 2) if variant == "room" else ("", "")
    if room:
        event["location"] = f"{room} room"
    c.add_seed("calendar", event)
    asked = {"actor": asker, "to": c.agent, "text": {"contains": [title]}}
    update: Spec = {"event_id": eid}
    if variant == "swap":
        stand = c.person()
        text = (f"I can't make Friday's \"{title}\" after all. Could you invite "
                f"{c.directory[stand]['name']} instead of me? They know the topic.")
        update |= {"add_attendees": [stand], "remove_attendees": [asker]}
        checks: list[Spec] = [{  # (no order by id: --fresh-people renames them)
            "id": c.cid("swapped"), "kind": "sql", "gate": True, "weight": 2,
            "query": f"SELECT count(*), sum(person IN ('{other}', '{stand}')) FROM "
                     f"calendar_attendees WHERE event_id = '{eid}'", "expect": [[2, 2]]}]
        outcome = f"{c.name(stand)} goes to \"{title}\" instead of {c.name(asker)}"
        goal = c.rng.choice([
            f"I organise \"{title}\" on Friday; if an attendee can't come and sends "
            "someone in their place, change the invitation.",
            f"Keep the guest list of my Friday \"{title}\" up to date with who will "
            "actually be there."])
    elif variant == "room":
        text = (f"The {room} room is closed for repairs on Friday. Can we hold "
                f"\"{title}\" in the {new_room} room instead?")
        update["location"] = f"{new_room} room"
        checks = [{
            "id": c.cid("room"), "kind": "sql", "gate": True, "weight": 2,
            "query": f"SELECT count(*) FROM calendar_events WHERE id = '{eid}' AND "
                     f"location LIKE '%{new_room}%' AND location NOT LIKE '%{room}%'",
            "expect": [[1]]}]
        outcome = f"\"{title}\" is now in the {new_room} room"
        goal = c.rng.choice([
            f"I organise \"{title}\" on Friday; if its room changes, update the "
            "invitation.",
            f"Make sure my Friday \"{title}\" says where it really takes place."])
    else:
        new_et = f"{new // 60}:{new % 60:02d}"
        text = (f"Could we move Friday's \"{title}\" to {new_et} New York time? Sorry "
                "for the shuffle.")
        update |= {"start": utc(4, new // 60, new % 60),
                   "end": utc(4, (new + dur) // 60, (new + dur) % 60)}
        checks = [{"id": c.cid("moved"), "kind": "calendar_event",
                   "title_contains": title, "start": utc(4, new // 60, new % 60),
                   "gate": True, "weight": 2}]
        outcome = f"\"{title}\" moved to {new_et}"
        goal = c.rng.choice([
            f"I organise \"{title}\" on Friday; if someone asks to move it, do.",
            f"Attendees of my Friday \"{title}\" may want another time: accommodate "
            "them."])
    c.timeline.append({"at": LATE, "actor": asker, "action": {
        "kind": "message", "to": c.agent, "text": text}})
    c.member(asker)
    c.buckets["late"] += [
        {"kind": "wait", "message_from": asker},
        {"kind": "tool", "tool": "calendar_list_events",
         "args": {"start": utc(4, 0), "end": utc(5, 0)}},
        {"kind": "tool", "tool": "calendar_update_event", "args": update}]
    c.outcomes.append((outcome, asked))
    c.checks += [*checks,
                    {"id": c.cid(f"{'changed' if variant else 'moved'}-when-asked"),
                     "kind": "order", "gate": True, "first": asked,
                     "then": {"tool": "calendar_update_event", "args": {"event_id": eid}}}]
    c.goals.append(goal)


MOVE_MEETING = Primitive(
    "move_meeting", "depend", (frozenset({"calendar"}),), ("dynamic_workspace_state",),
    provides=("a meeting already on the agent's calendar that an attendee asks to move mid-task "
              "(or to invite a stand-in instead of them, or to hold in another room)"),
    grading=("gates: changed only after the request, as asked; the summary says so"),
    build=build, variants={"swap": "calendar", "room": "calendar"})
