"""The ``work_ticket`` primitive: an open ticket a colleague filed, named in the instruction,
whose description alone says what to do (note the figures learned and resolve it, or hand it
on)."""

from __future__ import annotations

from typing import Any

from ..palette import (
    TOPICS,
    queue_id,
)
from ..primitive import Composition, Primitive


def build(c: Composition, st: dict[str, Any]) -> None:
    """An open ticket a colleague filed, named in the instruction; what it asks is in its
    description only: the figures learned put in a comment and the ticket resolved, or
    (when the plan learns none) the ticket handed to someone and set in progress."""
    requester = c.person()
    tid = f"T{c.rng.randint(100, 999)}"
    team = str(c.directory[requester].get("team") or "team").title()
    qname = c.fresh_name("queues", [f"{team} requests", f"{team} service desk",
                                    f"{team} intake"], draw=False)
    queue = queue_id(qname)
    topic = c.rng.choice(c.req.parameters.ticket_topics + TOPICS)
    values = c.values
    if values:
        names = ", ".join(f"the {v.name}" for v in values)
        ask = (f"Please put {names} in a comment on this ticket once you have "
               f"{'it' if len(values) == 1 else 'them'}, then resolve it.")
    else:
        heir = c.person()
        role = str(c.directory[heir].get("role") or "colleague").lower()
        ask = (f"Please hand this to {c.directory[heir]['name']}, our {role}, and set "
               "it in progress.")
    c.add_seed("queues", {"id": queue, "name": qname, "members": [c.agent]})
    c.add_seed("tickets", {"id": tid, "title": topic, "reporter": requester,
                              "queue": queue, "priority": "medium",
                              "description": f"{topic}. {ask}"})
    read = {"kind": "tool", "tool": "tickets_read", "args": {"ticket_id": tid}}
    c.buckets["setup"].insert(0, read)  # (what to do is in the ticket: read it first)
    if values:
        text = "; ".join(f"{v.name}: {v.text}" for v in values)
        c.buckets["act"] += [
            {"kind": "tool", "tool": "tickets_comment", "args": {
                "ticket_id": tid, "text": f"{text}."}},
            {"kind": "tool", "tool": "tickets_update", "args": {
                "ticket_id": tid, "status": "resolved"}}]
        c.checks.append({"id": c.cid("ticket-resolved"), "kind": "ticket",
                            "ticket": tid, "status": "resolved", "gate": True,
                            "weight": 2})
        c.checks += [{"id": c.cid("ticket-noted"), "kind": "ticket", "ticket": tid,
                         "comment_contains": v.text, "gate": True} for v in values]
        c.checks += [{"id": c.cid("ticket-not-stale"), "kind": "never", "gate": True,
                         "select": {"tool": "tickets_comment", "args": {"ticket_id": tid},
                                    "text": {"contains": [v.stale]}}}
                        for v in values if v.stale]
        c.checks.append({"id": c.cid("noted-then-resolved"), "kind": "order",
                            "gate": True,
                            "first": {"tool": "tickets_comment", "args": {"ticket_id": tid}},
                            "then": {"tool": "tickets_update",
                                     "args": {"ticket_id": tid, "status": "resolved"}}})
        c.after_approval += [{"tool": "tickets_comment", "args": {"ticket_id": tid}},
                                {"tool": "tickets_update",
                                 "args": {"ticket_id": tid, "status": "resolved"}}]
    else:
        c.buckets["setup"] += [
            {"kind": "tool", "tool": "tickets_assign", "args": {
                "ticket_id": tid, "assignee": heir}},
            {"kind": "tool", "tool": "tickets_update", "args": {
                "ticket_id": tid, "status": "in_progress"}}]
        c.checks.append({"id": c.cid("ticket-handed"), "kind": "ticket",
                            "ticket": tid, "assignee": heir, "status": "in_progress",
                            "gate": True, "weight": 2})
    c.checks.append({"id": c.cid("ticket-read-first"), "kind": "order",
                        "gate": True, "first": {"tool": "tickets_read",
                                                "args": {"ticket_id": tid}},
                        "then": {"tool": ["tickets_update", "tickets_comment",
                                          "tickets_assign"], "args": {"ticket_id": tid}}})
    c.goals.append(c.rng.choice([
        f"{c.name(requester)} filed {tid} in the {qname} queue: do what it asks.",
        f"Take care of ticket {tid} ({topic}) for {c.name(requester)}.",
        f"There's an open ticket from {c.name(requester)}, {tid}: handle it."]))


WORK_TICKET = Primitive(
    "work_ticket", "act", (frozenset({"tickets"}),), ("tool_coordination",),
    provides=("an open ticket a colleague filed, named in the instruction, whose description "
              "alone says what to do (note the figures learned and resolve it, or hand it on)"),
    grading=("gates: read before it is changed; as its description asks; noted before resolved"),
    build=build)
