"""Chat: channels, direct messages, posting, reading, search, reactions."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ..errors import ToolError
from ..models import Channel, ChatMessage
from ._base import ToolArgs, ToolContext, tool


def _channel(ctx: ToolContext, ref: str, fieldname: str = "channel") -> Channel:
    name = ref.lstrip("#")
    ch = ctx.state.channels.get(name) or next(
        (c for c in ctx.state.channels.values() if c.name == name and not c.is_dm), None
    )
    if ch is None:
        raise ToolError("not_found", f"no channel {ref!r}", fieldname)
    if ctx.actor not in ch.members:
        raise ToolError("forbidden", f"you are not a member of #{ch.name}", fieldname)
    return ch


def _dm(ctx: ToolContext, other: str, *, create: bool) -> Channel | None:
    pair = sorted([ctx.actor, other])
    cid = f"dm-{pair[0]}-{pair[1]}"
    ch = ctx.state.channels.get(cid)
    if ch is None and create:
        ch = Channel(id=cid, name=cid, members=pair, internal_only=False, is_dm=True)
        ctx.emit("channel", "created", ch)
    return ch


def _post(ctx: ToolContext, ch: Channel, text: str) -> dict[str, Any]:
    mid = ctx.state.next_id("chat")
    msg = ChatMessage(id=mid, channel=ch.id, sender=ctx.actor, text=text, sent_at=ctx.now_iso)
    ctx.emit("chat", "posted", msg)
    for p in ch.members:
        ctx.notify(p, "chat", channel=ch.id, channel_name=ch.name, dm=ch.is_dm,
                   message_id=mid, sender=ctx.actor, text=text)
    return {"message_id": mid, "channel": ch.id}


def _render(m: ChatMessage) -> dict[str, Any]:
    return {"id": m.id, "sender": m.sender, "text": m.text, "sent_at": m.sent_at,
            "reactions": m.reactions}


class ListChannelsArgs(ToolArgs):
    pass


@tool("chat_list_channels", "chat", ListChannelsArgs, writes=False)
def chat_list_channels(ctx: ToolContext, a: ListChannelsArgs) -> dict[str, Any]:
    """List the chat channels you belong to (direct messages included)."""
    return {"channels": [
        {"id": c.id, "name": c.name, "members": c.members, "dm": c.is_dm,
         "internal_only": c.internal_only}
        for c in ctx.state.channels.values() if ctx.actor in c.members
    ]}


class PostArgs(ToolArgs):
    channel: str = Field(description="Channel name (with or without #) or id")
    text: str = Field(min_length=1, description="Message text")


@tool("chat_post", "chat", PostArgs, writes=True)
def chat_post(ctx: ToolContext, a: PostArgs) -> dict[str, Any]:
    """Post a message in a channel you belong to."""
    return _post(ctx, _channel(ctx, a.channel), a.text)


class DmArgs(ToolArgs):
    to: str = Field(description="Person id or email address")
    text: str = Field(min_length=1, description="Message text")


@tool("chat_send_dm", "chat", DmArgs, writes=True)
def chat_send_dm(ctx: ToolContext, a: DmArgs) -> dict[str, Any]:
    """Send a direct message to one person."""
    other = ctx.person(a.to, "to")
    if other.id == ctx.actor:
        raise ToolError("invalid_arguments", "you cannot message yourself", "to")
    ch = _dm(ctx, other.id, create=True)
    assert ch is not None
    return _post(ctx, ch, a.text)


class ReadArgs(ToolArgs):
    channel: str | None = Field(default=None, description="Channel name or id")
    with_person: str | None = Field(default=None, description="Read your DMs with this person")
    limit: int = Field(default=30, ge=1, le=200)


@tool("chat_read", "chat", ReadArgs, writes=False)
def chat_read(ctx: ToolContext, a: ReadArgs) -> dict[str, Any]:
    """Read the latest messages of a channel, or of your direct messages with a person."""
    if (a.channel is None) == (a.with_person is None):
        raise ToolError("invalid_arguments", "give exactly one of channel or with_person", "channel")
    if a.with_person is not None:
        ch = _dm(ctx, ctx.person(a.with_person, "with_person").id, create=False)
        if ch is None:
            return {"channel": None, "messages": []}
    else:
        ch = _channel(ctx, a.channel or "")
    msgs = [_render(m) for m in ctx.state.chat.values() if m.channel == ch.id]
    return {"channel": ch.id, "messages": msgs[-a.limit :]}


class ChatSearchArgs(ToolArgs):
    query: str = Field(min_length=1, description="Words to look for (case-insensitive)")


@tool("chat_search", "chat", ChatSearchArgs, writes=False)
def chat_search(ctx: ToolContext, a: ChatSearchArgs) -> dict[str, Any]:
    """Search messages in every channel you belong to."""
    q = a.query.lower()
    mine = {c.id for c in ctx.state.channels.values() if ctx.actor in c.members}
    return {"messages": [
        {**_render(m), "channel": m.channel}
        for m in ctx.state.chat.values() if m.channel in mine and q in m.text.lower()
    ]}


class ReactArgs(ToolArgs):
    message_id: str
    emoji: str = Field(min_length=1, max_length=32, description="e.g. thumbsup")


@tool("chat_react", "chat", ReactArgs, writes=True)
def chat_react(ctx: ToolContext, a: ReactArgs) -> dict[str, Any]:
    """Add your reaction to a message."""
    m = ctx.state.chat.get(a.message_id)
    if m is None:
        raise ToolError("not_found", f"no message {a.message_id!r}", "message_id")
    _channel(ctx, m.channel, "message_id")
    people = m.reactions.get(a.emoji, [])
    if ctx.actor in people:
        raise ToolError("conflict", f"you already reacted with {a.emoji}", "emoji")
    ctx.emit("chat", "reacted", m.model_copy(update={
        "reactions": {**m.reactions, a.emoji: [*people, ctx.actor]}}))
    return {"message_id": m.id, "emoji": a.emoji}


class CreateChannelArgs(ToolArgs):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{1,40}$", description="lowercase channel name")
    members: list[str] = Field(default_factory=list, description="People to add besides you")
    internal_only: bool = Field(default=True, description="Refuse external members")


@tool("chat_create_channel", "chat", CreateChannelArgs, writes=True)
def chat_create_channel(ctx: ToolContext, a: CreateChannelArgs) -> dict[str, Any]:
    """Create a channel and add members."""
    if any(c.name == a.name for c in ctx.state.channels.values()):
        raise ToolError("conflict", f"channel #{a.name} already exists", "name")
    members = [ctx.actor]
    for i, r in enumerate(a.members):
        p = ctx.person(r, f"members[{i}]")
        if a.internal_only and p.external:
            raise ToolError("forbidden", f"{p.email} is external; #{a.name} is internal-only",
                            f"members[{i}]")
        members.append(p.id)
    ch = Channel(id=a.name, name=a.name, members=list(dict.fromkeys(members)),
                 internal_only=a.internal_only)
    ctx.emit("channel", "created", ch)
    return {"channel": ch.id, "members": ch.members}


class InviteArgs(ToolArgs):
    channel: str
    person: str = Field(description="Person id or email address")


@tool("chat_invite", "chat", InviteArgs, writes=True)
def chat_invite(ctx: ToolContext, a: InviteArgs) -> dict[str, Any]:
    """Add a person to a channel you belong to."""
    ch = _channel(ctx, a.channel)
    if ch.is_dm:
        raise ToolError("conflict", "direct messages have fixed members", "channel")
    p = ctx.person(a.person, "person")
    if ch.internal_only and p.external:
        raise ToolError("forbidden", f"{p.email} is external; #{ch.name} is internal-only", "person")
    if p.id in ch.members:
        raise ToolError("conflict", f"{p.name} is already in #{ch.name}", "person")
    ctx.emit("channel", "joined", ch.model_copy(update={"members": [*ch.members, p.id]}))
    ctx.notify(p.id, "chat_invite", channel=ch.id, by=ctx.actor)
    return {"channel": ch.id, "added": p.id}
