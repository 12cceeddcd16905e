"""``retail_exchange``: the customer exchanges an item of a delivered order for another
variant of the same product (one option different); the agent finds the variant's item id
in the catalogue, and the price difference goes through the original payment method."""

from __future__ import annotations

from typing import Any

from coworkenv.synth import Composition, Primitive

from ._shared import confirmed_write, conversation, pick_swap, take_order


def build(c: Composition, st: dict[str, Any]) -> None:
    conv = conversation(c)
    order = take_order(c, conv, "retail_exchange")
    oid = order["order_id"]
    sw = pick_swap(c, order)
    item, var, pm = sw.item, sw.variant, sw.payment_method
    c.goals.append(c.rng.choice([
        f"The {sw.name} in order {oid} is the wrong {sw.option}: I'd like to exchange it for "
        f"the same one in {sw.new} {sw.option} instead of {sw.old}. Use the payment method I "
        "paid with for any difference.",
        f"Can I swap the {sw.name} from order {oid} for the {sw.new} one (mine is {sw.old})? "
        "Any price difference on my original payment method, please."]))
    confirmed_write(c, order, "exchange_delivered_order_items",
                    {"order_id": oid, "item_ids": [item["item_id"]],
                     "new_item_ids": [var["item_id"]], "payment_method_id": pm},
                    "exchange", f"exchange item {item['item_id']} ({sw.name}, {sw.option} "
                    f"{sw.old}) of order {oid} for item {var['item_id']} ({sw.option} "
                    f"{sw.new}); the price difference of {sw.difference:+.2f} goes through "
                    f"{pm}.",
                    {"status": "exchange requested", "exchange_items": [item["item_id"]],
                     "exchange_new_items": [var["item_id"]],
                     "exchange_payment_method_id": pm,
                     "exchange_price_difference": sw.difference})


EXCHANGE = Primitive(
    "retail_exchange", "act", (frozenset({"retail"}),),
    ("multi_turn_communication", "tool_coordination"),
    provides="a customer with a delivered order who wants one item in another variant of the "
             "same product (one option different), the difference paid with how they paid",
    grading="the order's exchange request names exactly that item and the new variant's item "
            "id, the original payment method and the price difference; only after the "
            "customer's explicit yes, after authentication and reading the order",
    build=build, drawn=False, example="coworkenv_retail:workflows/retail-support.yaml")
