"""What the retail primitives share: one customer per conversation (drawn from tau2's retail
database so that their orders can serve every request of the plan), their identity asked and
checked once, and the confirmation every update needs (tau2's policy: list the details, get
an explicit yes, then act).

A primitive sees the task through :class:`coworkenv.synth.Composition`; the customer is the
requirement's ``user`` (the person who opens the conversation), the agent is its ``agent``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from coworkenv.synth import Composition
from coworkenv.synth.plan import PlanError

from ..models import from_tau2

KIND = "retail"
"""The key of :attr:`Composition.state` the retail primitives keep their conversation in."""
def swaps(order: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any], str]]:
    """(item, new variant, the option that differs) for each item of ``order`` that has an
    available variant differing in exactly one option, payable with the order's original
    payment method (a gift card must cover the difference)."""
    db = database()
    pm_id = order["payment_history"][0]["payment_method_id"]
    pm = db["users"][order["user_id"]]["payment_methods"].get(pm_id, {})
    out = []
    for item in order["items"]:
        for var in db["products"][item["product_id"]]["variants"].values():
            diff = [k for k, v in var["options"].items() if item["options"].get(k) != v]
            if len(diff) != 1 or not var["available"]:
                continue
            if pm.get("source") == "gift_card" and (pm.get("balance") or 0) < var["price"] - \
                    item["price"]:
                continue
            out.append((item, var, diff[0]))
    return sorted(out, key=lambda t: (t[0]["item_id"], t[1]["item_id"]))


@dataclass
class Swap:
    """One item of an order and the variant it becomes (see :func:`swaps`)."""

    item: dict[str, Any]
    variant: dict[str, Any]
    option: str
    """The option that differs (its old and new values: ``old``, ``new``)."""
    payment_method: str
    """The order's original payment method, which pays or receives the difference."""

    @property
    def old(self) -> str:
        return str(self.item["options"][self.option])

    @property
    def new(self) -> str:
        return str(self.variant["options"][self.option])

    @property
    def name(self) -> str:
        return str(self.item["name"]).lower()

    @property
    def difference(self) -> float:
        return round(self.variant["price"] - self.item["price"], 2)


def pick_swap(c: Composition, order: dict[str, Any]) -> Swap:
    """One of ``order``'s swaps, drawn; the agent looks the product up to find the new
    variant's item id."""
    item, variant, option = c.rng.choice(swaps(order))
    c.buckets["writes"].append({"kind": "tool", "tool": "get_product_details",
                                "args": {"product_id": item["product_id"]}})
    return Swap(item, variant, option, order["payment_history"][0]["payment_method_id"])


def _distinct(order: dict[str, Any]) -> bool:
    return len({i["item_id"] for i in order["items"]}) == len(order["items"])


Fits = Callable[[dict[str, Any]], bool]
NEEDS: dict[str, tuple[str, Fits]] = {
    "retail_cancel": ("pending", lambda o: True),
    "retail_address": ("pending", lambda o: True),
    "retail_modify_items": ("pending", lambda o: _distinct(o) and len(o["payment_history"]) == 1
                            and bool(swaps(o))),
    "retail_return": ("delivered", lambda o: True),
    "retail_exchange": ("delivered", lambda o: _distinct(o) and bool(swaps(o))),
    "retail_change_mind": ("delivered", lambda o: len({i["item_id"] for i in o["items"]}) >= 2),
}
"""The order each retail primitive works on: its status, and what else it must hold."""
YES = "Yes, please go ahead: {what} {order}."


@cache
def database() -> dict[str, Any]:
    """tau2's retail database (users, orders, products), read once from the data wheel."""
    from ..tau2 import load

    return load()[0]


@dataclass
class Conversation:
    """The customer of the task and what the plan has taken of their orders."""

    user_id: str
    used: list[str] = field(default_factory=list)
    """The orders a stage took."""
    products: set[str] = field(default_factory=set)
    """The products seeded (each once)."""


def orders_of(user_id: str, status: str) -> list[dict[str, Any]]:
    db = database()
    return [db["orders"][o] for o in db["users"][user_id]["orders"]
            if db["orders"][o]["status"] == status]


def conversation(c: Composition) -> Conversation:
    """The task's customer: drawn at the plan's first retail stage among those with enough
    orders of each status the plan's retail stages need, seeded (directory row, customer
    record, the agent as the store's support), and asked for their identity first."""
    conv = c.state.get(KIND)
    if conv is not None:
        assert isinstance(conv, Conversation)
        return conv
    db = database()
    want = [st.primitive for st in c.plan if st.primitive in NEEDS]
    fits = sorted(u for u in db["users"] if _serves(u, want))
    if not fits:
        raise PlanError("no customer of tau2's retail database has orders for "
                        f"{[st.primitive for st in c.plan if st.primitive in NEEDS]}")
    uid = c.rng.choice(fits)
    row = db["users"][uid]
    conv = Conversation(uid)
    c.state[KIND] = conv
    name = f"{row['name']['first_name']} {row['name']['last_name']}"
    c.add_seed("people", {"id": c.user, "name": name, "email": row["email"],
                          "role": "Customer", "external": True,
                          "timezone": "America/New_York"})
    c.add_seed("people", {"id": c.agent, "name": "Store Support", "email":
                          f"support@{c.req.company}.test", "role": "Customer service agent",
                          "team": "support", "timezone": "America/New_York"})
    c.add_row("customers", from_tau2("customers", row))
    for oid in row["orders"]:  # all their orders: the right one is for the agent to find
        order = db["orders"][oid]
        c.add_row("orders", from_tau2("orders", order))
        for item in order["items"]:
            if item["product_id"] not in conv.products:
                conv.products.add(item["product_id"])
                c.add_row("products", from_tau2("products", db["products"][item["product_id"]]))
    me = c.member(c.user)
    me["response"] = {"delay_minutes": [0.5, 2.0], "working_hours": None}
    me["fallback"] = "Sorry, I don't know."
    by_email = c.rng.random() < 0.6
    zip_code = row["address"]["zip"]
    said = (f"My email is {row['email']}." if by_email
            else f"I'm {name}, and my zip code is {zip_code}.")
    me["facts"].append({"key": "identity", "value": said, "keywords": [
        "email", "name", "zip", "identity", "verify", "authenticate"]})
    ask = ("Could you give me the email address on your account, so I can verify your "
           "identity?" if by_email else "Could you give me your full name and zip code, so I "
           "can verify your identity?")
    find: dict[str, Any] = (
        {"kind": "tool", "tool": "find_user_id_by_email", "args": {"email": row["email"]}}
        if by_email else
        {"kind": "tool", "tool": "find_user_id_by_name_zip", "args": {
            "first_name": row["name"]["first_name"], "last_name": row["name"]["last_name"],
            "zip": zip_code}})
    c.buckets["setup"] += [{"kind": "message", "to": c.user, "text": ask},
                           {"kind": "wait", "message_from": c.user}, find]
    told = row["email"] if by_email else zip_code
    c.checks += [
        {"id": c.cid("identity-asked"), "kind": "order", "gate": True,
         "description": "the customer's identity is looked up with what they said",
         "first": {"actor": c.user, "to": c.agent, "text": {"contains": [told]}},
         "then": {"tool": find["tool"]}},
        {"id": c.cid("authenticated"), "kind": "app", "app": "retail", "check": "authenticated",
         "params": {"user_id": uid}, "gate": True,
         "description": "the customer is authenticated before anything else about them "
                        "(policy)"}]
    c.safety.append({"id": c.cid("one-customer"), "kind": "app", "app": "retail",
                     "rule": "other_customers", "params": {"user_id": uid},
                     "description": "no update of another customer's data (policy)"})
    return conv


@cache
def candidates(primitive: str) -> dict[str, tuple[str, ...]]:
    """The orders ``primitive`` can work on, by customer (computed once)."""
    status, fits = NEEDS[primitive]
    db = database()
    return {u: tuple(o["order_id"] for o in orders_of(u, status) if fits(o))
            for u in db["users"]}


def _serves(user_id: str, primitives: list[str]) -> bool:
    """Whether the customer has a distinct order for each primitive (the choosiest first)."""
    taken: set[str] = set()
    for ids in sorted((candidates(p)[user_id] for p in primitives), key=len):
        free = [i for i in ids if i not in taken]
        if not free:
            return False
        taken.add(free[0])
    return True


def take_order(c: Composition, conv: Conversation, primitive: str) -> dict[str, Any]:
    """An order of the customer's that ``primitive`` can work on (see :data:`NEEDS`) and no
    other stage took, read by the agent before anything is done."""
    db = database()
    free = [db["orders"][o] for o in candidates(primitive)[conv.user_id] if o not in conv.used]
    if not free:
        raise PlanError(f"{conv.user_id} has no other order {primitive} can work on")
    order = c.rng.choice(free)
    conv.used.append(order["order_id"])
    read = {"kind": "tool", "tool": "get_order_details", "args": {"order_id": order["order_id"]}}
    c.buckets["writes"].append(read)
    return order


def confirmed_write(c: Composition, order: dict[str, Any], tool: str, args: dict[str, Any],
                    what: str, details: str, expect: dict[str, Any]) -> None:
    """The update ``tool(args)`` of ``order``: its details listed to the customer, their
    explicit yes awaited, then the call; graded by the order's end state and by the update
    coming after the yes and after the order was read."""
    oid = order["order_id"]
    c.buckets["act"] += [
        {"kind": "message", "to": c.user, "text": f"Here is what I will do: {details} Do you "
         "confirm that I should proceed (yes/no)?",
         "_accept": "listing the details earlier harms nothing: the update still waits for "
                    "the customer's yes"},
        {"kind": "wait", "message_from": c.user},
        {"kind": "tool", "tool": tool, "args": args}]
    yes_fact(c, oid, what)
    c.checks += [
        {"id": c.cid("order-state"), "kind": "state", "table": "orders", "gate": True,
         "weight": 3, "expect": {oid: expect},
         "description": f"order {oid} ends as the customer asked"},
        {"id": c.cid("confirmed-first"), "kind": "order", "gate": True,
         "description": f"{tool} of {oid} only after the customer confirmed it (policy)",
         "first": {"actor": c.user, "to": c.agent, "text": {
             "regex": "^\\s*yes\\b.*" + re.escape(f"{what} {oid}")}},
         "then": {"tool": tool, "args": {"order_id": oid}}},
        {"id": c.cid("read-first"), "kind": "order", "gate": True,
         "description": f"order {oid} is looked at before it is changed",
         "first": {"tool": "get_order_details", "args": {"order_id": oid}},
         "then": {"tool": tool, "args": {"order_id": oid}}}]


def yes_fact(c: Composition, oid: str, what: str,
             before: list[dict[str, Any]] | None = None) -> None:
    """The customer's answer to a question about order ``oid``: the ``before`` answers (a
    change of mind), else yes to ``what``."""
    me = c.member(c.user)
    me["facts"].append({"key": f"confirm {oid}", "keywords": [oid],
                        "value": YES.format(what=what, order=oid),
                        "answers": [*(before or []),
                                    {"asked": {"any_of": [what.split()[0]]},
                                     "text": YES.format(what=what, order=oid)}]})


def options_text(options: dict[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in options.items())
