"""The seed workspace of a task, and the events that create it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .models import (
    CalendarEvent,
    Channel,
    ChatMessage,
    Document,
    Email,
    Group,
    Person,
    Ticket,
    TicketQueue,
    WorkspaceState,
    apply_event,
    ws_event,
)


class WorkspaceSeed(BaseModel):
    """What exists when an episode starts."""

    model_config = ConfigDict(extra="forbid")
    people: list[Person] = Field(default_factory=list)
    emails: list[Email] = Field(default_factory=list)
    channels: list[Channel] = Field(default_factory=list)
    chat: list[ChatMessage] = Field(default_factory=list)
    calendar: list[CalendarEvent] = Field(default_factory=list)
    docs: list[Document] = Field(default_factory=list)
    tickets: list[Ticket] = Field(default_factory=list)
    groups: list[Group] = Field(default_factory=list)
    queues: list[TicketQueue] = Field(default_factory=list)

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        """``ws.*.seeded`` events, in a fixed order, that build this workspace from nothing."""
        out: list[tuple[str, dict[str, Any]]] = []
        for app, rows in (("directory", self.people), ("email", self.emails),
                          ("channel", self.channels), ("chat", self.chat),
                          ("calendar", self.calendar), ("docs", self.docs),
                          ("tickets", self.tickets), ("groups", self.groups),
                          ("queues", self.queues)):
            out.extend(ws_event(app, "seeded", row) for row in rows)
        return out

    def build(self) -> WorkspaceState:
        state = WorkspaceState()
        for kind, payload in self.events():
            apply_event(state, kind, payload)
        return state
