"""The ``forward`` primitive: an email from outside that belongs with a colleague (named by
role) or a team's shared mailbox, beside another from the same sender that does not."""

from __future__ import annotations

from typing import Any

from ..palette import (
    VENDORS,
)
from ..primitive import Composition, Primitive, Spec


def build(c: Composition, st: dict[str, Any]) -> None:
    """An invoice that belongs with a colleague (named by role) or a team's shared
    mailbox; a second email from the same sender stays where it is."""
    vendor = c.rng.choice(VENDORS)
    billing = c.outsider(vendor, "billing", "Billing")
    code = f"INV-{c.rng.randint(1000, 9999)}"
    other = f"INV-{c.rng.randint(1000, 9999)}"
    while other == code:
        other = f"INV-{c.rng.randint(1000, 9999)}"
    amount = c.fresh_money(*c.req.parameters.amounts)
    eid = c.email(billing, f"Invoice {code}", f"Hello, please find invoice {code} for "
                     f"{amount}, due in 30 days. Kind regards, {vendor} billing", "11:20")
    c.email(billing, f"Receipt for {other}", f"Payment for invoice {other} was "
               f"received, thank you. {vendor} billing", "11:35")
    pid = c.person()
    role = str(c.directory[pid].get("role", "")) or "colleague"
    steps: list[Spec] = [{"kind": "tool", "tool": "email_search",
                          "args": {"query": vendor}}]
    if c.rng.random() < 0.5:  # to the team's shared mailbox
        team = str(c.directory[pid].get("team") or "ops")
        box = f"{team}-desk@{c.req.company}.test"
        c.add_seed("groups", {"id": f"g-{c.tid[-5:]}-{c.n}",
                                 "name": f"{team.title()} desk", "email": box,
                                 "kind": "mailbox", "members": [pid]})
        steps.append({"kind": "tool", "tool": "directory_get_group", "args": {"group": box}})
        to, where = box, f"the {team} desk's shared mailbox ({box})"
    else:
        steps.append({"kind": "tool", "tool": "directory_search",
                      "args": {"query": role.split()[-1]}})
        to, where = pid, f"our {role.lower()}"
    steps.append({"kind": "tool", "tool": "email_forward", "args": {
        "email_id": eid, "to": [to], "body": f"For payment: {vendor} invoice {code}."}})
    c.buckets["setup"] += steps
    itself = {"group_itself": True} if to != pid else {}  # the mailbox, not a member
    c.checks += [
        {"id": c.cid("forwarded"), "kind": "event", "gate": True, "weight": 2,
         "select": {"tool": "email_forward", "args": {"email_id": eid}, "to": to, **itself}},
        {"id": c.cid("invoice-reached"), "kind": "email_sent", "to": to, **itself,
         "sender": c.agent, "body": {"contains": [code], "must_not_contain": [other]}}]
    c.goals.append(c.rng.choice([
        f"{vendor} sent me an invoice that should go to {where}: forward it.",
        f"Pass the {vendor} invoice in my inbox on to {where}; the receipt stays with me."]))


FORWARD = Primitive(
    "forward", "setup", (frozenset({"email"}),), ("tool_coordination",),
    provides=("an email from outside that belongs with a colleague (named by role) or a team's "
              "shared mailbox, beside another from the same sender that does not"),
    grading=("the right email forwarded to the right recipient; the other not"),
    build=build)
