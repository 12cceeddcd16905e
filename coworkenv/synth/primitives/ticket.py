"""The ``ticket`` primitive: a queue with typed fields, required fields and its own workflow."""

from __future__ import annotations

from typing import Any

from ..palette import (
    TOPICS,
    metric_of,
    queue_id,
)
from ..primitive import Composition, Primitive


def build(c: Composition, st: dict[str, Any]) -> None:
    topic = (metric_of(st["step"]).capitalize() + " request") if st.get("step") else \
        c.rng.choice(c.req.parameters.ticket_topics + TOPICS)
    assignee = c.person()
    team = str(c.directory[assignee].get("team") or "service").title()
    qname = c.fresh_name("queues", [f"{team} requests", f"{team} service desk",
                                    f"{team} intake"], draw=False)
    queue = queue_id(qname)
    amount_v = c.values[0] if c.values else None
    amount = amount_v.text if amount_v else c.fresh_money(*c.req.parameters.amounts)
    stated = ", ".join(v.text for v in c.values) or amount
    code = f"CC-{c.rng.randint(100, 999)}"
    c.add_seed("queues", {"id": queue, "name": qname,
                             "fields": {"amount": "number", "cost_center": "text"},
                             "required": ["amount", "cost_center"],
                             "transitions": {"open": ["in_progress"],
                                             "in_progress": ["resolved", "open"],
                                             "resolved": ["closed", "open"],
                                             "closed": ["open"]},
                             "members": [assignee]})
    tref = f"t{c.n}"
    c.buckets["act" if c.values else "setup"] += [
        {"kind": "tool", "tool": "tickets_search", "args": {"query": topic.split()[0]}},
        {"kind": "tool", "tool": "tickets_list_queues", "args": {}},
        {"kind": "tool", "id": tref, "tool": "tickets_create", "args": {
            "title": topic, "description": f"{topic}: {stated}, cost center {code}.",
            "queue": queue, "fields": {"amount": amount, "cost_center": code},
            "assignee": assignee}},
        {"kind": "tool", "tool": "tickets_update", "args": {
            "ticket_id": f"${{{tref}.id}}", "status": "in_progress"}},
        {"kind": "tool", "tool": "tickets_comment", "args": {
            "ticket_id": f"${{{tref}.id}}", "text": f"Working on it. Figures: {stated}."}},
        {"kind": "tool", "tool": "tickets_update", "args": {
            "ticket_id": f"${{{tref}.id}}", "status": "resolved"}},
        {"kind": "tool", "tool": "tickets_update", "args": {
            "ticket_id": f"${{{tref}.id}}", "status": "closed"}}]
    c.checks.append({"id": c.cid("ticket-done"), "kind": "ticket", "find": {
        "queue": queue, "fields": {"amount": amount}}, "status": "closed",
        "assignee": assignee, "fields": {"cost_center": code}, "weight": 2, "gate": True,
        "comment_contains": "Figures"})
    for a, b in (("in_progress", "resolved"), ("resolved", "closed")):
        c.checks.append({"id": c.cid("lifecycle"), "kind": "order", "gate": True,
                            "first": {"tool": "tickets_update", "args": {"status": a}},
                            "then": {"tool": "tickets_update", "args": {"status": b}}})
    c.after_approval.append({"tool": "tickets_create"})
    what = (f"the {amount_v.name}" if amount_v else f"{amount}")
    c.goals.append(c.rng.choice([
        f"File a \"{topic}\" ticket in the {qname} queue for {what}, cost center {code}, "
        f"assigned to {c.name(assignee)}, and take it through to closed.",
        f"Track the \"{topic}\" request as a ticket in the {qname} queue ({what}, cost center "
        f"{code}) for {c.name(assignee)} and close it when it's handled."]))


TICKET = Primitive(
    "ticket", "act", (frozenset({"tickets"}),), ("tool_coordination",),
    provides=("a queue with typed fields, required fields and its own workflow"),
    grading=("the ticket found by its fields, in the queue, at the end of its lifecycle"),
    build=build)
