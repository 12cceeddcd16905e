"""Checks across arrivals of a simulation, and what an episode's agent gave (its outputs).

An arrival whose agent hands work on to another agent (a message that makes an arrival of
another template: a hand-off) is graded once those arrivals have ended; the simulation then
records in its view an ``arrival.links`` event: its own case, and for each hand-off it caused
that arrival's template, case, termination and outputs (with each output's choices). Its
``handoff`` and ``agrees_with`` checks read that event, so a regrade of the stored episode
gives the same grade. An episode alone has no such event: those checks fail there, saying why.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..store import EventRecord
from ..workspace import WorkspaceState
from ..workspace.text import fold
from .selectors import occurrences
from .task import AgreesWithCheck, HandoffCheck, Output, Task

LINKS = "arrival.links"
TAKEN_UP = frozenset({"agent_finished", "user_satisfied"})


def _said(task: Task, state: WorkspaceState, events: list[EventRecord],
          told: str) -> list[str]:
    """What the agent said to ``told`` (user: the task's), oldest first: messages, DMs,
    mail."""
    person = task.user.person if told == "user" else told
    return [o.text for o in occurrences(task, state, events)
            if o.actor == "agent" and o.ok and person in o.to and o.text]


def _choice(texts: list[str], choices: list[str]) -> str | None:
    """The choice named by the last text that names exactly one of them."""
    for text in reversed(texts):
        named = [c for c in choices if re.search(rf"(?<!\w){re.escape(fold(c))}(?!\w)",
                                                 fold(text))]
        if len(named) == 1:
            return named[0]
        if named:
            return None  # (it named several: no decision to read)
    return None


def output_value(out: Output, texts: list[str]) -> str | None:
    if out.one_of:
        return _choice(texts, out.one_of)
    assert out.pattern is not None
    for text in reversed(texts):
        m = re.search(out.pattern, text)
        if m:
            return m.group(1) if m.groups() else m.group(0)
    return None


def task_outputs(task: Task, state: WorkspaceState,
                 events: list[EventRecord]) -> dict[str, str | None]:
    """Each of the task's outputs as the agent gave it (None: it did not)."""
    return {name: output_value(out, _said(task, state, events, out.told))
            for name, out in task.outputs.items()}


def _links(events: list[EventRecord]) -> dict[str, Any] | None:
    return next((e.payload for e in reversed(events) if e.kind == LINKS), None)


Result = Callable[[bool, str, list[int] | None], Any]


def evaluate_cross(chk: HandoffCheck | AgreesWithCheck, task: Task, state: WorkspaceState,
                   events: list[EventRecord], res: Result) -> Any:
    """A ``handoff`` or ``agrees_with`` check, from the arrival's ``arrival.links``."""
    links = _links(events)
    if links is None:
        return res(False, "graded in a simulation only: this episode handed nothing on", None)
    own = links.get("case") or {}
    mine = [h for h in links.get("handoffs", []) if h.get("template") == chk.task]
    if isinstance(chk, HandoffCheck):
        same = [h for h in mine if all((h.get("case") or {}).get(k) == own.get(k)
                                       for k in chk.same)]
        done = [h for h in same if h.get("termination") in TAKEN_UP or not chk.taken_up]
        if done:
            return res(True, f"handed to {done[0]['arrival']} ({chk.task}, "
                       f"{done[0].get('termination')})", None)
        if same:
            return res(False, f"handed to {same[0]['arrival']}, which ended "
                       f"{same[0].get('termination')}", None)
        if mine:
            got = {k: (mine[0].get("case") or {}).get(k) for k in chk.same}
            want = {k: own.get(k) for k in chk.same}
            return res(False, f"handed on {got}, not {want} as asked", None)
        unmatched = links.get("unmatched") or []
        why = f" (a message that made no arrival: {unmatched[0][:120]!r})" if unmatched else ""
        return res(False, f"no arrival of {chk.task} came from it{why}", None)
    if not mine:
        return res(False, f"no arrival of {chk.task} came from it to agree with", None)
    h = mine[-1]
    given = (h.get("outputs") or {}).get(chk.output)
    choices = list((h.get("choices") or {}).get(chk.output) or [])
    if given is None:
        return res(False, f"{h['arrival']} gave no {chk.output}", None)
    said = _choice(_said(task, state, events, chk.told), choices) if choices else None
    if said is None and not choices:  # (a pattern output: the same value, said)
        texts = _said(task, state, events, chk.told)
        ok = any(fold(str(given)) in fold(t) for t in texts)
        return res(ok, f"{'told' if ok else 'never told'} {chk.told} {given!r} "
                   f"({h['arrival']}'s {chk.output})", None)
    return res(said == given, f"told {chk.told} {said!r}; {h['arrival']}'s {chk.output} "
               f"was {given!r}", None)
