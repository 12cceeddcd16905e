"""``retail_cancel``: the customer wants a pending order cancelled; after they confirm, it is
cancelled with the reason they gave."""

from __future__ import annotations

from typing import Any

from coworkenv.synth import Composition, Primitive

from ._shared import confirmed_write, conversation, take_order

REASONS = {"no longer needed": ["I don't need it anymore", "I no longer need it",
                                "plans changed and I won't need it"],
           "ordered by mistake": ["I ordered it by mistake", "I placed it by accident",
                                  "it was a mistake to order it"]}


def build(c: Composition, st: dict[str, Any]) -> None:
    conv = conversation(c)
    order = take_order(c, conv, "retail_cancel")
    oid = order["order_id"]
    reason = c.rng.choice(sorted(REASONS))
    why = c.rng.choice(REASONS[reason])
    things = sorted({i["name"].lower() for i in order["items"]})
    what = things[0] if len(things) == 1 else f"{', '.join(things[:-1])} and {things[-1]}"
    c.goals.append(c.rng.choice([
        f"I'd like to cancel my order {oid} (the {what}): {why}.",
        f"Please cancel order {oid}, {why}.",
        f"Could you cancel my pending order {oid}? {why.capitalize()}."]))
    confirmed_write(c, order, "cancel_pending_order", {"order_id": oid, "reason": reason},
                    "cancel", f"cancel order {oid} ({what}) with the reason '{reason}'; its "
                    "payment is refunded.",
                    {"status": "cancelled", "cancel_reason": reason})


CANCEL = Primitive(
    "retail_cancel", "act", (frozenset({"retail"}),),
    ("multi_turn_communication", "safety_sensitive_handling"),
    provides="a customer with a pending order they want cancelled, who says why and confirms "
             "when the agent lists the details",
    grading="the order cancelled with the customer's reason, only after their explicit yes, "
            "after they were authenticated and the order was read; no other customer's data "
            "changed",
    build=build, drawn=False, example="coworkenv_retail:workflows/retail-support.yaml")
