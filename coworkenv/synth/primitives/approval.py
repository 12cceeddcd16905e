"""The ``approval`` primitive: an approver, often in meetings, whose answer depends on the
amount in the document when they reply."""

from __future__ import annotations

import re
from typing import Any

from ..palette import (
    utc,
)
from ..primitive import Composition, Primitive


def build(c: Composition, st: dict[str, Any]) -> None:
    d = c.state["lookup_doc"][0]
    approver = c.person(st.get("role"))
    busy = c.rng.random() < 0.5
    m = c.member(approver)
    delay = c.rng.choice([5, 10, 20])
    m["response"] = {"delay_minutes": [delay, delay], "working_hours": None,
                     "calendar": busy}
    if busy:
        c.add_seed("calendar", {
            "id": f"ev-meet-{c.n}", "title": "Planning offsite", "organizer": approver,
            "start": utc(0, 9), "end": utc(0, c.rng.choice([12, 13, 14])),
            "attendees": {approver: "accepted"}})
    pattern = re.escape(d["metric"].capitalize()) + r": (\$[\d,]+)"
    look = {"app": "docs", "id": d["id"], "field": "content", "pattern": pattern}
    m["facts"].append({"key": f"approve{c.n}", "value": "Which amount?",
                       "keywords": ["approve"], "answers": [
                           {"lookup": look, "mentions_lookup": True,
                            "text": "Approved: {value}. Go ahead."},
                           {"lookup": look, "mentions_lookup": False,
                            "text": f"That is not the amount in \"{d['title']}\" ({{value}})."
                                    " Ask me again with the right one."}]})
    ask = {**c.say(approver, f"Hi {c.name(approver)}, could you approve the "
                                f"{d['metric']} of {d['amount']}?"),
           "_accept_stale": "asking the approver about the old amount is harmless: they "
                            "refuse it, and nothing depends on that answer"}
    wait = {"kind": "wait", "message_from": approver}
    if c.has_change:  # asked once the corrected figure is known
        c.buckets["depend"] += [ask, wait]
    else:  # asked with the other questions
        c.buckets["writes"].append(ask)
        c.buckets["waits"].append(wait)
    c.approved_event = {"actor": approver, "to": c.agent,
                     "text": {"contains": ["Approved", d["amount"]]}}
    if st.get("mark"):  # the approved document's status says so
        for row in c.seed["docs"]:
            if row["id"] == d["id"]:
                row["permissions"] = {**row.get("permissions", {}), c.agent: "edit"}
        mark = {"kind": "tool", "tool": "docs_set_status",
                "args": {"doc_id": d["id"], "status": "approved"}}
        where = c.buckets["depend" if c.has_change else "waits"]
        if not c.has_change:  # awaited first, so that a status set before this
            where.remove(wait)   # wait is one set before the approval
            where.insert(0, wait)
        where.insert(where.index(wait) + 1, mark)  # right after the approval
        c.after_approval.append({"tool": "docs_set_status", "args": {"doc_id": d["id"]}})
        c.checks.append({"id": c.cid("marked"), "kind": "doc", "doc": d["id"],
                            "status": "approved", "gate": True})
        c.goals.append(f"Once it is approved, set \"{d['title']}\" to approved.")
    if not st.get("ruled"):  # (a process's rule says when approval is needed)
        c.goals.append(c.rng.choice([
            f"{c.name(approver)} has to approve the {d['metric']} before anything goes "
            "out.", f"Nothing leaves before {c.name(approver)} approves the "
            f"{d['metric']}."]))


APPROVAL = Primitive(
    "approval", "depend", (frozenset({"docs"}), frozenset({"chat", "email"})),
    ("multi_turn_communication",),
    provides=("an approver, often in meetings, whose answer depends on the amount in the document"
              " when they reply"),
    grading=("a gate: what depends on the approval comes after the approver approved the current "
             "amount"),
    build=build, needs=("lookup_doc",), rank=1)
