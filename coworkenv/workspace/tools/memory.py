"""Memory: private notes an agent keeps for itself (a key and a text), written, searched and
read through tools, so that what an agent remembers over a long simulation is workspace state
like everything else: events in the log, replayed, graded, exported."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from ..errors import ToolError
from ..models import Note
from ._base import ToolArgs, ToolContext, tool

_WORD = re.compile(r"[\w$%.,:/-]+")


def _mine(ctx: ToolContext) -> dict[str, Note]:
    """The actor's notes, by key."""
    return {n.key: n for n in ctx.state.table("notes").values() if n.owner == ctx.actor}


def _shown(n: Note) -> dict[str, Any]:
    return {"key": n.key, "text": n.text, "updated_at": n.updated_at}


class WriteArgs(ToolArgs):
    key: str = Field(min_length=1, max_length=120, description="What the note is about (a "
                     "word or a few: how you will look it up)")
    text: str = Field(min_length=1, max_length=4000, description="What to remember")


@tool("memory_write", "memory", WriteArgs, writes=True)
def memory_write(ctx: ToolContext, a: WriteArgs) -> dict[str, Any]:
    """Keep a note for yourself under a key, to look up later (writing a key again replaces
    its text). Your notes are private: only you can read them."""
    old = _mine(ctx).get(a.key)
    if old is None:
        n = Note(id=ctx.state.next_id("notes"), owner=ctx.actor, key=a.key, text=a.text,
                 updated_at=ctx.now_iso)
        ctx.emit("notes", "created", n)
    else:
        n = old.model_copy(update={"text": a.text, "updated_at": ctx.now_iso})
        ctx.emit("notes", "updated", n, changed=("text", "updated_at"))
    return {"key": n.key, "kept": True}


class SearchArgs(ToolArgs):
    query: str = Field(min_length=1, max_length=400, description="Words to look for in your "
                       "notes' keys and texts")
    limit: int = Field(default=5, ge=1, le=50)


@tool("memory_search", "memory", SearchArgs, writes=False)
def memory_search(ctx: ToolContext, a: SearchArgs) -> dict[str, Any]:
    """Find your notes whose key or text holds words of the query, best match first (the
    most words in common, then the newest)."""
    words = {w.lower().strip(".,:") for w in _WORD.findall(a.query)} - {""}
    scored = []
    for n in _mine(ctx).values():
        have = {w.lower().strip(".,:") for w in _WORD.findall(f"{n.key} {n.text}")}
        hits = len(words & have)
        if hits:
            scored.append((-hits, n.updated_at, n.id, n))
    scored.sort(key=lambda x: x[1], reverse=True)  # (stable sorts: newest first, then
    scored.sort(key=lambda x: x[0])                   # the most words in common first)
    found = [_shown(n) for *_, n in scored[:a.limit]]
    return {"notes": found, "count": len(scored)}


class KeyArgs(ToolArgs):
    key: str = Field(min_length=1, max_length=120)


@tool("memory_read", "memory", KeyArgs, writes=False)
def memory_read(ctx: ToolContext, a: KeyArgs) -> dict[str, Any]:
    """Read one of your notes by its key."""
    n = _mine(ctx).get(a.key)
    if n is None:
        keys = sorted(_mine(ctx))[:20]
        raise ToolError("not_found", f"no note {a.key!r} (your notes: {keys})", "key")
    return _shown(n)


@tool("memory_forget", "memory", KeyArgs, writes=True)
def memory_forget(ctx: ToolContext, a: KeyArgs) -> dict[str, Any]:
    """Drop one of your notes."""
    n = _mine(ctx).get(a.key)
    if n is None:
        raise ToolError("not_found", f"no note {a.key!r}", "key")
    ctx.emit("notes", "deleted", None, entity_id=n.id)
    return {"key": a.key, "forgotten": True}
