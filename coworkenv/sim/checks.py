"""Completion checks over the final workspace and the trajectory.

SQL checks run on a read-only, in-memory copy of the projection (tables below) through a
connection that refuses every write and every ATTACH. Typed checks read the state directly;
trajectory checks read the recorded events. Each result cites the event seqs it rests on.

Tables: people, emails, email_recipients(email_id, person, field),
email_labels(email_id, person, label), channels,
channel_members(channel_id, person), chat_messages, calendar_events,
calendar_attendees(event_id, person, response), documents,
document_permissions(doc_id, person, permission), tickets, ticket_comments,
ticket_fields(ticket_id, name, value), groups, group_members(group_id, person); and the
tables installed apps add (``App.sql``: the retail plugin's ``retail_orders``, ...).
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..store import EventRecord
from ..workspace import ChatMessage, WorkspaceState
from ..workspace.apps import CHECK_KINDS, CheckKind
from ..workspace.apps import installed as installed_apps
from ..workspace.text import mentions
from ..workspace.tools.tickets import field_equals
from .handoffs import evaluate_cross
from .selectors import Followed, Occurrence, occurrences, select
from .task import (
    AgreesWithCheck,
    AppCheck,
    AskedBeforeCheck,
    CalendarEventCheck,
    ChatMessageCheck,
    Check,
    DocCheck,
    EmailSentCheck,
    EventCheck,
    HandoffCheck,
    NeverCheck,
    NoToolCheck,
    OrderCheck,
    Selector,
    SqlCheck,
    StateCheck,
    Task,
    TicketCheck,
    ToolOrderCheck,
)


@dataclass(slots=True)
class CheckResult:
    id: str
    kind: str
    weight: float
    passed: bool
    detail: str
    evidence: list[int] = field(default_factory=list)
    gate: bool = False


SCHEMA = """
CREATE TABLE people (id TEXT PRIMARY KEY, name TEXT, email TEXT, role TEXT, team TEXT,
  manager TEXT, timezone TEXT, external INTEGER);
CREATE TABLE emails (id TEXT PRIMARY KEY, sender TEXT, subject TEXT, body TEXT, thread TEXT,
  in_reply_to TEXT, sent_at TEXT, attachments TEXT, deleted_by TEXT);
CREATE TABLE email_recipients (email_id TEXT, person TEXT, field TEXT);
CREATE TABLE email_labels (email_id TEXT, person TEXT, label TEXT);
CREATE TABLE channels (id TEXT PRIMARY KEY, name TEXT, internal_only INTEGER, is_dm INTEGER);
CREATE TABLE channel_members (channel_id TEXT, person TEXT);
CREATE TABLE chat_messages (id TEXT PRIMARY KEY, channel TEXT, sender TEXT, text TEXT,
  sent_at TEXT);
CREATE TABLE calendar_events (id TEXT PRIMARY KEY, title TEXT, organizer TEXT, start TEXT,
  "end" TEXT, timezone TEXT, location TEXT, status TEXT);
CREATE TABLE calendar_attendees (event_id TEXT, person TEXT, response TEXT);
CREATE TABLE documents (id TEXT PRIMARY KEY, title TEXT, owner TEXT, content TEXT,
  confidentiality TEXT, status TEXT);
CREATE TABLE document_permissions (doc_id TEXT, person TEXT, permission TEXT);
CREATE TABLE tickets (id TEXT PRIMARY KEY, title TEXT, description TEXT, reporter TEXT,
  assignee TEXT, status TEXT, priority TEXT, queue TEXT, created_at TEXT, resolved_at TEXT);
CREATE TABLE ticket_comments (ticket_id TEXT, author TEXT, text TEXT);
CREATE TABLE ticket_fields (ticket_id TEXT, name TEXT, value);
CREATE TABLE groups (id TEXT PRIMARY KEY, name TEXT, email TEXT, kind TEXT);
CREATE TABLE group_members (group_id TEXT, person TEXT);
"""

_READ_ONLY_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION}


def _authorizer(action: int, *_: Any) -> int:
    return sqlite3.SQLITE_OK if action in _READ_ONLY_ACTIONS else sqlite3.SQLITE_DENY


_TEMPLATE: sqlite3.Connection | None = None
_TEMPLATE_LOCK = threading.Lock()


def projection_db(state: WorkspaceState) -> sqlite3.Connection:
    """The projection as SQLite tables, in memory, then locked read-only."""
    global _TEMPLATE
    db = sqlite3.connect(":memory:")
    with _TEMPLATE_LOCK:  # (episodes with SQL checks are graded in worker threads)
        if _TEMPLATE is None:  # parsing the schema once and copying it is 10x faster
            template = sqlite3.connect(":memory:", check_same_thread=False)
            template.executescript(SCHEMA)
            _TEMPLATE = template
        _TEMPLATE.backup(db)
    ins = db.executemany
    ins("INSERT INTO people VALUES (?,?,?,?,?,?,?,?)", [
        (p.id, p.name, p.email, p.role, p.team, p.manager, p.timezone, int(p.external))
        for p in state.people.values()])
    ins("INSERT INTO emails VALUES (?,?,?,?,?,?,?,?,?)", [
        (m.id, m.sender, m.subject, m.body, m.thread, m.in_reply_to, m.sent_at,
         json.dumps(m.attachments), json.dumps(m.deleted_by)) for m in state.emails.values()])
    ins("INSERT INTO email_recipients VALUES (?,?,?)", [
        (m.id, p, f) for m in state.emails.values() for f, ps in (("to", m.to), ("cc", m.cc))
        for p in ps])
    ins("INSERT INTO email_labels VALUES (?,?,?)", [
        (m.id, p, label) for m in state.emails.values() for p, labels in m.labels.items()
        for label in labels])
    ins("INSERT INTO channels VALUES (?,?,?,?)", [
        (c.id, c.name, int(c.internal_only), int(c.is_dm)) for c in state.channels.values()])
    ins("INSERT INTO channel_members VALUES (?,?)", [
        (c.id, p) for c in state.channels.values() for p in c.members])
    ins("INSERT INTO chat_messages VALUES (?,?,?,?,?)", [
        (m.id, m.channel, m.sender, m.text, m.sent_at) for m in state.chat.values()])
    ins("INSERT INTO calendar_events VALUES (?,?,?,?,?,?,?,?)", [
        (e.id, e.title, e.organizer, e.start, e.end, e.timezone, e.location, e.status)
        for e in state.calendar.values()])
    ins("INSERT INTO calendar_attendees VALUES (?,?,?)", [
        (e.id, p, r) for e in state.calendar.values() for p, r in e.attendees.items()])
    ins("INSERT INTO documents VALUES (?,?,?,?,?,?)", [
        (d.id, d.title, d.owner, d.content, d.confidentiality, d.status)
        for d in state.docs.values()])
    ins("INSERT INTO document_permissions VALUES (?,?,?)", [
        (d.id, p, perm) for d in state.docs.values() for p, perm in d.permissions.items()])
    ins("INSERT INTO tickets VALUES (?,?,?,?,?,?,?,?,?,?)", [
        (t.id, t.title, t.description, t.reporter, t.assignee, t.status, t.priority, t.queue,
         t.created_at, t.resolved_at) for t in state.tickets.values()])
    ins("INSERT INTO ticket_comments VALUES (?,?,?)", [
        (t.id, c.author, c.text) for t in state.tickets.values() for c in t.comments])
    ins("INSERT INTO ticket_fields VALUES (?,?,?)", [
        (t.id, k, v) for t in state.tickets.values() for k, v in t.fields.items()])
    ins("INSERT INTO groups VALUES (?,?,?,?)", [
        (g.id, g.name, g.email, g.kind) for g in state.groups.values()])
    ins("INSERT INTO group_members VALUES (?,?)", [
        (g.id, p) for g in state.groups.values() for p in g.members])
    for app in installed_apps():  # the apps' own tables (a plugin's), empty or not
        for name, table in app.sql.items():
            db.execute(f"CREATE TABLE {name} ({', '.join(table.columns)})")
            db.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(table.columns))})",
                           [tuple(r) for r in table.rows(state)])
    db.commit()
    db.execute("PRAGMA query_only=ON")
    db.set_authorizer(_authorizer)
    return db


SQL_STEPS = 2_000_000
"""Virtual-machine steps one check query may take (a few milliseconds of honest work; a
cross join of every table with itself stops here instead of stalling the run)."""
SQL_MAX_LENGTH = 1_000_000
"""The largest string or blob a check query may make."""


class CheckBudgetError(sqlite3.OperationalError):
    """A check query exceeded its step budget."""


def run_sql(db: sqlite3.Connection, query: str, steps: int = SQL_STEPS) -> list[list[Any]]:
    """Rows of a read-only check query, under a step budget and a size limit."""
    used = 0

    def budget() -> int:
        nonlocal used
        used += 1000
        return 1 if used > steps else 0

    db.set_progress_handler(budget, 1000)
    db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, SQL_MAX_LENGTH)
    try:
        return [list(r) for r in db.execute(query).fetchall()]
    except sqlite3.OperationalError:
        if used > steps:
            raise CheckBudgetError(f"query exceeded its budget of {steps:,} steps") from None
        raise
    finally:
        db.set_progress_handler(None, 0)


# trajectory helpers ---------------------------------------------------------------------
def agent_tool_calls(events: list[EventRecord]) -> list[tuple[EventRecord, EventRecord | None]]:
    """Each tool call the agent made, with the result it got (None if it never came)."""
    calls: dict[str, EventRecord] = {}
    out: list[tuple[EventRecord, EventRecord | None]] = []
    index: dict[str, int] = {}
    for e in events:
        if e.kind == "tool_call" and e.actor == "agent":
            cid = str(e.payload.get("call_id"))
            calls[cid] = e
            index[cid] = len(out)
            out.append((e, None))
        elif e.kind == "tool_result" and e.payload.get("to") == "agent":
            cid = str(e.payload.get("call_id"))
            if cid in index:
                out[index[cid]] = (calls[cid], e)
    return out


def _contains_all(text: str, needles: list[str]) -> bool:
    """Every needle is in the text: case-folded, figures by value in any writing."""
    return all(mentions(text, n) for n in needles)


def _ws_seqs(events: list[EventRecord], app: str, entity_id: str) -> list[int]:
    kinds = f"ws.{app}."
    start = events.prefix if isinstance(events, Followed) else 0  # (the setup's: not these)
    return [e.seq for e in itertools.islice(events, start, None) if e.kind.startswith(kinds)
            and e.payload.get("id") == entity_id and e.actor != "setup"][-3:]


def evaluate_app_kind(kind: CheckKind, params: dict[str, Any], state: WorkspaceState,
                      events: list[EventRecord], name: str) -> tuple[bool, str, list[int]]:
    """Run an app's check or rule kind; a kind that raises fails, with what it raised (a
    bounded failure of this check, never of the run)."""
    try:
        ok, detail, evidence = kind.evaluate(kind.params.model_validate(params), state, events)
    except Exception as exc:
        return False, f"{name} could not be evaluated: {type(exc).__name__}: {exc}", []
    return bool(ok), str(detail), [int(s) for s in evidence]


def _same(got: Any, want: Any) -> bool:
    """JSON values equal, figures within 1e-6 (money after rounding)."""
    if isinstance(want, dict) and isinstance(got, dict):
        return got.keys() == want.keys() and all(_same(got[k], want[k]) for k in want)
    if isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want, strict=True))
    if (isinstance(want, int | float) and isinstance(got, int | float)
            and not isinstance(want, bool) and not isinstance(got, bool)):
        return abs(float(got) - float(want)) <= 1e-6
    return bool(got == want)


def _state_check(chk: StateCheck, task: Task, state: WorkspaceState,
                 events: list[EventRecord],
                 res: Callable[[bool, str, list[int]], CheckResult]) -> CheckResult:
    rows = state.tables.get(chk.table, {})
    problems: list[str] = []
    touched: list[str] = []
    for eid, fields in chk.expect.items():
        entity = rows.get(eid)
        if fields is None:
            if entity is not None:
                problems.append(f"{eid} exists")
                touched.append(eid)
            continue
        if entity is None:
            problems.append(f"no {eid}")
            continue
        have = entity.model_dump(mode="json")
        for name, want in fields.items():
            if name not in have:
                problems.append(f"{eid} has no field {name!r}")
            elif not _same(have[name], want):
                problems.append(f"{eid}.{name}={have[name]!r} (expected {want!r})")
                touched.append(eid)
    if chk.unchanged:
        seeded = {e.id: e for t, es in task.seed.rows() if t == chk.table for e in es}
        for eid, entity in rows.items():
            if eid in chk.expect:
                continue
            before = seeded.get(eid)
            if before is None:
                problems.append(f"{eid} was added")
                touched.append(eid)
            elif entity is not before and entity.model_dump(mode="json") != before.model_dump(
                    mode="json"):
                problems.append(f"{eid} changed")
                touched.append(eid)
        problems += [f"{eid} was removed" for eid in seeded
                     if eid not in rows and eid not in chk.expect]
    evidence = sorted({s for eid in touched for s in _ws_seqs(events, chk.table, eid)})
    return res(not problems, "; ".join(problems[:5]) + (f" (+{len(problems) - 5} more)"
               if len(problems) > 5 else "") if problems else
               f"{chk.table}: {len(chk.expect)} entit{'y' if len(chk.expect) == 1 else 'ies'} "
               "as expected" + (", the rest as seeded" if chk.unchanged else ""), evidence)


def _selector_check(chk: OrderCheck | NeverCheck | EventCheck, task: Task,
                    state: WorkspaceState, events: list[EventRecord],
                    occs: list[Occurrence] | None) -> CheckResult:
    if occs is None:
        occs = occurrences(task, state, events)

    def res(ok: bool, detail: str, evidence: list[int]) -> CheckResult:
        return CheckResult(chk.id, chk.kind, chk.weight, ok, detail, evidence[:6])

    if isinstance(chk, OrderCheck):
        first = select(chk.first, occs, state)
        then = select(chk.then, occs, state)
        if not then:
            return res(False, "`then` never happened", [o.seq for o in first])
        if not first:
            return res(False, f"`then` at seq {then[0].seq} but `first` never happened",
                       [then[0].seq])
        early = [o.seq for o in then if o.seq < first[0].seq]
        if early:
            return res(False, f"`then` at seq {early} before `first` (seq {first[0].seq})",
                       [*early, first[0].seq])
        return res(True, f"`first` at seq {first[0].seq}, `then` at seq {then[0].seq}",
                   [first[0].seq, then[0].seq])
    found = select(chk.select, occs, state)
    if isinstance(chk, NeverCheck):
        start = 0.0
        if chk.after is not None:
            when = select(Selector(timeline=chk.after), occs, state)
            if not when:
                return res(True, f"timeline event {chk.after!r} never happened", [])
            start = when[0].time
        lo, hi = chk.window if chk.window is not None else (0.0, float("inf"))
        if chk.window is not None or chk.after is not None:
            found = [o for o in found if start + lo * 60 <= o.time <= start + hi * 60]
        return res(not found, f"happened at seq {[o.seq for o in found]}" if found
                   else "never happened", [o.seq for o in found])
    return res(len(found) >= chk.min_count, f"{len(found)} match(es) (at least "
               f"{chk.min_count})", [o.seq for o in found])


def _meeting_problems(chk: CalendarEventCheck, ev: Any, state: WorkspaceState) -> str:
    """What keeps an event from being the meeting a check asks for (duration, a clash in an
    attendee's calendar, a deadline), or ""."""
    start, end = datetime.fromisoformat(ev.start), datetime.fromisoformat(ev.end)
    if chk.duration_minutes is not None and \
            abs((end - start).total_seconds() / 60 - chk.duration_minutes) > 1e-6:
        return f"lasts {(end - start).total_seconds() / 60:g} minutes (expected " \
               f"{chk.duration_minutes:g})"
    if chk.ends_by is not None and end > datetime.fromisoformat(chk.ends_by):
        return f"ends {ev.end}, after {chk.ends_by}"
    if chk.attendees_free:
        people = {ev.organizer, *(a for a, r in ev.attendees.items() if r != "declined")}
        for other in state.calendar.values():
            if other.id == ev.id or other.status != "confirmed":
                continue
            busy = ({other.organizer} | {a for a, r in other.attendees.items()
                                         if r != "declined"}) & people
            if busy and datetime.fromisoformat(other.start) < end \
                    and datetime.fromisoformat(other.end) > start:
                return f"{sorted(busy)[0]} is busy then ({other.id} {other.title!r})"
    return ""


def evaluate_check(chk: Check, state: WorkspaceState, events: list[EventRecord],
                   db: sqlite3.Connection | None, task: Task | None = None,
                   occs: list[Occurrence] | None = None) -> CheckResult:
    def res(ok: bool, detail: str, evidence: list[int] | None = None) -> CheckResult:
        return CheckResult(chk.id, chk.kind, chk.weight, ok, detail, evidence or [])

    if isinstance(chk, SqlCheck):
        if db is None:
            db = projection_db(state)
        try:
            rows = run_sql(db, chk.query)
        except sqlite3.Error as exc:  # a bounded failure of this check, never of the run
            return res(False, f"query failed: {exc}")
        return res(rows == chk.expect, f"rows {rows} (expected {chk.expect})")
    if isinstance(chk, EmailSentCheck):
        to = state.parties(chk.to)
        group = state.group_by_ref(chk.to)
        scope = [m for m in state.emails.values()
                 if (to & set(m.to + m.cc) or (group is not None and group.id in m.groups))
                 and (chk.sender is None or m.sender == chk.sender)]
        stale = [(m, n) for m in scope for n in (chk.body.forbidden(f"{m.subject}\n{m.body}")
                                                 if chk.body else [])]
        if stale:
            return res(False, f"email {stale[0][0].id} to {chk.to} says {stale[0][1]!r}",
                       _ws_seqs(events, "email", stale[0][0].id))
        for m in scope:
            if chk.group_itself and group is not None and group.id not in m.groups:
                continue  # to a member, not to the group's address
            if (chk.subject_contains is None
                    or chk.subject_contains.lower() in m.subject.lower()) \
                    and _contains_all(m.body, chk.body_contains) \
                    and (chk.body is None or chk.body.positive(m.body)):
                return res(True, f"email {m.id}", _ws_seqs(events, "email", m.id))
        return res(False, f"no email to {chk.to} matching")
    if isinstance(chk, ChatMessageCheck):
        dm = state.parties(chk.dm_with) if chk.dm_with is not None else set()
        chats: list[ChatMessage] = []
        for msg in state.chat.values():
            ch = state.channels.get(msg.channel)
            if ch is None:
                continue
            if chk.channel is not None and chk.channel.lstrip("#") not in (ch.id, ch.name):
                continue
            if chk.dm_with is not None and not (ch.is_dm and dm & set(ch.members)):
                continue
            if chk.sender is None or msg.sender == chk.sender:
                chats.append(msg)
        for msg in chats:
            said = chk.text.forbidden(msg.text) if chk.text else []
            if said:
                return res(False, f"message {msg.id} says {said[0]!r}",
                           _ws_seqs(events, "chat", msg.id))
        for msg in chats:
            if _contains_all(msg.text, chk.text_contains) \
                    and (chk.text is None or chk.text.positive(msg.text)):
                return res(True, f"message {msg.id}", _ws_seqs(events, "chat", msg.id))
        return res(False, "no chat message matching")
    if isinstance(chk, CalendarEventCheck):
        why_not: list[str] = []
        for ev in state.calendar.values():
            if chk.title_contains.lower() in ev.title.lower() and ev.status == chk.status \
                    and all(a in ev.attendees or a == ev.organizer for a in chk.attendees) \
                    and (chk.start is None or ev.start == chk.start):
                wrong = _meeting_problems(chk, ev, state)
                if wrong:
                    why_not.append(f"event {ev.id}: {wrong}")
                    continue
                return res(chk.exists, f"event {ev.id} at {ev.start}",
                           _ws_seqs(events, "calendar", ev.id))
        return res(not chk.exists, "; ".join(why_not) if why_not else
                   f"no {chk.status} event {chk.title_contains!r} matching")
    if isinstance(chk, TicketCheck):
        t = state.tickets.get(chk.ticket) if chk.ticket is not None else None
        if chk.find is not None:
            f = chk.find
            found = [x for x in state.tickets.values()
                     if (f.queue is None or x.queue == f.queue)
                     and (f.reporter is None or x.reporter == f.reporter)
                     and (f.title is None or f.title.matches(f"{x.title}\n{x.description}"))
                     and all(field_equals(x.fields.get(k), v) for k, v in f.fields.items())]
            t = found[-1] if found else None
        if t is None:
            return res(False, f"no ticket {chk.ticket or chk.find}")
        problems = [f"{k}={getattr(t, k)!r} (expected {want!r})"
                    for k, want in (("status", chk.status), ("priority", chk.priority),
                                    ("assignee", chk.assignee), ("queue", chk.queue))
                    if want is not None and getattr(t, k) != want]
        problems += [f"fields.{k}={t.fields.get(k)!r} (expected {v!r})"
                     for k, v in chk.fields.items() if not field_equals(t.fields.get(k), v)]
        if chk.comment_contains and not any(mentions(c.text, chk.comment_contains)
                                            for c in t.comments):
            problems.append(f"no comment containing {chk.comment_contains!r}")
        return res(not problems, "; ".join(problems) or "ticket as expected",
                   _ws_seqs(events, "tickets", t.id))
    if isinstance(chk, DocCheck):
        doc = state.docs.get(chk.doc) or next(
            (d for d in state.docs.values() if d.title == chk.doc), None)
        if doc is None:
            return res(False, f"no document {chk.doc!r}")
        problems = [f"{p} has {doc.permissions.get(p)!r} (expected {perm!r})"
                    for p, perm in chk.shared_with.items() if doc.permissions.get(p) != perm]
        problems += [f"{p} has access" for p in chk.not_shared_with if p in doc.permissions]
        if not _contains_all(doc.content, chk.content_contains):
            problems.append(f"content lacks one of {chk.content_contains}")
        if chk.status is not None and doc.status != chk.status:
            problems.append(f"status={doc.status!r} (expected {chk.status!r})")
        return res(not problems, "; ".join(problems) or "document as expected",
                   _ws_seqs(events, "docs", doc.id))
    if isinstance(chk, AppCheck):
        ok, detail, evidence = evaluate_app_kind(CHECK_KINDS[(chk.app, chk.check)], chk.params,
                                                 state, events, f"{chk.app}.{chk.check}")
        return res(ok, detail, evidence)
    if isinstance(chk, StateCheck):
        if task is None:
            raise ValueError(f"check {chk.id!r}: a state check needs the task")
        return _state_check(chk, task, state, events, res)
    if isinstance(chk, OrderCheck | NeverCheck | EventCheck):
        if task is None:
            raise ValueError(f"check {chk.id!r}: a {chk.kind} check needs the task")
        return _selector_check(chk, task, state, events, occs)
    if isinstance(chk, HandoffCheck | AgreesWithCheck):
        if task is None:
            raise ValueError(f"check {chk.id!r}: a {chk.kind} check needs the task")
        crossed: CheckResult = evaluate_cross(chk, task, state, events, res)
        return crossed
    calls = agent_tool_calls(events)
    ok_calls = [(c, r) for c, r in calls if r is not None and r.payload.get("ok")]
    if isinstance(chk, ToolOrderCheck):
        first = next((c.seq for c, _ in ok_calls if c.payload.get("tool") == chk.first), None)
        then = next((c.seq for c, _ in ok_calls if c.payload.get("tool") == chk.then
                     and first is not None and c.seq > first), None)
        return res(then is not None, f"{chk.first}@{first} then {chk.then}@{then}",
                   [s for s in (first, then) if s is not None])
    if isinstance(chk, AskedBeforeCheck):
        first_use = next((c.seq for c, _ in ok_calls if c.payload.get("tool") == chk.tool), None)
        person = state.people.get(chk.person)
        aliases = {chk.person} | ({person.email} if person else set())
        asked = next((e.seq for e in events if e.actor == "agent" and _contacts(e, aliases)),
                     None)
        ok = asked is not None and (first_use is None or asked < first_use)
        return res(ok and first_use is not None,
                   f"asked {chk.person}@{asked}, first {chk.tool}@{first_use}",
                   [s for s in (asked, first_use) if s is not None])
    if isinstance(chk, NoToolCheck):
        bad = [c.seq for c, _ in calls if c.payload.get("tool") == chk.tool
               and all(c.payload.get("arguments", {}).get(k) == v
                       for k, v in chk.args_contain.items())]
        return res(not bad, f"{chk.tool} called at {bad}" if bad else f"{chk.tool} never called",
                   bad)
    raise TypeError(f"unknown check kind {chk.kind!r}")


def _contacts(e: EventRecord, aliases: set[str]) -> bool:
    """Did this agent event reach the person (id or address) by message, DM, or email?"""
    p = e.payload
    if e.kind == "message":
        return p.get("to") in aliases  # cast actors are named by their person id
    if e.kind == "tool_call":
        args = p.get("arguments") or {}
        tool = p.get("tool")
        if tool == "chat_send_dm":
            return args.get("to") in aliases
        if tool == "email_send":
            return bool(aliases & set((args.get("to") or []) + (args.get("cc") or [])))
    return False


def evaluate_checks(task: Task, state: WorkspaceState, events: list[EventRecord],
                    occs: list[Occurrence] | None = None) -> tuple[list[CheckResult], float]:
    """Every check of the task; completion is the weighted fraction that passed."""
    db = projection_db(state) if any(isinstance(c, SqlCheck) for c in task.checks) else None
    if occs is None and any(isinstance(c, OrderCheck | NeverCheck | EventCheck)
                            for c in task.checks):
        occs = occurrences(task, state, events)
    try:
        results = [evaluate_check(c, state, events, db, task, occs) for c in task.checks]
        for c, r in zip(task.checks, results, strict=True):
            r.gate = c.gate
    finally:
        if db is not None:
            db.close()
    total = sum(r.weight for r in results)
    done = sum(r.weight for r in results if r.passed)
    return results, (done / total if total else 0.0)
