"""The ``invite`` primitive: a new colleague in no channel yet."""

from __future__ import annotations

from typing import Any

from ..palette import (
    EXTRA_PEOPLE,
)
from ..plan import PlanError
from ..primitive import Composition, Primitive


def build(c: Composition, st: dict[str, Any]) -> None:
    """A new colleague added to a channel the agent is in, then welcomed there."""
    extra = [e for e in EXTRA_PEOPLE if e[0].split()[0].lower() not in c.directory]
    if not extra:
        raise PlanError("no new colleague to invite")
    name, role, team, tz = extra[c.rng.randrange(len(extra))]
    # The team's own channel, with no one in it who plays a part: a welcome that named
    # someone the plan waits on would be answered, and that answer would stand in for the
    # one awaited.
    ch = c.fresh_name("channels", [team, f"{team}-team", f"team-{team}", f"{team}-crew"],
                      draw=False)
    members = [p for p, row in c.directory.items() if row.get("team") == team
               and not row.get("external") and p not in c.cast
               and p not in (c.user, *c.used)]
    c.add_seed("channels", {"id": ch, "name": ch, "members": [c.agent, *members],
                               "internal_only": True})
    pid = c.hire(name, role, team, tz)
    c.used.append(pid)  # (joins the channel; asked nothing)
    first = name.split()[0]
    why = "when to welcome the new colleague is the agent's choice"
    c.buckets["act"] += [
        {"kind": "tool", "tool": "directory_get_person", "args": {"person": pid}},
        {"kind": "tool", "tool": "chat_invite", "args": {"channel": ch, "person": pid},
         "_accept": why},
        {"kind": "tool", "tool": "chat_post", "args": {
            "channel": ch, "text": f"Welcome {first}, who joins us as {role}!"},
         "_accept": why}]
    c.checks += [
        {"id": c.cid("in-channel"), "kind": "sql", "gate": True, "weight": 2,
         "query": "SELECT count(*) FROM channel_members WHERE channel_id = "
                  f"'{ch}' AND person = '{pid}'", "expect": [[1]]},
        {"id": c.cid("welcomed"), "kind": "chat_message", "channel": ch,
         "sender": c.agent, "text": {"contains": [first]}, "gate": True},
        {"id": c.cid("welcome-after-invite"), "kind": "order", "gate": True,
         "first": {"tool": "chat_invite", "args": {"person": pid}},
         "then": {"tool": "chat_post", "args": {"channel": ch}}}]
    c.goals.append(c.rng.choice([
        f"{name} has just joined as {role}: add them to #{ch} and welcome them there.",
        f"Get our new {role.lower()}, {name}, into #{ch} and say welcome."]))


INVITE = Primitive(
    "invite", "act", (frozenset({"chat"}),), ("tool_coordination",),
    provides=("a new colleague in no channel yet"),
    grading=("a gate: they are a member of the channel, welcomed there after they were added"),
    build=build)
