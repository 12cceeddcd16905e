"""The ``change_figure`` primitive: the document's figure is corrected mid-task, and its owner
says so."""

from __future__ import annotations

from typing import Any

from ..primitive import Composition, Primitive


def build(c: Composition, st: dict[str, Any]) -> None:
    d = c.state["lookup_doc"][0]
    v = next(x for x in c.values if x.text == d["amount"])
    lo, hi = c.req.parameters.amounts
    new = c.fresh_money(lo, hi)
    hh, mm = c.rng.choice([(15, 0), (15, 30), (16, 0)])
    at, told = f"d2 {hh}:{mm:02d}", f"d2 {hh}:{mm + 1:02d}"
    c.timeline += [
        {"id": f"corrected-{c.n}", "at": at, "actor": d["owner"], "action": {
            "kind": "tool", "tool": "docs_edit", "args": {
                "doc_id": d["id"], "content": d["content"].replace(d["amount"], new)
                + " Corrected."}}},
        {"at": told, "actor": d["owner"], "action": {
            "kind": "message", "to": c.agent,
            "text": f"Heads-up: I corrected the {d['metric']} in \"{d['title']}\"."}}]
    c.member(d["owner"])
    c.buckets["depend"] += [
        {"kind": "wait", "message_from": d["owner"]},
        {"kind": "tool", "tool": "docs_read", "args": {"doc_id": d["id"]}}]
    c.has_change = True
    v.stale, v.text = v.text, new
    v.source = {"timeline": f"corrected-{c.n}"}
    after = (24 * 60 + (hh - 9) * 60 + mm) + 1
    c.checks.append({"id": c.cid("no-stale"), "kind": "never", "gate": True,
                        "description": "the old figure is not stated after the change",
                        "select": {"text": {"contains": [v.stale]}},
                        "window": [after, 5 * 24 * 60]})
    d["amount"] = new
    d["content"] = d["content"].replace(v.stale, new)
    c.checks = [c for c in c.checks if not (
        c["kind"] == "order" and c.get("then", {}).get("text", {}).get("contains") ==
        [v.stale])]
    c.gate_value(v)
    c.goals.append("Figures may still be corrected today: use the current ones.")


CHANGE_FIGURE = Primitive(
    "change_figure", "depend", (frozenset({"docs"}),), ("dynamic_workspace_state",),
    provides=("the document's figure is corrected mid-task, and its owner says so"),
    grading=("gates: the new figure only after the change; the old one never in the result"),
    build=build, needs=("lookup_doc",))
