"""``retail_modify_items``: the customer changes an item of a pending order to another variant
of the same product (one option different) before it ships; the difference goes through the
order's original payment method."""

from __future__ import annotations

from typing import Any

from coworkenv.synth import Composition, Primitive

from ._shared import confirmed_write, conversation, pick_swap, take_order


def build(c: Composition, st: dict[str, Any]) -> None:
    conv = conversation(c)
    order = take_order(c, conv, "retail_modify_items")
    oid = order["order_id"]
    sw = pick_swap(c, order)
    item, var, pm, diff = sw.item, sw.variant, sw.payment_method, sw.difference
    c.goals.append(c.rng.choice([
        f"Before order {oid} ships, I'd like the {sw.name} in {sw.new} {sw.option} instead of "
        f"{sw.old}. Charge or refund any difference on how I paid.",
        f"Can you change the {sw.name} on my pending order {oid} to the {sw.new} one? Mine is "
        f"{sw.old}; use my original payment method for the difference."]))
    items = [dict(i) if i["item_id"] != item["item_id"] else {
        "name": i["name"], "product_id": i["product_id"], "item_id": var["item_id"],
        "price": var["price"], "options": dict(var["options"])} for i in order["items"]]
    history = [*order["payment_history"], {
        "transaction_type": "payment" if diff > 0 else "refund", "amount": abs(diff),
        "payment_method_id": pm}]
    confirmed_write(c, order, "modify_pending_order_items",
                    {"order_id": oid, "item_ids": [item["item_id"]],
                     "new_item_ids": [var["item_id"]], "payment_method_id": pm},
                    "change the items of", f"change item {item['item_id']} ({sw.name}, "
                    f"{sw.option} {sw.old}) of pending order {oid} to item {var['item_id']} "
                    f"({sw.option} {sw.new}); the difference of {diff:+.2f} goes through {pm}.",
                    {"status": "pending (item modified)", "items": items,
                     "payment_history": history})


MODIFY_ITEMS = Primitive(
    "retail_modify_items", "act", (frozenset({"retail"}),),
    ("multi_turn_communication", "tool_coordination"),
    provides="a customer with a pending order who wants one item in another variant of the "
             "same product before it ships, the difference paid with how they paid",
    grading="the order's items and payments as the change makes them, only after the "
            "customer's explicit yes, after authentication and reading the order",
    build=build, drawn=False, example="coworkenv_retail:workflows/retail-support.yaml")
