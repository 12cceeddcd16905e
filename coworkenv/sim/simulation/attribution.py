"""Attribution: which arrival an action of a persistent seat counts for.

A persistent seat works several open requests at once with one agent, so each of its actions
(a tool call, a message, finish) is credited to one arrival before it happens, from what the
action itself names, in this order:

1. ``re``: the arrival the agent names (its key, ``a0007``), if it is one of its open ones;
2. an entity the action touches or names (a ticket, document, mail, calendar event or chat
   message id among its arguments or the words of its texts) that one open arrival owns: its
   own seed entities, and what actions credited to it created;
3. what it replies to: the open arrival of what the agent was handed when it acted (the
   result of a call credited to it, a message or notice for it, its request);
4. a person it writes to or names who takes part in exactly one open arrival (its requester,
   its coworkers);
5. the only open arrival;
6. the seat's *focus*: the arrival its last credited action was for (or the newest one),
   marked ``ambiguous`` with the candidates;

and with no open arrival at all the action is ``unattributed``. The result is recorded as a
``sim.attribution`` event before the action, so a replay, a regrade and the viewer read it
back; what was ambiguous or unattributed is visible there and in the summary, never credited
silently.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

_WORD = re.compile(r"[A-Za-z0-9][\w-]*[A-Za-z0-9]")
"""A word of a text that may be an entity's id (``T1-7``, ``E1-27``, ``doc4``)."""


@dataclass(frozen=True, slots=True)
class Attribution:
    arrival: str | None
    """The arrival the action counts for (None: unattributed)."""
    via: str
    """How: ``re``, ``entity T1-7``, ``person maya``, ``reply``, ``only open``, ``focus``,
    ``none``."""
    candidates: list[str] = field(default_factory=list)
    """The open arrivals it could have been for, when that was more than one."""

    @property
    def ambiguous(self) -> bool:
        return len(self.candidates) > 1

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"arrival": self.arrival, "via": self.via}
        if self.ambiguous:
            out["candidates"] = self.candidates
        return out


def strings(value: Any) -> Iterable[str]:
    """Every string value in an action's arguments (dict keys left out)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from strings(v)


def attribute(*, explicit: str | None, names: Iterable[str], open_keys: list[str],
              owners: Mapping[str, str], cast: Mapping[str, frozenset[str]],
              replying: str | None, focus: str | None) -> Attribution:
    """See the module's docstring. ``names``: the strings the action names (its arguments,
    its addressee); ``open_keys``: the seat's open arrivals, oldest first; ``owners``: entity
    id -> the arrival that owns it; ``cast``: arrival -> the people taking part in it;
    ``replying``: the arrival of what the agent is handling."""
    if not open_keys:
        return Attribution(None, "none")
    if explicit is not None and explicit in open_keys:
        return Attribution(explicit, "re")
    named = list(dict.fromkeys(names))
    words = list(dict.fromkeys(w for n in named for w in _WORD.findall(n) if w in owners))
    for kind, linked in (("entity", _by_entity([*named, *words], open_keys, owners)),
                         ("reply", [(replying, "")] if replying in open_keys else []),
                         ("person", _by_person(named, open_keys, cast))):
        keys = list(dict.fromkeys(k for k, _ in linked if k is not None))
        if len(keys) == 1:
            return Attribution(keys[0], f"{kind} {linked[0][1]}".strip())
        if keys:  # several: what it replies to or the focus if one of them, else the oldest
            pick = replying if replying in keys else focus if focus in keys else keys[0]
            what = next(n for k, n in linked if k == pick)
            return Attribution(pick, f"{kind} {what}", sorted(keys, key=open_keys.index))
    if len(open_keys) == 1:
        return Attribution(open_keys[0], "only open")
    pick = focus if focus in open_keys else open_keys[-1]
    return Attribution(pick, "focus", list(open_keys))


def _by_entity(named: list[str], open_keys: list[str],
               owners: Mapping[str, str]) -> list[tuple[str | None, str]]:
    return [(owners[n], n) for n in named if owners.get(n) in open_keys]


def _by_person(named: list[str], open_keys: list[str],
               cast: Mapping[str, frozenset[str]]) -> list[tuple[str | None, str]]:
    out: list[tuple[str | None, str]] = []
    for n in named:
        keys = [k for k in open_keys if n in cast.get(k, frozenset())]
        if len(keys) == 1:  # (a person in several open requests tells nothing)
            out.append((keys[0], n))
    return out
