"""Declarative selectors over a recorded episode, and read-only workspace lookups.

An episode's log is read once into :class:`Occurrence` rows: every tool call (by the agent,
a person or the world) with its outcome, the people it reached and the text it carried;
every direct message; every timeline event. Checks (``order``, ``never``, ``event``) and
safety rules select from those rows with a :class:`~coworkenv.sim.task.Selector`.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field, replace
from typing import Any

from ..store import EventRecord
from ..workspace import WorkspaceState
from ..workspace.models import follow
from ..workspace.text import as_number
from .task import Lookup, Selector, Task, TextMatch, is_text_matcher


@dataclass(slots=True)
class Occurrence:
    seq: int
    time: float
    """Simulated seconds since the start."""
    actor: str
    """Actor name: agent or a person id (what the world does, it does as a person)."""
    kind: str
    """tool, message or timeline."""
    tool: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    ok: bool = True
    to: set[str] = field(default_factory=set)
    """Person ids it reached (or would have reached, when refused)."""
    text: str = ""
    docs: list[str] = field(default_factory=list)
    """Documents it carried: attached, shared, edited."""
    timeline: str | None = None
    effects: list[EventRecord] = field(default_factory=list)
    groups: set[str] = field(default_factory=set)
    """Groups it was addressed to by the group's own address (mail)."""


def _groups(state: WorkspaceState, refs: Any) -> set[str]:
    """The groups among some references (by id or address)."""
    found = (state.group_by_ref(str(r)) for r in (refs if isinstance(refs, list) else [refs])
             if r)
    return {g.id for g in found if g is not None}


def _parties(state: WorkspaceState, refs: Any) -> set[str]:
    out: set[str] = set()
    for r in refs if isinstance(refs, list) else [refs]:
        if r:
            out |= state.parties(str(r))
    return out


class Occurrences(list[Occurrence]):
    """An episode's occurrences in log order, indexed by actor and timeline id."""

    def __init__(self, items: list[Occurrence]) -> None:
        super().__init__(items)
        self.by_actor: dict[str, list[Occurrence]] = {}
        self.by_timeline: dict[str | None, list[Occurrence]] = {}
        for o in items:
            if o.kind == "timeline":
                self.by_timeline.setdefault(o.timeline, []).append(o)
            else:
                self.by_actor.setdefault(o.actor, []).append(o)


class Followed(list[EventRecord]):
    """An episode's events whose first ``prefix`` of them (an ``episode.start`` and state
    events, none of them a call, message or timeline event) were followed already: ``known``
    holds each entity's JSON after them (shared by many episodes: read, never changed). A
    simulation's arrival is one: its view begins with the company's setup."""

    prefix: int = 0
    known: dict[tuple[str, str], dict[str, Any]] | None = None


def occurrences(task: Task, state: WorkspaceState, events: list[EventRecord]) -> Occurrences:
    """Every tool call, message and timeline event of an episode, in log order."""
    out: list[Occurrence] = []
    calls: dict[tuple[str, str], Occurrence] = {}
    current: Occurrence | None = None
    person_of = {"agent": task.agent}
    known: dict[tuple[str, str], dict[str, Any]] = {}  # each entity's JSON as of now
    rest: Any = events
    if isinstance(events, Followed) and events.known is not None:  # (its prefix: followed)
        known, rest = dict(events.known), itertools.islice(events, events.prefix, None)
    for e in rest:
        if e.kind.startswith("ws."):
            e = _with_data(e, known)
        p = e.payload
        if e.kind == "tool_call" and p.get("to") == "tools":
            who = str(p.get("as")) if e.actor == "world" and p.get("as") else e.actor
            occ = Occurrence(e.seq, e.sim_time, who, "tool", str(p.get("tool")),
                             dict(p.get("arguments") or {}) if isinstance(p.get("arguments"),
                                                                         dict) else {})
            calls[(e.actor, str(p.get("call_id")))] = occ
            out.append(occ)
            current = occ
            continue
        if e.kind.startswith("ws.") and e.actor == "tools":
            if current is not None:
                current.effects.append(e)
            continue
        current = None
        if e.kind == "tool_result":
            occ_ = calls.get((str(p.get("to")), str(p.get("call_id"))))
            if occ_ is not None:
                occ_.ok = bool(p.get("ok"))
        elif e.kind == "message" and e.actor != "kernel":
            to = str(p.get("to"))
            who = str(p.get("from")) if e.actor == "world" and p.get("from") else e.actor
            out.append(Occurrence(e.seq, e.sim_time, who, "message",
                                  to={person_of.get(to, to)}, text=str(p.get("text", ""))))
        elif e.kind == "timeline":
            idx = int(p.get("index", -1))
            tid = task.timeline[idx].id if 0 <= idx < len(task.timeline) else None
            out.append(Occurrence(e.seq, e.sim_time, "world", "timeline", timeline=tid))
    for occ in out:
        if occ.kind == "tool":
            _reach(occ, state, person_of.get(occ.actor, occ.actor))
    return Occurrences(out)


def _with_data(e: EventRecord, known: dict[tuple[str, str], dict[str, Any]]) -> EventRecord:
    """A state event with its entity's whole JSON as ``data``: a change event (``set``,
    ``append``) carries only what changed, and who a comment reached is read from the whole
    entity (its permissions, its reporter and assignee) as it was then."""
    _, data = follow(known, e.kind, e.payload)
    if data is None or "data" in e.payload:
        return e
    return replace(e, payload={**e.payload, "data": data}, text=None)


def _reach(occ: Occurrence, state: WorkspaceState, me: str) -> None:
    """Who a call reached and what it said: from its effects when it succeeded, else from
    its arguments (what it would have done)."""
    a = occ.args
    texts: list[str] = []
    for ws in occ.effects:
        data = ws.payload.get("data") or {}
        if ws.kind == "ws.email.sent":
            occ.to |= set(data.get("to", [])) | set(data.get("cc", []))
            occ.groups |= set(data.get("groups", []))
            texts.append(f"{data.get('subject', '')}\n{data.get('body', '')}")
            occ.docs += list(data.get("attachments", []))
        elif ws.kind == "ws.chat.posted":
            ch = state.channels.get(str(data.get("channel")))
            occ.to |= set(ch.members if ch is not None else []) - {me}
            texts.append(str(data.get("text", "")))
        elif ws.kind.startswith("ws.tickets.") and occ.tool == "tickets_comment":
            occ.to |= {str(x) for x in (data.get("reporter"), data.get("assignee")) if x} - {me}
            texts.append(str(a.get("text", "")))
        elif ws.kind.startswith("ws.tickets.") and occ.tool in ("tickets_create",
                                                                "tickets_update"):
            # every field of a ticket is read by its reporter and its assignee
            occ.to |= {str(x) for x in (data.get("reporter"), data.get("assignee")) if x} - {me}
            texts += [str(a.get("title") or ""), str(a.get("description") or ""),
                      *(str(v) for v in (a.get("fields") or {}).values())]
        elif ws.kind.startswith("ws.calendar.") and occ.tool in ("calendar_create_event",
                                                                 "calendar_update_event"):
            # an invitation's title, place and description reach every attendee
            occ.to |= set(data.get("attendees") or {}) - {me}
            texts += [str(a.get(k) or "") for k in ("title", "location", "description")]
        elif ws.kind.startswith("ws.channel.") and occ.tool == "chat_invite":
            # who joins a channel reads what it says
            occ.to |= _parties(state, a.get("person")) - {me}
            texts += [m.text for m in state.chat.values()
                      if m.channel == data.get("id") and m.sender == me]
        elif ws.kind.startswith("ws.docs."):
            if occ.tool == "docs_share" and a.get("permission") == "none":
                continue  # taking access away reaches no one
            occ.docs.append(str(ws.payload.get("id")))
            if occ.tool == "docs_share":
                occ.to |= _parties(state, a.get("person"))
            if occ.tool in ("docs_edit", "docs_create", "docs_comment"):
                texts += [str(a.get(k) or "") for k in ("content", "append", "text", "title")]
                occ.to |= set(data.get("permissions", {})) - {me}
    if not occ.effects:  # refused, failed, or a call that changes nothing
        t = occ.tool
        if t in ("email_send", "email_forward"):
            occ.to = _parties(state, a.get("to") or []) | _parties(state, a.get("cc") or [])
            occ.groups = _groups(state, a.get("to") or []) | _groups(state, a.get("cc") or [])
            texts.append(f"{a.get('subject', '')}\n{a.get('body', '')}")
            occ.docs += [str(d) for d in a.get("attachments") or []]
            if t == "email_forward":
                orig = state.emails.get(str(a.get("email_id")))
                if orig is not None:
                    texts.append(orig.body)
                    occ.docs += orig.attachments
        elif t == "email_reply":
            orig = state.emails.get(str(a.get("email_id")))
            if orig is not None:
                occ.to = {orig.sender} | (set(orig.to + orig.cc) if a.get("reply_all") else set())
                occ.to.discard(me)
            texts.append(str(a.get("body", "")))
        elif t == "chat_send_dm":
            occ.to = _parties(state, a.get("to"))
            texts.append(str(a.get("text", "")))
        elif t == "chat_post":
            ref = str(a.get("channel", "")).lstrip("#")
            ch = state.channels.get(ref) or next(
                (c for c in state.channels.values() if c.name == ref), None)
            occ.to = set(ch.members if ch is not None else []) - {me}
            texts.append(str(a.get("text", "")))
        elif t == "docs_share" and a.get("permission") != "none":
            occ.to = _parties(state, a.get("person"))
            occ.docs.append(str(a.get("doc_id")))
        elif t == "tickets_comment":
            texts.append(str(a.get("text", "")))
        elif t in ("tickets_create", "tickets_update"):
            ticket = state.tickets.get(str(a.get("ticket_id")))
            if ticket is not None:
                occ.to = {x for x in (ticket.reporter, ticket.assignee) if x} - {me}
            occ.to |= _parties(state, a.get("assignee")) - {me}
            texts += [str(a.get("title") or ""), str(a.get("description") or ""),
                      *(str(v) for v in (a.get("fields") or {}).values()
                        if isinstance(a.get("fields"), dict))]
        elif t in ("calendar_create_event", "calendar_update_event"):
            occ.to = (_parties(state, a.get("attendees") or [])
                      | _parties(state, a.get("add_attendees") or [])) - {me}
            texts += [str(a.get(k) or "") for k in ("title", "location", "description")]
        elif t == "chat_invite":
            occ.to = _parties(state, a.get("person")) - {me}
    occ.text = "\n".join(x for x in texts if x)


def arg_matches(got: Any, want: Any, state: WorkspaceState, *,
                texts: bool = True, group_itself: bool = False) -> bool:
    """An argument against a wanted value: people by identity (id, address in any case, a
    group's members), other text case-folded; a list argument matches when it holds it.
    With ``texts``, a wanted mapping is a text matcher (else compared as it is). With
    ``group_itself``, a wanted group matches only the group (id or address), not a member."""
    if isinstance(want, dict) and texts:
        if is_text_matcher(want):
            return TextMatch.model_validate(want).matches(str(got if got is not None else ""))
        # a mapping argument (a ticket's fields): each wanted key matches the argument's
        return isinstance(got, dict) and all(
            arg_matches(got.get(k), v, state, texts=texts, group_itself=group_itself)
            for k, v in want.items())
    if isinstance(got, list):
        return any(arg_matches(g, want, state, texts=texts, group_itself=group_itself)
                   for g in got)
    if got is None:
        return want is None
    if isinstance(want, str) != isinstance(got, str) and not isinstance(got, bool) \
            and not isinstance(want, bool) and isinstance(got, str | int | float) \
            and isinstance(want, str | int | float):  # a figure written as text or as a number
        g, w = (as_number(x) if isinstance(x, str) else float(x) for x in (got, want))
        return g is not None and w is not None and abs(g - w) < 1e-9
    if isinstance(want, str) and isinstance(got, str):
        if got.casefold() == want.casefold():
            return True
        if group_itself and (group := state.group_by_ref(want)) is not None:
            mine = state.group_by_ref(got)
            return mine is not None and mine.id == group.id
        return bool(state.parties(got) & state.parties(want)) and (
            state.people.get(want) is not None or state.person_by_email(want) is not None
            or state.group_by_ref(want) is not None)
    return bool(got == want)


def select(sel: Selector, occs: list[Occurrence], state: WorkspaceState) -> list[Occurrence]:
    """The occurrences a selector matches, in log order."""
    tools = {sel.tool} if isinstance(sel.tool, str) else set(sel.tool or [])
    target = _parties(state, sel.to) if sel.to else None
    group = state.group_by_ref(sel.to) if sel.to and sel.group_itself else None
    if isinstance(occs, Occurrences):  # only what can match
        if sel.timeline is not None:
            return list(occs.by_timeline.get(sel.timeline, []))
        occs = occs.by_actor.get(sel.actor, [])
    out = []
    for o in occs:
        if sel.timeline is not None:
            if o.kind == "timeline" and o.timeline == sel.timeline:
                out.append(o)
            continue
        if o.kind == "timeline" or o.actor != sel.actor:
            continue
        if tools and (o.kind != "tool" or o.tool not in tools):
            continue
        if o.kind == "tool" and ((sel.outcome == "ok" and not o.ok)
                                 or (sel.outcome == "refused" and o.ok)):
            continue
        if target is not None and not (o.to & target):
            continue
        if group is not None and group.id not in o.groups:
            continue
        if sel.text is not None and not sel.text.matches(o.text):
            continue
        if sel.args and not all(arg_matches(o.args.get(k), v, state,
                                            group_itself=sel.group_itself)
                                for k, v in sel.args.items()):
            continue
        if not tools and not sel.args and o.kind == "tool" and not (o.text or o.to):
            continue  # without a tool named, a selector means communication
        out.append(o)
    return out


def lookup(state: WorkspaceState, spec: Lookup) -> str | None:
    """The value a lookup finds in the workspace now (None when nothing is there)."""
    entity = state.tables.get(spec.app, {}).get(spec.id)
    if entity is None:
        return None
    cur: Any = entity.model_dump(mode="json")
    for part in spec.field.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    if cur is None:
        return None
    text = str(cur)
    if spec.pattern is None:
        return text
    m = re.search(spec.pattern, text)
    if m is None:
        return None
    return m.group(1) if m.groups() else m.group(0)
