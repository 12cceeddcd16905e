"""The ``change_meeting`` primitive: an attendee who asks to move the meeting mid-task."""

from __future__ import annotations

from typing import Any

from ..palette import (
    LATE,
    utc,
)
from ..primitive import Composition, Primitive


def build(c: Composition, st: dict[str, Any]) -> None:
    mt = c.state["schedule"]
    asker = mt["who"][0]
    new = mt["slot"] + c.rng.choice([60, 120])
    new_et = f"{new // 60}:{new % 60:02d}"
    c.timeline.append({"at": LATE, "actor": asker, "action": {
        "kind": "message", "to": c.agent,
        "text": f"Something came up: can we move \"{mt['title']}\" to {new_et} New York "
                "time, same day?"}})
    moved_msg = {"actor": asker, "to": c.agent, "text": {"contains": [mt["title"]]}}
    c.member(asker)
    c.buckets["late"] += [
        {"kind": "wait", "message_from": asker},
        {"kind": "tool", "tool": "calendar_update_event", "args": {
            "event_id": f"${{{mt['ref']}.id}}", "start": utc(mt["day"], new // 60,
                                                              new % 60),
            "end": utc(mt["day"], (new + mt["dur"]) // 60, (new + mt["dur"]) % 60)}}]
    c.outcomes.append((f"\"{mt['title']}\" moved to {new_et}", moved_msg))
    c.checks += [
        {"id": c.cid("moved"), "kind": "calendar_event", "title_contains": mt["title"],
         "start": utc(mt["day"], new // 60, new % 60), "gate": True, "weight": 2},
        {"id": c.cid("moved-when-asked"), "kind": "order", "gate": True,
         "first": moved_msg,
         "then": {"tool": "calendar_update_event"}}]
    c.goals.append(c.words.choice([
        "If anyone asks for another time, move it.",
        "People may ask to move it; if they do, move it.",
        "If an attendee asks for a different time, reschedule it."]))


CHANGE_MEETING = Primitive(
    "change_meeting", "depend", (frozenset({"calendar"}),), ("dynamic_workspace_state",),
    provides=("an attendee who asks to move the meeting mid-task"),
    grading=("gates: moved only after the request, to the time asked"),
    build=build, needs=("schedule",))
