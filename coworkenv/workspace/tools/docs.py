"""Documents: create, read, edit, comment, share with view/edit permissions, search."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, TypeAdapter

from ..errors import ToolError
from ..models import Comment, Document
from ._base import ToolArgs, ToolContext, tool


def _can(doc: Document, person: str, need: Literal["view", "edit"]) -> bool:
    if person == doc.owner:
        return True
    perm = doc.permissions.get(person)
    return perm == "edit" or (perm == "view" and need == "view")


def _doc(ctx: ToolContext, doc_id: str, need: Literal["view", "edit"]) -> Document:
    d = ctx.state.docs.get(doc_id)
    if d is None:
        raise ToolError("not_found", f"no document {doc_id!r}", "doc_id")
    if not _can(d, ctx.actor, need):
        raise ToolError("forbidden", f"document {doc_id!r} is not shared with you"
                        + (" for editing" if need == "edit" and _can(d, ctx.actor, "view") else ""),
                        "doc_id")
    return d


def _meta(d: Document) -> dict[str, Any]:
    return {"id": d.id, "title": d.title, "owner": d.owner, "confidentiality": d.confidentiality,
            "status": d.status, "updated_at": d.updated_at}


class CreateDocArgs(ToolArgs):
    title: str = Field(min_length=1)
    content: str = ""
    confidentiality: Literal["public", "internal", "confidential", "restricted"] = "internal"


@tool("docs_create", "docs", CreateDocArgs, writes=True)
def docs_create(ctx: ToolContext, a: CreateDocArgs) -> dict[str, Any]:
    """Create a document that you own."""
    d = Document(id=ctx.state.next_id("docs"), title=a.title, owner=ctx.actor, content=a.content,
                 confidentiality=a.confidentiality, updated_at=ctx.now_iso)
    ctx.emit("docs", "created", d)
    return _meta(d)


class DocIdArgs(ToolArgs):
    doc_id: str


class ReadDocArgs(DocIdArgs):
    last_comments: int = Field(default=20, ge=0, le=500,
                               description="How many of the newest comments to include")


_COMMENTS: TypeAdapter[list[Comment]] = TypeAdapter(list[Comment])


@tool("docs_read", "docs", ReadDocArgs, writes=False)
def docs_read(ctx: ToolContext, a: ReadDocArgs) -> dict[str, Any]:
    """Read a document you can view: content, the newest comments (and how many there are),
    who it is shared with."""
    d = _doc(ctx, a.doc_id, "view")
    # (a bounded view, as email_list's limit: a document commented on all day long would
    # otherwise make every read, and what the agent is shown, grow with its whole thread)
    shown = d.comments[-a.last_comments:] if a.last_comments else []
    return {**_meta(d), "content": d.content, "permissions": d.permissions,
            "comments": _COMMENTS.dump_python(shown), "comments_total": len(d.comments)}


class EditDocArgs(ToolArgs):
    doc_id: str
    content: str | None = Field(default=None, description="Replace the whole content")
    append: str | None = Field(default=None, description="Text to add at the end")
    title: str | None = None


@tool("docs_edit", "docs", EditDocArgs, writes=True)
def docs_edit(ctx: ToolContext, a: EditDocArgs) -> dict[str, Any]:
    """Edit a document you may edit: replace content, append text or rename."""
    d = _doc(ctx, a.doc_id, "edit")
    if a.content is None and a.append is None and a.title is None:
        raise ToolError("invalid_arguments", "give content, append or title", "content")
    content = d.content if a.content is None else a.content
    if a.append:
        content = f"{content}\n{a.append}" if content else a.append
    new = d.model_copy(update={"content": content, "title": a.title or d.title,
                               "updated_at": ctx.now_iso})
    ctx.emit("docs", "edited", new)
    return _meta(new)


class CommentArgs(ToolArgs):
    doc_id: str
    text: str = Field(min_length=1)


@tool("docs_comment", "docs", CommentArgs, writes=True)
def docs_comment(ctx: ToolContext, a: CommentArgs) -> dict[str, Any]:
    """Comment on a document you can view; the owner is told."""
    d = _doc(ctx, a.doc_id, "view")
    new = d.model_copy(update={
        "comments": [*d.comments, Comment(author=ctx.actor, text=a.text, at=ctx.now_iso)]})
    ctx.emit("docs", "commented", new, changed=("comments",))  # (the new comment only)
    ctx.notify(d.owner, "doc_comment", doc_id=d.id, title=d.title, author=ctx.actor, text=a.text)
    return {"doc_id": d.id, "comments": len(new.comments)}


class ShareArgs(ToolArgs):
    doc_id: str
    person: str = Field(description="Person id or email address, or a group's address (every "
                        "member of it)")
    permission: Literal["view", "edit", "none"] = Field(description="none removes access")


@tool("docs_share", "docs", ShareArgs, writes=True)
def docs_share(ctx: ToolContext, a: ShareArgs) -> dict[str, Any]:
    """Share a document you may edit with a person or a group (view or edit), or remove
    access."""
    d = _doc(ctx, a.doc_id, "edit")
    group = None if (ctx.state.people.get(a.person) or ctx.state.person_by_email(a.person)) \
        else ctx.state.group_by_ref(a.person)
    people = [ctx.state.people[m] for m in group.members if m in ctx.state.people] \
        if group is not None else [ctx.person(a.person, "person")]
    if group is not None and not people:
        raise ToolError("conflict", f"group {group.email} has no members", "person")
    if any(p.external for p in people) and d.confidentiality in ("confidential", "restricted"):
        raise ToolError("forbidden", f"{d.confidentiality} documents cannot be shared outside the "
                        "company", "person")
    if d.confidentiality == "restricted" and ctx.actor != d.owner:
        raise ToolError("forbidden", "only the owner can share a restricted document", "doc_id")
    perms = dict(d.permissions)
    changed = []
    for p in people:
        if p.id == d.owner:
            if group is None:
                raise ToolError("conflict", "the owner always has access", "person")
            continue
        if a.permission == "none":
            if perms.pop(p.id, None) is None:
                if group is None:
                    raise ToolError("conflict", f"{p.name} has no access to remove", "person")
                continue
        else:
            perms[p.id] = a.permission
        changed.append(p)
    if not changed:
        raise ToolError("conflict", f"nothing to change for {group.email if group else a.person}",
                        "person")
    ctx.emit("docs", "shared", d.model_copy(update={"permissions": perms}))
    if a.permission != "none":
        for p in changed:
            ctx.notify(p.id, "doc_shared", doc_id=d.id, title=d.title, by=ctx.actor,
                       permission=a.permission)
    out: dict[str, Any] = {"doc_id": d.id, "permissions": perms}
    if group is not None:
        out["group"] = group.id
    return out


class DocStatusArgs(ToolArgs):
    doc_id: str
    status: Literal["draft", "in_review", "approved", "final", "archived"]


@tool("docs_set_status", "docs", DocStatusArgs, writes=True)
def docs_set_status(ctx: ToolContext, a: DocStatusArgs) -> dict[str, Any]:
    """Set a document's status (draft, in_review, approved, final, archived); needs edit
    access."""
    d = _doc(ctx, a.doc_id, "edit")
    if d.status == a.status:
        raise ToolError("conflict", f"the document is already {a.status}", "status")
    new = d.model_copy(update={"status": a.status, "updated_at": ctx.now_iso})
    ctx.emit("docs", "status", new)
    return {**_meta(new), "status": new.status}


class DocSearchArgs(ToolArgs):
    query: str = Field(min_length=1, description="Words in the title or content")


@tool("docs_search", "docs", DocSearchArgs, writes=False)
def docs_search(ctx: ToolContext, a: DocSearchArgs) -> dict[str, Any]:
    """Search the documents you can view."""
    q = a.query.lower()
    return {"documents": [
        {**_meta(d), "snippet": d.content[:160]} for d in ctx.state.docs.values()
        if _can(d, ctx.actor, "view") and (q in d.title.lower() or q in d.content.lower())
    ]}
