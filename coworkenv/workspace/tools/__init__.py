"""Workspace tools: the installed apps' tools are in :data:`REGISTRY` once
:mod:`coworkenv.workspace` is imported (the apps are loaded from the ``coworkenv.apps`` entry
points at the end of its import, when a plugin can import every public name of it: see
:mod:`coworkenv.workspace.apps`)."""

from ._base import REGISTRY, Notification, Tool, ToolArgs, ToolContext, ToolOutcome, execute_tool

__all__ = ["REGISTRY", "Notification", "Tool", "ToolArgs", "ToolContext", "ToolOutcome",
           "execute_tool"]
