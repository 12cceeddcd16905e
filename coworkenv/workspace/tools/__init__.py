"""Workspace tools: the installed apps' tools are in :data:`REGISTRY` once this package is
imported (the apps are loaded from the ``coworkenv.apps`` entry points: see
:mod:`coworkenv.workspace.apps`)."""

from ._base import REGISTRY, Notification, Tool, ToolArgs, ToolContext, ToolOutcome, execute_tool

__all__ = ["REGISTRY", "Notification", "Tool", "ToolArgs", "ToolContext", "ToolOutcome",
           "execute_tool"]

from ..apps import load as _load_apps  # (after the registry exists)

_load_apps()
