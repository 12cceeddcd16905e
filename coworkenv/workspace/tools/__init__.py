"""Workspace tools: importing this package registers every tool in :data:`REGISTRY`."""

from . import calendar, chat, directory, docs, email, tickets  # noqa: F401  (registration)
from ._base import REGISTRY, Notification, Tool, ToolArgs, ToolContext, ToolOutcome, execute_tool

__all__ = ["REGISTRY", "Notification", "Tool", "ToolArgs", "ToolContext", "ToolOutcome",
           "execute_tool"]
