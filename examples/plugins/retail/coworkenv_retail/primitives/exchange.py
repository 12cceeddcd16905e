"""``retail_exchange``: the customer exchanges an item of a delivered order for another
variant of the same product (one option different); the agent finds the variant's item id
in the catalogue, and the price difference goes through the original payment method."""

from __future__ import annotations

from typing import Any

from coworkenv.synth import Composition, Primitive

from ._shared import confirmed_write, conversation, swaps, take_order


def build(c: Composition, st: dict[str, Any]) -> None:
    conv = conversation(c)
    order = take_order(c, conv, "retail_exchange")
    oid = order["order_id"]
    item, var, option = c.rng.choice(swaps(order))
    pm = order["payment_history"][0]["payment_method_id"]
    old, new = item["options"][option], var["options"][option]
    name = item["name"].lower()
    c.goals.append(c.rng.choice([
        f"The {name} in order {oid} is the wrong {option}: I'd like to exchange it for the "
        f"same one in {new} {option} instead of {old}. Use the payment method I paid with "
        "for any difference.",
        f"Can I swap the {name} from order {oid} for the {new} one (mine is {old})? Any "
        "price difference on my original payment method, please."]))
    c.buckets["writes"].append({"kind": "tool", "tool": "get_product_details",
                                "args": {"product_id": item["product_id"]}})
    diff = round(var["price"] - item["price"], 2)
    confirmed_write(c, order, "exchange_delivered_order_items",
                    {"order_id": oid, "item_ids": [item["item_id"]],
                     "new_item_ids": [var["item_id"]], "payment_method_id": pm},
                    "exchange", f"exchange item {item['item_id']} ({name}, {option} {old}) of "
                    f"order {oid} for item {var['item_id']} ({option} {new}); the price "
                    f"difference of {diff:+.2f} goes through {pm}.",
                    {"status": "exchange requested", "exchange_items": [item["item_id"]],
                     "exchange_new_items": [var["item_id"]],
                     "exchange_payment_method_id": pm, "exchange_price_difference": diff})


EXCHANGE = Primitive(
    "retail_exchange", "act", (frozenset({"retail"}),),
    ("multi_turn_communication", "tool_coordination"),
    provides="a customer with a delivered order who wants one item in another variant of the "
             "same product (one option different), the difference paid with how they paid",
    grading="the order's exchange request names exactly that item and the new variant's item "
            "id, the original payment method and the price difference; only after the "
            "customer's explicit yes, after authentication and reading the order",
    build=build, drawn=False, example="coworkenv_retail:workflows/retail-support.yaml")
