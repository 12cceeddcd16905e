"""The ``report`` primitive: someone who receives the result: the user, a channel or a shared
mailbox. Built once, after every other stage."""

from __future__ import annotations

from typing import Any

from ..primitive import Composition, Primitive, Spec


def build(c: Composition, st: dict[str, Any]) -> None:
    values = [v.text for v in c.values]
    stale = [v.stale for v in c.values if v.stale]
    lines = "; ".join([*(f"{v.name}: {v.text}" for v in c.values),
                       *(o for o, _ in c.outcomes)]) or "all done"
    r = c.report
    told: Spec | None = None  # the user told it is done, when the deliverable is a document
    replied = False  # the summary answers the user's emailed request
    if (values and not stale and c.clarified is None and "docs" in c.apps
            and c.rng.random() < 0.3):  # the figures go into the user's tracker
        doc_id = f"doc-{c.tid[-5:]}-tracker"
        title = f"{c.rng.choice(['Weekly', 'Team', 'Open items'])} tracker"
        c.add_seed("docs", {"id": doc_id, "title": title, "owner": c.user,
                               "content": "Figures and updates:",
                               "confidentiality": "internal",
                               "permissions": {c.agent: "edit"}})
        # found first, so the edit follows what was learned at once
        c.buckets["setup"].append({"kind": "tool", "tool": "docs_search",
                                      "args": {"query": "tracker"}})
        step = {"kind": "tool", "tool": "docs_edit", "args": {
            "doc_id": doc_id, "append": f"Summary: {lines}."}}
        sel: dict[str, Any] = {"tool": "docs_edit", "args": {"doc_id": doc_id}}
        chk: Spec = {"kind": "doc", "doc": doc_id, "content_contains": values}
        if r["via"] == "chat":
            told = {"kind": "tool", "tool": "chat_send_dm", "args": {
                "to": r["to"], "text": f"I updated the {title}."}}
            told_sel: dict[str, Any] = {"tool": "chat_send_dm", "to": r["to"]}
            c.checks.append({"id": c.cid("told"), "kind": "chat_message",
                                "dm_with": r["to"], "sender": c.agent, "gate": True})
        else:
            told = {"kind": "tool", "tool": "email_send", "args": {
                "to": [r["to"]], "subject": f"{title} updated",
                "body": f"I updated the {title}."}}
            told_sel = {"tool": "email_send", "to": r["to"]}
            c.checks.append({"id": c.cid("told"), "kind": "email_sent",
                                "to": r["to"], "sender": c.agent, "gate": True})
        c.checks.append({"id": c.cid("told-after-edit"), "kind": "order",
                            "gate": True, "first": sel, "then": told_sel})
        c.goals.append(c.rng.choice([
            f"Put the figures in my \"{title}\" document and tell me when it's done.",
            f"Add the numbers to the {title} doc, then let me know."]))
    elif r["via"] == "channel":
        step = {"kind": "tool", "tool": "chat_post", "args": {
            "channel": r["channel"], "text": f"Summary: {lines}."}}
        sel = {"tool": "chat_post", "args": {"channel": r["channel"]}}
        chk = {"kind": "chat_message", "channel": r["channel"],
                     "sender": c.agent, "text": {"contains": values,
                                                    "must_not_contain": stale}}
    elif r["via"] == "chat":
        step = {"kind": "tool", "tool": "chat_send_dm", "args": {
            "to": r["to"], "text": f"Summary: {lines}."}}
        sel = {"tool": "chat_send_dm", "to": r["to"]}
        chk = {"kind": "chat_message", "dm_with": r["to"], "sender": c.agent,
               "text": {"contains": values, "must_not_contain": stale}}
    elif c.clarified is None and c.rng.random() < 0.35:  # a reply to the request
        mid = f"m-{c.tid[-5:]}-ask"
        c.add_seed("emails", {"id": mid, "sender": r["to"], "to": [c.agent],
                                 "subject": "Figures for this week",
                                 "body": "Could you pull these together for me? Reply to "
                                         "this email when you have them.",
                                 "thread": mid, "sent_at": "2026-03-02T13:55:00Z"})
        step = {"kind": "tool", "tool": "email_reply", "args": {
            "email_id": mid, "body": f"Summary: {lines}."}}
        sel = {"tool": ["email_reply", "email_send"], "to": r["to"]}  # (a new email is
        # as good as a reply)
        chk = {"kind": "email_sent", "to": r["to"], "sender": c.agent,
               "body": {"contains": values, "must_not_contain": stale}}
        replied = True
    else:
        step = {"kind": "tool", "tool": "email_send", "args": {
            "to": [r["to"]], "subject": "Summary", "body": f"Summary: {lines}."}}
        sel = {"tool": "email_send", "to": r["to"]}
        chk = {"kind": "email_sent", "to": r["to"], "sender": c.agent,
               "body": {"contains": values, "must_not_contain": stale}}
    for _, event in c.outcomes:
        c.checks.append({"id": c.cid("reported-after-change"), "kind": "order",
                            "gate": True, "first": event, "then": sel})
    if c.state.get("next_day", False):
        due = "d4 09:00"  # after the slowest answer and every late change
        c.buckets["tomorrow"].append({"kind": "wait", "until": due})
        c.checks.append({"id": c.cid("not-before-due"), "kind": "never",
                            "gate": True, "select": sel, "window": [0, 3 * 24 * 60 - 1]})
        c.goals.append(c.rng.choice(["It is due on Thursday morning, not before.",
                                           "Don't send it before Thursday at 9."]))
    c.report_steps = [step, *([told] if told else [])]
    c.checks.append({"id": c.cid("reported"), "weight": 3, "gate": True, **chk})
    c.after_approval.append(sel)
    if c.clarified is not None:
        c.checks.append({"id": c.cid("where-asked"), "kind": "order", "gate": True,
                            "first": c.clarified, "then": sel})
        c.goals.append(c.words.choice([
            "Send me a summary with the figures when it's all done.",
            "Once everything is in, send me the figures.",
            "When it's all done, send me a summary with the numbers."]))
    elif told is not None:
        pass  # (its goal is said above)
    elif replied:
        c.goals.append(c.rng.choice(["Reply to my email with the figures.",
                                           "Answer my email with the numbers."]))
    elif r["via"] == "chat":
        c.goals.append(c.rng.choice(["DM me a summary with the figures.",
                                           "Then send me the figures on chat."]))
    else:
        c.goals.append(c.rng.choice(["Email me a summary with the figures.",
                                           "Then mail me the numbers."]))


REPORT = Primitive(
    "report", "finish", (frozenset({"chat", "email"}),), ("tool_coordination",),
    provides=("someone who receives the result: the user, a channel or a shared mailbox"),
    grading=("a gate: every figure, current values only, at the right destination"),
    build=build, last=True)
