"""Calendar: events, invites and RSVP, free/busy across people, time zones."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field

from ..errors import ToolError
from ..models import CalendarEvent, iso, parse_iso
from ._base import ToolArgs, ToolContext, tool


def _zone(name: str, fieldname: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError("invalid_arguments", f"unknown time zone {name!r}", fieldname) from None


def _when(text: str, tz: ZoneInfo, fieldname: str) -> datetime:
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ToolError("invalid_arguments", f"{text!r} is not an ISO-8601 date-time",
                        fieldname) from None
    return dt.replace(tzinfo=tz) if dt.tzinfo is None else dt


def _render(e: CalendarEvent) -> dict[str, Any]:
    tz = ZoneInfo(e.timezone)
    return {**e.model_dump(mode="json"),
            "local_start": parse_iso(e.start).astimezone(tz).isoformat(),
            "local_end": parse_iso(e.end).astimezone(tz).isoformat()}


def _event(ctx: ToolContext, event_id: str) -> CalendarEvent:
    e = ctx.state.calendar.get(event_id)
    if e is None or (ctx.actor != e.organizer and ctx.actor not in e.attendees):
        raise ToolError("not_found", f"no event {event_id!r} on your calendar", "event_id")
    return e


class CreateEventArgs(ToolArgs):
    title: str = Field(min_length=1)
    start: str = Field(description="ISO-8601 date-time; without an offset it is read in `timezone`")
    end: str = Field(description="ISO-8601 date-time, after start")
    timezone: str = Field(default="UTC", description="IANA time zone, e.g. America/New_York")
    attendees: list[str] = Field(default_factory=list, description="People to invite")
    location: str = ""
    description: str = ""


@tool("calendar_create_event", "calendar", CreateEventArgs, writes=True)
def calendar_create_event(ctx: ToolContext, a: CreateEventArgs) -> dict[str, Any]:
    """Create an event on your calendar and invite attendees."""
    tz = _zone(a.timezone, "timezone")
    start, end = _when(a.start, tz, "start"), _when(a.end, tz, "end")
    if end <= start:
        raise ToolError("invalid_arguments", "end must be after start", "end")
    attendees = {ctx.person(r, f"attendees[{i}]").id: "pending" for i, r in enumerate(a.attendees)}
    attendees.pop(ctx.actor, None)
    eid = ctx.state.next_id("calendar")
    e = CalendarEvent(id=eid, title=a.title, organizer=ctx.actor, start=iso(start), end=iso(end),
                      timezone=a.timezone, location=a.location, description=a.description,
                      attendees=attendees)  # type: ignore[arg-type]
    ctx.emit("calendar", "created", e)
    for p in attendees:
        ctx.notify(p, "invite", event_id=eid, title=a.title, start=e.start, organizer=ctx.actor)
    return _render(e)


class UpdateEventArgs(ToolArgs):
    event_id: str
    title: str | None = None
    start: str | None = Field(default=None, description="New start (ISO-8601)")
    end: str | None = Field(default=None, description="New end (ISO-8601)")
    add_attendees: list[str] = Field(default_factory=list)
    remove_attendees: list[str] = Field(default_factory=list)
    location: str | None = None


@tool("calendar_update_event", "calendar", UpdateEventArgs, writes=True)
def calendar_update_event(ctx: ToolContext, a: UpdateEventArgs) -> dict[str, Any]:
    """Change an event you organize: time, title, location or attendees."""
    e = _event(ctx, a.event_id)
    if e.organizer != ctx.actor:
        raise ToolError("forbidden", "only the organizer can change this event", "event_id")
    if e.status == "cancelled":
        raise ToolError("conflict", "the event is cancelled", "event_id")
    tz = ZoneInfo(e.timezone)
    start = _when(a.start, tz, "start") if a.start else parse_iso(e.start)
    end = _when(a.end, tz, "end") if a.end else parse_iso(e.end)
    if a.start and not a.end:
        end = start + (parse_iso(e.end) - parse_iso(e.start))
    if end <= start:
        raise ToolError("invalid_arguments", "end must be after start", "end")
    attendees = dict(e.attendees)
    for i, r in enumerate(a.remove_attendees):
        attendees.pop(ctx.person(r, f"remove_attendees[{i}]").id, None)
    added = []
    for i, r in enumerate(a.add_attendees):
        pid = ctx.person(r, f"add_attendees[{i}]").id
        if pid not in attendees and pid != e.organizer:
            attendees[pid] = "pending"
            added.append(pid)
    moved = iso(start) != e.start or iso(end) != e.end
    if moved:  # a new time needs fresh answers
        attendees = dict.fromkeys(attendees, "pending")
    new = e.model_copy(update={
        "title": a.title or e.title, "start": iso(start), "end": iso(end),
        "location": e.location if a.location is None else a.location, "attendees": attendees})
    ctx.emit("calendar", "updated", new)
    for p in attendees:
        if moved or p in added:
            ctx.notify(p, "invite", event_id=e.id, title=new.title, start=new.start,
                       organizer=ctx.actor, updated=True)
    return _render(new)


class EventIdArgs(ToolArgs):
    event_id: str


@tool("calendar_cancel_event", "calendar", EventIdArgs, writes=True)
def calendar_cancel_event(ctx: ToolContext, a: EventIdArgs) -> dict[str, Any]:
    """Cancel an event you organize; attendees are told."""
    e = _event(ctx, a.event_id)
    if e.organizer != ctx.actor:
        raise ToolError("forbidden", "only the organizer can cancel this event", "event_id")
    if e.status == "cancelled":
        raise ToolError("conflict", "the event is already cancelled", "event_id")
    ctx.emit("calendar", "cancelled", e.model_copy(update={"status": "cancelled"}))
    for p in e.attendees:
        ctx.notify(p, "cancelled", event_id=e.id, title=e.title)
    return {"event_id": e.id, "status": "cancelled"}


class RsvpArgs(ToolArgs):
    event_id: str
    response: Literal["accepted", "declined", "tentative"]


@tool("calendar_rsvp", "calendar", RsvpArgs, writes=True)
def calendar_rsvp(ctx: ToolContext, a: RsvpArgs) -> dict[str, Any]:
    """Answer an invitation: accepted, declined or tentative."""
    e = _event(ctx, a.event_id)
    if ctx.actor not in e.attendees:
        raise ToolError("conflict", "you organize this event; there is nothing to answer",
                        "event_id")
    ctx.emit("calendar", "rsvp", e.model_copy(update={
        "attendees": {**e.attendees, ctx.actor: a.response}}))
    ctx.notify(e.organizer, "rsvp", event_id=e.id, attendee=ctx.actor, response=a.response)
    return {"event_id": e.id, "response": a.response}


class ListEventsArgs(ToolArgs):
    start: str = Field(description="Window start (ISO-8601)")
    end: str = Field(description="Window end (ISO-8601)")
    person: str | None = Field(default=None, description="Whose calendar (default: yours); "
                               "others' events show only as busy blocks")


@tool("calendar_list_events", "calendar", ListEventsArgs, writes=False)
def calendar_list_events(ctx: ToolContext, a: ListEventsArgs) -> dict[str, Any]:
    """List calendar events in a time window."""
    lo, hi = _when(a.start, ZoneInfo("UTC"), "start"), _when(a.end, ZoneInfo("UTC"), "end")
    who = ctx.person(a.person, "person").id if a.person else ctx.actor
    out = []
    for e in ctx.state.calendar.values():
        if e.status == "cancelled" or (who != e.organizer and who not in e.attendees):
            continue
        if parse_iso(e.end) <= lo or parse_iso(e.start) >= hi:
            continue
        if who == ctx.actor or ctx.actor == e.organizer or ctx.actor in e.attendees:
            out.append(_render(e))
        else:
            out.append({"busy": True, "start": e.start, "end": e.end})
    out.sort(key=lambda r: (r["start"], r.get("id", "")))
    return {"person": who, "events": out}


class FreeBusyArgs(ToolArgs):
    people: list[str] = Field(min_length=1, description="People to check")
    start: str = Field(description="Window start (ISO-8601)")
    end: str = Field(description="Window end (ISO-8601)")
    duration_minutes: int = Field(default=30, ge=5, le=480, description="Length of slot wanted")


@tool("calendar_free_busy", "calendar", FreeBusyArgs, writes=False)
def calendar_free_busy(ctx: ToolContext, a: FreeBusyArgs) -> dict[str, Any]:
    """Busy blocks of several people in a window, and the common free slots."""
    lo, hi = _when(a.start, ZoneInfo("UTC"), "start"), _when(a.end, ZoneInfo("UTC"), "end")
    if hi <= lo:
        raise ToolError("invalid_arguments", "end must be after start", "end")
    ids = [ctx.person(r, f"people[{i}]").id for i, r in enumerate(a.people)]
    busy: dict[str, list[tuple[datetime, datetime]]] = {p: [] for p in ids}
    for e in ctx.state.calendar.values():
        if e.status == "cancelled":
            continue
        s, t = parse_iso(e.start), parse_iso(e.end)
        if t <= lo or s >= hi:
            continue
        for p in ids:
            if p == e.organizer or e.attendees.get(p) in ("pending", "accepted", "tentative"):
                busy[p].append((s, t))
    blocks = sorted(b for v in busy.values() for b in v)
    free, cursor, need = [], lo, timedelta(minutes=a.duration_minutes)
    for s, t in blocks:
        if s - cursor >= need:
            free.append({"start": iso(cursor), "end": iso(s)})
        cursor = max(cursor, t)
    if hi - cursor >= need:
        free.append({"start": iso(cursor), "end": iso(hi)})
    return {"busy": {p: [{"start": iso(s), "end": iso(t)} for s, t in sorted(v)]
                     for p, v in busy.items()}, "free": free}
