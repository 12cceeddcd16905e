"""Differences between two workspace states, and a readable rendering of one."""

from __future__ import annotations

from typing import Any

from .models import WorkspaceState


def diff_states(a: WorkspaceState, b: WorkspaceState) -> dict[str, dict[str, Any]]:
    """Per app: entities added, removed, and changed (field -> [before, after])."""
    ja, jb = a.to_json(), b.to_json()
    out: dict[str, dict[str, Any]] = {}
    for app in ja:
        ra, rb = ja[app], jb[app]
        added = {k: rb[k] for k in rb.keys() - ra.keys()}
        removed = sorted(ra.keys() - rb.keys())
        changed = {}
        for k in ra.keys() & rb.keys():
            if ra[k] != rb[k]:
                changed[k] = {f: [ra[k].get(f), rb[k].get(f)]
                              for f in sorted(set(ra[k]) | set(rb[k]))
                              if ra[k].get(f) != rb[k].get(f)}
        if added or removed or changed:
            out[app] = {"added": dict(sorted(added.items())), "removed": removed,
                        "changed": dict(sorted(changed.items()))}
    return out


def describe_state(state: WorkspaceState) -> list[str]:
    """Mailboxes, channels, calendars, documents and tickets as lines of text."""
    lines: list[str] = []
    people = state.people
    lines.append(f"directory: {len(people)} people")
    lines.append("email:")
    for m in sorted(state.emails.values(), key=lambda m: (m.sent_at, m.id)):
        labels = {p: v for p, v in m.labels.items() if v}
        lines.append(f"  {m.id} {m.sent_at} {m.sender} -> {', '.join(m.to + m.cc)}: "
                     f"{m.subject!r}" + (f" attachments={m.attachments}" if m.attachments else "")
                     + (f" labels={labels}" if labels else "")
                     + (f" deleted_by={m.deleted_by}" if m.deleted_by else ""))
    lines.append("chat:")
    for c in state.channels.values():
        msgs = [x for x in state.chat.values() if x.channel == c.id]
        lines.append(f"  #{c.name} ({', '.join(c.members)}): {len(msgs)} message(s)")
        lines.extend(f"    {x.id} {x.sender}: {x.text}" for x in msgs[-5:])
    lines.append("calendar:")
    for e in sorted(state.calendar.values(), key=lambda e: (e.start, e.id)):
        att = ", ".join(f"{p}:{r}" for p, r in e.attendees.items())
        lines.append(f"  {e.id} {e.start}..{e.end} {e.title!r} by {e.organizer} [{att}] "
                     f"{e.status}")
    lines.append("documents:")
    for d in state.docs.values():
        perms = ", ".join(f"{p}:{v}" for p, v in d.permissions.items())
        lines.append(f"  {d.id} {d.title!r} ({d.confidentiality}) owner {d.owner}"
                     + (f" shared [{perms}]" if perms else "")
                     + (f" {len(d.comments)} comment(s)" if d.comments else ""))
    lines.append("tickets:")
    for t in state.tickets.values():
        lines.append(f"  {t.id} {t.title!r} {t.status}/{t.priority} assignee {t.assignee} "
                     f"reporter {t.reporter}" + (f" {len(t.comments)} comment(s)"
                                                 if t.comments else ""))
    return lines
