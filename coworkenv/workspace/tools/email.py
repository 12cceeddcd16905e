"""Email: send, reply, forward, read, list, search, labels, delete; attachments are documents."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ..errors import ToolError
from ..models import Email
from ._base import ToolArgs, ToolContext, tool


def _visible(ctx: ToolContext, m: Email) -> bool:
    me = ctx.actor
    return (me == m.sender or me in m.to or me in m.cc) and me not in m.deleted_by


def _get(ctx: ToolContext, email_id: str, fieldname: str = "email_id") -> Email:
    m = ctx.state.emails.get(email_id)
    if m is None or not _visible(ctx, m):
        raise ToolError("not_found", f"no email {email_id!r} in your mailbox", fieldname)
    return m


def _unread(m: Email, me: str) -> bool:
    return me not in m.read_by and me != m.sender


def _summary(m: Email, me: str) -> dict[str, Any]:
    return {
        "id": m.id,
        "from": m.sender,
        "to": m.to,
        "cc": m.cc,
        "subject": m.subject,
        "sent_at": m.sent_at,
        "unread": _unread(m, me),
        "labels": m.labels.get(me, []),
        "attachments": m.attachments,
    }


def _check_attachments(ctx: ToolContext, docs: list[str]) -> None:
    for i, d in enumerate(docs):
        doc = ctx.state.docs.get(d)
        if doc is None:
            raise ToolError("not_found", f"no document {d!r}", f"attachments[{i}]")
        if ctx.actor != doc.owner and ctx.actor not in doc.permissions:
            raise ToolError("forbidden", f"document {d!r} is not shared with you", f"attachments[{i}]")


def _resolve(ctx: ToolContext, refs: list[str], fieldname: str) -> tuple[list[str], list[str]]:
    """People (ids or addresses) and groups (their members) as person ids, and the groups."""
    people: list[str] = []
    groups: list[str] = []
    for i, r in enumerate(refs):
        ids, group = ctx.recipients(r, f"{fieldname}[{i}]")
        people += [p for p in ids if p not in people]
        if group is not None:
            groups.append(group)
    return people, groups


def _deliver(ctx: ToolContext, m: Email) -> dict[str, Any]:
    ctx.emit("email", "sent", m)
    for p in dict.fromkeys(m.to + m.cc):
        ctx.notify(p, "email", email_id=m.id, sender=m.sender, subject=m.subject, body=m.body)
    return {"email_id": m.id, "thread": m.thread}


class EmailSendArgs(ToolArgs):
    to: list[str] = Field(min_length=1, description="Recipients: person ids or email addresses")
    subject: str = Field(description="Subject line")
    body: str = Field(description="Plain-text body")
    cc: list[str] = Field(default_factory=list, description="Copied recipients")
    attachments: list[str] = Field(default_factory=list, description="Document ids to attach")


@tool("email_send", "email", EmailSendArgs, writes=True)
def email_send(ctx: ToolContext, a: EmailSendArgs) -> dict[str, Any]:
    """Send a new email."""
    to, groups = _resolve(ctx, a.to, "to")
    cc, cc_groups = _resolve(ctx, a.cc, "cc")
    _check_attachments(ctx, a.attachments)
    eid = ctx.state.next_id("email")
    m = Email(id=eid, sender=ctx.actor, to=to, cc=[p for p in cc if p not in to],
              subject=a.subject, body=a.body, attachments=a.attachments, thread=eid,
              sent_at=ctx.now_iso, read_by=[ctx.actor], groups=groups + cc_groups)
    return _deliver(ctx, m)


class EmailReplyArgs(ToolArgs):
    email_id: str = Field(description="The email to reply to")
    body: str = Field(description="Plain-text body")
    reply_all: bool = Field(default=False, description="Also reply to every other recipient")


@tool("email_reply", "email", EmailReplyArgs, writes=True)
def email_reply(ctx: ToolContext, a: EmailReplyArgs) -> dict[str, Any]:
    """Reply to an email in its thread."""
    orig = _get(ctx, a.email_id)
    to = [orig.sender] if orig.sender != ctx.actor else list(orig.to)
    cc = [p for p in orig.to + orig.cc if p not in to and p != ctx.actor] if a.reply_all else []
    subject = orig.subject if orig.subject.lower().startswith("re:") else f"Re: {orig.subject}"
    eid = ctx.state.next_id("email")
    m = Email(id=eid, sender=ctx.actor, to=to, cc=cc, subject=subject, body=a.body,
              thread=orig.thread or orig.id, in_reply_to=orig.id, sent_at=ctx.now_iso,
              read_by=[ctx.actor])
    return _deliver(ctx, m)


class EmailForwardArgs(ToolArgs):
    email_id: str = Field(description="The email to forward")
    to: list[str] = Field(min_length=1, description="Recipients: person ids or email addresses")
    body: str = Field(default="", description="A note above the forwarded message")


@tool("email_forward", "email", EmailForwardArgs, writes=True)
def email_forward(ctx: ToolContext, a: EmailForwardArgs) -> dict[str, Any]:
    """Forward an email (with its attachments) to other people."""
    orig = _get(ctx, a.email_id)
    to, groups = _resolve(ctx, a.to, "to")
    eid = ctx.state.next_id("email")
    body = f"{a.body}\n\n---------- Forwarded message ----------\nFrom: {orig.sender}\n" \
           f"Subject: {orig.subject}\n\n{orig.body}"
    m = Email(id=eid, sender=ctx.actor, to=to, subject=f"Fwd: {orig.subject}", body=body,
              attachments=list(orig.attachments), thread=eid, in_reply_to=orig.id,
              sent_at=ctx.now_iso, read_by=[ctx.actor], groups=groups)
    return _deliver(ctx, m)


class EmailIdArgs(ToolArgs):
    email_id: str = Field(description="Email id")


@tool("email_read", "email", EmailIdArgs, writes=False)
def email_read(ctx: ToolContext, a: EmailIdArgs) -> dict[str, Any]:
    """Open an email: full body, recipients and attachments; marks it read."""
    m = _get(ctx, a.email_id)
    if ctx.actor not in m.read_by:
        ctx.emit("email", "read", m.model_copy(update={"read_by": [*m.read_by, ctx.actor]}))
    return {**_summary(m, ctx.actor), "body": m.body, "unread": False, "in_reply_to": m.in_reply_to}


class EmailListArgs(ToolArgs):
    folder: str = Field(default="inbox", pattern="^(inbox|sent|all)$", description="inbox, sent or all")
    label: str | None = Field(default=None, description="Only emails with this label")
    unread_only: bool = False
    limit: int = Field(default=20, ge=1, le=100)


@tool("email_list", "email", EmailListArgs, writes=False)
def email_list(ctx: ToolContext, a: EmailListArgs) -> dict[str, Any]:
    """List emails in your mailbox, newest first."""
    me = ctx.actor
    found = []
    for m in ctx.state.emails.values():
        if not _visible(ctx, m):
            continue
        if a.folder == "inbox" and me not in m.to and me not in m.cc:
            continue
        if a.folder == "sent" and m.sender != me:
            continue
        if a.label and a.label not in m.labels.get(me, []):
            continue
        if a.unread_only and not _unread(m, me):
            continue
        found.append(m)
    found.sort(key=lambda m: (m.sent_at, m.id), reverse=True)
    return {"emails": [_summary(m, me) for m in found[: a.limit]]}  # (only those returned)


class QueryArgs(ToolArgs):
    query: str = Field(min_length=1, description="Words to look for (case-insensitive)")


@tool("email_search", "email", QueryArgs, writes=False)
def email_search(ctx: ToolContext, a: QueryArgs) -> dict[str, Any]:
    """Search your mailbox by words in the subject or body."""
    q = a.query.lower()
    hits = [
        {**_summary(m, ctx.actor), "snippet": m.body[:160]}
        for m in ctx.state.emails.values()
        if _visible(ctx, m) and (q in m.subject.lower() or q in m.body.lower())
    ]
    return {"emails": hits}


class EmailLabelArgs(ToolArgs):
    email_id: str
    add: list[str] = Field(default_factory=list, description="Labels to add")
    remove: list[str] = Field(default_factory=list, description="Labels to remove")


@tool("email_label", "email", EmailLabelArgs, writes=True)
def email_label(ctx: ToolContext, a: EmailLabelArgs) -> dict[str, Any]:
    """Add or remove labels on an email in your mailbox."""
    m = _get(ctx, a.email_id)
    if not a.add and not a.remove:
        raise ToolError("invalid_arguments", "give labels to add or remove", "add")
    mine = [x for x in m.labels.get(ctx.actor, []) if x not in a.remove]
    mine += [x for x in a.add if x not in mine]
    ctx.emit("email", "labelled", m.model_copy(update={"labels": {**m.labels, ctx.actor: mine}}))
    return {"email_id": m.id, "labels": mine}


@tool("email_delete", "email", EmailIdArgs, writes=True)
def email_delete(ctx: ToolContext, a: EmailIdArgs) -> dict[str, Any]:
    """Delete an email from your mailbox (other people's copies stay)."""
    m = _get(ctx, a.email_id)
    ctx.emit("email", "deleted", m.model_copy(update={"deleted_by": [*m.deleted_by, ctx.actor]}))
    return {"email_id": m.id, "deleted": True}
