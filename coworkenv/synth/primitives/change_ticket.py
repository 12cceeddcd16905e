"""The ``change_ticket`` primitive: the owner of an existing ticket hands it on mid-task (or
asks to raise its priority, move it to another team's queue, or correct its amount)."""

from __future__ import annotations

from typing import Any

from ...workspace.text import as_number
from ..palette import (
    LATE,
    TOPICS,
    queue_id,
)
from ..primitive import Composition, Primitive, Spec


def build(c: Composition, st: dict[str, Any]) -> None:
    """An existing ticket whose owner asks for a change mid-task: hand it to a colleague,
    by default; variant ``urgent``: raise its priority; ``route``: move it to another
    team's queue; ``amount``: correct the figure in its amount field."""
    variant = st.get("variant", "")
    owner = c.person()
    topic = c.rng.choice(TOPICS)
    tid = f"T{c.rng.randint(20, 90)}"
    ticket: Spec = {"id": tid, "title": topic, "reporter": c.user, "assignee": owner,
                    "priority": "medium"}
    handed = {"actor": owner, "to": c.agent, "text": {"contains": [tid]}}
    update: Spec = {"ticket_id": tid}  # (what each variant's tickets_update sets)
    step: Spec = {"kind": "tool", "tool": "tickets_update", "args": update}
    if variant == "urgent":
        why = c.rng.choice(["the whole sales team is blocked by it",
                               "a customer demo depends on it tomorrow",
                               "it now stops the month-end payments"])
        prio = c.rng.choice(["high", "urgent"])
        text = f"{tid} ({topic}) just became urgent: {why}. Please raise it to {prio}."
        update["priority"] = prio
        check: Spec = {"id": c.cid("priority"), "kind": "ticket", "ticket": tid,
                       "priority": prio, "gate": True}
        outcome = f"{tid} is now {prio} priority"
        goal = f"Keep {tid}'s priority where its owner says it should be."
    elif variant == "route":
        team = str(c.directory[owner].get("team") or "operations")
        other = next((str(r.get("team")) for r in c.directory.values()
                      if r.get("team") and r.get("team") != team
                      and not r.get("external")), "facilities")
        name = c.fresh_name("queues", [f"{other.title()} requests",
                                       f"{other.title()} service desk",
                                       f"{other.title()} intake"], draw=False)
        queue = queue_id(name)
        c.add_seed("queues", {"id": queue, "name": name, "members": [owner]})
        text = (f"{tid} ({topic}) isn't ours to fix: the {other} team handles these. "
                f"Please move it to their \"{name}\" queue.")
        update["queue"] = queue
        check = {"id": c.cid("routed"), "kind": "ticket", "ticket": tid,
                 "queue": queue, "gate": True}
        outcome = f"{tid} is in the {name} queue"
        goal = f"Make sure {tid} sits in the queue its owner says it belongs in."
    elif variant == "amount":
        qname = c.fresh_name("queues", ["Purchase requests", "Purchasing",
                                        "Procurement requests"], draw=False)
        queue = queue_id(qname)
        c.add_seed("queues", {"id": queue, "name": qname,
                                 "fields": {"amount": "number"},
                                 "members": [owner, c.agent]})
        was = c.fresh_money(*c.req.parameters.amounts)
        now = c.fresh_money(*c.req.parameters.amounts)
        ticket |= {"queue": queue, "fields": {"amount": as_number(was)}}
        text = (f"The quote behind {tid} ({topic}) changed from {was} to {now}. Please "
                "correct the amount on the ticket.")
        update["fields"] = {"amount": now}
        check = {"id": c.cid("amount"), "kind": "ticket", "ticket": tid,
                 "fields": {"amount": now}, "gate": True}
        outcome = f"{tid}'s amount is now {now}"
        goal = f"Keep the amount on {tid} in line with what its owner tells you."
    else:
        heir = c.person()
        text = (f"I'm moving to another project today. Please hand {tid} ({topic}) to "
                f"{c.name(heir)}.")
        step = {"kind": "tool", "tool": "tickets_assign",
                "args": {"ticket_id": tid, "assignee": heir}}
        check = {"id": c.cid("reassigned"), "kind": "ticket", "ticket": tid,
                 "assignee": heir, "gate": True}
        outcome = f"{tid} is now with {c.name(heir)}"
        goal = c.words.choice([f"Keep {tid} with whoever is responsible for it today.",
                             f"{tid} may change hands today; make sure it follows.",
                             f"If {tid}'s owner hands it on, see that it gets there."])
    c.add_seed("tickets", ticket)
    c.timeline.append({"at": LATE, "actor": owner, "action": {
        "kind": "message", "to": c.agent, "text": text}})
    c.member(owner)
    c.buckets["late"] += [
        {"kind": "wait", "message_from": owner},
        {"kind": "tool", "tool": "tickets_read", "args": {"ticket_id": tid}}, step]
    c.outcomes.append((outcome, handed))
    c.checks += [
        check,
        {"id": c.cid(f"{'changed' if variant else 'reassigned'}-when-asked"),
         "kind": "order", "gate": True, "first": handed,
         "then": {"tool": step["tool"], "args": {"ticket_id": tid}}}]
    c.goals.append(goal)


CHANGE_TICKET = Primitive(
    "change_ticket", "depend", (frozenset({"tickets"}),), ("dynamic_workspace_state",),
    provides=("the owner of an existing ticket hands it on mid-task (or asks to raise its "
              "priority, move it to another team's queue, or correct its amount)"),
    grading=("a gate: changed as asked, after the request"),
    build=build, variants={"urgent": "tickets", "route": "tickets", "amount": "tickets"})
