"""``retail_return``: the customer returns items of a delivered order; the refund goes to the
original payment method."""

from __future__ import annotations

from typing import Any

from coworkenv.synth import Composition, Primitive

from ._shared import confirmed_write, conversation, take_order


def build(c: Composition, st: dict[str, Any]) -> None:
    conv = conversation(c)
    order = take_order(c, conv, "retail_return")
    oid = order["order_id"]
    items = order["items"]
    k = c.rng.randint(1, min(2, len(items)))
    back = c.rng.sample(items, k)
    pm = order["payment_history"][0]["payment_method_id"]
    names = " and the ".join(f"{i['name'].lower()} ({', '.join(i['options'].values())})"
                             for i in back)
    c.goals.append(c.rng.choice([
        f"I want to return the {names} from order {oid}, refunded to how I paid.",
        f"Order {oid} arrived, but I'd like to send back the {names}. Please refund it to my "
        "original payment method."]))
    ids = sorted(i["item_id"] for i in back)
    confirmed_write(c, order, "return_delivered_order_items",
                    {"order_id": oid, "item_ids": ids, "payment_method_id": pm},
                    "return the items of", f"return items {', '.join(ids)} of order {oid}, "
                    f"refunded to {pm}.",
                    {"status": "return requested", "return_items": ids,
                     "return_payment_method_id": pm})


RETURN = Primitive(
    "retail_return", "act", (frozenset({"retail"}),),
    ("multi_turn_communication", "safety_sensitive_handling"),
    provides="a customer with a delivered order, some items of which they want to return for "
             "a refund to the original payment method",
    grading="exactly those items returned, refunded to the original payment method, only "
            "after the customer's explicit yes, after authentication and reading the order",
    build=build, drawn=False, example="coworkenv_retail:workflows/retail-support.yaml")
