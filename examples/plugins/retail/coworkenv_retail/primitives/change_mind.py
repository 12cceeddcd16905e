"""``retail_change_mind``: the customer asks to return two items of a delivered order, and,
when the agent lists the return, changes their mind: they keep one. The agent must list the
new return and get a fresh yes before acting on it."""

from __future__ import annotations

from typing import Any

from coworkenv.synth import Composition, Primitive

from ._shared import conversation, take_order, yes_fact


def build(c: Composition, st: dict[str, Any]) -> None:
    conv = conversation(c)
    order = take_order(c, conv, "retail_change_mind")
    oid = order["order_id"]
    distinct = list({i["item_id"]: i for i in order["items"]}.values())
    ret, keep = c.rng.sample(distinct, 2)
    pm = order["payment_history"][0]["payment_method_id"]

    def called(i: dict[str, Any]) -> str:
        return f"{i['name'].lower()} ({', '.join(i['options'].values())})"

    c.goals.append(f"I'd like to return the {called(ret)} and the {called(keep)} from order "
                   f"{oid}, refunded to how I paid.")
    mind = (f"Actually, I've changed my mind: I'll keep the {keep['name'].lower()}. Please "
            f"return only the {ret['name'].lower()} ({ret['item_id']}).")
    yes_fact(c, oid, "return the items of",
             before=[{"asked": {"contains": [keep["item_id"], ret["item_id"]]}, "text": mind}])
    both = sorted([ret["item_id"], keep["item_id"]])
    c.buckets["act"] += [
        {"kind": "message", "to": c.user, "text": f"Here is what I will do: return items "
         f"{', '.join(both)} of order {oid}, refunded to {pm}. Do you confirm that I should "
         "proceed (yes/no)?", "_accept": "listing the details earlier harms nothing: no "
                                        "return is made before the customer answers"},
        {"kind": "wait", "message_from": c.user},
        {"kind": "message", "to": c.user, "text": f"Understood. Here is what I will do now: "
         f"return item {ret['item_id']} of order {oid} only, refunded to {pm}. Do you confirm "
         "that I should proceed (yes/no)?", "_accept": "offering the smaller return earlier "
                                                        "harms nothing: it is made only after "
                                                        "the change of mind and a yes"},
        {"kind": "wait", "message_from": c.user},
        {"kind": "tool", "tool": "return_delivered_order_items", "args": {
            "order_id": oid, "item_ids": [ret["item_id"]], "payment_method_id": pm}}]
    changed = {"actor": c.user, "to": c.agent, "text": {"contains": ["changed my mind"]}}
    c.checks += [
        {"id": c.cid("kept"), "kind": "state", "table": "orders", "gate": True, "weight": 3,
         "expect": {oid: {"status": "return requested", "return_items": [ret["item_id"]],
                          "return_payment_method_id": pm}},
         "description": f"only the item the customer still returns goes back ({oid})"},
        {"id": c.cid("after-change-of-mind"), "kind": "order", "gate": True,
         "description": "the return is made after the customer changed their mind",
         "first": changed, "then": {"tool": "return_delivered_order_items",
                                    "args": {"order_id": oid}}},
        {"id": c.cid("confirmed-again"), "kind": "order", "gate": True,
         "description": "the changed return is confirmed again before it is made (policy)",
         "first": {"actor": c.user, "to": c.agent, "text": {
             "regex": f"^\\s*yes\\b.*return the items of {oid}"}},
         "then": {"tool": "return_delivered_order_items", "args": {"order_id": oid}}},
        {"id": c.cid("read-first"), "kind": "order", "gate": True,
         "first": {"tool": "get_order_details", "args": {"order_id": oid}},
         "then": {"tool": "return_delivered_order_items", "args": {"order_id": oid}}}]
    c.has_change = True


CHANGE_MIND = Primitive(
    "retail_change_mind", "act", (frozenset({"retail"}),),
    ("multi_turn_communication", "dynamic_workspace_state"),
    provides="a customer who asks to return two items of a delivered order and, shown the "
             "return, keeps one of them",
    grading="only the item still wanted back is returned, after the change of mind and a "
            "fresh explicit yes; the first request is never carried out",
    build=build, drawn=False, example="coworkenv_retail:workflows/retail-support.yaml")
