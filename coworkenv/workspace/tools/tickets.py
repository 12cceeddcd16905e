"""Tickets: create, assign, comment, change status and priority, search."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ..errors import ToolError
from ..models import Comment, Ticket
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


class CreateTicketArgs(ToolArgs):
    title: str = Field(min_length=1)
    description: str = ""
    priority: Priority = "medium"
    assignee: str | None = Field(default=None, description="Person id or email address")


@tool("tickets_create", "tickets", CreateTicketArgs, writes=True)
def tickets_create(ctx: ToolContext, a: CreateTicketArgs) -> dict[str, Any]:
    """Open a new ticket."""
    assignee = ctx.person(a.assignee, "assignee").id if a.assignee else None
    t = Ticket(id=ctx.state.next_id("tickets"), title=a.title, description=a.description,
               reporter=ctx.actor, assignee=assignee, priority=a.priority, updated_at=ctx.now_iso)
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
    ctx.emit("tickets", "commented", new)
    for p in {t.reporter, t.assignee} - {None}:
        ctx.notify(str(p), "ticket_comment", ticket_id=t.id, author=ctx.actor, text=a.text)
    return {"ticket_id": t.id, "comments": len(new.comments)}


class UpdateTicketArgs(ToolArgs):
    ticket_id: str
    status: Status | None = None
    priority: Priority | None = None


_ALLOWED: dict[str, set[str]] = {
    "open": {"in_progress", "blocked", "resolved", "closed"},
    "in_progress": {"open", "blocked", "resolved", "closed"},
    "blocked": {"open", "in_progress", "closed"},
    "resolved": {"closed", "open"},
    "closed": {"open"},
}


@tool("tickets_update", "tickets", UpdateTicketArgs, writes=True)
def tickets_update(ctx: ToolContext, a: UpdateTicketArgs) -> dict[str, Any]:
    """Change a ticket's status and/or priority."""
    t = _ticket(ctx, a.ticket_id)
    if a.status is None and a.priority is None:
        raise ToolError("invalid_arguments", "give status or priority", "status")
    if a.status and a.status != t.status and a.status not in _ALLOWED[t.status]:
        raise ToolError("conflict", f"cannot move a ticket from {t.status} to {a.status}", "status")
    new = t.model_copy(update={"status": a.status or t.status, "priority": a.priority or t.priority,
                               "updated_at": ctx.now_iso})
    ctx.emit("tickets", "updated", new)
    return _render(new)


class TicketSearchArgs(ToolArgs):
    query: str = Field(default="", description="Words in the title or description")
    status: Status | None = None
    assignee: str | None = None
    priority: Priority | None = None


@tool("tickets_search", "tickets", TicketSearchArgs, writes=False)
def tickets_search(ctx: ToolContext, a: TicketSearchArgs) -> dict[str, Any]:
    """Search tickets by words, status, assignee or priority."""
    q = a.query.lower()
    who = ctx.person(a.assignee, "assignee").id if a.assignee else None
    ext = ctx.me().external
    rows = [
        {k: v for k, v in _render(t).items() if k != "comments"}
        for t in ctx.state.tickets.values()
        if (not q or q in t.title.lower() or q in t.description.lower())
        and (a.status is None or t.status == a.status)
        and (a.priority is None or t.priority == a.priority)
        and (who is None or t.assignee == who)
        and (not ext or ctx.actor in (t.reporter, t.assignee))
    ]
    return {"tickets": rows}
