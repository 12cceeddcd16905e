"""The ``handoff`` primitive: a coworker who takes the work over and delivers it the next
working day."""

from __future__ import annotations

from typing import Any

from ..palette import (
    DELIVERABLES,
    metric_of,
)
from ..primitive import Composition, Primitive, Value


def build(c: Composition, st: dict[str, Any]) -> None:
    pid = c.person(st.get("role"))
    what = metric_of(st["step"]) if st.get("step") else c.rng.choice(DELIVERABLES)
    amount = c.money()
    m = c.member(pid)
    m["facts"].append({"key": f"f{c.n}", "value": "On it. I'll send it to you tomorrow "
                       "morning.", "keywords": ["prepare"]})
    m.setdefault("triggers", []).append({"asked": ["prepare"], "after_minutes": 24 * 60, "actions": [
        {"kind": "message", "to": c.agent, "text": f"Here is the {what}, as promised: "
         f"it comes to {amount} in total."}]})
    c.buckets["writes"].append(c.say(pid, f"Hi {c.name(pid)}, could you prepare "
                                           f"the {what}? Send it to me when it's ready."))
    c.buckets["waits"] += [{"kind": "wait", "message_from": pid},
                              {"kind": "wait", "message_from": pid}]
    v = Value(f"{what} total", amount, {"actor": pid, "to": c.agent,
                                        "text": {"contains": [amount]}})
    c.learn(v)
    c.goals.append(c.rng.choice([
        f"Hand the {what} over to {c.name(pid)} and use it once it arrives.",
        f"{c.name(pid)} should prepare the {what}; follow up when it comes in."]))


HANDOFF = Primitive(
    "handoff", "gather", (frozenset({"chat", "email"}),),
    ("multi_turn_communication", "dynamic_workspace_state"),
    provides=("a coworker who takes the work over and delivers it the next working day"),
    grading=("a gate: the result is used only after it was delivered"),
    build=build)
