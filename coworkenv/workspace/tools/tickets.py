"""Tickets: create, assign, comment, change status and priority, search."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ..errors import ToolError
from ..models import Comment, Ticket, TicketQueue
from ..text import as_number
from ._base import ToolArgs, ToolContext, tool

Status = Literal["open", "in_progress", "blocked", "resolved", "closed"]
Priority = Literal["low", "medium", "high", "urgent"]


def _ticket(ctx: ToolContext, ticket_id: str) -> Ticket:
    t = ctx.state.tickets.get(ticket_id)
    if t is None:
        raise ToolError("not_found", f"no ticket {ticket_id!r}", "ticket_id")
    if ctx.me().external and ctx.actor not in (t.reporter, t.assignee):
        raise ToolError("forbidden", "external people see only their own tickets", "ticket_id")
    return t


def _render(t: Ticket) -> dict[str, Any]:
    return t.model_dump(mode="json")


def _queue(ctx: ToolContext, ref: str) -> TicketQueue:
    q = ctx.state.queues.get(ref) or next(
        (q for q in ctx.state.queues.values() if q.name.lower() == ref.lower()), None)
    if q is None:
        known = ", ".join(sorted(ctx.state.queues)) or "none"
        raise ToolError("not_found", f"no queue {ref!r} (queues: {known})", "queue")
    return q


def _typed(q: TicketQueue | None, fields: dict[str, Any],
           old: dict[str, str | float | bool]) -> dict[str, str | float | bool]:
    """Custom fields checked against the queue's types (numbers accept "$1,250")."""
    if fields and q is None:
        raise ToolError("invalid_arguments", "custom fields need a queue", "fields")
    out = dict(old)
    for name, value in fields.items():
        assert q is not None
        kind = q.fields.get(name)
        if kind is None:
            raise ToolError("invalid_arguments", f"queue {q.id} has no field {name!r} (fields: "
                            f"{', '.join(q.fields) or 'none'})", f"fields.{name}")
        if kind == "number":
            num = value if isinstance(value, int | float) and not isinstance(value, bool) \
                else as_number(str(value))
            if num is None:
                raise ToolError("invalid_arguments", f"{name} must be a number, got {value!r}",
                                f"fields.{name}")
            out[name] = float(num)
        elif kind == "bool":
            if not isinstance(value, bool):
                raise ToolError("invalid_arguments", f"{name} must be true or false",
                                f"fields.{name}")
            out[name] = value
        else:
            out[name] = str(value)
    return out


class CreateTicketArgs(ToolArgs):
    title: str = Field(min_length=1)
    description: str = ""
    priority: Priority = "medium"
    assignee: str | None = Field(default=None, description="Person id or email address")
    queue: str | None = Field(default=None, description="Queue id or name to route it to")
    fields: dict[str, str | float | bool] = Field(default_factory=dict, description="Custom "
                                                   "fields of the queue, by name")


@tool("tickets_create", "tickets", CreateTicketArgs, writes=True)
def tickets_create(ctx: ToolContext, a: CreateTicketArgs) -> dict[str, Any]:
    """Open a new ticket, optionally in a queue with its custom fields."""
    assignee = ctx.person(a.assignee, "assignee").id if a.assignee else None
    q = _queue(ctx, a.queue) if a.queue else None
    fields = _typed(q, a.fields, {})
    t = Ticket(id=ctx.state.next_id("tickets"), title=a.title, description=a.description,
               reporter=ctx.actor, assignee=assignee, priority=a.priority, updated_at=ctx.now_iso,
               queue=q.id if q else None, fields=fields, created_at=ctx.now_iso)
    ctx.emit("tickets", "created", t)
    if assignee:
        ctx.notify(assignee, "ticket_assigned", ticket_id=t.id, title=t.title, by=ctx.actor)
    return _render(t)


class TicketIdArgs(ToolArgs):
    ticket_id: str


@tool("tickets_read", "tickets", TicketIdArgs, writes=False)
def tickets_read(ctx: ToolContext, a: TicketIdArgs) -> dict[str, Any]:
    """Show a ticket with its comments."""
    return _render(_ticket(ctx, a.ticket_id))


class AssignArgs(ToolArgs):
    ticket_id: str
    assignee: str = Field(description="Person id or email address")


@tool("tickets_assign", "tickets", AssignArgs, writes=True)
def tickets_assign(ctx: ToolContext, a: AssignArgs) -> dict[str, Any]:
    """Assign a ticket to a person in the company."""
    t = _ticket(ctx, a.ticket_id)
    p = ctx.person(a.assignee, "assignee")
    if p.external:
        raise ToolError("forbidden", "tickets can only be assigned to employees", "assignee")
    if t.status == "closed":
        raise ToolError("conflict", "the ticket is closed", "ticket_id")
    new = t.model_copy(update={"assignee": p.id, "updated_at": ctx.now_iso})
    ctx.emit("tickets", "assigned", new)
    ctx.notify(p.id, "ticket_assigned", ticket_id=t.id, title=t.title, by=ctx.actor)
    return _render(new)


class TicketCommentArgs(ToolArgs):
    ticket_id: str
    text: str = Field(min_length=1)


@tool("tickets_comment", "tickets", TicketCommentArgs, writes=True)
def tickets_comment(ctx: ToolContext, a: TicketCommentArgs) -> dict[str, Any]:
    """Comment on a ticket; the reporter and assignee are told."""
    t = _ticket(ctx, a.ticket_id)
    new = t.model_copy(update={
        "comments": [*t.comments, Comment(author=ctx.actor, text=a.text, at=ctx.now_iso)],
        "updated_at": ctx.now_iso})
    ctx.emit("tickets", "commented", new, changed=("comments", "updated_at"))
    for p in dict.fromkeys(x for x in (t.reporter, t.assignee) if x):  # (in a fixed order)
        ctx.notify(str(p), "ticket_comment", ticket_id=t.id, author=ctx.actor, text=a.text)
    return {"ticket_id": t.id, "comments": len(new.comments)}


class UpdateTicketArgs(ToolArgs):
    ticket_id: str
    status: Status | None = None
    priority: Priority | None = None
    queue: str | None = Field(default=None, description="Route it to this queue (id or name)")
    fields: dict[str, str | float | bool] = Field(default_factory=dict, description="Custom "
                                                   "fields to set, by name")


_ALLOWED: dict[str, set[str]] = {
    "open": {"in_progress", "blocked", "resolved", "closed"},
    "in_progress": {"open", "blocked", "resolved", "closed"},
    "blocked": {"open", "in_progress", "closed"},
    "resolved": {"closed", "open"},
    "closed": {"open"},
}


@tool("tickets_update", "tickets", UpdateTicketArgs, writes=True)
def tickets_update(ctx: ToolContext, a: UpdateTicketArgs) -> dict[str, Any]:
    """Change a ticket's status, priority, queue or custom fields (the queue's workflow says
    which status changes are allowed)."""
    t = _ticket(ctx, a.ticket_id)
    if a.status is None and a.priority is None and a.queue is None and not a.fields:
        raise ToolError("invalid_arguments", "give status, priority, queue or fields", "status")
    owned = ctx.state.queues.get(t.queue or "")
    if owned is not None and ctx.actor not in (t.reporter, t.assignee, *owned.members):
        raise ToolError("forbidden", f"ticket {t.id} is in queue {owned.id}: only its reporter, "
                        f"its assignee or the queue's members may change it", "ticket_id")
    q = _queue(ctx, a.queue) if a.queue else ctx.state.queues.get(t.queue or "")
    fields = _typed(q, a.fields, t.fields)
    allowed = q.transitions if q is not None and q.transitions is not None else _ALLOWED
    if a.status and a.status != t.status and a.status not in allowed.get(t.status, []):
        raise ToolError("conflict", f"cannot move a ticket from {t.status} to {a.status} "
                        f"(allowed: {', '.join(allowed.get(t.status, [])) or 'none'})", "status")
    if a.status in ("resolved", "closed") and q is not None:
        missing = [f for f in q.required if f not in fields]
        if missing:
            raise ToolError("conflict", f"queue {q.id} needs {', '.join(missing)} before a "
                            f"ticket is {a.status}", "fields")
    new = t.model_copy(update={
        "status": a.status or t.status, "priority": a.priority or t.priority,
        "queue": q.id if q is not None else t.queue, "fields": fields,
        "updated_at": ctx.now_iso,
        "resolved_at": ctx.now_iso if a.status in ("resolved", "closed") and not t.resolved_at
        else t.resolved_at})
    ctx.emit("tickets", "updated", new)
    return _render(new)


class TicketSearchArgs(ToolArgs):
    query: str = Field(default="", description="Words in the title or description")
    status: Status | None = None
    assignee: str | None = None
    priority: Priority | None = None
    queue: str | None = Field(default=None, description="Queue id or name")
    fields: dict[str, str | float | bool] = Field(default_factory=dict, description="Custom "
                                                   "field values that must match")


@tool("tickets_search", "tickets", TicketSearchArgs, writes=False)
def tickets_search(ctx: ToolContext, a: TicketSearchArgs) -> dict[str, Any]:
    """Search tickets by words, status, assignee, priority, queue or custom fields."""
    q = a.query.lower()
    who = ctx.person(a.assignee, "assignee").id if a.assignee else None
    queue = _queue(ctx, a.queue).id if a.queue else None
    ext = ctx.me().external
    rows = [
        {k: v for k, v in _render(t).items() if k != "comments"}
        for t in ctx.state.tickets.values()
        if (not q or q in t.title.lower() or q in t.description.lower())
        and (a.status is None or t.status == a.status)
        and (a.priority is None or t.priority == a.priority)
        and (who is None or t.assignee == who)
        and (not ext or ctx.actor in (t.reporter, t.assignee))
        and (queue is None or t.queue == queue)
        and all(field_equals(t.fields.get(k), v) for k, v in a.fields.items())
    ]
    return {"tickets": rows}


def field_equals(got: Any, want: Any) -> bool:
    """A custom field against a wanted value: figures by value, text case-folded."""
    if got is None:
        return False
    if isinstance(got, bool) or isinstance(want, bool):
        return got is want or str(got).lower() == str(want).lower()
    g = got if isinstance(got, int | float) else as_number(str(got))
    w = want if isinstance(want, int | float) else as_number(str(want))
    if g is not None and w is not None:
        return abs(float(g) - float(w)) < 1e-6
    return str(got).casefold() == str(want).casefold()


class QueueListArgs(ToolArgs):
    pass


@tool("tickets_list_queues", "tickets", QueueListArgs, writes=False)
def tickets_list_queues(ctx: ToolContext, a: QueueListArgs) -> dict[str, Any]:
    """List ticket queues with their custom fields, required fields and status workflow."""
    return {"queues": [q.model_dump(mode="json") for q in ctx.state.queues.values()]}
