"""Directory: people, roles, teams, managers, external contacts."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ..errors import ToolError
from ..models import Person
from ._base import ToolArgs, ToolContext, tool


def person_card(p: Person) -> dict[str, Any]:
    return p.model_dump(mode="json")


class DirectorySearchArgs(ToolArgs):
    query: str = Field(default="", description="Matches name, email, role or team (case-insensitive)")
    include_external: bool = Field(default=True, description="Include external contacts")


@tool("directory_search", "directory", DirectorySearchArgs, writes=False)
def directory_search(ctx: ToolContext, a: DirectorySearchArgs) -> dict[str, Any]:
    """Search the company directory for people by name, email, role or team."""
    q = a.query.lower()
    hits = [
        person_card(p)
        for p in ctx.state.people.values()
        if (a.include_external or not p.external)
        and (not q or any(q in s.lower() for s in (p.name, p.email, p.role, p.team)))
    ]
    return {"people": hits}


class PersonArgs(ToolArgs):
    person: str = Field(description="Person id or email address")


@tool("directory_get_person", "directory", PersonArgs, writes=False)
def directory_get_person(ctx: ToolContext, a: PersonArgs) -> dict[str, Any]:
    """Show one person's directory card: role, team, manager, time zone."""
    return person_card(ctx.person(a.person, "person"))


class TeamArgs(ToolArgs):
    team: str = Field(description="Team name (exact, case-insensitive)")


@tool("directory_list_team", "directory", TeamArgs, writes=False)
def directory_list_team(ctx: ToolContext, a: TeamArgs) -> dict[str, Any]:
    """List the members of a team, with each member's manager."""
    members = [person_card(p) for p in ctx.state.people.values() if p.team.lower() == a.team.lower()]
    if not members:
        raise ToolError("not_found", f"no team named {a.team!r}", "team")
    return {"team": a.team, "members": members}


@tool("directory_get_manager", "directory", PersonArgs, writes=False)
def directory_get_manager(ctx: ToolContext, a: PersonArgs) -> dict[str, Any]:
    """Find a person's manager."""
    p = ctx.person(a.person, "person")
    if p.manager is None:
        raise ToolError("not_found", f"{p.name} has no manager on record", "person")
    return person_card(ctx.person(p.manager, "person"))


class GroupArgs(ToolArgs):
    group: str = Field(description="Group id or address (a shared mailbox or a mailing list)")


@tool("directory_get_group", "directory", GroupArgs, writes=False)
def directory_get_group(ctx: ToolContext, a: GroupArgs) -> dict[str, Any]:
    """Show a shared mailbox or mailing list: its address and members. Mail to its address
    reaches every member."""
    g = ctx.state.group_by_ref(a.group)
    if g is None:
        raise ToolError("not_found", f"no group {a.group!r}", "group")
    return {**g.model_dump(mode="json"),
            "members": [person_card(ctx.state.people[p]) for p in g.members
                        if p in ctx.state.people]}
