"""The simulated company: entities, state, tools and the catalog."""

from .catalog import markdown_table, openai_tools
from .errors import ToolError, WorkspaceError
from .models import (
    ENTITY_TYPES,
    CalendarEvent,
    Channel,
    ChatMessage,
    Comment,
    Document,
    Email,
    Group,
    Person,
    Ticket,
    TicketQueue,
    WorkspaceState,
    apply_event,
    iso,
    parse_iso,
)
from .replay import replay_events
from .seed import WorkspaceSeed
from .tools import REGISTRY, Notification, Tool, ToolOutcome, execute_tool

__all__ = [
    "ENTITY_TYPES",
    "REGISTRY",
    "CalendarEvent",
    "Channel",
    "ChatMessage",
    "Comment",
    "Document",
    "Email",
    "Group",
    "Notification",
    "Person",
    "Ticket",
    "TicketQueue",
    "Tool",
    "ToolError",
    "ToolOutcome",
    "WorkspaceError",
    "WorkspaceSeed",
    "WorkspaceState",
    "apply_event",
    "execute_tool",
    "iso",
    "markdown_table",
    "openai_tools",
    "parse_iso",
    "replay_events",
]
