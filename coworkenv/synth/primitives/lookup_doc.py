"""The ``lookup_doc`` primitive: a document holding a figure."""

from __future__ import annotations

from typing import Any

from ..palette import (
    metric_of,
)
from ..plan import PlanError
from ..primitive import Composition, Primitive, Spec, Value


def build(c: Composition, st: dict[str, Any]) -> None:
    metric = metric_of(st["step"]) if st.get("step") else c.metric()
    amount = c.money("lookup_doc")
    owner = c.person()
    if st.get("variant") == "email":  # the figure came by email: search the inbox, read it
        rid = c.email(owner, f"{metric.capitalize()} figure", f"Hi, for your records: "
                         f"the {metric} is {amount}. {c.name(owner)}", "12:50")
        steps: list[Spec] = [{"kind": "tool", "tool": "email_search",
                              "args": {"query": metric.split()[-1]}},
                             {"kind": "tool", "tool": "email_read",
                              "args": {"email_id": rid}}]
        goals = [f"{c.name(owner)} emailed me the {metric} earlier today.",
                 f"The {metric} is in an email in my inbox."]
    elif st.get("variant") == "channel":  # posted in a channel the agent is in
        channels = c.channels()
        if not channels:
            raise PlanError("no internal channel the agent is in")
        ch = next((c for c in channels if owner in c.get("members", [])), channels[0])["id"]
        c.add_seed("chat", {"id": f"c-{c.tid[-5:]}-{c.n}", "channel": ch,
                               "sender": owner, "text": f"FYI all: the {metric} came in "
                               f"at {amount}.", "sent_at": "2026-03-02T12:40:00Z"})
        c.n += 1
        steps = [{"kind": "tool", "tool": "chat_read", "args": {"channel": ch}}]
        goals = [f"{c.name(owner)} posted the {metric} in #{ch} this morning.",
                 f"The {metric} was shared in #{ch}; use it."]
    else:
        rid = f"doc-{c.tid[-5:]}-{c.n}"
        title = f"{metric.title()} {c.rng.choice(['report', 'sheet', 'summary'])}"
        content = f"{metric.capitalize()}: {amount} (prepared by {c.name(owner)})."
        doc = {"id": rid, "title": title, "owner": owner, "content": content,
               "confidentiality": "internal", "permissions": {c.agent: "view"}}
        c.add_seed("docs", doc)
        c.state.setdefault("lookup_doc", []).append({**doc, "metric": metric, "amount": amount})
        steps = [{"kind": "tool", "tool": "docs_search",
                  "args": {"query": metric.split()[-1]}},
                 {"kind": "tool", "tool": "docs_read", "args": {"doc_id": rid}}]
        goals = [f"The {metric} is in the \"{title}\" document.",
                 f"Look up the {metric} in our documents."]
    c.buckets["writes"][:0] = steps
    read = steps[-1]  # the figure is learned from the last step
    v = Value(metric, amount, {"tool": read["tool"], "args": dict(read["args"])})
    c.learn(v)
    c.goals.append(c.rng.choice(goals))


LOOKUP_DOC = Primitive(
    "lookup_doc", "gather", (frozenset({"docs"}),), ("tool_coordination",),
    provides=("a document holding a figure"),
    grading=("a gate: no write states the figure before the document was read"),
    build=build, variants={"email": "email", "channel": "chat"})
