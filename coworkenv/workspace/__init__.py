"""The simulated company: entities, state, tools and the catalog; the apps it is made of
(:mod:`coworkenv.workspace.apps`: ``App``, ``Table``, ``Entity``, ``tool``, ``ToolArgs``,
``ToolContext``, ``CheckKind`` and ``SqlTable`` are what an app plugin builds with)."""

from .apps import App, CheckKind, SqlTable, Table
from .catalog import markdown_table, openai_tools
from .errors import AppError, ToolError, WorkspaceError
from .models import (
    ENTITY_TYPES,
    CalendarEvent,
    Channel,
    ChatMessage,
    Comment,
    Document,
    Email,
    Entity,
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
from .tools import REGISTRY, Notification, Tool, ToolArgs, ToolContext, ToolOutcome, execute_tool
from .tools._base import tool

__all__ = [
    "ENTITY_TYPES",
    "REGISTRY",
    "App",
    "AppError",
    "CalendarEvent",
    "Channel",
    "ChatMessage",
    "CheckKind",
    "Comment",
    "Document",
    "Email",
    "Entity",
    "Group",
    "Notification",
    "Person",
    "SqlTable",
    "Table",
    "Ticket",
    "TicketQueue",
    "Tool",
    "ToolArgs",
    "ToolContext",
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
    "tool",
]

from .apps import load as _load_apps

_load_apps()
