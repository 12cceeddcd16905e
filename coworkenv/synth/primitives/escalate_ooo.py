"""The ``escalate_ooo`` primitive: a person out of office with an auto-reply naming a backup
who knows."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ..palette import (
    START,
)
from ..primitive import Composition, Primitive, Value


def build(c: Composition, st: dict[str, Any]) -> None:
    away, backup = c.person(), c.person()
    metric, amount = c.metric(), c.fresh_money(*c.req.parameters.amounts)
    back = START + timedelta(days=c.rng.choice([3, 4]))
    c.member(away)["response"]["out_of_office"] = [{
        "start": (START - timedelta(days=2)).isoformat(), "end": back.isoformat(),
        "auto_reply": f"I'm out of office until {back.strftime('%A')}. For anything "
                      f"urgent, please ask {c.name(backup)}."}]
    c.member(away)["facts"].append({"key": f"f{c.n}", "value": f"The {metric} is "
                                       f"{amount}.", "keywords": [metric.lower()]})
    c.member(backup)["facts"].append({"key": f"f{c.n}b", "value": f"{c.name(away)} "
                                         f"is away; the {metric} is {amount}.",
                                         "keywords": [metric.lower()]})
    c.buckets["writes"].append(c.say(away, f"Hi {c.name(away)}, what is the "
                                           f"{metric}?"))
    c.buckets["waits"][:0] = [  # first: the auto-reply comes at once
        {"kind": "wait", "message_from": away},
        c.say(backup, f"Hi {c.name(backup)}, {c.name(away)} is away. What is the "
                         f"{metric}?"),
        {"kind": "wait", "message_from": backup}]
    c.checks.append({"id": c.cid("after-auto-reply"), "kind": "order", "gate": True,
                        "first": {"actor": away, "to": c.agent,
                                  "text": {"contains": ["out of office"]}},
                        "then": {"to": backup, "text": {"contains": [metric]}}})
    v = Value(metric, amount, {"actor": backup, "to": c.agent,
                               "text": {"contains": [amount]}})
    c.learn(v)
    c.goals.append(f"Get the {metric} from {c.name(away)}.")


ESCALATE_OOO = Primitive(
    "escalate_ooo", "gather", (frozenset({"chat", "email"}),), ("multi_turn_communication",),
    provides=("a person out of office with an auto-reply naming a backup who knows"),
    grading=("gates: the backup is asked after the auto-reply; the figure comes from them"),
    build=build)
