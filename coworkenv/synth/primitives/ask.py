"""The ``ask`` primitive: a person who knows a figure, answers after a delay inside working
hours."""

from __future__ import annotations

from typing import Any

from ..palette import (
    metric_of,
)
from ..primitive import Composition, Primitive, Value


def build(c: Composition, st: dict[str, Any], variant: str = "") -> None:
    pid = c.person(st.get("role"))
    metric = metric_of(st["step"]) if st.get("step") else c.metric()
    amount = c.money()
    key = metric.lower()
    m = c.member(pid)
    role = str(c.directory.get(pid, {}).get("role", ""))
    by_role = bool(role) and variant != "reminder" and c.rng.random() < 0.3
    team = str(c.directory.get(pid, {}).get("team", ""))
    by_team = by_role and bool(team) and c.rng.random() < 0.4
    if by_team:  # the team named: its members listed, the role picked out
        c.buckets["writes"].append({"kind": "tool", "tool": "directory_list_team",
                                       "args": {"team": team}})
    elif by_role:
        c.buckets["writes"].append({"kind": "tool", "tool": "directory_search",
                                       "args": {"query": role.split()[-1]}})
    who = (f"the {role.lower()} in the {team} team" if by_team else
           f"our {role.lower()}" if by_role else c.name(pid))
    if not by_role and c.rng.random() < 0.75:  # check who they are first
        c.buckets["writes"].append({"kind": "tool", "tool": "directory_get_person",
                                       "args": {"person": pid}})
    if variant == "reminder":
        m["fallback"] = "I'm buried today. Remind me later and I'll dig it out."
        m["facts"].append({"key": f"f{c.n}", "value": f"Sorry for the wait: the {metric} "
                           f"is {amount}.", "keywords": ["remind", "following up"]})
        c.buckets["writes"].append(c.say(pid, f"Hi {c.name(pid)}, could you tell "
                                               f"me the {metric}?"))
        c.buckets["waits"] += [
            {"kind": "wait", "message_from": pid},
            {"kind": "wait", "minutes": 120},
            {**c.say(pid, f"Following up (a friendly reminder) on the {metric}, please."),
             "_accept": "when to send a reminder is the agent's choice"},
            {"kind": "wait", "message_from": pid}]
        c.goals.append(c.rng.choice([
            f"Get the {metric} from {who}; {c.name(pid)} is swamped today, so expect "
            f"to chase it.", f"{who} owes us the {metric}."]))
    else:
        m["facts"].append({"key": f"f{c.n}", "value": f"The {metric} is {amount}.",
                           "keywords": [key]})
        c.buckets["writes"].append(c.say(pid, f"Hi, what is the {metric}?"))
        c.buckets["waits"].append({"kind": "wait", "message_from": pid})
        c.goals.append(c.rng.choice([
            f"Find out the {metric} from {who}.", f"{who.capitalize()} knows the {metric}.",
            f"We need the {metric}; ask {who}."]))
    v = Value(metric, amount, {"actor": pid, "to": c.agent,
                               "text": {"contains": [amount]}})
    c.learn(v)


ASK = Primitive(
    "ask", "gather", (frozenset({"chat", "email"}),), ("multi_turn_communication",),
    provides=("a person who knows a figure, answers after a delay inside working hours"),
    grading=("a gate: no write states the figure before that person gave it"),
    build=build)
